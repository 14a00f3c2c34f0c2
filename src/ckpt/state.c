/* The training state as one byte vector. The REPLICATED part (identical on
 * every data-parallel rank) is the parameters followed by each optimizer
 * slot, nparams floats apiece; it is cut into shards. The PER-RANK part is
 * the model RNG (4 x uint64) followed by the batchnorm running statistics
 * (nbufs floats), which differ between ranks because each normalises its own
 * batches. Both are host (little-endian) byte order. Also: the model hash and
 * the checkpoint-interval formulas. */
#include "session.h"
#include "state.h"

#include <math.h>
#include <string.h>

#include <stdlib.h>

#include "scaleout/err.h"

/* The k-th segment of the replicated vector: params, then slot 0, 1, ... */
static uint8_t *segment(so_model *m, so_optim *o, int k)
{
    return k == 0 ? (uint8_t *)m->params : (uint8_t *)so_optim_slot(o, k - 1);
}

/* Copies rep bytes [off, off+len) out (dir 0) of or into (dir 1) the model. */
static void rep_copy(so_model *m, so_optim *o, uint8_t *buf, uint64_t off, uint64_t len, int into)
{
    uint64_t seg = (uint64_t)m->nparams * 4;
    int nseg = 1 + so_optim_nslots(o);
    for (int k = 0; k < nseg && len; k++) {
        uint64_t lo = (uint64_t)k * seg, hi = lo + seg;
        if (off >= hi)
            continue;
        uint64_t n = hi - off < len ? hi - off : len;
        uint8_t *p = segment(m, o, k) + (off - lo);
        if (into)
            memcpy(p, buf, n);
        else
            memcpy(buf, p, n);
        buf += n;
        off += n;
        len -= n;
    }
}

void ck_rep_get(so_model *m, so_optim *o, void *dst, uint64_t off, uint64_t len) { rep_copy(m, o, dst, off, len, 0); }
void ck_rep_set(so_model *m, so_optim *o, const void *src, uint64_t off, uint64_t len)
{
    rep_copy(m, o, (uint8_t *)src, off, len, 1);
}

uint64_t ck_rep_bytes(const so_model *m, const so_optim *o)
{
    return (uint64_t)(1 + so_optim_nslots(o)) * m->nparams * 4;
}

uint64_t ck_rank_bytes(const so_model *m, const so_rank_state *rs)
{
    return 32 + (uint64_t)m->nbufs * 4 + (rs ? rs->bytes : 0);
}

void ck_rank_get(const so_model *m, const so_rank_state *rs, void *dst)
{
    uint8_t *p = dst;
    memcpy(p, m->rng.s, 32);
    if (m->nbufs)
        memcpy(p + 32, m->bufs, m->nbufs * 4);
    if (rs && rs->bytes)
        rs->get(rs->ctx, p + ck_rank_bytes(m, NULL));
}

void ck_rank_set(so_model *m, const void *src)
{
    const uint8_t *p = src;
    memcpy(m->rng.s, p, 32);
    if (m->nbufs)
        memcpy(m->bufs, p + 32, m->nbufs * 4);
}

void ck_block(uint64_t total, int n, int k, uint64_t *off, uint64_t *len)
{
    uint64_t base = total / (uint64_t)n, extra = total % (uint64_t)n;
    *off = (uint64_t)k * base + ((uint64_t)k < extra ? (uint64_t)k : extra);
    *len = base + ((uint64_t)k < extra ? 1 : 0);
}

/* ---- the strategy's state ------------------------------------------------------ */

/* Shard i's piece of unit v: elements [*lo, *lo + *n). */
static void unit_piece(const ck_units *u, int v, int i, uint64_t *lo, uint64_t *n)
{
    uint64_t off, len, off2;
    ck_block(u->units[v + 1] - u->units[v], u->shards, i % u->shards, &off, &len);
    ck_block(len, u->replicas, i / u->shards, &off2, n);
    *lo = u->units[v] + off + off2;
}

uint64_t ck_units_floats(const ck_units *u, int i)
{
    uint64_t total = 0, lo, n;
    for (int v = 0; v < u->nunits; v++) {
        unit_piece(u, v, i, &lo, &n);
        total += n;
    }
    return total;
}

void ck_shard_span(const ck_units *u, int nseg, uint64_t rep_bytes, int world, int i, uint64_t *off, uint64_t *len)
{
    if (!u || !u->units) {
        ck_block(rep_bytes, world, i, off, len);
        return;
    }
    *off = 0;
    for (int j = 0; j < i; j++)
        *off += ck_units_floats(u, j) * 4 * (uint64_t)nseg;
    *len = ck_units_floats(u, i) * 4 * (uint64_t)nseg;
}

void ck_units_walk(const ck_units *u, int nseg, int i, uint8_t *buf, ck_piece_fn fn, void *ctx)
{
    uint64_t lo, n;
    for (int seg = 0; seg < nseg; seg++)
        for (int v = 0; v < u->nunits; v++) {
            unit_piece(u, v, i, &lo, &n);
            if (n)
                fn(ctx, seg, lo, n, (float *)buf);
            buf += n * 4;
        }
}

/* Whole floats [e, e + n) of the vector (segment after segment) through fn. */
static void feed_floats(uint64_t nparams, uint64_t e, uint64_t n, float *src, ck_piece_fn fn, void *ctx)
{
    while (n) {
        int seg = (int)(e / nparams);
        uint64_t lo = e % nparams, k = nparams - lo < n ? nparams - lo : n;
        fn(ctx, seg, lo, k, src);
        e += k;
        n -= k;
        src += k;
    }
}

void ck_canonical_feed(uint64_t nparams, uint64_t off, const uint8_t *src, uint64_t len, uint8_t carry[4],
                       int *ncarry, ck_piece_fn fn, void *ctx)
{
    float chunk[4096];
    if (!nparams)
        return;
    while (len && *ncarry) { /* complete the float cut by the previous shard */
        carry[(*ncarry)++] = *src++;
        off++;
        len--;
        if (*ncarry == 4) {
            memcpy(chunk, carry, 4);
            feed_floats(nparams, off / 4 - 1, 1, chunk, fn, ctx);
            *ncarry = 0;
        }
    }
    while (len >= 4) { /* through an aligned buffer: src may start mid-float */
        uint64_t k = len / 4 < 4096 ? len / 4 : 4096;
        memcpy(chunk, src, k * 4);
        feed_floats(nparams, off / 4, k, chunk, fn, ctx);
        src += k * 4;
        off += k * 4;
        len -= k * 4;
    }
    for (; len; len--) /* the start of a float the next shard completes */
        carry[(*ncarry)++] = *src++;
}

int ck_units_check(const ck_units *u, uint64_t nparams, int world)
{
    if (u->nunits < 1 || u->shards < 1 || u->replicas < 1 || (int64_t)u->shards * u->replicas != world)
        return -1;
    if (u->units[0] != 0 || u->units[u->nunits] != nparams)
        return -1;
    for (int v = 0; v < u->nunits; v++)
        if (u->units[v + 1] <= u->units[v])
            return -1;
    return 0;
}

/* ---- the session's view ----------------------------------------------------------- */

static const ck_units *layout(const so_ckpt *ck) { return ck->unit_bounds ? &ck->units : NULL; }

void ck_span(const so_ckpt *ck, int i, uint64_t *off, uint64_t *len)
{
    ck_shard_span(layout(ck), 1 + so_optim_nslots(ck->opt), ck->rep_bytes, ck->t.world, i, off, len);
}

static void get_piece(void *ctx, int seg, uint64_t lo, uint64_t n, float *data)
{
    const so_state_layout *l = ctx;
    l->get(l->ctx, seg, (size_t)lo, (size_t)n, data);
}

void ck_shard_get(so_ckpt *ck, void *dst)
{
    if (!layout(ck)) {
        uint64_t off, len;
        ck_span(ck, ck->t.rank, &off, &len);
        ck_rep_get(ck->m, ck->opt, dst, off, len);
        return;
    }
    ck_units_walk(&ck->units, 1 + so_optim_nslots(ck->opt), ck->t.rank, dst, get_piece, (void *)ck->c.state);
}

/* Without a strategy's layout: straight into the model and the optimizer. */
static void set_whole(void *ctx, int seg, uint64_t lo, uint64_t n, float *data)
{
    so_ckpt *ck = ctx;
    float *dst = seg == 0 ? ck->m->params : so_optim_slot(ck->opt, seg - 1);
    if (dst)
        memcpy(dst + lo, data, n * 4);
}

static void set_state(void *ctx, int seg, uint64_t lo, uint64_t n, float *data)
{
    const so_state_layout *l = ctx;
    l->set(l->ctx, seg, (size_t)lo, (size_t)n, data);
}

void ck_shard_put(so_ckpt *ck, const so_ckpt_manifest *m, int k, uint8_t *buf, uint8_t carry[4], int *ncarry)
{
    ck_piece_fn fn = ck->c.state ? set_state : set_whole;
    void *ctx = ck->c.state ? (void *)ck->c.state : (void *)ck;
    if (m->nunits) {
        ck_units u = {m->nunits, m->unit_shards, m->unit_replicas, m->units};
        ck_units_walk(&u, 1 + m->nslots, k, buf, fn, ctx);
    } else {
        ck_canonical_feed(m->nparams, m->shards[k].rep_off, buf, m->shards[k].rep_len, carry, ncarry, fn, ctx);
    }
}

int ck_units_from_state(so_ckpt *ck)
{
    const so_state_layout *l = ck->c.state;
    if (!l)
        return 0;
    if (ck->c.naive)
        return so_err(SO_EINVAL, "--ckpt-mode naive writes the whole state from rank 0, which a sharded strategy "
                      "does not hold: use --ckpt-mode scaleout");
    if (!(ck->unit_bounds = malloc(((size_t)l->nunits + 1) * sizeof *ck->unit_bounds)))
        return so_err(SO_ENOMEM, "out of memory");
    for (int v = 0; v <= l->nunits; v++)
        ck->unit_bounds[v] = l->units[v];
    ck->units = (ck_units){l->nunits, l->shards, l->replicas, ck->unit_bounds};
    if (ck_units_check(&ck->units, ck->m->nparams, ck->t.world) ||
        l->replica * l->shards + l->shard != ck->t.rank)
        return so_err(SO_EINVAL, "checkpoint: the strategy's layout (%d units, %d x %d shards) does not fit %d ranks",
                      l->nunits, l->shards, l->replicas, ck->t.world);
    return 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

uint64_t so_ckpt_model_hash(const so_model *m)
{
    uint64_t h = 1469598103934665603ULL;
    const so_graph *g = m->g;
    for (int i = 0; i < so_graph_size(g); i++) {
        so_tensor_desc t[4];
        int n = so_node_tensors(g, i, t);
        const so_node *nd = so_graph_node(g, i);
        for (int k = 0; k < n; k++) {
            h = fnv(h, nd->name, strlen(nd->name));
            h = fnv(h, t[k].suffix, strlen(t[k].suffix));
            int64_t v[7] = {t[k].is_buffer, (int64_t)t[k].off, (int64_t)t[k].count, t[k].dims[0],
                            t[k].ndim > 1 ? t[k].dims[1] : 0, t[k].ndim > 2 ? t[k].dims[2] : 0,
                            t[k].ndim > 3 ? t[k].dims[3] : 0};
            h = fnv(h, v, sizeof v);
        }
    }
    uint64_t sizes[2] = {m->nparams, m->nbufs};
    return fnv(h, sizes, sizeof sizes);
}

double so_ckpt_young(double delta, double mtbf) { return sqrt(2.0 * delta * mtbf); }

double so_ckpt_daly(double delta, double mtbf)
{
    if (delta <= 0 || mtbf <= 0)
        return 0;
    if (delta >= 2.0 * mtbf)
        return mtbf;
    double x = delta / (2.0 * mtbf);
    return sqrt(2.0 * delta * mtbf) * (1.0 + sqrt(x) / 3.0 + x / 9.0) - delta;
}
