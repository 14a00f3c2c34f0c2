/* Private helpers shared by the data module's files and its fuzz targets.
 * Not part of the public API: the loader and parsers only need data.h. */
#ifndef SCALEOUT_DATA_INTERNAL_H
#define SCALEOUT_DATA_INTERNAL_H
#include <stddef.h>
#include <stdint.h>

#include "scaleout/data.h"

/* Largest file (after decompression) so_read_file accepts: all of CIFAR-10 is
 * 180 MB, so 2 GiB only stops runaway reads and gzip bombs. */
#define SO_DATA_MAX_BYTES ((size_t)1 << 31)

/* Inflates the gzip stream (one or more members) in in[0..len) into a new
 * malloc'd buffer of at most `cap` bytes. Truncated or corrupt streams,
 * trailing non-gzip bytes and output over `cap` are SO_EFORMAT errors naming
 * `what`. On success the caller frees *out with free(). */
int so_gunzip(const uint8_t *in, size_t len, const char *what, size_t cap, uint8_t **out, size_t *outlen);

/* Big-endian 32-bit read (IDX headers are big-endian). */
static inline uint32_t so_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* ---- token shards (tokens.c) ---- */
/* The shard files of a split in dir (NAME_split.bin, NAME_split_*.bin), in
 * strcmp order; *n may be 0. Free with so_tokens_free_paths. */
int so_tokens_find(const char *dir, const char *split, char ***paths, int *n);
void so_tokens_free_paths(char **paths, int n);
/* Shard s's tokens (width bytes each), and the vocabulary set by
 * so_tokens_check_vocab (0: none). */
const void *so_tokens_data(const so_tokens *t, int s);
int so_tokens_vocab(const so_tokens *t);
/* 0, or SO_EFORMAT naming the file and index of the first token of
 * [start, start+n) of shard s at or above the vocabulary. */
int so_tokens_bad_token(const so_tokens *t, int s, int64_t start, int64_t n);

/* ---- a token dataset's batches (token_batch.c), for loader.c ----
 * Create once per loader; tok_plan_epoch before an epoch's first fill; fills
 * of one epoch in increasing step order are cheapest (llm.c's shuffle draws
 * its permutations as it goes) but any order is right. Not thread-safe: one
 * filler at a time (the loader's producer, or its consumer without one). */
typedef struct tok_plan tok_plan;
int tok_plan_create(const so_dataset *d, const so_loader_config *c, tok_plan **out);
void tok_plan_destroy(tok_plan *p);
int64_t tok_plan_steps(const tok_plan *p);
void tok_plan_epoch(tok_plan *p, int epoch);
/* Batch `step`: x (B,T) token ids as floats, y (B,T) next tokens. */
int tok_plan_fill(tok_plan *p, int64_t step, float *x, int32_t *y);
/* Windows of T+1 tokens at stride T in all shards (the random order's samples). */
int64_t tok_plan_windows(const so_tokens *t, int T);
/* Reads the raw bytes of a regular file (no gunzip) into a malloc'd buffer. */
int so_read_file_raw(const char *path, uint8_t **buf, size_t *len);
/* Reads a whole file into *buf, growing it (capacity *cap) as needed; files
 * over max bytes are SO_EFORMAT. *len = bytes read. */
int image_read_file(const char *path, uint8_t **buf, size_t *cap, size_t *len, size_t max);
/* Writes buf to path through a temporary file and a rename. */
int so_write_file_atomic(const char *path, const void *buf, size_t len);

/* ---- image data sets ---------------------------------------------------------- */

/* Where one sample is: imagefolder: its own file (offset 0, length 0 = the
 * whole file); tfrecord: the record's [offset, offset + length) in a shard. */
typedef struct {
    uint32_t file;
    int32_t label;        /* as stored (tfrecord: before label_offset) */
    uint64_t offset, length;
} so_image_sample_loc;

typedef struct so_image_source {
    int kind;             /* 1 imagefolder, 2 tfrecord */
    char *root;           /* the data set directory */
    int n, nfiles, classes, label_offset, indexed;
    so_image_sample_loc *loc;  /* n */
    char *names;          /* NUL-terminated file names (relative to root) and class names */
    size_t names_len, names_cap;
    uint32_t *file_name;  /* nfiles offsets into names */
    uint32_t *class_name; /* imagefolder: classes offsets into names (NULL for tfrecord) */
    size_t files_cap, samples_cap;
    /* the transform (so_image_opts) */
    int image_size, resize;
    float scale_min, scale_max, ratio_min, ratio_max;
} so_image_source;

int image_source_open(const char *kind, const char *dir, int train, const so_image_opts *o, so_image_source **out);
void image_source_free(so_image_source *s);
const char *image_source_file(const so_image_source *s, int file);
/* pread of [off, off + len) of path into buf; a short file is SO_EFORMAT. */
int image_read_range(const char *path, uint64_t off, size_t len, uint8_t *buf);

/* Largest encoded image accepted (bigger ones are skipped as unreadable) and
 * largest decoded one (width x height; 64 Mpixel is 192 MB of RGB). */
/* The image loader's threads and ring (stream.c), driven by loader.c. */
typedef struct img_stream img_stream;
int img_stream_create(const so_dataset *d, const so_loader_config *c, img_stream **out);
void img_stream_destroy(img_stream *s);
/* Starts an epoch over this rank's shard idx[0..count) (borrowed until the
 * next start) at step `first`; quiesces the threads first. */
int img_stream_start(img_stream *s, int epoch, const int32_t *idx, int count, int steps, int first);
int img_stream_next(img_stream *s, const float **x, const int32_t **y, int *n);
double img_stream_wait(const img_stream *s);
void img_stream_stats(img_stream *s, so_loader_stats *out);

#define SO_IMAGE_MAX_BYTES ((size_t)64 << 20)
#define SO_IMAGE_MAX_PIXELS ((uint64_t)64 << 20)

#endif
