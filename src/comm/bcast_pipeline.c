/* Broadcast algorithm "pipeline": a chain root -> root+1 -> ... with the
 * buffer cut into segments, so every link carries a different segment at the
 * same time (MPICH's pipelined bcast, NCCL's ring broadcast). For large
 * messages the time approaches n beta however many ranks there are.
 *
 * Accepts: any p, any root, any count (at most 64 segments in flight), any
 *          element type and transport.
 * Cost:    (p - 2 + S) (alpha + n/S beta) for S segments; large n: ~n beta.
 * Steps, p = 3, root 0, 3 segments (time runs down):
 *   t0  0->1 seg0
 *   t1  0->1 seg1   1->2 seg0
 *   t2  0->1 seg2   1->2 seg1
 *   t3              1->2 seg2 */
#include "coll_internal.h"

#define PIPE_MAX_SEGS 64

int so_bcast_pipeline(so_coll_ctx *x, void *buf, size_t count, int root)
{
    so_tp_req rreq[PIPE_MAX_SEGS], sreq[PIPE_MAX_SEGS];
    int rc = 0, p = x->size, r = x->rank, nsend = 0;
    if (p == 1 || count == 0)
        return 0;
    int v = (r - root + p) % p, prev = (r - 1 + p) % p, next = (r + 1) % p;
    size_t seg = so_coll_seg_bytes() / x->esz, cap = SO_TP_MAX_BYTES / x->esz;
    if (count / seg + 1 > PIPE_MAX_SEGS)
        seg = count / (PIPE_MAX_SEGS - 1) + 1;
    if (seg > cap)
        seg = cap;
    int nseg = (int)((count + seg - 1) / seg);
    /* All receives go straight into buf, so they can all be posted at once. */
    for (int k = 0; v > 0 && k < nseg && !rc; k++) {
        size_t off = (size_t)k * seg, len = count - off < seg ? count - off : seg;
        rc = x->tp->ops->post(x->tp, so_el(x, buf, off), len * x->esz, prev, SO_TAG_BCAST, 0, &rreq[k]);
    }
    for (int k = 0; k < nseg && !rc; k++) {
        size_t off = (size_t)k * seg, len = count - off < seg ? count - off : seg;
        if (v > 0 && (rc = so_tp_wait(x->tp, x->w, &rreq[k], 1)))
            break;
        if (v < p - 1)
            rc = x->tp->ops->post(x->tp, so_el(x, buf, off), len * x->esz, next, SO_TAG_BCAST, 1, &sreq[nsend++]);
    }
    if (!rc && nsend)
        rc = so_tp_wait(x->tp, x->w, sreq, nsend);
    return rc;
}
