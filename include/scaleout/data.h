/* Datasets and the batch loader. A dataset holds decoded samples (uint8
 * pixels for IDX/CIFAR, floats for synthetic); the loader shuffles per epoch,
 * shards across ranks (DistributedSampler semantics), normalises, augments
 * and prefetches batches on a background thread. */
#ifndef SCALEOUT_DATA_H
#define SCALEOUT_DATA_H
#include <stddef.h>
#include <stdint.h>

struct so_image_source;

typedef struct so_dataset {
    char name[32];        /* "fashion-mnist", "mnist", "cifar10", "synthetic", "imagefolder", "tfrecord" */
    int n;                /* samples */
    int c, h, w;
    int classes;
    uint8_t *pixels;      /* n*c*h*w, CHW per sample (NULL for synthetic) */
    float *values;        /* synthetic only: n*c*h*w already-normalised floats */
    int32_t *labels;      /* n labels in [0, classes) */
    float mean[3], std[3];/* per-channel normalisation applied to pixels/255 */
    struct so_tokens *tokens; /* token datasets (so_dataset_tokens) only, owned: the split's
                             shards; then pixels, values and labels are NULL, c = h = 1,
                             w = T (tokens per sequence), classes = 0 (the model's
                             vocabulary governs) and n the sequences of T+1 tokens one
                             epoch of random windows holds (capped at INT_MAX) */
    /* Image data sets (so_dataset_open_images): where each sample's encoded
     * bytes are; pixels and values are NULL, c,h,w the output of the
     * transform (3, image_size, image_size). Owned. */
    struct so_image_source *images;
} so_dataset;

/* Loads the train (train=1) or test split of "fashion-mnist" / "mnist" (IDX,
 * gzip or not, names as distributed: train-images-idx3-ubyte[.gz], ...) or
 * "cifar10" (data_batch_1..5.bin / test_batch.bin, in dir or in
 * dir/cifar-10-batches-bin) from dir. Errors name the file and the problem:
 * SO_EIO for a missing directory or file, SO_EFORMAT for bad magic, truncated
 * or trailing data, a label >= classes (10) or an image/label count mismatch.
 * The caller owns *out (so_dataset_destroy). */
int so_dataset_load(const char *kind, const char *dir, int train, so_dataset **out);
/* n random samples of shape (c,h,w) (standard normal values) with uniform
 * random labels in [0, classes), deterministic in seed. */
int so_dataset_synthetic(int n, int c, int h, int w, int classes, uint64_t seed, so_dataset **out);
void so_dataset_destroy(so_dataset *d); /* accepts NULL */

/* In-memory parsers (used by the loaders and the fuzz targets). The returned
 * pointers point into `buf`. `what` names the file in error messages. Any
 * malformed input is SO_EFORMAT: bad magic, a zero or absurd dimension
 * (counts up to 2^31-1, sides up to 65535), fewer bytes than the header
 * promises, and also trailing bytes after the data (the files as distributed
 * are exact, so extra bytes mean a wrong or damaged file). */
int so_idx_parse_images(const uint8_t *buf, size_t len, const char *what, int *n, int *h, int *w,
                        const uint8_t **pixels);
int so_idx_parse_labels(const uint8_t *buf, size_t len, const char *what, int *n, const uint8_t **labels);
/* CIFAR-10 binary batch: records of 1 label byte + 3072 pixel bytes (R, G, B
 * planes of 32x32). Empty files, partial records and labels >= 10 are errors. */
int so_cifar_parse(const uint8_t *buf, size_t len, const char *what, int *n);
/* Reads a whole file, gunzipping transparently (zlib) when it starts with the
 * gzip magic 1f 8b whatever its name. Truncated or corrupt gzip streams and
 * trailing non-gzip bytes are SO_EFORMAT, open/read failures SO_EIO; sizes are
 * limited to 2 GiB. Caller frees *buf with free(). */
int so_read_file(const char *path, uint8_t **buf, size_t *len);

/* so_loader_config.shuffle: images shuffle when it is not OFF; token
 * datasets have three orders (see "Token datasets" below). */
enum { SO_SHUFFLE_OFF = 0, SO_SHUFFLE_ON = 1, SO_SHUFFLE_LLMC = 2 };

typedef struct {
    int batch;            /* per-rank batch size */
    int shuffle;          /* SO_SHUFFLE_*: reshuffle every epoch (seeded) */
    int drop_last;        /* training: drop the last partial batch */
    int augment;          /* random crop with padding 4 and horizontal flip (CIFAR-style);
                             padding is a black pixel, normalised like any other
                             (torchvision's RandomCrop before Normalize); 0 for synthetic */
    int pad;              /* crop padding: 0 means the default 4 when augment, < 0 no crop */
    int prefetch;         /* batches prepared ahead on a background thread; 0 = synchronous */
    uint64_t seed;
    int rank, world;      /* this rank's shard of every epoch */
    int no_flip;          /* augment without the horizontal flip (ablations, tests) */
    int max_steps;        /* > 0: at most this many batches per epoch (evaluating on the start of
                             a large split, as llm.c's val_num_batches) */
    /* Image data sets only (d->images): augment selects the train recipe
     * (RandomResizedCrop + flip), 0 the eval one (resize + centre crop). */
    int decode_threads;   /* threads reading and decoding samples (0: 1) */
    int dct_scale;        /* JPEG DCT-domain downscaling: SO_DCT_TRAIN (0: train crops only),
                             SO_DCT_ALL (eval too), SO_DCT_OFF (never: torchvision's pixels) */
    int strict;           /* an unreadable sample is an error instead of a skipped one */
    int fixed_shard;      /* each rank keeps the same samples every epoch (shuffled within);
                             implied by stage_local */
    const char *stage_local; /* copy what this rank reads in its first epoch to this
                                directory and read it from there afterwards (NULL: off) */
} so_loader_config;

enum { SO_DCT_TRAIN = 0, SO_DCT_ALL = 1, SO_DCT_OFF = 2 };

typedef struct so_loader so_loader;

/* The dataset is borrowed and must outlive the loader. Fails (SO_EINVAL) if
 * the shard is empty for this rank (fewer samples than ranks), batch < 1, the
 * rank is not in [0, world), prefetch is not in 0..64, or drop_last leaves
 * zero steps (batch larger than the shard). All batch buffers are allocated
 * here; with prefetch > 0 a producer thread starts (idle until an epoch). */
int so_loader_create(const so_dataset *d, const so_loader_config *c, so_loader **out);
void so_loader_destroy(so_loader *l); /* accepts NULL; safe mid-epoch */
/* Starts epoch `epoch` (0-based): permutation seeded by (seed, epoch), the
 * same on every rank (0..n-1 without shuffle); rank r takes positions r,
 * r+world, ... of the first floor(n/world)*world when drop_last, else of all n
 * (then ranks may differ by one sample; for evaluation). Augmentation is
 * seeded by (seed, epoch, rank, step). May be called mid-epoch: the rest of
 * the previous epoch is abandoned and earlier batch pointers become invalid. */
int so_loader_start_epoch(so_loader *l, int epoch);
/* Next batch: x is batch*c*h*w normalised floats (NCHW), y the labels, n the
 * number of valid samples (the unused tail of a last partial batch is zero).
 * Returns 1 with a batch, 0 at the end of the epoch (and again until the next
 * start_epoch), negative if no epoch was started. The pointers stay valid
 * until the next call on this loader. */
int so_loader_next(so_loader *l, const float **x, const int32_t **y, int *n);
/* Batches per epoch for this rank. */
int so_loader_steps(const so_loader *l);
/* Labels per sample in y: 1 for images, T (a target per token) for token
 * datasets; y holds batch times this many. */
int so_loader_sample_labels(const so_loader *l);
/* Sample indices of this rank's shard for the current epoch, in order (for tests). */
const int32_t *so_loader_indices(const so_loader *l, int *count);
/* Seconds the caller spent blocked in so_loader_next since creation (with
 * prefetch 0, all the time spent preparing batches). Consumer thread only. */
double so_loader_wait_seconds(const so_loader *l);
/* Starts epoch `epoch` at its batch `first` (a resume): the permutation and
 * every later batch are those of an uninterrupted run, and the batches
 * before `first` are never read or decoded. so_loader_start_epoch(l, e) is
 * so_loader_start_epoch_at(l, e, 0). */
int so_loader_start_epoch_at(so_loader *l, int epoch, int first);

/* ---- image data sets: imagefolder and tfrecord -------------------------------
 * Streamed: the data set holds where every sample's encoded bytes are and its
 * label; the loader reads, decodes (JPEG through libjpeg-turbo's TurboJPEG,
 * PNG through libpng when built with them) and transforms samples on
 * decode_threads threads into its ring of prefetch + 1 batch buffers. */

typedef struct {
    int image_size;       /* output side (224) */
    int resize;           /* eval: shorter side before the centre crop (0: image_size * 256 / 224) */
    float scale_min, scale_max; /* RandomResizedCrop's area range (0.08, 1) */
    float ratio_min, ratio_max; /* its aspect-ratio range (3/4, 4/3) */
    int label_offset;     /* tfrecord: subtracted from stored labels (1: ImageNet shards are 1-based) */
    const char *index;    /* index file (scaleout data index); NULL: DIR/scaleout.idx when it exists */
} so_image_opts;

/* Defaults above: torchvision's ImageNet recipe. */
void so_image_opts_defaults(so_image_opts *o);

/* Opens the train (train = 1) or validation split of an image data set in dir:
 * - "imagefolder": torchvision's layout, dir/train/<class>/<image> and
 *   dir/val/<class>/<image>; classes sorted by name (label = index, as
 *   torchvision's ImageFolder), files sorted by name within a class; files
 *   whose names end in .jpg/.jpeg/.png (any case) count as images.
 * - "tfrecord": tf_cnn_benchmarks' shards dir/train-*-of-* and
 *   dir/validation-*-of-* (TFRecord framing, tf.train.Example records with
 *   image/encoded and image/class/label); classes = largest label + 1 after
 *   label_offset.
 * With an index (scaleout data index) nothing but the index is read. Errors
 * (SO_EIO / SO_EFORMAT, naming the file): a missing split directory or no
 * shards, an empty class directory, a split with no images, a CRC mismatch,
 * an Example without the two fields, a label outside [0, classes) after the
 * offset, a stale or damaged index. The caller owns *out. */
int so_dataset_open_images(const char *kind, const char *dir, int train, const so_image_opts *o, so_dataset **out);
/* Whether dir has the split: imagefolder dir/train or dir/val is a directory,
 * tfrecord dir holds train-*-of-* or validation-*-of-* shards, or the index
 * (o->index, else dir/scaleout.idx) lists samples of it. */
int so_image_has_split(const char *kind, const char *dir, int train, const so_image_opts *o);
/* Whether this build decodes JPEG (libturbojpeg) and PNG (libpng). */
int so_image_have_jpeg(void);
int so_image_have_png(void);

/* The index: every sample of both splits, its source file, offset, length and
 * label, written to path (NULL: dir/scaleout.idx). *nsamples gets the count
 * over both splits. */
int so_image_index_write(const char *kind, const char *dir, const so_image_opts *o, const char *path, long *nsamples);

/* Decode + transform of one sample outside a loader (tests, `scaleout data`):
 * sample i of d into out (3 x image_size x image_size normalised floats),
 * with the train recipe seeded by (seed, epoch, i) when train, else the eval
 * recipe. Returns 0, or SO_EFORMAT for an undecodable sample (message names
 * it), SO_EIO when it cannot be read. */
int so_image_sample(const so_dataset *d, int i, int train, uint64_t seed, int epoch, int dct_scale, float *out);
/* The train crop of sample i at (seed, epoch): torchvision's RandomResizedCrop
 * box (top, left, height, width) on a w x h image and the flip. */
void so_image_train_crop(const so_dataset *d, uint64_t seed, int epoch, int i, int w, int h, int box[4], int *flip);
/* The encoded bytes of sample i (malloc'd, caller frees) and its source's name. */
int so_image_read(const so_dataset *d, int i, uint8_t **buf, size_t *len, const char **source);

/* What the image loader did since creation (zeros for other data sets). */
typedef struct {
    long decoded;         /* samples decoded */
    long skipped;         /* unreadable samples skipped (each warned once) */
    double decode_seconds;/* summed over the decode threads: read + decode + transform */
    double read_bytes;    /* encoded bytes read from the data set */
    int threads;
    /* --stage-local */
    double staged_bytes, stage_seconds; /* copied to the local directory, time spent writing */
    double local_bytes;   /* read back from it */
    size_t memory_bound;  /* bytes the loader may hold: batch buffers + per-thread buffers */
} so_loader_stats;
void so_loader_get_stats(const so_loader *l, so_loader_stats *out);

/* ---- TFRecord and tf.train.Example (parsers of external bytes; fuzzed) ----- */
/* The record at buf[0..len): *payload and *plen its data, *next the offset of
 * the following record. SO_EFORMAT for a short header, a length CRC mismatch,
 * a record past the end or a data CRC mismatch (what names the file). */
int so_tfrecord_next(const uint8_t *buf, size_t len, const char *what, size_t *payload_off, size_t *plen,
                     size_t *next);
/* The masked CRC32C TFRecord stores: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
uint32_t so_tfrecord_mask(uint32_t crc);
/* image/encoded (pointer into buf) and image/class/label of a serialised
 * tf.train.Example; SO_EFORMAT for malformed protobuf or a missing field. */
int so_example_parse(const uint8_t *buf, size_t len, const char *what, const uint8_t **image, size_t *image_len,
                     int64_t *label);

/* ---- Token datasets: llm.c's token shards ---------------------------------
 * A shard (docs/FORMATS.md) is a header of 256 little-endian int32 -- magic,
 * version, token count, zeros -- then the tokens: magic 20240520 version 1
 * holds uint16 tokens (GPT-2; what llm.c's dev/data scripts write for
 * TinyShakespeare, TinyStories, FineWeb), magic 20240801 version 7 uint32
 * (llama-3). A split is every file of a directory named *_SPLIT.bin or
 * *_SPLIT_*.bin ("train", "val"), in strcmp order (glob's, as llm.c).
 *
 * Batches. A token dataset's loader (so_loader_create, w = T) hands out, per
 * so_loader_next: x = (B, T) token ids as floats (exact: ids < 2^24), so
 * they travel through so_model_forward, pipeline stages and the trainer as
 * any input does; y = (B, T) int32 targets, y[b][t] the token after
 * x[b][t]; n = B. The orders (so_loader_config.shuffle):
 *  - SO_SHUFFLE_ON: sequences are windows of T+1 tokens at stride T inside
 *    a shard (shifted each epoch by a random offset within the shard's
 *    spare tokens), permuted per (seed, epoch) by a keyed bijection (no
 *    table: FineWeb-scale sets need no memory per window) and sharded as
 *    images are: rank r takes positions r, r+world, ... Step s of an epoch
 *    depends only on (seed, epoch, rank, s), so a resume sees what an
 *    uninterrupted run would.
 *  - SO_SHUFFLE_OFF: llm.c's order exactly. Batch i of a shard, on rank r,
 *    is the B*T+1 tokens from (i*world + r)*B*T, reshaped (B, T) with the
 *    targets shifted by one; a shard holds (len-1) / (world*B*T) batches,
 *    the rest of it is skipped; shards follow in order; an epoch is one
 *    pass over all shards (llm.c wraps to the first shard the same way).
 *  - SO_SHUFFLE_LLMC: llm.c's shuffled order (its train_gpt2.c default):
 *    the same batches, with shards and each shard's batches permuted by
 *    llm.c's mt19937 seeded with seed + rank (llm.c: 42 + rank, so --seed 42,
 *    the default, gives its order).
 * A token id at or above the vocabulary set with so_tokens_check_vocab fails
 * the batch that reads it: so_loader_next returns SO_EFORMAT naming the file
 * and the token's index. */
#define SO_TOKENS_HEADER_BYTES 1024
#define SO_TOKENS_MAGIC_U16 20240520
#define SO_TOKENS_VERSION_U16 1
#define SO_TOKENS_MAGIC_U32 20240801
#define SO_TOKENS_VERSION_U32 7

typedef struct so_tokens so_tokens;

/* Validates a whole shard in memory: SO_EFORMAT naming `what` for a short
 * header, an unknown magic, a wrong version, a count <= 0, and a body that is
 * shorter (truncated) or longer than the header's count says. Sets the token
 * width in bytes (2 or 4) and the count. */
int so_tokens_parse(const uint8_t *buf, size_t len, const char *what, int *width, int64_t *count);
/* Opens the shards of split `split` of dir ("train", "val"): each a regular
 * file (opened O_NONBLOCK, checked with fstat), validated as above and
 * mapped read-only. SO_EIO when dir has none; one split's shards must share
 * their width. The caller owns *out (so_tokens_close). */
int so_tokens_open(const char *dir, const char *split, so_tokens **out);
/* The same for a list of files, in the order given. */
int so_tokens_open_paths(const char *const *paths, int n, so_tokens **out);
void so_tokens_close(so_tokens *t); /* accepts NULL */
int so_tokens_nshards(const so_tokens *t);
const char *so_tokens_path(const so_tokens *t, int shard);
int64_t so_tokens_len(const so_tokens *t, int shard);   /* tokens in the shard */
int64_t so_tokens_total(const so_tokens *t);            /* tokens in all shards */
int so_tokens_width(const so_tokens *t);                /* bytes per token, 2 or 4 */
uint32_t so_tokens_at(const so_tokens *t, int shard, int64_t i); /* token i of a shard; i < its len */
/* The model's vocabulary, once the model is known: every token must be
 * below it. Sets of up to 2^31 tokens are scanned now (SO_EFORMAT naming the
 * first offending file and index); larger ones are checked batch by batch as
 * the loader reads them (FineWeb-100B would be 200 GB to read at start-up). */
int so_tokens_check_vocab(so_tokens *t, int vocab);
/* Writes one shard: n tokens (1..INT32_MAX) of width 2 (each must fit
 * uint16) or 4 bytes. SO_EINVAL for bad arguments, SO_EIO for I/O (the
 * partial file is removed). */
int so_tokens_write(const char *path, const uint32_t *ids, size_t n, int width);

/* One in-memory shard holding a copy of ids (named `name` in messages). */
int so_tokens_from_ids(const uint32_t *ids, int64_t n, int width, const char *name, so_tokens **out);
/* A token dataset of ntokens ids uniform in [0, vocab), deterministic in
 * seed (benchmarks and tests: no files). */
int so_dataset_synthetic_tokens(int64_t ntokens, int vocab, int seq_len, uint64_t seed, so_dataset **out);

/* The token dataset of a split of dir for sequences of seq_len tokens
 * (the shards of "train", or of "val" when train = 0). For the val split
 * only, a directory without val shards is not an error: *out is NULL. */
int so_dataset_tokens(const char *dir, int train, int seq_len, so_dataset **out);

#endif
