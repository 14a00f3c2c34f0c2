/* Allgather algorithm "mpi": the MPI library's MPI_Iallgatherv with the
 * caller's blocks, watched; in place maps to MPI_IN_PLACE.
 * Accepts: totals below 2^31 elements (MPI displacements are int), every
 *          element type.
 * Cost: whatever the library picks; the reference for "ring". */
#include "coll_internal.h"

#include "scaleout/err.h"

#include <limits.h>
#include <stdlib.h>

int so_allgather_mpi(so_coll_ctx *x, const void *send, void *recv, const size_t *displ)
{
    int rc = 0, p = x->size, r = x->rank, *counts = NULL, *displs = NULL;
    if (displ[p] > INT_MAX)
        return so_err(SO_EINVAL, "allgather mpi: %zu elements exceed MPI's int displacements", displ[p]);
    counts = malloc((size_t)p * sizeof *counts);
    displs = malloc((size_t)p * sizeof *displs);
    if (!counts || !displs) {
        rc = so_err(SO_ENOMEM, "allgather mpi: out of memory");
        goto out;
    }
    for (int i = 0; i < p; i++) {
        counts[i] = (int)(displ[i + 1] - displ[i]);
        displs[i] = (int)displ[i];
    }
    const void *src = send == so_el(x, recv, displ[r]) ? MPI_IN_PLACE : send;
    MPI_Datatype t = so_mpi_dtype(x->dt);
    MPI_Request req;
    SO_MPI_TRY(MPI_Iallgatherv(src, counts[r], t, recv, counts, displs, t, x->comm, &req));
    rc = so_coll_wait(x->w, 1, &req);
out:
    free(counts);
    free(displs);
    return rc;
}
