/* Training a byte-pair encoder on the user's text (so_tokenizer_train):
 * GPT-2's pre-tokenizer splits the text into pieces; identical pieces are
 * counted once with their frequency; then, merge after merge, the most
 * frequent adjacent pair of symbols (ties: the smaller ids) becomes a token.
 * Pair counts are kept up to date incrementally: a merge touches only the
 * words that hold its pair (each pair keeps the list of words it occurs
 * in), and a max-heap with lazy deletion finds the next pair. */
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "tokenizer_internal.h"

/* ---- unique pieces and their counts ---------------------------------------- */

typedef struct {
    const uint8_t *text;      /* the training text (pieces point into it) */
    size_t *start;            /* per unique piece: offset in text */
    uint32_t *len;
    int64_t *count;
    int32_t *slot;            /* hash table: piece index + 1 */
    size_t n, cap, slots;
} piece_set;

static uint64_t fnv(const uint8_t *b, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h ^ (h >> 31);
}

static int pieces_rehash(piece_set *ps)
{
    size_t slots = ps->slots ? 2 * ps->slots : 1 << 10;
    int32_t *slot = calloc(slots, sizeof *slot);
    if (!slot)
        return -1;
    for (size_t k = 0; k < ps->n; k++) {
        size_t i = fnv(ps->text + ps->start[k], ps->len[k]) & (slots - 1);
        while (slot[i])
            i = (i + 1) & (slots - 1);
        slot[i] = (int32_t)k + 1;
    }
    free(ps->slot);
    ps->slot = slot, ps->slots = slots;
    return 0;
}

static int pieces_grow(piece_set *ps)
{
    size_t cap = ps->cap ? 2 * ps->cap : 1 << 9;
    size_t *st = realloc(ps->start, cap * sizeof *st);
    if (st)
        ps->start = st;
    uint32_t *ln = st ? realloc(ps->len, cap * sizeof *ln) : NULL;
    if (ln)
        ps->len = ln;
    int64_t *ct = ln ? realloc(ps->count, cap * sizeof *ct) : NULL;
    if (!ct)
        return -1;
    ps->count = ct, ps->cap = cap;
    return 0;
}

static int add_piece(void *arg, const uint8_t *p, size_t len)
{
    piece_set *ps = arg;
    if (len > UINT32_MAX || ps->n >= 0x7fffffff)
        return so_err(SO_EINVAL, "tokenizer training: a piece of %zu bytes or too many pieces", len);
    if (2 * (ps->n + 1) > ps->slots && pieces_rehash(ps))
        return so_err(SO_ENOMEM, "tokenizer training: out of memory counting pieces");
    size_t i = fnv(p, len) & (ps->slots - 1);
    for (; ps->slot[i]; i = (i + 1) & (ps->slots - 1)) {
        size_t k = (size_t)ps->slot[i] - 1;
        if (ps->len[k] == len && memcmp(ps->text + ps->start[k], p, len) == 0) {
            ps->count[k]++;
            return 0;
        }
    }
    if (ps->n == ps->cap && pieces_grow(ps))
        return so_err(SO_ENOMEM, "tokenizer training: out of memory counting pieces");
    ps->start[ps->n] = (size_t)(p - ps->text);
    ps->len[ps->n] = (uint32_t)len;
    ps->count[ps->n] = 1;
    ps->slot[i] = (int32_t)++ps->n;
    return 0;
}

static void pieces_free(piece_set *ps)
{
    free(ps->start);
    free(ps->len);
    free(ps->count);
    free(ps->slot);
}

/* ---- pairs ------------------------------------------------------------------- */

typedef struct {
    int32_t a, b;
    int64_t count;
    int32_t *words;           /* words holding the pair (maybe stale or repeated) */
    int nwords, capwords;
    int32_t touched;          /* the last merge step that changed its count */
} pair_stat;

typedef struct {
    int64_t count;
    int32_t pair;
} heap_entry;

typedef struct {
    /* words: the unique pieces as symbol lists */
    int32_t *sym;             /* all words' symbols; word w is sym[wstart[w] .. + wlen[w]) */
    size_t *wstart;
    uint32_t *wlen;
    int64_t *wcount;
    int32_t *stamp;           /* the last merge that processed each word */
    size_t nwords;
    /* pairs */
    pair_stat *p;
    int32_t np, capp;
    uint64_t *pkey;           /* hash: (a << 32 | b) + 1 -> pair index in pval */
    int32_t *pval;
    size_t pslots;
    heap_entry *heap;
    size_t nheap, capheap;
    int32_t *changed;         /* pairs whose count this step changed */
    int32_t nchanged, capchanged, step;
} trainer;

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    return k ^ (k >> 33);
}

static int pairs_rehash(trainer *t)
{
    size_t slots = t->pslots ? 2 * t->pslots : 1 << 10;
    uint64_t *key = calloc(slots, sizeof *key);
    int32_t *val = malloc(slots * sizeof *val);
    if (!key || !val) {
        free(key), free(val);
        return -1;
    }
    for (int32_t k = 0; k < t->np; k++) {
        uint64_t kk = ((uint64_t)(uint32_t)t->p[k].a << 32 | (uint32_t)t->p[k].b) + 1;
        size_t i = mix(kk) & (slots - 1);
        while (key[i])
            i = (i + 1) & (slots - 1);
        key[i] = kk, val[i] = k;
    }
    free(t->pkey), free(t->pval);
    t->pkey = key, t->pval = val, t->pslots = slots;
    return 0;
}

/* The index of pair (a, b), created with count 0 if new; -1 when out of memory. */
static int32_t pair_get(trainer *t, int32_t a, int32_t b)
{
    if (2 * ((size_t)t->np + 1) > t->pslots && pairs_rehash(t))
        return -1;
    uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    size_t i = mix(k) & (t->pslots - 1);
    for (; t->pkey[i]; i = (i + 1) & (t->pslots - 1))
        if (t->pkey[i] == k)
            return t->pval[i];
    if (t->np == t->capp) {
        int cap = t->capp ? 2 * t->capp : 1 << 9;
        pair_stat *p = realloc(t->p, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        t->p = p, t->capp = cap;
    }
    t->p[t->np] = (pair_stat){a, b, 0, NULL, 0, 0, -1};
    t->pkey[i] = k, t->pval[i] = t->np;
    return t->np++;
}

static int pair_add_word(pair_stat *p, int32_t w)
{
    if (p->nwords && p->words[p->nwords - 1] == w)
        return 0;
    if (p->nwords == p->capwords) {
        int cap = p->capwords ? 2 * p->capwords : 4;
        int32_t *v = realloc(p->words, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        p->words = v, p->capwords = cap;
    }
    p->words[p->nwords++] = w;
    return 0;
}

/* Max-heap by count, then by the smaller (a, b). */
static int heap_above(const trainer *t, heap_entry x, heap_entry y)
{
    if (x.count != y.count)
        return x.count > y.count;
    const pair_stat *px = &t->p[x.pair], *py = &t->p[y.pair];
    return px->a != py->a ? px->a < py->a : px->b < py->b;
}

static int heap_push(trainer *t, int32_t pair)
{
    if (t->nheap == t->capheap) {
        size_t cap = t->capheap ? 2 * t->capheap : 1 << 10;
        heap_entry *h = realloc(t->heap, cap * sizeof *h);
        if (!h)
            return -1;
        t->heap = h, t->capheap = cap;
    }
    heap_entry x = {t->p[pair].count, pair};
    size_t i = t->nheap++;
    while (i > 0 && heap_above(t, x, t->heap[(i - 1) / 2])) {
        t->heap[i] = t->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->heap[i] = x;
    return 0;
}

static heap_entry heap_pop(trainer *t)
{
    heap_entry top = t->heap[0], x = t->heap[--t->nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= t->nheap)
            break;
        if (c + 1 < t->nheap && heap_above(t, t->heap[c + 1], t->heap[c]))
            c++;
        if (!heap_above(t, t->heap[c], x))
            break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (t->nheap)
        t->heap[i] = x;
    return top;
}

/* Notes that pair p's count changed in this step (queued again at its end). */
static int touch(trainer *t, int32_t p)
{
    if (t->p[p].touched == t->step)
        return 0;
    if (t->nchanged == t->capchanged) {
        int cap = t->capchanged ? 2 * t->capchanged : 1024;
        int32_t *v = realloc(t->changed, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        t->changed = v, t->capchanged = cap;
    }
    t->p[p].touched = t->step;
    t->changed[t->nchanged++] = p;
    return 0;
}

/* Adds sign * the word's count to each of its pairs (and, adding, lists the
 * word under them). */
static int count_word(trainer *t, int32_t w, int sign)
{
    const int32_t *s = t->sym + t->wstart[w];
    for (uint32_t i = 0; i + 1 < t->wlen[w]; i++) {
        int32_t p = pair_get(t, s[i], s[i + 1]);
        if (p < 0 || touch(t, p))
            return -1;
        t->p[p].count += sign * t->wcount[w];
        if (sign > 0 && pair_add_word(&t->p[p], w))
            return -1;
    }
    return 0;
}

/* Queues every pair the step changed with its new count (older heap entries
 * of those pairs no longer match their count and are skipped when popped). */
static int queue_changed(trainer *t)
{
    for (int32_t k = 0; k < t->nchanged; k++)
        if (t->p[t->changed[k]].count > 0 && heap_push(t, t->changed[k]))
            return -1;
    t->nchanged = 0;
    t->step++;
    return 0;
}

/* Replaces every (a, b) of word w, left to right, by m. */
static void merge_word(trainer *t, int32_t w, int32_t a, int32_t b, int32_t m)
{
    int32_t *s = t->sym + t->wstart[w];
    uint32_t k = 0;
    for (uint32_t i = 0; i < t->wlen[w]; i++) {
        if (i + 1 < t->wlen[w] && s[i] == a && s[i + 1] == b)
            s[k++] = m, i++;
        else
            s[k++] = s[i];
    }
    t->wlen[w] = k;
}

static int has_pair(const trainer *t, int32_t w, int32_t a, int32_t b)
{
    const int32_t *s = t->sym + t->wstart[w];
    for (uint32_t i = 0; i + 1 < t->wlen[w]; i++)
        if (s[i] == a && s[i + 1] == b)
            return 1;
    return 0;
}

static void trainer_free(trainer *t)
{
    free(t->sym), free(t->wstart), free(t->wlen), free(t->wcount), free(t->stamp);
    for (int32_t k = 0; k < t->np; k++)
        free(t->p[k].words);
    free(t->p), free(t->pkey), free(t->pval), free(t->heap), free(t->changed);
}

/* ---- the tokenizer being built ------------------------------------------------- */

typedef struct {
    so_tokenizer *t;
    size_t cap_bytes;
    int cap_tokens;
} builder;

/* Appends a token (its bytes) to the table; index rebuilt at the end. */
static int add_token(builder *bd, const uint8_t *b, size_t n)
{
    so_tokenizer *t = bd->t;
    if (t->vocab == bd->cap_tokens) {
        int cap = 2 * bd->cap_tokens;
        size_t *off = realloc(t->off, ((size_t)cap + 1) * sizeof *off);
        if (!off)
            return -1;
        t->off = off, bd->cap_tokens = cap;
    }
    if (t->off[t->vocab] + n > bd->cap_bytes) {
        size_t cap = 2 * (bd->cap_bytes + n);
        uint8_t *bytes = realloc(t->bytes, cap);
        if (!bytes)
            return -1;
        t->bytes = bytes, bd->cap_bytes = cap;
    }
    memcpy(t->bytes + t->off[t->vocab], b, n);
    t->off[t->vocab + 1] = t->off[t->vocab] + n;
    t->vocab++;
    return 0;
}

/* The id of a + b's bytes: an existing token (two merges can spell the same
 * string, and GPT-2's encoder.json has one id per string) or a new one. */
static int32_t merged_id(builder *bd, int32_t a, int32_t b, uint8_t *buf)
{
    so_tokenizer *t = bd->t;
    size_t la = t->off[a + 1] - t->off[a], lb = t->off[b + 1] - t->off[b];
    memcpy(buf, t->bytes + t->off[a], la);
    memcpy(buf + la, t->bytes + t->off[b], lb);
    int32_t id = so_tok_find(t, buf, la + lb);
    if (id >= 0)
        return id;
    if (add_token(bd, buf, la + lb))
        return -1;
    id = t->vocab - 1;
    return so_tok_index_add(t, id) ? -1 : id;
}

/* One merge: the best live pair, applied to the words that hold it. */
static int merge_step(trainer *tr, builder *bd, int32_t stamp, uint8_t *buf, int *done)
{
    heap_entry top;
    for (;;) { /* skip entries whose count changed since they were queued */
        if (!tr->nheap) {
            *done = 1;
            return 0;
        }
        top = heap_pop(tr);
        if (top.count == tr->p[top.pair].count)
            break;
    }
    if (top.count < 2) { /* nothing occurs twice: more merges would only memorise */
        *done = 1;
        return 0;
    }
    int32_t a = tr->p[top.pair].a, b = tr->p[top.pair].b, m = merged_id(bd, a, b, buf);
    if (m < 0 || so_tok_add_merge(bd->t, a, b, m))
        return -1;
    /* The pair's word list, taken: afterwards no word holds the pair (a
     * left-to-right merge leaves no (a, b) behind), so it is not needed. */
    int32_t *words = tr->p[top.pair].words, nwords = tr->p[top.pair].nwords;
    tr->p[top.pair].words = NULL;
    tr->p[top.pair].nwords = tr->p[top.pair].capwords = 0;
    int rc = 0;
    for (int32_t k = 0; !rc && k < nwords; k++) {
        int32_t w = words[k];
        if (tr->stamp[w] == stamp || !has_pair(tr, w, a, b))
            continue;
        tr->stamp[w] = stamp;
        rc = count_word(tr, w, -1);
        merge_word(tr, w, a, b, m);
        rc = rc ? rc : count_word(tr, w, +1);
    }
    free(words);
    return rc ? rc : queue_changed(tr);
}

static int load_words(trainer *tr, const piece_set *ps)
{
    size_t total = 0;
    for (size_t k = 0; k < ps->n; k++)
        total += ps->len[k];
    tr->nwords = ps->n;
    tr->sym = malloc((total ? total : 1) * sizeof *tr->sym);
    tr->wstart = malloc((ps->n + 1) * sizeof *tr->wstart);
    tr->wlen = malloc((ps->n + 1) * sizeof *tr->wlen);
    tr->wcount = malloc((ps->n + 1) * sizeof *tr->wcount);
    tr->stamp = malloc((ps->n + 1) * sizeof *tr->stamp);
    if (!tr->sym || !tr->wstart || !tr->wlen || !tr->wcount || !tr->stamp)
        return -1;
    for (size_t k = 0, at = 0; k < ps->n; k++) {
        tr->wstart[k] = at;
        tr->wlen[k] = ps->len[k];
        tr->wcount[k] = ps->count[k];
        tr->stamp[k] = -1;
        for (uint32_t i = 0; i < ps->len[k]; i++)
            tr->sym[at++] = ps->text[ps->start[k] + i]; /* byte b is token b */
        if (count_word(tr, (int32_t)k, +1))
            return -1;
    }
    return queue_changed(tr);
}

static int start_tokenizer(builder *bd)
{
    bd->cap_tokens = 1024;
    bd->cap_bytes = 1 << 16;
    if (!(bd->t = so_tok_alloc(TOK_BPE, bd->cap_tokens, bd->cap_bytes)))
        return -1;
    bd->t->vocab = 0;
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        if (add_token(bd, &c, 1))
            return -1;
        bd->t->byte_id[b] = b;
    }
    return so_tok_index(bd->t, "tokenizer training") ? -1 : 0;
}

int so_tokenizer_train(const char *text, size_t len, int vocab, so_tokenizer **out)
{
    *out = NULL;
    if (vocab < 257 || vocab > (1 << 24))
        return so_err(SO_EINVAL, "--vocab: %d is not in 257..%d (256 bytes + merges + <|endoftext|>)", vocab, 1 << 24);
    piece_set ps = {(const uint8_t *)text, NULL, NULL, NULL, NULL, 0, 0, 0};
    trainer tr;
    memset(&tr, 0, sizeof tr);
    builder bd = {NULL, 0, 0};
    uint8_t *buf = NULL;
    int rc = so_pretok_gpt2((const uint8_t *)text, len, add_piece, &ps);
    if (!rc && (load_words(&tr, &ps) || start_tokenizer(&bd) || !(buf = malloc(len + 1))))
        rc = so_err(SO_ENOMEM, "tokenizer training: out of memory");
    int done = 0;
    for (int32_t stamp = 0; !rc && !done && bd.t->vocab < vocab - 1; stamp++)
        if (merge_step(&tr, &bd, stamp, buf, &done))
            rc = so_err(SO_ENOMEM, "tokenizer training: out of memory after %d merges", bd.t->nmerges);
    if (!rc) { /* <|endoftext|> last, as GPT-2's 50256 */
        int32_t e = so_tok_find(bd.t, (const uint8_t *)"<|endoftext|>", 13);
        if (e < 0 && (add_token(&bd, (const uint8_t *)"<|endoftext|>", 13) || so_tok_index(bd.t, "tokenizer training")))
            rc = so_err(SO_ENOMEM, "tokenizer training: out of memory");
        bd.t->eot = e >= 0 ? e : bd.t->vocab - 1;
    }
    free(buf);
    trainer_free(&tr);
    pieces_free(&ps);
    if (rc)
        so_tokenizer_destroy(bd.t);
    else
        *out = bd.t;
    return rc;
}
