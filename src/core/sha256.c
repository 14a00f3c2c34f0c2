/* SHA-256 as FIPS 180-4 specifies it (sections 4.1.2, 4.2.2, 5.1.1, 6.2) and
 * HMAC over it (RFC 2104). Written for clarity over speed: it runs a few
 * times per connection at set-up, never on the data path. Big-endian words
 * are assembled byte by byte, so the code is the same on any host. */
#include "sha256.h"

#include <string.h>

/* The first 32 bits of the fractional parts of the cube roots of the first
 * 64 primes (FIPS 180-4, 4.2.2). */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void store_be32(uint8_t *p, uint32_t x)
{
    p[0] = (uint8_t)(x >> 24), p[1] = (uint8_t)(x >> 16), p[2] = (uint8_t)(x >> 8), p[3] = (uint8_t)x;
}

/* One 64-byte block into the chaining state (FIPS 180-4, 6.2.2). */
static void compress(uint32_t h[8], const uint8_t *block)
{
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = load_be32(block + 4 * t);
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
    so_wipe(w, sizeof w);
}

void so_sha256_init(so_sha256_ctx *s)
{
    /* The first 32 bits of the fractional parts of the square roots of the first 8 primes. */
    static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, H0, sizeof H0);
    s->bytes = 0;
    s->fill = 0;
}

void so_sha256_update(so_sha256_ctx *s, const void *data, size_t len)
{
    const uint8_t *p = data;
    s->bytes += len;
    while (len) {
        size_t take = SO_SHA256_BLOCK - s->fill < len ? SO_SHA256_BLOCK - s->fill : len;
        memcpy(s->block + s->fill, p, take);
        s->fill += take, p += take, len -= take;
        if (s->fill == SO_SHA256_BLOCK) {
            compress(s->h, s->block);
            s->fill = 0;
        }
    }
}

/* Padding (5.1.1): a 1 bit, zeros up to 56 mod 64 bytes, the bit length. */
void so_sha256_final(so_sha256_ctx *s, uint8_t out[SO_SHA256_BYTES])
{
    uint64_t bits = s->bytes * 8;
    uint8_t pad[SO_SHA256_BLOCK + 8] = {0x80};
    size_t npad = (s->fill < 56 ? 56 : 120) - s->fill;
    for (int i = 0; i < 8; i++)
        pad[npad + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
    so_sha256_update(s, pad, npad + 8);
    for (int i = 0; i < 8; i++)
        store_be32(out + 4 * i, s->h[i]);
    so_wipe(s, sizeof *s);
}

void so_sha256(const void *data, size_t len, uint8_t out[SO_SHA256_BYTES])
{
    so_sha256_ctx s;
    so_sha256_init(&s);
    so_sha256_update(&s, data, len);
    so_sha256_final(&s, out);
}

/* HMAC (RFC 2104): H((K ^ opad) || H((K ^ ipad) || message)), K padded to a
 * block, or hashed first when longer than one. */
void so_hmac_sha256_init(so_hmac_sha256_ctx *m, const void *key, size_t key_len)
{
    uint8_t k[SO_SHA256_BLOCK] = {0}, pad[SO_SHA256_BLOCK];
    if (key_len > SO_SHA256_BLOCK)
        so_sha256(key, key_len, k);
    else if (key_len)
        memcpy(k, key, key_len);
    for (int i = 0; i < SO_SHA256_BLOCK; i++)
        pad[i] = k[i] ^ 0x36;
    so_sha256_init(&m->inner);
    so_sha256_update(&m->inner, pad, sizeof pad);
    for (int i = 0; i < SO_SHA256_BLOCK; i++)
        pad[i] = k[i] ^ 0x5c;
    so_sha256_init(&m->outer);
    so_sha256_update(&m->outer, pad, sizeof pad);
    so_wipe(k, sizeof k);
    so_wipe(pad, sizeof pad);
}

void so_hmac_sha256_update(so_hmac_sha256_ctx *m, const void *data, size_t len)
{
    so_sha256_update(&m->inner, data, len);
}

void so_hmac_sha256_final(so_hmac_sha256_ctx *m, uint8_t out[SO_SHA256_BYTES])
{
    uint8_t inner[SO_SHA256_BYTES];
    so_sha256_final(&m->inner, inner);
    so_sha256_update(&m->outer, inner, sizeof inner);
    so_sha256_final(&m->outer, out);
    so_wipe(inner, sizeof inner);
}

void so_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, uint8_t out[SO_SHA256_BYTES])
{
    so_hmac_sha256_ctx m;
    so_hmac_sha256_init(&m, key, key_len);
    so_hmac_sha256_update(&m, data, len);
    so_hmac_sha256_final(&m, out);
}

int so_ct_equal(const void *a, const void *b, size_t n)
{
    const volatile uint8_t *x = a, *y = b;
    uint8_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= x[i] ^ y[i];
    return diff == 0;
}

void so_wipe(void *p, size_t n)
{
    /* Stores through a volatile pointer are side effects the compiler keeps
     * (explicit_bzero is glibc-only; this is the portable equivalent). */
    volatile uint8_t *v = p;
    while (n--)
        *v++ = 0;
}
