/* Reduce-scatter algorithm "mpi": the MPI library's MPI_Ireduce_scatter with
 * the uneven block counts of so_blk, watched.
 * Accepts: blocks below 2^31 floats (MPI counts are int), in place through a
 *          scratch block (MPI's own in-place form would overwrite the start
 *          of the caller's vector), SUM / MAX / MIN.
 * Cost: whatever the library picks; the reference for "ring". */
#include "coll_internal.h"

#include "scaleout/err.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

int so_reduce_scatter_mpi(const float *send, float *recv, size_t count, so_reduce_op op,
                          MPI_Comm comm, so_waiter *w)
{
    int rc = 0, p, r, *counts = NULL;
    float *tmp = NULL;
    SO_MPI_TRY(MPI_Comm_size(comm, &p));
    SO_MPI_TRY(MPI_Comm_rank(comm, &r));
    size_t myoff, mylen;
    so_blk(count, p, r, &myoff, &mylen);
    if (count / (size_t)p + 1 > INT_MAX)
        return so_err(SO_EINVAL, "reduce-scatter mpi: blocks of %zu floats exceed MPI's int counts",
                      count / (size_t)p + 1);
    counts = malloc((size_t)p * sizeof *counts);
    int inplace = recv == send + myoff;
    if (inplace && mylen)
        tmp = malloc(mylen * sizeof *tmp);
    if (!counts || (inplace && mylen && !tmp)) {
        rc = so_err(SO_ENOMEM, "reduce-scatter mpi: out of memory");
        goto out;
    }
    for (int i = 0; i < p; i++) {
        size_t off, len;
        so_blk(count, p, i, &off, &len);
        counts[i] = (int)len;
    }
    MPI_Op mop = op == SO_REDUCE_MAX ? MPI_MAX : op == SO_REDUCE_MIN ? MPI_MIN : MPI_SUM;
    MPI_Request req;
    SO_MPI_TRY(MPI_Ireduce_scatter(send, inplace ? tmp : recv, counts, MPI_FLOAT, mop, comm, &req));
    if ((rc = so_coll_wait(w, 1, &req)))
        goto out;
    if (inplace && mylen)
        memcpy(recv, tmp, mylen * sizeof *recv);
out:
    free(tmp);
    free(counts);
    return rc;
}
