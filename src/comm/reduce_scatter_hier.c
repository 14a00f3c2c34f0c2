/* Reduce-scatter algorithm "hier": on one node, straight out of the peers'
 * registered send buffers -- ZeRO's gradient buckets live in registered
 * memory, as data parallelism's do for hier's allreduce.
 *
 * Accepts: any p and blocks (even, or the caller's counts), in place or out
 *          of place, SUM / MAX / MIN, any element type. Zero copy needs one
 *          node (the group is its node group) and every rank's send buffer
 *          in one registered region (so_comm_buf_alloc). Otherwise, agreed
 *          by all ranks after the same barrier, the same reduction runs
 *          through the window's contribution areas (the copy path): the
 *          same order, so the same bits, whether or not a caller's buffers
 *          are registered. More than one node: the ring over the group's
 *          transport.
 * Phases:  1. publish where send lives; barrier; every rank decides alike
 *             (so_hier_share).
 *          2. rank r reduces block r of the q send buffers, in node-rank
 *             order (the same order, so the same bits, as hier's allreduce),
 *             through a private temp of SO_ZC_SUB elements, into its recv.
 *          3. barrier: nobody changes its send buffer while a peer reads it.
 * Cost:    2 barriers + per rank n/q bytes read from each of the q buffers
 *          ((q-1)/q of them remote) + n/q written + n/q gamma: no copies.
 * Copy path: in steps of a chunk split over the q blocks, every rank copies
 * the others' pieces into its contribution area; barrier; rank r reduces its
 * piece from the q - 1 areas and its own send buffer, in node-rank order;
 * barrier (the areas are reused). Cost: 2 barriers per step + (q-1)/q n
 * bytes copied per rank (the ring's volume) + n/q reduced.
 * In place (recv == send + block offset) is safe: rank r writes only block
 * r, which only it reads, and reduces each sub-chunk into a private temp
 * before storing it. */
#include "coll_internal.h"

#include <string.h>

/* Elements [0, len) of the q inputs (node rank j's at base[j]), reduced in
 * node-rank order into recv through the private temp: recv may be one of
 * the inputs (in place), and a sub-chunk is read before it is stored. */
static void reduce_into(so_coll_ctx *x, so_shm *s, const char *const *base, size_t len, void *recv,
                        so_reduce_op op)
{
    const void *in[256];
    for (size_t o = 0; o < len; o += SO_ZC_SUB) {
        size_t k = len - o < SO_ZC_SUB ? len - o : SO_ZC_SUB;
        for (int j = 0; j < s->q; j++)
            in[j] = base[j] + o * x->esz;
        so_red_multi(x->dt, op, s->zc_tmp, in, s->q, k);
        memcpy(so_el(x, recv, o), s->zc_tmp, k * x->esz);
    }
}

/* Block [lo, hi) of the q registered send buffers, straight into recv. */
static void zero_copy(so_coll_ctx *x, so_shm *s, size_t lo, size_t hi, void *recv, so_reduce_op op)
{
    const char *base[256];
    for (int j = 0; j < s->q; j++)
        base[j] = s->zc_in[j] + lo * x->esz;
    reduce_into(x, s, base, hi - lo, recv, op);
}

/* Without registered buffers, through the window. Step t takes `sub`
 * elements of every block at once, so every rank copies and reduces in
 * every step: rank r copies the others' pieces of its send buffer into
 * slot k of its contribution area; barrier; it reduces its own piece from
 * the q areas and its own send buffer, in node-rank order; barrier. */
static int copy_path(so_coll_ctx *x, so_shm *s, const void *send, void *recv, const size_t *displ, so_reduce_op op)
{
    const char *base[256];
    size_t sub = s->chunk_bytes / x->esz / (size_t)s->q, longest = 0;
    for (int k = 0; k < s->q; k++)
        if (displ[k + 1] - displ[k] > longest)
            longest = displ[k + 1] - displ[k];
    for (size_t t0 = 0; t0 < longest; t0 += sub) {
        for (int k = 0; k < s->q; k++) {
            size_t off = displ[k] + t0, n = off < displ[k + 1] ? displ[k + 1] - off : 0;
            if (k != s->r && n)
                so_shm_copy(s->contrib[s->r] + (size_t)k * sub * x->esz, so_el(x, send, off),
                            (n < sub ? n : sub) * x->esz);
        }
        int rc = so_shm_barrier(s, x->w);
        if (rc)
            return rc;
        size_t off = displ[s->r] + t0, n = off < displ[s->r + 1] ? displ[s->r + 1] - off : 0;
        for (int j = 0; j < s->q; j++)
            base[j] = j == s->r ? so_el(x, send, off) : s->contrib[j] + (size_t)s->r * sub * x->esz;
        if (n)
            reduce_into(x, s, base, n < sub ? n : sub, so_el(x, recv, t0), op);
        if ((rc = so_shm_barrier(s, x->w)))
            return rc;
    }
    return 0;
}

int so_reduce_scatter_hier(so_coll_ctx *x, const void *send, void *recv, const size_t *displ, so_reduce_op op)
{
    so_shm *s;
    int rc = so_shm_get(x->comm, x->w, &s), ok = 0;
    if (rc)
        return rc;
    if (s->nodes > 1 || s->q != x->size || s->q > 256 || x->size == 1) /* the same on every rank */
        return so_reduce_scatter_ring(x, send, recv, displ, op);
    if ((rc = so_hier_share(s, x->w, send, displ[x->size] * x->esz, &ok)))
        return rc;
    so_hier_count(ok);
    if (!ok && s->chunk_bytes / x->esz < (size_t)s->q) /* a window too small to split (the same everywhere) */
        return so_reduce_scatter_ring(x, send, recv, displ, op);
    if (!ok)
        return copy_path(x, s, send, recv, displ, op);
    zero_copy(x, s, displ[x->rank], displ[x->rank + 1], recv, op);
    return so_shm_barrier(s, x->w);
}
