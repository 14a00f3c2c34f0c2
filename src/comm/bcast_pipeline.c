/* Broadcast algorithm "pipeline": a chain root -> root+1 -> ... with the
 * buffer cut into segments, so every link carries a different segment at the
 * same time (MPICH's pipelined bcast, NCCL's ring broadcast). For large
 * messages the time approaches n beta however many ranks there are.
 *
 * Accepts: any p, any root, any count (at most 64 segments in flight).
 * Cost:    (p - 2 + S) (alpha + n/S beta) for S segments; large n: ~n beta.
 * Steps, p = 3, root 0, 3 segments (time runs down):
 *   t0  0->1 seg0
 *   t1  0->1 seg1   1->2 seg0
 *   t2  0->1 seg2   1->2 seg1
 *   t3              1->2 seg2 */
#include "coll_internal.h"

#define PIPE_MAX_SEGS 64

int so_bcast_pipeline(float *buf, size_t count, int root, MPI_Comm comm, so_waiter *w)
{
    int rc = 0, p, r, nsend = 0;
    MPI_Request rreq[PIPE_MAX_SEGS], sreq[PIPE_MAX_SEGS];
    SO_MPI_TRY(MPI_Comm_size(comm, &p));
    SO_MPI_TRY(MPI_Comm_rank(comm, &r));
    if (p == 1 || count == 0)
        return 0;
    int v = (r - root + p) % p, prev = (r - 1 + p) % p, next = (r + 1) % p;
    size_t seg = so_coll_seg();
    if (count / seg + 1 > PIPE_MAX_SEGS)
        seg = count / (PIPE_MAX_SEGS - 1) + 1;
    if (seg > SO_MPI_CHUNK)
        seg = SO_MPI_CHUNK;
    int nseg = (int)((count + seg - 1) / seg);
    /* All receives go straight into buf, so they can all be posted at once. */
    if (v > 0)
        for (int k = 0; k < nseg; k++) {
            size_t off = (size_t)k * seg, len = count - off < seg ? count - off : seg;
            SO_MPI_TRY(MPI_Irecv(buf + off, (int)len, MPI_FLOAT, prev, SO_TAG_BCAST, comm, &rreq[k]));
        }
    for (int k = 0; k < nseg; k++) {
        size_t off = (size_t)k * seg, len = count - off < seg ? count - off : seg;
        if (v > 0 && (rc = so_coll_wait(w, 1, &rreq[k])))
            goto out;
        if (v < p - 1)
            SO_MPI_TRY(MPI_Isend(buf + off, (int)len, MPI_FLOAT, next, SO_TAG_BCAST, comm, &sreq[nsend++]));
    }
    if (nsend)
        rc = so_coll_wait(w, nsend, sreq);
out:
    return rc;
}
