/* Private helpers shared by the data module's files and its fuzz targets.
 * Not part of the public API: the loader and parsers only need data.h. */
#ifndef SCALEOUT_DATA_INTERNAL_H
#define SCALEOUT_DATA_INTERNAL_H
#include <stddef.h>
#include <stdint.h>

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

#endif
