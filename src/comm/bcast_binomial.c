/* Broadcast algorithm "binomial": the root's buffer travels down a binomial
 * tree (MPICH bcast_intra_binomial). lg p steps; each message is sent whole,
 * so it suits small and mid sizes; "pipeline" streams large ones.
 *
 * Accepts: any p, any root, any count (chunks of SO_MPI_CHUNK floats).
 * Cost:    ceil(lg p) (alpha + n beta).
 * Steps, p = 6, root 0 (virtual rank v = (r - root) mod p; v receives from
 *        v minus its lowest set bit, then sends to v + m for m below that bit):
 *   m 4   0->4
 *   m 2   0->2  4->(6: none)
 *   m 1   0->1  2->3  4->5 */
#include "coll_internal.h"

int so_bcast_binomial(float *buf, size_t count, int root, MPI_Comm comm, so_waiter *w)
{
    int rc = 0, p, r;
    SO_MPI_TRY(MPI_Comm_size(comm, &p));
    SO_MPI_TRY(MPI_Comm_rank(comm, &r));
    int v = (r - root + p) % p, mask = 1;
    /* Receive from the parent: the lowest set bit of v names it. */
    for (; mask < p; mask <<= 1)
        if (v & mask) {
            int parent = (v - mask + root) % p;
            if ((rc = so_sendrecv(NULL, 0, MPI_PROC_NULL, buf, count, parent, SO_TAG_BCAST, comm, w)))
                goto out;
            break;
        }
    /* Send to the children, farthest subtree first so it starts earliest. */
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (v + mask < p) {
            int child = (v + mask + root) % p;
            if ((rc = so_sendrecv(buf, count, child, NULL, 0, MPI_PROC_NULL, SO_TAG_BCAST, comm, w)))
                goto out;
        }
out:
    return rc;
}
