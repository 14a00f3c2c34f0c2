/* Reduce-scatter algorithm "ring": the first half of ring allreduce, shifted
 * by one block so rank r ends with block r (the MPI_Reduce_scatter_block
 * convention). Bandwidth-optimal; the building block of sharded optimizer
 * state (ZeRO-style: reduce-scatter gradients, update a shard, allgather).
 *
 * Accepts: any p, any blocks (even, or the caller's counts: reduce-scatterv;
 *          blocks may be empty), out of place (recv holds block r only) or
 *          in place (recv == send + offset of block r), SUM / MAX / MIN, any
 *          element type and transport. send is never written.
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

int so_reduce_scatter_ring(so_coll_ctx *x, const void *send, void *recv, const size_t *displ, so_reduce_op op)
{
    int rc = 0, p = x->size, r = x->rank;
    char *tmp = NULL;
    if (p == 1) {
        if (recv != send)
            memmove(recv, send, displ[1] * x->esz);
        return 0;
    }
    size_t maxblk = 0;
    for (int i = 0; i < p; i++)
        maxblk = displ[i + 1] - displ[i] > maxblk ? displ[i + 1] - displ[i] : maxblk;
    if (p > 2 && maxblk && !(tmp = malloc(2 * maxblk * x->esz)))
        return so_err(SO_ENOMEM, "reduce-scatter ring: out of memory for %zu elements", 2 * maxblk);
    int right = (r + 1) % p, left = (r + p - 1) % p;
    const void *prev = NULL; /* partial sum of the block we send next */
    for (int s = 0; s < p - 1 && !rc; s++) {
        int sb = (r - s - 1 + 2 * p) % p, rb = (r - s - 2 + 2 * p) % p;
        size_t slen = displ[sb + 1] - displ[sb], rlen = displ[rb + 1] - displ[rb];
        void *out = s == p - 2 ? recv : tmp + (size_t)(s & 1) * maxblk * x->esz;
        rc = so_xchg_reduce(x, s == 0 ? so_el(x, send, displ[sb]) : prev, slen, right, out,
                            so_el(x, send, displ[rb]), rlen, left, op, SO_TAG_RS);
        prev = out;
    }
    free(tmp);
    return rc;
}
