/* Aligned allocation: every tensor buffer in scaleout is 64-byte aligned so
 * AVX-512 loads never split cache lines. */
#ifndef SCALEOUT_MEM_H
#define SCALEOUT_MEM_H
#include <stddef.h>

#define SO_ALIGN 64

/* Zero-filled, SO_ALIGN-aligned block of `bytes` (0 gives a valid 64-byte block); NULL on failure. */
void *so_alloc(size_t bytes);
void so_free(void *p);
/* Peak resident set size of this process in bytes (from getrusage), 0 if unknown. */
size_t so_peak_rss(void);

#endif
