/* Reduce-scatter algorithm "hier": on one node, straight out of the peers'
 * registered send buffers -- ZeRO's gradient buckets live in registered
 * memory, as data parallelism's do for hier's allreduce.
 *
 * Accepts: any p and blocks (even, or the caller's counts), in place or out
 *          of place, SUM / MAX / MIN, any element type. Zero copy needs one
 *          node (the group is its node group) and every rank's send buffer
 *          in one registered region (so_comm_buf_alloc); otherwise, agreed
 *          by all ranks after the same barrier, the ring over the group's
 *          transport runs instead.
 * Phases:  1. publish where send lives; barrier; every rank decides alike
 *             (so_hier_share).
 *          2. rank r reduces block r of the q send buffers, in node-rank
 *             order (the same order, so the same bits, as hier's allreduce),
 *             through a private temp of SO_ZC_SUB elements, into its recv.
 *          3. barrier: nobody changes its send buffer while a peer reads it.
 * Cost:    2 barriers + per rank n/q bytes read from each of the q buffers
 *          ((q-1)/q of them remote) + n/q written + n/q gamma: no copies.
 * In place (recv == send + block offset) is safe: rank r writes only block
 * r, which only it reads, and reads a sub-chunk before storing it. */
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
        return so_reduce_scatter_ring(x, send, recv, displ, op);
    reduce_block(x, s, displ[x->rank], displ[x->rank + 1] - displ[x->rank], recv, op);
    return so_shm_barrier(s, x->w);
}
