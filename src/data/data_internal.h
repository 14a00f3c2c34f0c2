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
