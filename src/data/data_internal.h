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

#endif
