/* Datasets and the batch loader. A dataset holds decoded samples (uint8
 * pixels for IDX/CIFAR, floats for synthetic); the loader shuffles per epoch,
 * shards across ranks (DistributedSampler semantics), normalises, augments
 * and prefetches batches on a background thread. */
#ifndef SCALEOUT_DATA_H
#define SCALEOUT_DATA_H
#include <stddef.h>
#include <stdint.h>

typedef struct so_dataset {
    char name[32];        /* "fashion-mnist", "mnist", "cifar10", "synthetic" */
    int n;                /* samples */
    int c, h, w;
    int classes;
    uint8_t *pixels;      /* n*c*h*w, CHW per sample (NULL for synthetic) */
    float *values;        /* synthetic only: n*c*h*w already-normalised floats */
    int32_t *labels;      /* n labels in [0, classes) */
    float mean[3], std[3];/* per-channel normalisation applied to pixels/255 */
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
} so_loader_config;

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

#endif
