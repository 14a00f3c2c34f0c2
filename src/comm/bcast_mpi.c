/* Broadcast algorithm "mpi": the MPI library's own MPI_Ibcast, watched.
 * Accepts: any p, root and count (chunks of SO_MPI_CHUNK floats).
 * Cost: whatever the library picks; the reference for binomial / pipeline. */
#include "coll_internal.h"

int so_bcast_mpi(float *buf, size_t count, int root, MPI_Comm comm, so_waiter *w)
{
    int rc = 0;
    for (size_t off = 0; off < count; off += SO_MPI_CHUNK) {
        size_t n = count - off < SO_MPI_CHUNK ? count - off : SO_MPI_CHUNK;
        MPI_Request req;
        SO_MPI_TRY(MPI_Ibcast(buf + off, (int)n, MPI_FLOAT, root, comm, &req));
        if ((rc = so_coll_wait(w, 1, &req)))
            goto out;
    }
out:
    return rc;
}
