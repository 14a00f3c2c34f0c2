/* Allreduce algorithm "mpi": the MPI library's own MPI_Iallreduce.
 * Accepts: any count (split into chunks of 2^30 floats, MPI counts are int),
 *          in place when send == recv, SUM / MAX / MIN on float.
 * Cost: whatever the library picks (Open MPI libnbc, MPICH's nb schedules);
 *       the baseline every hand-written algorithm is checked and timed against.
 * Non-blocking so the wait goes through the watchdog (so_waiter_wait). */
#include "comm_internal.h"

/* In-place SUM of doubles (small statistics vectors: synchronised batchnorm). */
int so_allreduce_mpi_double(double *buf, size_t count, MPI_Comm comm, so_waiter *w)
{
    for (size_t off = 0; off < count; off += SO_MPI_CHUNK) {
        int n = (int)(count - off < SO_MPI_CHUNK ? count - off : SO_MPI_CHUNK);
        MPI_Request req;
        int mrc = MPI_Iallreduce(MPI_IN_PLACE, buf + off, n, MPI_DOUBLE, MPI_SUM, comm, &req);
        if (mrc != MPI_SUCCESS)
            return so_mpi_err(mrc, "MPI_Iallreduce");
        int rc = so_waiter_wait(w, 1, &req);
        if (rc)
            return rc;
    }
    return 0;
}

int so_allreduce_mpi(const float *send, float *recv, size_t count, so_reduce_op op,
                     MPI_Comm comm, so_waiter *w)
{
    MPI_Op mop = op == SO_REDUCE_MAX ? MPI_MAX : op == SO_REDUCE_MIN ? MPI_MIN : MPI_SUM;
    for (size_t off = 0; off < count; off += SO_MPI_CHUNK) {
        int n = (int)(count - off < SO_MPI_CHUNK ? count - off : SO_MPI_CHUNK);
        const void *src = send == recv ? MPI_IN_PLACE : (const void *)(send + off);
        MPI_Request req;
        int mrc = MPI_Iallreduce(src, recv + off, n, MPI_FLOAT, mop, comm, &req);
        if (mrc != MPI_SUCCESS)
            return so_mpi_err(mrc, "MPI_Iallreduce");
        int rc = so_waiter_wait(w, 1, &req);
        if (rc)
            return rc;
    }
    return 0;
}
