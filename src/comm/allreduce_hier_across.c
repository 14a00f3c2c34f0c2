/* hier's step across nodes (allreduce_hier.c's leaders, or the cross groups
 * of its zero-copy path): an allreduce of one buffer among one rank per node,
 * in place -- the ring algorithm over the group's tcp transport between
 * hosts (from 64 KiB), else recursive doubling or Rabenseifner over MPI
 * point-to-point. Its own file so both hier paths call down to it.
 *
 * Accepts: any number of nodes, any count and element type, SUM / MAX / MIN.
 * Cost:    recursive doubling (latency-bound, <= 64 KiB) or Rabenseifner
 *          (bandwidth-bound above) over the nodes; the ring over tcp
 *          2(n-1) alpha + 2(n-1)/n bytes beta with both link directions busy. */
#include "coll_internal.h"

#include "scaleout/err.h"

/* Steps across nodes by transport, for so_comm_hier_across_counts. */
static _Atomic uint64_t n_tcp, n_mpi;

void so_comm_hier_across_counts(uint64_t *tcp, uint64_t *mpi)
{
    *tcp = atomic_load_explicit(&n_tcp, memory_order_relaxed);
    *mpi = atomic_load_explicit(&n_mpi, memory_order_relaxed);
}

so_allreduce_algo so_allreduce_leaders_algo(size_t bytes, int nodes)
{
    /* Leaders talk through MPI: latency-bound below ~64 KiB, bandwidth-bound above. */
    (void)nodes;
    return bytes <= (64 << 10) ? SO_ALLREDUCE_RD : SO_ALLREDUCE_RABENSEIFNER;
}

/* A large step takes the group's tcp transport (set up at the first one,
 * the same call on every member); a set-up that did not connect everyone
 * (agreed, warned) leaves the group on MPI. */
int so_hier_across(so_coll_ctx *x, void *buf, size_t count, so_reduce_op op, MPI_Comm comm, int nodes)
{
    so_tp *tp;
    int rc = so_tcp_wanted(count * x->esz) ? so_tp_tcp_or_mpi(comm, x->w, "hier's steps across nodes", &tp)
                                           : so_tp_get(comm, SO_TRANSPORT_MPI, x->w, &tp);
    if (rc)
        return rc;
    so_allreduce_algo a = so_allreduce_leaders_algo(count * x->esz, nodes);
    if (tp->kind == SO_TRANSPORT_TCP)
        a = SO_ALLREDUCE_RING;
    atomic_fetch_add_explicit(a == SO_ALLREDUCE_RING ? &n_tcp : &n_mpi, 1, memory_order_relaxed);
    so_coll_ctx across = *x;
    across.tp = tp;
    across.comm = comm;
    across.rank = tp->rank;
    across.size = tp->size;
    if (a == SO_ALLREDUCE_RING)
        return so_allreduce_ring(&across, buf, buf, count, op);
    return (a == SO_ALLREDUCE_RD ? so_allreduce_rd : so_allreduce_rabenseifner)(&across, buf, buf, count, op);
}
