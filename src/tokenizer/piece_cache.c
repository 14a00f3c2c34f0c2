/* The encoder's memory of pieces it has merged: piece bytes -> token ids, an
 * open-addressing table over one arena. Text repeats its words (2.6 MB of
 * fortunes are 655K pieces but 48K distinct), so most pieces skip the merge
 * loop, as encoder.py's cache lets them. Bounded: when the table or the
 * arena is full it starts over empty rather than evicting piecemeal. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

#define MIN_SLOTS 4096
#define MAX_SLOTS (1u << 19)            /* 8 MB of entries */
#define MAX_ARENA ((size_t)64 << 20)

typedef struct {
    uint64_t hash;     /* 0 = empty slot */
    uint32_t off;      /* arena offset: nids int32 ids, then len key bytes */
    uint16_t len, nids;
} entry;

struct so_piece_cache {
    entry *slot;
    size_t nslots, n;
    uint8_t *arena;
    size_t used, cap;
};

static uint64_t hash_piece(const uint8_t *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    h ^= h >> 29;
    return h | 1; /* never 0: 0 marks an empty slot */
}

so_piece_cache *so_piece_cache_create(void)
{
    so_piece_cache *c = calloc(1, sizeof *c);
    if (c && !(c->slot = calloc(MIN_SLOTS, sizeof *c->slot))) {
        free(c);
        return NULL;
    }
    if (c)
        c->nslots = MIN_SLOTS;
    return c;
}

void so_piece_cache_destroy(so_piece_cache *c)
{
    if (!c)
        return;
    free(c->slot);
    free(c->arena);
    free(c);
}

/* memcmp for the few bytes of a piece, without the call. */
static int same_bytes(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

static entry *find(const so_piece_cache *c, uint64_t h, const uint8_t *p, size_t len, int *found)
{
    size_t mask = c->nslots - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        entry *e = &c->slot[i];
        if (!e->hash || (e->hash == h && e->len == len &&
                         same_bytes(c->arena + e->off + (size_t)e->nids * sizeof(int32_t), p, len))) {
            *found = e->hash != 0;
            return e;
        }
    }
}

const int32_t *so_piece_cache_get(const so_piece_cache *c, const uint8_t *p, size_t len, size_t *nids)
{
    int found;
    if (len > SO_PIECE_CACHE_MAX)
        return NULL;
    entry *e = find(c, hash_piece(p, len), p, len, &found);
    if (!found)
        return NULL;
    *nids = e->nids;
    return (const int32_t *)(const void *)(c->arena + e->off);
}

static void clear(so_piece_cache *c)
{
    memset(c->slot, 0, c->nslots * sizeof *c->slot);
    c->n = c->used = 0;
}

/* Doubles the table (rehashing every entry), or, at the size limit, empties it. */
static int grow(so_piece_cache *c)
{
    if (2 * c->nslots > MAX_SLOTS) {
        clear(c);
        return 0;
    }
    entry *old = c->slot;
    size_t nold = c->nslots;
    if (!(c->slot = calloc(2 * nold, sizeof *c->slot))) {
        c->slot = old;
        return -1;
    }
    c->nslots = 2 * nold;
    for (size_t i = 0; i < nold; i++) {
        if (!old[i].hash)
            continue;
        size_t j = old[i].hash & (c->nslots - 1);
        while (c->slot[j].hash)
            j = (j + 1) & (c->nslots - 1);
        c->slot[j] = old[i];
    }
    free(old);
    return 0;
}

/* Room for `need` more arena bytes (4-byte aligned); empties the cache past the limit. */
static int reserve(so_piece_cache *c, size_t need)
{
    if (c->used + need <= c->cap)
        return 0;
    if (c->used + need > MAX_ARENA) {
        clear(c);
        return 0;
    }
    size_t cap = c->cap ? 2 * c->cap : (size_t)1 << 16;
    while (cap < c->used + need)
        cap *= 2;
    uint8_t *a = realloc(c->arena, cap);
    if (!a)
        return -1;
    c->arena = a, c->cap = cap;
    return 0;
}

void so_piece_cache_put(so_piece_cache *c, const uint8_t *p, size_t len, const int32_t *ids, size_t nids)
{
    if (len > SO_PIECE_CACHE_MAX || nids > len)
        return;
    if (2 * (c->n + 1) > c->nslots && grow(c))
        return; /* out of memory: the piece is merged again next time */
    size_t need = (nids * sizeof(int32_t) + len + 3) & ~(size_t)3;
    if (reserve(c, need))
        return;
    uint64_t h = hash_piece(p, len);
    int found;
    entry *e = find(c, h, p, len, &found);
    if (found)
        return;
    *e = (entry){h, (uint32_t)c->used, (uint16_t)len, (uint16_t)nids};
    memcpy(c->arena + c->used, ids, nids * sizeof(int32_t));
    memcpy(c->arena + c->used + nids * sizeof(int32_t), p, len);
    c->used += need;
    c->n++;
}
