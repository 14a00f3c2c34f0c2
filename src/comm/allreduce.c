/* The allreduce selector: a table from so_allreduce_algo to the algorithm's
 * function (one file each, same signature, see comm_internal.h), the
 * resolution of `auto` (tune.c, per group; the names behind --allreduce are
 * in tune_text.c), and the shared argument checks and AVG scaling so each
 * algorithm only implements SUM, MAX and MIN. */
#include "coll_internal.h"

#include "scaleout/err.h"

/* Names live with the tuning-file text (tune_text.c), which needs no MPI. */
static so_allreduce_fn *const algos[SO_ALLREDUCE_AUTO] = {
    [SO_ALLREDUCE_MPI] = so_allreduce_mpi,
    [SO_ALLREDUCE_RING] = so_allreduce_ring,
    [SO_ALLREDUCE_RD] = so_allreduce_rd,
    [SO_ALLREDUCE_RABENSEIFNER] = so_allreduce_rabenseifner,
    [SO_ALLREDUCE_TREE] = so_allreduce_tree,
    [SO_ALLREDUCE_HIER] = so_allreduce_hier,
}; /* SO_ALLREDUCE_AUTO is resolved per call from the group's table (so_comm_auto_algo) */

so_allreduce_fn *so_allreduce_fn_of(so_allreduce_algo algo)
{
    return (unsigned)algo < SO_ALLREDUCE_AUTO ? algos[algo] : NULL;
}

so_allreduce_algo so_allreduce_leaders_algo(size_t bytes, int nodes)
{
    /* Leaders talk through MPI: latency-bound below ~64 KiB, bandwidth-bound above. */
    (void)nodes;
    return bytes <= (64 << 10) ? SO_ALLREDUCE_RD : SO_ALLREDUCE_RABENSEIFNER;
}

int so_comm_set_allreduce_algo(so_comm *c, so_allreduce_algo algo)
{
    if ((unsigned)algo >= SO_ALLREDUCE_COUNT)
        return so_err(SO_EINVAL, "invalid allreduce algorithm %d", (int)algo);
    c->algo = algo;
    return 0;
}

int so_allreduce_run(so_comm *c, so_allreduce_algo algo, const float *send, float *recv, size_t count,
                     so_reduce_op op, MPI_Comm comm, so_waiter *w)
{
    if ((unsigned)algo >= SO_ALLREDUCE_COUNT)
        return so_err(SO_EINVAL, "invalid allreduce algorithm %d", (int)algo);
    if ((unsigned)op > SO_REDUCE_MIN)
        return so_err(SO_EINVAL, "invalid reduce op %d", (int)op);
    if (count == 0)
        return 0;
    if (!send || !recv)
        return so_err(SO_EINVAL, "allreduce of %zu floats with a NULL buffer", count);
    int size = c->size; /* comm is c's communicator or a duplicate */
    if (algo == SO_ALLREDUCE_AUTO)
        algo = so_comm_auto_algo(c, count * sizeof *send);
    /* Multiply by 1/size (not divide): one rounding per element, same on every rank. */
    float scale = 1.0f / (float)size;
    int rc, scaled = 0;
    if (op == SO_REDUCE_AVG && algo == SO_ALLREDUCE_HIER) /* zero copy scales before its stores */
        rc = so_allreduce_hier_scaled(send, recv, count, scale, comm, w, &scaled);
    else
        rc = algos[algo](send, recv, count, op == SO_REDUCE_AVG ? SO_REDUCE_SUM : op, comm, w);
    if (!rc && op == SO_REDUCE_AVG && !scaled)
        so_scale(recv, count, scale);
    return rc;
}

int so_comm_allreduce(so_comm *c, const float *send, float *recv, size_t count, so_reduce_op op)
{
    int rc = so_comm_check_idle(c);
    if (rc)
        return rc;
    so_waiter w;
    so_waiter_init(&w, c, "allreduce");
    return so_allreduce_run(c, c->algo, send, recv, count, op, c->mcomm, &w);
}
