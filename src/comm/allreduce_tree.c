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

int so_allreduce_tree(so_coll_ctx *x, const void *send, void *recv, size_t count, so_reduce_op op)
{
    int rc = 0, p = x->size, r = x->rank;
    const void *cur = send;
    for (int mask = 1; mask < p && !rc; mask <<= 1) {
        if (r & mask) { /* hand our partial result to the parent and stop */
            rc = so_sendrecv(x, cur, count, r - mask, NULL, 0, SO_TP_NONE, SO_TAG_TREE);
            break;
        }
        if (r + mask < p) {
            rc = so_xchg_reduce(x, NULL, 0, SO_TP_NONE, recv, cur, count, r + mask, op, SO_TAG_TREE);
            cur = recv;
        }
    }
    if (rc)
        return rc;
    if (r == 0 && cur != recv) /* p == 1, out of place */
        memcpy(recv, cur, count * x->esz);
    return so_bcast_binomial(x, recv, count, 0);
}
