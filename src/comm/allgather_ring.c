/* Allgather algorithm "ring": p-1 steps, each passing one block to the right
 * neighbour (MPICH allgather_intra_ring). Bandwidth-optimal for any p; the
 * second half of ring allreduce, used after a reduce-scatter.
 *
 * Accepts: any p, any count (uneven blocks, so_blk), out of place (send holds
 *          block r) or in place (send == recv + offset of block r).
 * Cost:    (p-1) alpha + (p-1)/p n beta.
 * Steps, p = 3: step s sends block (r-s), receives block (r-s-1):
 *            rank 0        rank 1        rank 2
 *   s=0      send 0 recv 2 send 1 recv 0 send 2 recv 1
 *   s=1      send 2 recv 1 send 0 recv 2 send 1 recv 0 */
#include "coll_internal.h"

#include <string.h>

int so_allgather_ring(const float *send, float *recv, size_t count, MPI_Comm comm, so_waiter *w)
{
    int rc = 0, p, r;
    SO_MPI_TRY(MPI_Comm_size(comm, &p));
    SO_MPI_TRY(MPI_Comm_rank(comm, &r));
    size_t myoff, mylen;
    so_blk(count, p, r, &myoff, &mylen);
    if (send != recv + myoff)
        memcpy(recv + myoff, send, mylen * sizeof *recv);
    int right = (r + 1) % p, left = (r + p - 1) % p;
    for (int s = 0; s < p - 1; s++) {
        int sb = (r - s + p) % p, rb = (r - s - 1 + p) % p;
        size_t soff, slen, roff, rlen;
        so_blk(count, p, sb, &soff, &slen);
        so_blk(count, p, rb, &roff, &rlen);
        if ((rc = so_sendrecv(recv + soff, slen, right, recv + roff, rlen, left, SO_TAG_AG, comm, w)))
            goto out;
    }
out:
    return rc;
}
