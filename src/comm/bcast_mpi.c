/* Broadcast algorithm "mpi": the MPI library's own MPI_Ibcast, watched.
 * Accepts: any p, root, count (chunks of 2^30 elements) and element type.
 * Cost: whatever the library picks; the reference for binomial / pipeline. */
#include "coll_internal.h"

int so_bcast_mpi(so_coll_ctx *x, void *buf, size_t count, int root)
{
    int rc = 0;
    for (size_t off = 0; off < count; off += SO_MPI_CHUNK) {
        size_t n = count - off < SO_MPI_CHUNK ? count - off : SO_MPI_CHUNK;
        MPI_Request req;
        SO_MPI_TRY(MPI_Ibcast(so_el(x, buf, off), (int)n, so_mpi_dtype(x->dt), root, x->comm, &req));
        if ((rc = so_coll_wait(x->w, 1, &req)))
            goto out;
    }
out:
    return rc;
}
