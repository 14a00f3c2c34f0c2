/* The tokenizer object (scaleout/tokenizer.h): its token table and maps,
 * the byte vocabulary, and encoding and decoding. Encoding a GPT-2-style
 * vocabulary is: pre-tokenize (pretok.c), then per piece start from its
 * single-byte tokens and apply merges by rank exactly as encoder.py's bpe():
 * take the adjacent pair of lowest rank, merge every occurrence of it left to
 * right, repeat. Short pieces do that directly; long ones (a megabyte of
 * '=' is one piece) through a heap in O(n log n), rank by rank in the same
 * order, so a hostile input cannot make encoding quadratic. */
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "tokenizer_internal.h"

/* Pieces up to this many bytes merge by direct scans (faster for words). */
#define DIRECT_MAX 48

/* ---- the object ----------------------------------------------------------- */

so_tokenizer *so_tok_alloc(int kind, int vocab, size_t bytes)
{
    so_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->kind = kind;
    t->vocab = vocab;
    t->eot = -1;
    pthread_mutex_init(&t->cache_mu, NULL);
    t->bytes = malloc(bytes ? bytes : 1);
    t->off = calloc((size_t)vocab + 1, sizeof *t->off);
    for (int b = 0; b < 256; b++)
        t->byte_id[b] = -1;
    if (!t->bytes || !t->off) {
        so_tokenizer_destroy(t);
        return NULL;
    }
    return t;
}

void so_tokenizer_destroy(so_tokenizer *t)
{
    if (!t)
        return;
    free(t->bytes);
    free(t->off);
    free(t->by_bytes.slot);
    free(t->merge_left);
    free(t->merge_right);
    free(t->pairs.key);
    free(t->pairs.rank);
    free(t->pairs.merged);
    so_piece_cache_destroy(t->cache);
    pthread_mutex_destroy(&t->cache_mu);
    free(t);
}

int so_tokenizer_bytes(so_tokenizer **out)
{
    so_tokenizer *t = so_tok_alloc(TOK_BYTES, 256, 256);
    *out = NULL;
    if (!t)
        return so_err(SO_ENOMEM, "tokenizer: out of memory");
    for (int b = 0; b < 256; b++) {
        t->bytes[b] = (uint8_t)b;
        t->off[b + 1] = (size_t)b + 1;
        t->byte_id[b] = b;
    }
    *out = t;
    return 0;
}

int so_tokenizer_vocab(const so_tokenizer *t) { return t->vocab; }
int so_tokenizer_merges(const so_tokenizer *t) { return t->nmerges; }
int so_tokenizer_eot(const so_tokenizer *t) { return t->eot; }

const char *so_tokenizer_kind(const so_tokenizer *t)
{
    return t->kind == TOK_BYTES ? "bytes" : t->kind == TOK_BPE ? "bpe" : "llmc";
}

const uint8_t *so_tokenizer_token(const so_tokenizer *t, uint32_t id, size_t *len)
{
    if (id >= (uint32_t)t->vocab) {
        *len = 0;
        return NULL;
    }
    *len = t->off[id + 1] - t->off[id];
    return t->bytes + t->off[id];
}

/* ---- maps ----------------------------------------------------------------- */

static uint64_t hash_bytes(const uint8_t *b, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h ^ (h >> 29);
}

static uint64_t hash_pair(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    return k ^ (k >> 33);
}

static size_t pow2_above(size_t n)
{
    size_t c = 16;
    while (c < 2 * n)
        c *= 2;
    return c;
}

int so_tok_index(so_tokenizer *t, const char *what)
{
    so_bytes_map *m = &t->by_bytes;
    free(m->slot);
    m->cap = pow2_above((size_t)t->vocab);
    if (!(m->slot = calloc(m->cap, sizeof *m->slot)))
        return so_err(SO_ENOMEM, "%s: out of memory for %d tokens", what, t->vocab);
    for (int id = 0; id < t->vocab; id++) {
        size_t len = t->off[id + 1] - t->off[id];
        const uint8_t *b = t->bytes + t->off[id];
        int32_t dup = so_tok_find(t, b, len);
        if (dup >= 0)
            return so_err(SO_EFORMAT, "%s: tokens %d and %d are the same bytes", what, dup, id);
        size_t i = hash_bytes(b, len) & (m->cap - 1);
        while (m->slot[i])
            i = (i + 1) & (m->cap - 1);
        m->slot[i] = id + 1;
    }
    return 0;
}

int so_tok_index_add(so_tokenizer *t, int32_t id)
{
    so_bytes_map *m = &t->by_bytes;
    if (2 * ((size_t)id + 1) > m->cap)
        return so_tok_index(t, "tokenizer"); /* rebuilt larger: the table doubles, so O(1) amortised */
    size_t len = t->off[id + 1] - t->off[id];
    size_t i = hash_bytes(t->bytes + t->off[id], len) & (m->cap - 1);
    while (m->slot[i])
        i = (i + 1) & (m->cap - 1);
    m->slot[i] = id + 1;
    return 0;
}

int32_t so_tok_find(const so_tokenizer *t, const uint8_t *b, size_t len)
{
    const so_bytes_map *m = &t->by_bytes;
    if (!m->cap)
        return -1;
    for (size_t i = hash_bytes(b, len) & (m->cap - 1); m->slot[i]; i = (i + 1) & (m->cap - 1)) {
        int32_t id = m->slot[i] - 1;
        if (t->off[id + 1] - t->off[id] == len && memcmp(t->bytes + t->off[id], b, len) == 0)
            return id;
    }
    return -1;
}

static int pairs_grow(so_pair_map *m)
{
    size_t cap = pow2_above(m->n + 1);
    if (cap <= m->cap)
        return 0;
    uint64_t *key = calloc(cap, sizeof *key);
    int32_t *rank = malloc(cap * sizeof *rank), *merged = malloc(cap * sizeof *merged);
    if (!key || !rank || !merged) {
        free(key), free(rank), free(merged);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->key[i])
            continue;
        size_t j = hash_pair(m->key[i]) & (cap - 1);
        while (key[j])
            j = (j + 1) & (cap - 1);
        key[j] = m->key[i], rank[j] = m->rank[i], merged[j] = m->merged[i];
    }
    free(m->key), free(m->rank), free(m->merged);
    m->key = key, m->rank = rank, m->merged = merged, m->cap = cap;
    return 0;
}

int32_t so_tok_pair(const so_tokenizer *t, int32_t left, int32_t right, int32_t *merged)
{
    const so_pair_map *m = &t->pairs;
    if (!m->cap)
        return -1;
    uint64_t k = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
    for (size_t i = hash_pair(k) & (m->cap - 1); m->key[i]; i = (i + 1) & (m->cap - 1))
        if (m->key[i] == k) {
            *merged = m->merged[i];
            return m->rank[i];
        }
    return -1;
}

int so_tok_add_merge(so_tokenizer *t, int32_t left, int32_t right, int32_t merged)
{
    if (t->nmerges == t->cap_merges) {
        int cap = t->cap_merges ? 2 * t->cap_merges : 1024;
        int32_t *l = realloc(t->merge_left, (size_t)cap * sizeof *l);
        if (l)
            t->merge_left = l;
        int32_t *r = l ? realloc(t->merge_right, (size_t)cap * sizeof *r) : NULL;
        if (!r)
            return so_err(SO_ENOMEM, "tokenizer: out of memory for %d merges", cap);
        t->merge_right = r;
        t->cap_merges = cap;
    }
    so_pair_map *m = &t->pairs;
    if (pairs_grow(m))
        return so_err(SO_ENOMEM, "tokenizer: out of memory for %zu merges", m->n + 1);
    int rank = t->nmerges++;
    t->merge_left[rank] = left;
    t->merge_right[rank] = right;
    uint64_t k = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
    size_t i = hash_pair(k) & (m->cap - 1);
    while (m->key[i] && m->key[i] != k)
        i = (i + 1) & (m->cap - 1);
    if (!m->key[i])
        m->n++;
    m->key[i] = k, m->rank[i] = rank, m->merged[i] = merged; /* a repeated pair: the later rank, as encoder.py */
    return 0;
}

/* ---- merging one piece ------------------------------------------------------ */

/* encoder.py's loop as it is: w[0..n) ids, merged in place; returns the new n. */
static size_t merge_direct(const so_tokenizer *t, int32_t *w, size_t n)
{
    while (n > 1) {
        int32_t best = -1, result = -1, m;
        for (size_t i = 0; i + 1 < n; i++) {
            int32_t r = so_tok_pair(t, w[i], w[i + 1], &m);
            if (r >= 0 && (best < 0 || r < best))
                best = r, result = m;
        }
        if (best < 0)
            break;
        int32_t a = t->merge_left[best], b = t->merge_right[best];
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (i + 1 < n && w[i] == a && w[i + 1] == b)
                w[k++] = result, i++;
            else
                w[k++] = w[i];
        }
        n = k;
    }
    return n;
}

/* The heap version: symbols in a linked list; heap entries (rank, position
 * of the pair's left symbol). Each round pops every entry of the lowest rank,
 * merges those still valid left to right, and only then queues the pairs the
 * round created: encoder.py's "all occurrences, then look again". */
typedef struct {
    int32_t rank;
    uint32_t pos;
} pair_entry;

typedef struct {
    pair_entry *e;
    size_t n;
} heap;

static int entry_less(pair_entry a, pair_entry b) { return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos); }

static void heap_push(heap *h, pair_entry x)
{
    size_t i = h->n++;
    while (i > 0 && entry_less(x, h->e[(i - 1) / 2])) {
        h->e[i] = h->e[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->e[i] = x;
}

static pair_entry heap_pop(heap *h)
{
    pair_entry top = h->e[0], x = h->e[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && entry_less(h->e[c + 1], h->e[c]))
            c++;
        if (!entry_less(h->e[c], x))
            break;
        h->e[i] = h->e[c];
        i = c;
    }
    if (h->n)
        h->e[i] = x;
    return top;
}

/* Working memory of merge_heap for pieces of up to `cap` bytes. */
typedef struct {
    uint32_t *next, *prev;  /* the list of live symbols, by original position */
    uint8_t *dead;
    pair_entry *heap;       /* 3*cap: n-1 initial pairs and at most 2 per merge */
    pair_entry *pend;       /* 2*cap: pairs a round created */
} chain;

#define NONE UINT32_MAX

/* Queues the pair whose left symbol is at p (if it has a rank). */
static void queue_pair(const so_tokenizer *t, const int32_t *w, const chain *c, uint32_t p, pair_entry *q,
                       size_t *nq)
{
    int32_t m;
    if (p == NONE || c->next[p] == NONE)
        return;
    int32_t r = so_tok_pair(t, w[p], w[c->next[p]], &m);
    if (r >= 0)
        q[(*nq)++] = (pair_entry){r, p};
}

static size_t merge_heap(const so_tokenizer *t, int32_t *w, size_t n, chain *c)
{
    heap h = {c->heap, 0};
    size_t npend = 0;
    for (size_t i = 0; i < n; i++) {
        c->next[i] = i + 1 < n ? (uint32_t)i + 1 : NONE;
        c->prev[i] = i ? (uint32_t)i - 1 : NONE;
        c->dead[i] = 0;
    }
    for (uint32_t i = 0; i + 1 < n; i++)
        queue_pair(t, w, c, i, c->pend, &npend);
    for (;;) {
        while (npend)
            heap_push(&h, c->pend[--npend]);
        if (!h.n)
            break;
        int32_t rank = h.e[0].rank, a = t->merge_left[rank], b = t->merge_right[rank], m = -1;
        (void)so_tok_pair(t, a, b, &m);
        while (h.n && h.e[0].rank == rank) {
            uint32_t p = heap_pop(&h).pos, q = c->next[p];
            if (c->dead[p] || q == NONE || w[p] != a || w[q] != b)
                continue; /* consumed by an earlier merge of this round */
            w[p] = m;
            c->dead[q] = 1;
            c->next[p] = c->next[q];
            if (c->next[q] != NONE)
                c->prev[c->next[q]] = p;
            queue_pair(t, w, c, c->prev[p], c->pend, &npend);
            queue_pair(t, w, c, p, c->pend, &npend);
        }
    }
    size_t k = 0;
    for (uint32_t p = 0; p != NONE; p = c->next[p])
        w[k++] = w[p];
    return k;
}

/* ---- encoding ----------------------------------------------------------------- */


typedef struct {
    const so_tokenizer *t;
    uint32_t **ids;
    size_t *n, *cap;
    int32_t *w;          /* the piece's symbols */
    chain c;             /* merge_heap's lists and heaps */
    size_t wcap;
    so_piece_cache *cache; /* the tokenizer's, when this call holds it; else NULL */
} encoder;

/* The per-piece working memory (ensure regrows it). */
static void scratch_free(encoder *e)
{
    free(e->w);
    free(e->c.next);
    free(e->c.prev);
    free(e->c.dead);
    free(e->c.heap);
    free(e->c.pend);
}

static void encoder_free(encoder *e) { scratch_free(e); }

static int ensure(encoder *e, size_t piece)
{
    if (piece <= e->wcap)
        return 0;
    size_t cap = piece > 2 * e->wcap ? piece : 2 * e->wcap;
    scratch_free(e);
    e->wcap = 0;
    e->w = malloc(cap * sizeof *e->w);
    e->c = (chain){malloc(cap * sizeof(uint32_t)), malloc(cap * sizeof(uint32_t)), malloc(cap),
                   malloc(3 * cap * sizeof(pair_entry)), malloc(2 * cap * sizeof(pair_entry))};
    if (!e->w || !e->c.next || !e->c.prev || !e->c.dead || !e->c.heap || !e->c.pend)
        return so_err(SO_ENOMEM, "tokenizer: out of memory for a piece of %zu bytes", piece);
    e->wcap = cap;
    return 0;
}

static int append_ids(encoder *e, const int32_t *w, size_t k)
{
    if (*e->n + k > *e->cap) {
        size_t cap = *e->cap ? *e->cap : 1024;
        while (cap < *e->n + k)
            cap *= 2;
        uint32_t *ids = realloc(*e->ids, cap * sizeof *ids);
        if (!ids)
            return so_err(SO_ENOMEM, "tokenizer: out of memory for %zu token ids", cap);
        *e->ids = ids;
        *e->cap = cap;
    }
    for (size_t i = 0; i < k; i++)
        (*e->ids)[(*e->n)++] = (uint32_t)w[i];
    return 0;
}

static int encode_piece(void *arg, const uint8_t *p, size_t len)
{
    encoder *e = arg;
    size_t nids;
    const int32_t *hit = e->cache ? so_piece_cache_get(e->cache, p, len, &nids) : NULL;
    if (hit)
        return append_ids(e, hit, nids);
    int rc = ensure(e, len);
    if (rc)
        return rc;
    for (size_t i = 0; i < len; i++)
        e->w[i] = e->t->byte_id[p[i]];
    size_t k = len <= DIRECT_MAX ? merge_direct(e->t, e->w, len) : merge_heap(e->t, e->w, len, &e->c);
    if (e->cache)
        so_piece_cache_put(e->cache, p, len, e->w, k);
    return append_ids(e, e->w, k);
}

/* Takes the tokenizer's piece cache if no other call holds it (the cache
 * is the one part of a tokenizer that encoding changes). */
static int cache_take(const so_tokenizer *t, encoder *e)
{
    so_tokenizer *mt = (so_tokenizer *)t;
    if (pthread_mutex_trylock(&mt->cache_mu) != 0)
        return 0;
    if (!mt->cache)
        mt->cache = so_piece_cache_create(); /* NULL: encode uncached */
    e->cache = mt->cache;
    return 1;
}

int so_tokenizer_encode(const so_tokenizer *t, const char *text, size_t len, uint32_t **ids, size_t *n, size_t *cap)
{
    if (t->kind == TOK_LLMC)
        return so_err(SO_EUNSUP, "tokenizer: llm.c's tokenizer file has no merges: it decodes, it cannot encode");
    encoder e = {t, ids, n, cap, NULL, {NULL, NULL, NULL, NULL, NULL}, 0, NULL};
    int rc;
    if (t->kind == TOK_BYTES) { /* no pieces: every byte is its token */
        rc = ensure(&e, 0);
        for (size_t i = 0; !rc && i < len; i += 4096) {
            size_t k = len - i < 4096 ? len - i : 4096;
            if (!(rc = ensure(&e, k))) {
                for (size_t j = 0; j < k; j++)
                    e.w[j] = (uint8_t)text[i + j];
                rc = append_ids(&e, e.w, k);
            }
        }
    } else {
        int held = cache_take(t, &e);
        rc = so_pretok_gpt2((const uint8_t *)text, len, encode_piece, &e);
        if (held)
            pthread_mutex_unlock(&((so_tokenizer *)t)->cache_mu);
    }
    encoder_free(&e);
    return rc;
}

/* ---- decoding ----------------------------------------------------------------- */

int so_tokenizer_decode(const so_tokenizer *t, const uint32_t *ids, size_t n, char **text, size_t *len)
{
    size_t total = 0;
    *text = NULL;
    *len = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= (uint32_t)t->vocab)
            return so_err(SO_EINVAL, "tokenizer: id %u at position %zu is not below the vocabulary of %d", ids[i],
                          i, t->vocab);
        total += t->off[ids[i] + 1] - t->off[ids[i]];
    }
    char *s = malloc(total + 1);
    if (!s)
        return so_err(SO_ENOMEM, "tokenizer: out of memory for %zu bytes of text", total);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = t->off[ids[i] + 1] - t->off[ids[i]];
        memcpy(s + k, t->bytes + t->off[ids[i]], l);
        k += l;
    }
    s[k] = 0;
    *text = s;
    *len = k;
    return 0;
}
