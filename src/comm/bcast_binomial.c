/* Broadcast algorithm "binomial": the root's buffer travels down a binomial
 * tree (MPICH bcast_intra_binomial). lg p steps; each message is sent whole,
 * so it suits small and mid sizes; "pipeline" streams large ones.
 *
 * Accepts: any p, any root, any count, element type and transport.
 * Cost:    ceil(lg p) (alpha + n beta).
 * Steps, p = 6, root 0 (virtual rank v = (r - root) mod p; v receives from
 *        v minus its lowest set bit, then sends to v + m for m below that bit):
 *   m 4   0->4
 *   m 2   0->2  4->(6: none)
 *   m 1   0->1  2->3  4->5 */
#include "coll_internal.h"

int so_bcast_binomial(so_coll_ctx *x, void *buf, size_t count, int root)
{
    int rc = 0, p = x->size, r = x->rank;
    int v = (r - root + p) % p, mask = 1;
    /* Receive from the parent: the lowest set bit of v names it. */
    for (; mask < p; mask <<= 1)
        if (v & mask) {
            int parent = (v - mask + root) % p;
            if ((rc = so_sendrecv(x, NULL, 0, SO_TP_NONE, buf, count, parent, SO_TAG_BCAST)))
                return rc;
            break;
        }
    /* Send to the children, farthest subtree first so it starts earliest. */
    for (mask >>= 1; mask > 0 && !rc; mask >>= 1)
        if (v + mask < p)
            rc = so_sendrecv(x, buf, count, (v + mask + root) % p, NULL, 0, SO_TP_NONE, SO_TAG_BCAST);
    return rc;
}
