/* Allreduce algorithm "tree": binomial-tree reduce to rank 0, then binomial
 * broadcast (MPICH's reduce + bcast composition). Any p without folding;
 * the root ends with the only copy of the sum, which every rank receives
 * bit for bit. Latency lg p like rd but twice the steps; kept as the
 * textbook reference and for reductions whose result must come from one place.
 *
 * Accepts: any p, any count, in place or out of place, SUM / MAX / MIN.
 * Cost:    2 ceil(lg p) alpha + 2 ceil(lg p) n beta + ceil(lg p) n gamma
 *          (segmented, so large messages pipeline through each edge).
 * Reduce steps, p = 6 (rank r with bit `mask` set sends to r - mask and stops):
 *   mask 1   1->0  3->2  5->4
 *   mask 2   2->0
 *   mask 4   4->0
 * then the same tree in reverse broadcasts from 0 (so_bcast_binomial). */
#include "coll_internal.h"

#include <string.h>

int so_allreduce_tree(const float *send, float *recv, size_t count, so_reduce_op op, MPI_Comm comm,
                      so_waiter *w)
{
    int rc = 0, p, r;
    SO_MPI_TRY(MPI_Comm_size(comm, &p));
    SO_MPI_TRY(MPI_Comm_rank(comm, &r));
    const float *cur = send;
    for (int mask = 1; mask < p; mask <<= 1) {
        if (r & mask) { /* hand our partial result to the parent and stop */
            rc = so_sendrecv(cur, count, r - mask, NULL, 0, MPI_PROC_NULL, SO_TAG_TREE, comm, w);
            break;
        }
        if (r + mask < p) {
            rc = so_xchg_reduce(NULL, 0, MPI_PROC_NULL, recv, cur, count, r + mask, op, SO_TAG_TREE,
                                comm, w);
            cur = recv;
        }
        if (rc)
            goto out;
    }
    if (rc)
        goto out;
    if (r == 0 && cur != recv) /* p == 1, out of place */
        memcpy(recv, cur, count * sizeof *recv);
    rc = so_bcast_binomial(recv, count, 0, comm, w);
out:
    return rc;
}
