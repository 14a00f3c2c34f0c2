/* The training thread's blocking collectives on float buffers (comm.h):
 * allreduce, reduce-scatter, allgather, broadcast by algorithm, and the
 * generic so_comm_coll entry with the blocking MPI reference the benchmark
 * compares against. Each runs the dispatcher (dispatch.c) on the group's own
 * communicator. */
#include "dispatch.h"

#include "scaleout/err.h"

#include <limits.h>
#include <string.h>

int so_comm_set_allreduce_algo(so_comm *c, so_allreduce_algo algo)
{
    if ((unsigned)algo >= SO_ALLREDUCE_COUNT)
        return so_err(SO_EINVAL, "invalid allreduce algorithm %d", (int)algo);
    c->algo = algo;
    return 0;
}

/* ---- blocking calls on the training thread ------------------------------------------------ */

/* Runs a float call on c's own communicator, the group's transport. */
static int run(so_comm *c, so_coll_kind kind, int algo, const float *send, float *recv, size_t count,
               so_reduce_op op, int root)
{
    int rc = so_comm_check_idle(c);
    if (rc)
        return rc;
    if ((unsigned)kind >= SO_COLL_KINDS || algo < 0 || algo >= so_coll_algo_count(kind))
        return so_err(SO_EINVAL, "%s: invalid algorithm %d", so_coll_kind_name(kind) ? so_coll_kind_name(kind) : "?",
                      algo);
    so_coll_call k = {kind, algo, send, recv, count, NULL, SO_DTYPE_F32, SO_DTYPE_F32, op, root, SO_TRANSPORT_AUTO};
    so_waiter w;
    so_waiter_init(&w, c, so_coll_kind_name(kind));
    return so_coll_run(c, c->mcomm, &k, &w, NULL, NULL, NULL);
}

int so_comm_allreduce(so_comm *c, const float *send, float *recv, size_t count, so_reduce_op op)
{
    return run(c, SO_COLL_ALLREDUCE, c->algo, send, recv, count, op, 0);
}

int so_comm_reduce_scatter(so_comm *c, so_rs_algo algo, const float *send, float *recv, size_t count,
                           so_reduce_op op)
{
    return run(c, SO_COLL_REDUCE_SCATTER, (int)algo, send, recv, count, op, 0);
}

int so_comm_allgather(so_comm *c, so_ag_algo algo, const float *send, float *recv, size_t count)
{
    return run(c, SO_COLL_ALLGATHER, (int)algo, send, recv, count, SO_REDUCE_SUM, 0);
}

int so_comm_bcast_algo(so_comm *c, so_bcast_algo algo, float *buf, size_t count, int root)
{
    return run(c, SO_COLL_BCAST, (int)algo, buf, buf, count, SO_REDUCE_SUM, root);
}

/* The MPI library's blocking collective: the benchmark's baseline (no watchdog). */
static int reference(so_comm *c, so_coll_kind kind, const float *send, float *recv, size_t count,
                     so_reduce_op op, int root)
{
    int rc = 0, p = c->size, counts[64], displs[64];
    MPI_Op mop = op == SO_REDUCE_MAX ? MPI_MAX : op == SO_REDUCE_MIN ? MPI_MIN : MPI_SUM;
    if (count > INT_MAX || p > 64)
        return so_err(SO_EINVAL, "reference %s: at most 2^31 floats and 64 ranks", so_coll_kind_name(kind));
    for (int i = 0; i < p && kind != SO_COLL_ALLREDUCE && kind != SO_COLL_BCAST; i++) {
        size_t off, len;
        so_blk(count, p, i, &off, &len);
        counts[i] = (int)len;
        displs[i] = (int)off;
    }
    switch (kind) {
    case SO_COLL_ALLREDUCE:
        SO_MPI_TRY(MPI_Allreduce(send == recv ? MPI_IN_PLACE : (const void *)send, recv, (int)count,
                                 MPI_FLOAT, mop, c->mcomm));
        break;
    case SO_COLL_REDUCE_SCATTER:
        SO_MPI_TRY(MPI_Reduce_scatter(send, recv, counts, MPI_FLOAT, mop, c->mcomm));
        break;
    case SO_COLL_ALLGATHER:
        SO_MPI_TRY(MPI_Allgatherv(send == recv + displs[c->rank] ? MPI_IN_PLACE : (const void *)send,
                                  counts[c->rank], MPI_FLOAT, recv, counts, displs, MPI_FLOAT, c->mcomm));
        break;
    default:
        SO_MPI_TRY(MPI_Bcast(recv, (int)count, MPI_FLOAT, root, c->mcomm));
    }
out:
    return rc;
}

int so_comm_coll(so_comm *c, so_coll_kind kind, int algo, const float *send, float *recv, size_t count,
                 so_reduce_op op, int root)
{
    if ((unsigned)kind >= SO_COLL_KINDS)
        return so_err(SO_EINVAL, "invalid collective kind %d", (int)kind);
    if (algo == SO_COLL_REFERENCE) {
        int rc = so_comm_check_idle(c);
        return rc || count == 0 ? rc : reference(c, kind, send, recv, count, op, root);
    }
    return run(c, kind, algo, send, recv, count, op, root);
}
