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
 * "cifar10" (data_batch_1..5.bin / test_batch.bin) from dir. Errors name the
 * file and the problem (missing, bad magic, truncated, label out of range). */
int so_dataset_load(const char *kind, const char *dir, int train, so_dataset **out);
/* n random samples of shape (c,h,w) with random labels, deterministic in seed. */
int so_dataset_synthetic(int n, int c, int h, int w, int classes, uint64_t seed, so_dataset **out);
void so_dataset_destroy(so_dataset *d);

/* In-memory parsers (used by the loaders and the fuzz targets). The returned
 * pointers point into `buf`. `what` names the file in error messages. */
int so_idx_parse_images(const uint8_t *buf, size_t len, const char *what, int *n, int *h, int *w,
                        const uint8_t **pixels);
int so_idx_parse_labels(const uint8_t *buf, size_t len, const char *what, int *n, const uint8_t **labels);
/* CIFAR-10 binary batch: records of 1 label byte + 3072 pixel bytes. */
int so_cifar_parse(const uint8_t *buf, size_t len, const char *what, int *n);
/* Reads a whole file, gunzipping transparently (zlib). Caller frees *buf with free(). */
int so_read_file(const char *path, uint8_t **buf, size_t *len);

typedef struct {
    int batch;            /* per-rank batch size */
    int shuffle;          /* reshuffle every epoch (seeded) */
    int drop_last;        /* training: drop the last partial batch */
    int augment;          /* random crop with padding 4 and horizontal flip (CIFAR-style) */
    int pad;              /* crop padding (default 4 when augment) */
    int prefetch;         /* batches prepared ahead on a background thread; 0 = synchronous */
    uint64_t seed;
    int rank, world;      /* this rank's shard of every epoch */
} so_loader_config;

typedef struct so_loader so_loader;

/* The dataset is borrowed and must outlive the loader. Fails if the shard is
 * empty for this rank or the batch does not fit the config. */
int so_loader_create(const so_dataset *d, const so_loader_config *c, so_loader **out);
void so_loader_destroy(so_loader *l);
/* Starts epoch `epoch` (0-based): permutation seeded by (seed, epoch), the
 * same on every rank; rank r takes positions r, r+world, ... of the first
 * floor(n/world)*world when drop_last, else of all n. */
int so_loader_start_epoch(so_loader *l, int epoch);
/* Next batch: x is batch*c*h*w normalised floats (NCHW), y the labels, n the
 * number of valid samples. Returns 1 with a batch, 0 at the end of the epoch,
 * negative on error. The pointers stay valid until the next call. */
int so_loader_next(so_loader *l, const float **x, const int32_t **y, int *n);
/* Batches per epoch for this rank. */
int so_loader_steps(const so_loader *l);
/* Sample indices of this rank's shard for the current epoch, in order (for tests). */
const int32_t *so_loader_indices(const so_loader *l, int *count);
/* Seconds the caller spent blocked in so_loader_next since creation. */
double so_loader_wait_seconds(const so_loader *l);

#endif
