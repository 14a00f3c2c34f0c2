/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the TCP transport's
 * set-up handshake (src/comm/tcp_wire.c): small, portable, no tables beyond
 * the 64 round constants, checked against the FIPS and RFC 4231 vectors
 * (tests/test_tcp_wire.c). Private to the libraries (not installed). */
#ifndef SCALEOUT_CORE_SHA256_H
#define SCALEOUT_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SO_SHA256_BYTES 32 /* digest */
#define SO_SHA256_BLOCK 64 /* input block */

typedef struct {
    uint32_t h[8];                  /* the chaining state */
    uint64_t bytes;                 /* message bytes hashed so far */
    uint8_t block[SO_SHA256_BLOCK]; /* a partial block waiting for more input */
    size_t fill;                    /* bytes in block */
} so_sha256_ctx;

void so_sha256_init(so_sha256_ctx *s);
void so_sha256_update(so_sha256_ctx *s, const void *data, size_t len);
/* Writes the digest and wipes the state. */
void so_sha256_final(so_sha256_ctx *s, uint8_t out[SO_SHA256_BYTES]);
/* One call: out = SHA-256(data). */
void so_sha256(const void *data, size_t len, uint8_t out[SO_SHA256_BYTES]);

/* HMAC-SHA256 over a message given in pieces: init with the key (any length;
 * longer than a block it is hashed first), update, final. */
typedef struct {
    so_sha256_ctx inner, outer; /* outer already holds key ^ opad */
} so_hmac_sha256_ctx;

void so_hmac_sha256_init(so_hmac_sha256_ctx *m, const void *key, size_t key_len);
void so_hmac_sha256_update(so_hmac_sha256_ctx *m, const void *data, size_t len);
/* Writes the MAC and wipes the state (it held key-derived blocks). */
void so_hmac_sha256_final(so_hmac_sha256_ctx *m, uint8_t out[SO_SHA256_BYTES]);
/* One call: out = HMAC-SHA256(key, data). */
void so_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, uint8_t out[SO_SHA256_BYTES]);

/* 1 when a and b hold the same n bytes. The time taken depends on n only, not
 * on where they differ, so a MAC check leaks nothing about the right MAC. */
int so_ct_equal(const void *a, const void *b, size_t n);

/* Overwrites n bytes with zeros in a way the compiler may not drop (secrets). */
void so_wipe(void *p, size_t n);

#endif
