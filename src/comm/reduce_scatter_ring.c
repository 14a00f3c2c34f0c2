/* Reduce-scatter algorithm "ring": the first half of ring allreduce, shifted
 * by one block so rank r ends with block r (the MPI_Reduce_scatter_block
 * convention). Bandwidth-optimal; the building block of sharded optimizer
 * state (ZeRO-style: reduce-scatter gradients, update a shard, allgather).
 *
 * Accepts: any p, any count (uneven blocks, so_blk), out of place (recv holds
 *          block r only) or in place (recv == send + offset of block r),
 *          SUM / MAX / MIN. send is never written.
 * Cost:    (p-1) alpha + (p-1)/p n beta + (p-1)/p n gamma.
 * Steps, p = 3 (send block / receive-and-reduce block):
 *            rank 0        rank 1        rank 2
 *   s=0      send 2 recv 1 send 0 recv 2 send 1 recv 0
 *   s=1      send 1 recv 0 send 2 recv 1 send 0 recv 2  -> rank r owns block r
 * Partial sums travel through two scratch blocks (the input is read-only);
 * the last step reduces straight into recv. */
#include "coll_internal.h"

#include "scaleout/err.h"

#include <stdlib.h>
#include <string.h>

int so_reduce_scatter_ring(const float *send, float *recv, size_t count, so_reduce_op op,
                           MPI_Comm comm, so_waiter *w)
{
    int rc = 0, p, r;
    float *tmp = NULL;
    SO_MPI_TRY(MPI_Comm_size(comm, &p));
    SO_MPI_TRY(MPI_Comm_rank(comm, &r));
    size_t myoff, mylen;
    so_blk(count, p, r, &myoff, &mylen);
    if (p == 1) {
        if (recv != send)
            memmove(recv, send, count * sizeof *recv);
        return 0;
    }
    size_t maxblk = count / (size_t)p + (count % (size_t)p != 0);
    if (p > 2 && maxblk) {
        tmp = malloc(2 * maxblk * sizeof *tmp);
        if (!tmp) {
            rc = so_err(SO_ENOMEM, "reduce-scatter ring: out of memory for %zu floats", 2 * maxblk);
            goto out;
        }
    }
    int right = (r + 1) % p, left = (r + p - 1) % p;
    const float *prev = NULL; /* partial sum of the block we send next */
    for (int s = 0; s < p - 1; s++) {
        int sb = (r - s - 1 + 2 * p) % p, rb = (r - s - 2 + 2 * p) % p;
        size_t soff, slen, roff, rlen;
        so_blk(count, p, sb, &soff, &slen);
        so_blk(count, p, rb, &roff, &rlen);
        float *out = s == p - 2 ? recv : tmp + (size_t)(s & 1) * maxblk;
        rc = so_xchg_reduce(s == 0 ? send + soff : prev, slen, right, out, send + roff, rlen, left,
                            op, SO_TAG_RS, comm, w);
        if (rc)
            goto out;
        prev = out;
    }
out:
    free(tmp);
    return rc;
}
