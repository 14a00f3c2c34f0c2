/* Reduce-scatter algorithm "mpi": the MPI library's MPI_Ireduce_scatter with
 * the caller's block counts, watched.
 * Accepts: blocks below 2^31 elements (MPI counts are int), in place through
 *          a scratch block (MPI's own in-place form would overwrite the start
 *          of the caller's vector), SUM / MAX / MIN, every element type.
 * Cost: whatever the library picks; the reference for "ring". */
#include "coll_internal.h"

#include "scaleout/err.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

int so_reduce_scatter_mpi(so_coll_ctx *x, const void *send, void *recv, const size_t *displ, so_reduce_op op)
{
    int rc = 0, p = x->size, r = x->rank, *counts = NULL;
    char *tmp = NULL;
    size_t mylen = displ[r + 1] - displ[r];
    for (int i = 0; i < p; i++)
        if (displ[i + 1] - displ[i] > INT_MAX)
            return so_err(SO_EINVAL, "reduce-scatter mpi: a block of %zu elements exceeds MPI's int counts",
                          displ[i + 1] - displ[i]);
    MPI_Op mop;
    if ((rc = so_mpi_op(x->dt, op, &mop)))
        return rc;
    counts = malloc((size_t)p * sizeof *counts);
    int inplace = recv == so_el(x, send, displ[r]);
    if (inplace && mylen)
        tmp = malloc(mylen * x->esz);
    if (!counts || (inplace && mylen && !tmp)) {
        rc = so_err(SO_ENOMEM, "reduce-scatter mpi: out of memory");
        goto out;
    }
    for (int i = 0; i < p; i++)
        counts[i] = (int)(displ[i + 1] - displ[i]);
    MPI_Request req;
    SO_MPI_TRY(MPI_Ireduce_scatter(send, inplace ? tmp : recv, counts, so_mpi_dtype(x->dt), mop, x->comm, &req));
    if ((rc = so_coll_wait(x->w, 1, &req)))
        goto out;
    if (inplace && mylen)
        memcpy(recv, tmp, mylen * x->esz);
out:
    free(tmp);
    free(counts);
    return rc;
}
