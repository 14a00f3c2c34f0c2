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

typedef struct {
    int batch;            /* per-rank batch size */
    int shuffle;          /* reshuffle every epoch (seeded) */
    int drop_last;        /* training: drop the last partial batch */
    int augment;          /* random crop with padding 4 and horizontal flip (CIFAR-style);
                             padding is a black pixel, normalised like any other
                             (torchvision's RandomCrop before Normalize); 0 for synthetic */
    int pad;              /* crop padding: 0 means the default 4 when augment, < 0 no crop */
    int prefetch;         /* batches prepared ahead on a background thread; 0 = synchronous */
    uint64_t seed;
    int rank, world;      /* this rank's shard of every epoch */
    int no_flip;          /* augment without the horizontal flip (ablations, tests) */
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

#endif
