/* Allgather algorithm "mpi": the MPI library's MPI_Iallgatherv with the
 * uneven blocks of so_blk, watched; in place maps to MPI_IN_PLACE.
 * Accepts: totals below 2^31 floats (MPI displacements are int).
 * Cost: whatever the library picks; the reference for "ring". */
#include "coll_internal.h"

#include "scaleout/err.h"

#include <limits.h>
#include <stdlib.h>

int so_allgather_mpi(const float *send, float *recv, size_t count, MPI_Comm comm, so_waiter *w)
{
    int rc = 0, p, r, *counts = NULL, *displs = NULL;
    SO_MPI_TRY(MPI_Comm_size(comm, &p));
    SO_MPI_TRY(MPI_Comm_rank(comm, &r));
    if (count > INT_MAX)
        return so_err(SO_EINVAL, "allgather mpi: %zu floats exceed MPI's int displacements", count);
    counts = malloc((size_t)p * sizeof *counts);
    displs = malloc((size_t)p * sizeof *displs);
    if (!counts || !displs) {
        rc = so_err(SO_ENOMEM, "allgather mpi: out of memory");
        goto out;
    }
    for (int i = 0; i < p; i++) {
        size_t off, len;
        so_blk(count, p, i, &off, &len);
        counts[i] = (int)len;
        displs[i] = (int)off;
    }
    const void *src = send == recv + displs[r] ? MPI_IN_PLACE : (const void *)send;
    MPI_Request req;
    SO_MPI_TRY(MPI_Iallgatherv(src, counts[r], MPI_FLOAT, recv, counts, displs, MPI_FLOAT, comm, &req));
    rc = so_coll_wait(w, 1, &req);
out:
    free(counts);
    free(displs);
    return rc;
}
