/* The mpi transport (tp.h): messages are MPI_Isend / MPI_Irecv of bytes on
 * the group's communicator, requests are MPI requests, and a test is one
 * MPI_Testall (whose progress engine moves every message of the library). */
#include "tp.h"

#include "scaleout/err.h"

#include <stdlib.h>

static int mpi_post(so_tp *t, void *buf, size_t bytes, int peer, int tag, int send, so_tp_req *r)
{
    r->slot = -1;
    if (bytes > SO_TP_MAX_BYTES)
        return so_err(SO_EINVAL, "mpi transport: message of %zu bytes (at most %zu)", bytes, SO_TP_MAX_BYTES);
    int dst = peer == SO_TP_NONE ? MPI_PROC_NULL : peer;
    int mrc = send ? MPI_Isend(buf, (int)bytes, MPI_BYTE, dst, tag, t->comm, &r->mpi)
                   : MPI_Irecv(buf, (int)bytes, MPI_BYTE, dst, tag, t->comm, &r->mpi);
    return mrc == MPI_SUCCESS ? 0 : so_mpi_err(mrc, send ? "MPI_Isend" : "MPI_Irecv");
}

#define TEST_BATCH 128 /* requests gathered for one MPI_Testall */

static int mpi_test(so_tp *t, so_tp_req *r, int n, int *done)
{
    (void)t;
    MPI_Request q[TEST_BATCH];
    *done = 1;
    for (int lo = 0; lo < n; lo += TEST_BATCH) {
        int k = n - lo < TEST_BATCH ? n - lo : TEST_BATCH, all = 0;
        for (int i = 0; i < k; i++)
            q[i] = r[lo + i].mpi;
        SO_IGNORE_STATUSES_BEGIN
        int mrc = MPI_Testall(k, q, &all, MPI_STATUSES_IGNORE);
        SO_IGNORE_STATUSES_END
        if (mrc != MPI_SUCCESS)
            return so_mpi_err(mrc, "MPI_Testall");
        for (int i = 0; i < k; i++)
            r[lo + i].mpi = q[i]; /* completed ones are MPI_REQUEST_NULL now */
        *done &= all;
    }
    return 0;
}

static void mpi_free(so_tp *t) { free(t); }

static const so_tp_ops mpi_ops = {mpi_post, mpi_test, NULL, mpi_free};

int so_tp_mpi_new(MPI_Comm comm, so_tp **out)
{
    int rc = 0;
    so_tp *t = calloc(1, sizeof *t);
    *out = NULL;
    if (!t)
        return so_err(SO_ENOMEM, "mpi transport: out of memory");
    *t = (so_tp){&mpi_ops, SO_TRANSPORT_MPI, 0, 0, comm, 0};
    SO_MPI_TRY(MPI_Comm_rank(comm, &t->rank));
    SO_MPI_TRY(MPI_Comm_size(comm, &t->size));
    *out = t;
    return 0;
out:
    free(t);
    return rc;
}
