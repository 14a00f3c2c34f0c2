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
 * Copy path: per chunk of the vector, every rank copies its chunk into its
 * contribution area; barrier; rank r reduces the part of block r inside the
 * chunk over the q areas, in node-rank order; barrier (areas are reused).
 * Cost: 2 barriers per chunk + n bytes copied in per rank + n/q reduced.
 * In place (recv == send + block offset) is safe: rank r writes only block
 * r, which only it reads, and reads a sub-chunk (zero copy) or the chunk
 * (copy path) before storing it. */
#include "coll_internal.h"

#include <string.h>

/* Block [lo, lo + len) of the q send buffers, reduced into recv. */
static void reduce_block(so_coll_ctx *x, so_shm *s, size_t lo, size_t len, void *recv, so_reduce_op op)
{
    const void *in[256];
    for (size_t o = 0; o < len; o += SO_ZC_SUB) {
        size_t k = len - o < SO_ZC_SUB ? len - o : SO_ZC_SUB;
        for (int j = 0; j < s->q; j++)
            in[j] = s->zc_in[j] + (lo + o) * x->esz;
        so_red_multi(x->dt, op, s->zc_tmp, in, s->q, k);
        memcpy(so_el(x, recv, o), s->zc_tmp, k * x->esz);
    }
}

/* Without registered buffers: the same reduction through the window. */
static int copy_path(so_coll_ctx *x, so_shm *s, const void *send, void *recv, const size_t *displ, so_reduce_op op)
{
    const void *in[256];
    size_t n = displ[x->size], per = s->chunk_bytes / x->esz;
    size_t lo = displ[x->rank], hi = displ[x->rank + 1];
    for (size_t c0 = 0; c0 < n; c0 += per) {
        size_t c1 = n - c0 < per ? n : c0 + per;
        so_shm_copy(s->contrib[s->r], so_el(x, send, c0), (c1 - c0) * x->esz);
        int rc = so_shm_barrier(s, x->w);
        if (rc)
            return rc;
        size_t a = lo > c0 ? lo : c0, b = hi < c1 ? hi : c1;
        if (a < b) {
            for (int j = 0; j < s->q; j++)
                in[j] = s->contrib[j] + (a - c0) * x->esz;
            so_red_multi(x->dt, op, so_el(x, recv, a - lo), in, s->q, b - a);
        }
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
    if (!ok)
        return copy_path(x, s, send, recv, displ, op);
    reduce_block(x, s, displ[x->rank], displ[x->rank + 1] - displ[x->rank], recv, op);
    return so_shm_barrier(s, x->w);
}
