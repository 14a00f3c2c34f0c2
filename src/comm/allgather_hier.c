/* Allgather algorithm "hier": on one node, every rank copies the peers'
 * blocks straight out of their registered send buffers -- ZeRO gathers its
 * updated parameter shards so.
 *
 * Accepts: any p and blocks (even, or the caller's counts), in place or out
 *          of place, any element type. Zero copy needs one node and every
 *          rank's send buffer in one registered region (any offset: in place
 *          the block sits at its own offset of recv); otherwise, agreed by
 *          all ranks after the same barrier, the ring runs instead.
 * Phases:  1. publish where send lives; barrier; every rank decides alike.
 *          2. rank r copies block j from rank j's send into its recv, for
 *             every j (its own only when out of place).
 *          3. barrier: nobody changes its block while a peer copies it.
 * Cost:    2 barriers + per rank (q-1)/q n bytes read remotely and written
 *          locally: one copy, where the ring moves every block q-1 times. */
#include "coll_internal.h"

#include <string.h>

int so_allgather_hier(so_coll_ctx *x, const void *send, void *recv, const size_t *displ)
{
    so_shm *s;
    int rc = so_shm_get(x->comm, x->w, &s), ok = 0, r = x->rank;
    if (rc)
        return rc;
    if (s->nodes > 1 || s->q != x->size || x->size == 1) /* the same on every rank */
        return so_allgather_ring(x, send, recv, displ);
    if ((rc = so_hier_share(s, x->w, send, (displ[r + 1] - displ[r]) * x->esz, &ok)))
        return rc;
    so_hier_count(ok);
    if (!ok)
        return so_allgather_ring(x, send, recv, displ);
    for (int j = 0; j < x->size; j++) {
        char *dst = so_el(x, recv, displ[j]);
        if (dst != s->zc_in[j]) /* in place: my block is there already */
            memcpy(dst, s->zc_in[j], (displ[j + 1] - displ[j]) * x->esz);
    }
    return so_shm_barrier(s, x->w);
}
