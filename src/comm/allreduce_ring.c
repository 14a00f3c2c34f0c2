/* Allreduce algorithm "ring": reduce-scatter around a ring, then allgather
 * around it (Patarasuk & Yuan; MPICH allreduce_intra_ring, Open MPI
 * ring_segmented). Bandwidth-optimal: every rank sends 2(p-1)/p of the vector.
 *
 * Accepts: any p, any count (uneven blocks when p does not divide it; blocks
 *          may be empty), in place or out of place, SUM / MAX / MIN, any
 *          element type and transport (BF16 / F16: rounded at every hop).
 * Cost:    2(p-1) alpha + 2(p-1)/p n beta + (p-1)/p n gamma.
 * Phases:  reduce-scatter, p-1 steps: step s sends block (r-s) to r+1 and
 *          receives block (r-s-1) from r-1, reducing it as it arrives (in
 *          segments, so_xchg_reduce: the reduction of one segment overlaps the
 *          transfer of the next -- large messages stream). Afterwards rank r
 *          owns the reduced block (r+1). Allgather, p-1 steps: step s sends
 *          block (r+1-s), receives block (r-s) straight into recv.
 *
 * Step table, p = 3 (block held fully reduced after the phase is marked *):
 *            rank 0        rank 1        rank 2
 *   RS s=0   send 0 recv 2 send 1 recv 0 send 2 recv 1
 *   RS s=1   send 2 recv 1 send 0 recv 2 send 1 recv 0
 *            owns 1*       owns 2*       owns 0*
 *   AG s=0   send 1 recv 0 send 2 recv 1 send 0 recv 2
 *   AG s=1   send 0 recv 2 send 1 recv 0 send 2 recv 1
 * Out of place needs no copy: the first time a block is received it is
 * combined as recv = send op incoming; blocks are sent from send at step 0
 * and from recv afterwards. */
#include "coll_internal.h"

#include <string.h>

int so_allreduce_ring(so_coll_ctx *x, const void *send, void *recv, size_t count, so_reduce_op op)
{
    int rc = 0, p = x->size, r = x->rank;
    if (p == 1) {
        if (send != recv)
            memcpy(recv, send, count * x->esz);
        return 0;
    }
    int right = (r + 1) % p, left = (r + p - 1) % p;
    for (int s = 0; s < p - 1 && !rc; s++) {
        int sb = (r - s + p) % p, rb = (r - s - 1 + p) % p;
        size_t soff, slen, roff, rlen;
        so_blk(count, p, sb, &soff, &slen);
        so_blk(count, p, rb, &roff, &rlen);
        const void *src = s == 0 ? send : recv; /* block sb was received last step */
        rc = so_xchg_reduce(x, so_el(x, src, soff), slen, right, so_el(x, recv, roff), so_el(x, send, roff), rlen,
                            left, op, SO_TAG_RING);
    }
    for (int s = 0; s < p - 1 && !rc; s++) {
        int sb = (r + 1 - s + p) % p, rb = (r - s + p) % p;
        size_t soff, slen, roff, rlen;
        so_blk(count, p, sb, &soff, &slen);
        so_blk(count, p, rb, &roff, &rlen);
        rc = so_sendrecv(x, so_el(x, recv, soff), slen, right, so_el(x, recv, roff), rlen, left, SO_TAG_RING);
    }
    return rc;
}
