/* Batches of a token dataset for the loader (loader.c): which token windows
 * make batch `step` of rank r in epoch e, in the three orders of data.h
 * (random windows; llm.c's order; llm.c's shuffled order), and the copy of
 * B windows of T+1 tokens into (B,T) float ids and (B,T) int32 targets.
 * Nothing here is sized by the data set but per-shard tables and, for
 * llm.c's shuffle, one shard's permutation (as llm.c holds it). */
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"
#include "scaleout/data.h"
#include "scaleout/err.h"
#include "scaleout/rng.h"

#define STREAM_WINDOWS 0x57494e444f57ULL /* "WINDOW": the epoch's permutation keys */
#define STREAM_OFFSETS 0x4f4646534554ULL /* "OFFSET": the epoch's window offsets */
#define FEISTEL_ROUNDS 6

/* ---- llm.c's mt19937 ------------------------------------------------------
 * The standard Mersenne Twister (Matsumoto & Nishimura's init_genrand and
 * genrand_int32), which llm.c's rand.h and torch use: llm.c's shuffle is
 * random_permutation, i.e. for i = n-1..1 swap(i, next() % (i+1)). */
#define MT_N 624
#define MT_M 397

typedef struct {
    uint32_t s[MT_N];
    int i;
} mt19937;

static void mt_seed(mt19937 *m, uint32_t seed)
{
    m->s[0] = seed;
    for (uint32_t j = 1; j < MT_N; j++)
        m->s[j] = 1812433253u * (m->s[j - 1] ^ (m->s[j - 1] >> 30)) + j;
    m->i = MT_N;
}

static void mt_twist(mt19937 *m)
{
    for (int k = 0; k < MT_N; k++) {
        uint32_t y = (m->s[k] & 0x80000000u) | (m->s[(k + 1) % MT_N] & 0x7fffffffu);
        m->s[k] = m->s[(k + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    m->i = 0;
}

static uint32_t mt_next(mt19937 *m)
{
    if (m->i >= MT_N)
        mt_twist(m);
    uint32_t y = m->s[m->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

/* llm.c's random_permutation, applied to v in place. */
static void mt_permute(mt19937 *m, int32_t *v, int64_t n)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = mt_next(m) % (uint32_t)(i + 1);
        int32_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* ---- the plan ----------------------------------------------------------------- */

struct tok_plan {
    const so_tokens *t;
    int B, T, rank, world, order;
    uint64_t seed;
    int64_t steps;        /* batches per epoch on every rank */
    int nshards;
    int64_t *nb;          /* nshards: windows (random) or batches (llm.c orders) of each shard */
    int64_t *first;       /* nshards + 1: prefix sums of nb in the epoch's shard order */
    int32_t *order_of;    /* nshards: the epoch's shard order (identity but for llm.c's shuffle) */
    int32_t *order_base;  /* llm.c's shuffle: its shard order before epoch rng_epoch_no permutes it */
    int epoch;
    /* SO_SHUFFLE_ON: this epoch's keyed bijection and window offsets */
    int half_bits;
    uint64_t keys[FEISTEL_ROUNDS];
    int64_t *offset;      /* nshards: first window's token of each shard */
    /* SO_SHUFFLE_LLMC: the generator at the start of this epoch, and the
     * permutation of the shard at position `cur_pos` with the generator after it */
    mt19937 rng_epoch, rng_cur;
    int rng_epoch_no;     /* the epoch rng_epoch starts */
    int cur_pos;          /* -1: none yet this epoch */
    int32_t *intra;       /* max nb: the current shard's batch permutation */
};

void tok_plan_destroy(tok_plan *p)
{
    if (!p)
        return;
    free(p->nb);
    free(p->first);
    free(p->order_of);
    free(p->order_base);
    free(p->offset);
    free(p->intra);
    free(p);
}

/* Windows (random) or batches (llm.c) per shard, and the epoch's length. */
static int count_batches(tok_plan *p)
{
    const so_tokens *t = p->t;
    int64_t total = 0, per_batch = (int64_t)p->world * p->B * p->T, maxnb = 1;
    for (int s = 0; s < p->nshards; s++) {
        int64_t len = so_tokens_len(t, s);
        /* llm.c: (ntok - 1) / (world*B*T) batches; random: (ntok - 1) / T windows of T+1 tokens */
        p->nb[s] = p->order == SO_SHUFFLE_ON ? (len - 1) / p->T : (len - 1) / per_batch;
        total += p->nb[s];
        maxnb = p->nb[s] > maxnb ? p->nb[s] : maxnb;
    }
    p->steps = p->order == SO_SHUFFLE_ON ? total / p->world / p->B : total;
    if (p->steps < 1)
        return so_err(SO_EINVAL,
                      "%s: %lld tokens in %d shard(s) make no batch of %d sequences of %d+1 tokens for %d rank(s)%s",
                      so_tokens_path(t, 0), (long long)so_tokens_total(t), p->nshards, p->B, p->T, p->world,
                      p->order == SO_SHUFFLE_ON ? "" : " (llm.c's order needs world*B*T+1 tokens in one shard)");
    if (p->steps > 0x7fffffff)
        return so_err(SO_EINVAL, "%s: %lld batches per epoch is more than 2^31-1: use larger batches",
                      so_tokens_path(t, 0), (long long)p->steps);
    if (p->order == SO_SHUFFLE_LLMC && !(p->intra = malloc((size_t)maxnb * sizeof *p->intra)))
        return so_err(SO_ENOMEM, "token loader: out of memory for %lld batch indices", (long long)maxnb);
    return 0;
}

int tok_plan_create(const so_dataset *d, const so_loader_config *c, tok_plan **out)
{
    *out = NULL;
    tok_plan *p = calloc(1, sizeof *p);
    if (!p)
        return so_err(SO_ENOMEM, "token loader: out of memory");
    p->t = d->tokens;
    p->B = c->batch, p->T = d->w, p->rank = c->rank, p->world = c->world;
    p->order = c->shuffle == SO_SHUFFLE_LLMC ? SO_SHUFFLE_LLMC : c->shuffle ? SO_SHUFFLE_ON : SO_SHUFFLE_OFF;
    p->seed = c->seed;
    p->nshards = so_tokens_nshards(p->t);
    p->epoch = p->rng_epoch_no = -1;
    size_t n = (size_t)p->nshards;
    p->nb = malloc(n * sizeof *p->nb);
    p->first = malloc((n + 1) * sizeof *p->first);
    p->order_of = malloc(n * sizeof *p->order_of);
    p->order_base = malloc(n * sizeof *p->order_base);
    p->offset = calloc(n, sizeof *p->offset);
    int rc = !p->nb || !p->first || !p->order_of || !p->order_base || !p->offset
                 ? so_err(SO_ENOMEM, "token loader: out of memory")
                 : count_batches(p);
    if (rc)
        tok_plan_destroy(p);
    else
        *out = p;
    return rc;
}

int64_t tok_plan_steps(const tok_plan *p) { return p->steps; }

int64_t tok_plan_windows(const so_tokens *t, int T)
{
    int64_t n = 0;
    for (int s = 0; s < so_tokens_nshards(t); s++)
        n += (so_tokens_len(t, s) - 1) / T;
    return n;
}

/* ---- epochs ------------------------------------------------------------------- */

static void prefix_in_order(tok_plan *p)
{
    p->first[0] = 0;
    for (int k = 0; k < p->nshards; k++)
        p->first[k + 1] = p->first[k] + p->nb[p->order_of[k]];
}

/* Random windows: the bijection's keys and each shard's offset within its
 * spare tokens ((len-1) - nb*T, less than T), from (seed, epoch). */
static void epoch_windows(tok_plan *p, int epoch)
{
    uint64_t wseed = so_rng_derive(so_rng_derive(p->seed, STREAM_WINDOWS), (uint64_t)epoch);
    for (int r = 0; r < FEISTEL_ROUNDS; r++)
        p->keys[r] = so_rng_derive(wseed, (uint64_t)r);
    int bits = 2;
    while (bits < 62 && ((uint64_t)1 << bits) < (uint64_t)p->first[p->nshards])
        bits += 2;
    p->half_bits = bits / 2;
    so_rng r;
    so_rng_seed(&r, so_rng_derive(so_rng_derive(p->seed, STREAM_OFFSETS), (uint64_t)epoch));
    for (int s = 0; s < p->nshards; s++) {
        int64_t spare = so_tokens_len(p->t, s) - 1 - p->nb[s] * p->T;
        p->offset[s] = (int64_t)so_rng_below(&r, (uint64_t)spare + 1);
    }
}

/* llm.c's shuffle: one epoch's draws, taking rng_epoch from the start of
 * epoch e to the start of e + 1: the shard order, permuted in place and so
 * cumulatively over epochs (llm.c's dataloader_reset), then each shard's
 * batch permutation (regenerated from the identity: only the number of its
 * draws matters here, n-1 for n batches). */
static void llmc_skip_epoch(tok_plan *p)
{
    mt_permute(&p->rng_epoch, p->order_base, p->nshards);
    for (int s = 0; s < p->nshards; s++)
        for (int64_t i = p->nb[s] - 1; i > 0; i--)
            (void)mt_next(&p->rng_epoch);
    p->rng_epoch_no++;
}

/* Epoch e's shard order in order_of and the generator after it in rng_cur;
 * the shards' batch permutations are drawn as batches reach them. Epochs
 * usually come in order (one skip each); going back replays from the seed. */
static void epoch_llmc(tok_plan *p, int epoch)
{
    if (p->rng_epoch_no < 0 || epoch < p->rng_epoch_no) {
        mt_seed(&p->rng_epoch, (uint32_t)(p->seed + (uint64_t)p->rank));
        for (int s = 0; s < p->nshards; s++)
            p->order_base[s] = s;
        p->rng_epoch_no = 0;
    }
    while (p->rng_epoch_no < epoch)
        llmc_skip_epoch(p);
    p->rng_cur = p->rng_epoch;
    memcpy(p->order_of, p->order_base, (size_t)p->nshards * sizeof *p->order_of);
    mt_permute(&p->rng_cur, p->order_of, p->nshards);
    p->cur_pos = -1;
}

void tok_plan_epoch(tok_plan *p, int epoch)
{
    if (p->order == SO_SHUFFLE_LLMC) {
        epoch_llmc(p, epoch);
    } else {
        for (int s = 0; s < p->nshards; s++)
            p->order_of[s] = s;
    }
    prefix_in_order(p);
    if (p->order == SO_SHUFFLE_ON)
        epoch_windows(p, epoch);
    p->epoch = epoch;
}

/* ---- batches ------------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The epoch's permutation of [0, n): a balanced Feistel network on 2h bits
 * (a bijection of [0, 4^h)), walked until it lands inside [0, n); n > 4^(h-1),
 * so under 4 rounds of the walk are expected. */
static int64_t permute_window(const tok_plan *p, int64_t i)
{
    uint64_t n = (uint64_t)p->first[p->nshards], h = (uint64_t)p->half_bits, mask = ((uint64_t)1 << h) - 1;
    uint64_t x = (uint64_t)i;
    do {
        uint64_t l = x >> h, r = x & mask;
        for (int k = 0; k < FEISTEL_ROUNDS; k++) {
            uint64_t f = mix64(r ^ p->keys[k]) & mask;
            uint64_t nl = r;
            r = l ^ f;
            l = nl;
        }
        x = l << h | r;
    } while (x >= n);
    return (int64_t)x;
}

/* Position k (in the epoch's shard order) holding item i of [0, first[n]). */
static int find_position(const tok_plan *p, int64_t i)
{
    int lo = 0, hi = p->nshards - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (p->first[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* llm.c's shuffle: the batch permutation of the shard at position pos,
 * drawing (or, going back, replaying) the generator up to it. */
static void llmc_intra(tok_plan *p, int pos)
{
    if (pos < p->cur_pos) {
        /* Back to the epoch's start; order_of is already this epoch's, so
         * only the shard permutation's draws are replayed. */
        p->rng_cur = p->rng_epoch;
        for (int64_t i = p->nshards - 1; i > 0; i--)
            (void)mt_next(&p->rng_cur);
        p->cur_pos = -1;
    }
    while (p->cur_pos < pos) {
        p->cur_pos++;
        int64_t nb = p->nb[p->order_of[p->cur_pos]];
        for (int64_t i = 0; i < nb; i++)
            p->intra[i] = (int32_t)i;
        mt_permute(&p->rng_cur, p->intra, nb);
    }
}

/* Copies the window of T+1 tokens at `start` of shard s into one row. */
static int copy_window(const tok_plan *p, int s, int64_t start, float *x, int32_t *y)
{
    int rc = so_tokens_bad_token(p->t, s, start, (int64_t)p->T + 1);
    if (rc)
        return rc;
    const void *data = so_tokens_data(p->t, s);
    if (so_tokens_width(p->t) == 2) {
        const uint16_t *v = (const uint16_t *)data + start;
        for (int k = 0; k < p->T; k++) {
            x[k] = (float)v[k];
            y[k] = v[k + 1];
        }
    } else {
        const uint32_t *v = (const uint32_t *)data + start;
        for (int k = 0; k < p->T; k++) {
            x[k] = (float)v[k];
            y[k] = (int32_t)v[k + 1];
        }
    }
    return 0;
}

int tok_plan_fill(tok_plan *p, int64_t step, float *x, int32_t *y)
{
    int64_t T = p->T;
    if (p->order == SO_SHUFFLE_ON) {
        for (int b = 0; b < p->B; b++) {
            int64_t w = permute_window(p, (step * p->B + b) * p->world + p->rank);
            int s = find_position(p, w); /* identity order: position = shard */
            int rc = copy_window(p, s, p->offset[s] + (w - p->first[s]) * T, x + b * T, y + b * T);
            if (rc)
                return rc;
        }
        return 0;
    }
    int pos = find_position(p, step);
    int s = p->order_of[pos];
    int64_t i = step - p->first[pos];
    if (p->order == SO_SHUFFLE_LLMC) {
        llmc_intra(p, pos);
        i = p->intra[i];
    }
    int64_t start = (i * p->world + p->rank) * p->B * T;
    for (int b = 0; b < p->B; b++) {
        int rc = copy_window(p, s, start + b * T, x + b * T, y + b * T);
        if (rc)
            return rc;
    }
    return 0;
}
