/* Allreduce algorithm "mpi": the MPI library's own MPI_Iallreduce.
 * Accepts: any count (chunks of 2^30 elements: MPI counts are int), in place
 *          when send == recv, SUM / MAX / MIN, every element type (BF16 / F16
 *          as 16-bit integers with user-defined operations reducing in FP32:
 *          the library's algorithm decides where rounding happens).
 * Cost: whatever the library picks (Open MPI libnbc, MPICH's nb schedules);
 *       the baseline every hand-written algorithm is checked and timed against.
 * Runs on the group's communicator, whatever the transport: it is the
 * library's. Non-blocking so the wait goes through the watchdog. */
#include "coll_internal.h"

int so_allreduce_mpi(so_coll_ctx *x, const void *send, void *recv, size_t count, so_reduce_op op)
{
    MPI_Op mop;
    int rc = so_mpi_op(x->dt, op, &mop);
    for (size_t off = 0; !rc && off < count; off += SO_MPI_CHUNK) {
        int n = (int)(count - off < SO_MPI_CHUNK ? count - off : SO_MPI_CHUNK);
        const void *src = send == recv ? MPI_IN_PLACE : (const void *)so_el(x, send, off);
        MPI_Request req;
        int mrc = MPI_Iallreduce(src, so_el(x, recv, off), n, so_mpi_dtype(x->dt), mop, x->comm, &req);
        if (mrc != MPI_SUCCESS)
            return so_mpi_err(mrc, "MPI_Iallreduce");
        rc = so_waiter_wait(x->w, 1, &req);
    }
    return rc;
}
