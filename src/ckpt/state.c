/* The training state as one byte vector. The REPLICATED part (identical on
 * every data-parallel rank) is the parameters followed by each optimizer
 * slot, nparams floats apiece; it is cut into shards. The PER-RANK part is
 * the model RNG (4 x uint64) followed by the batchnorm running statistics
 * (nbufs floats), which differ between ranks because each normalises its own
 * batches. Both are host (little-endian) byte order. Also: the model hash and
 * the checkpoint-interval formulas. */
#include "state.h"

#include <math.h>
#include <string.h>

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

uint64_t ck_rank_bytes(const so_model *m) { return 32 + (uint64_t)m->nbufs * 4; }

void ck_rank_get(const so_model *m, void *dst)
{
    uint8_t *p = dst;
    memcpy(p, m->rng.s, 32);
    if (m->nbufs)
        memcpy(p + 32, m->bufs, m->nbufs * 4);
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
