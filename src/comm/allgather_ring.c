/* Allgather algorithm "ring": p-1 steps, each passing one block to the right
 * neighbour (MPICH allgather_intra_ring). Bandwidth-optimal for any p; the
 * second half of ring allreduce, used after a reduce-scatter.
 *
 * Accepts: any p, any blocks (even, or the caller's counts: allgatherv),
 *          out of place (send holds block r) or in place (send == recv +
 *          offset of block r), any element type and transport.
 * Cost:    (p-1) alpha + (p-1)/p n beta.
 * Steps, p = 3: step s sends block (r-s), receives block (r-s-1):
 *            rank 0        rank 1        rank 2
 *   s=0      send 0 recv 2 send 1 recv 0 send 2 recv 1
 *   s=1      send 2 recv 1 send 0 recv 2 send 1 recv 0 */
#include "coll_internal.h"

#include <string.h>

int so_allgather_ring(so_coll_ctx *x, const void *send, void *recv, const size_t *displ)
{
    int rc = 0, p = x->size, r = x->rank;
    char *mine = so_el(x, recv, displ[r]);
    if (send != mine)
        memcpy(mine, send, (displ[r + 1] - displ[r]) * x->esz);
    int right = (r + 1) % p, left = (r + p - 1) % p;
    for (int s = 0; s < p - 1 && !rc; s++) {
        int sb = (r - s + p) % p, rb = (r - s - 1 + p) % p;
        rc = so_sendrecv(x, so_el(x, recv, displ[sb]), displ[sb + 1] - displ[sb], right, so_el(x, recv, displ[rb]),
                         displ[rb + 1] - displ[rb], left, SO_TAG_AG);
    }
    return rc;
}
