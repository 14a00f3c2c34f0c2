/* hier's step across nodes (allreduce_hier.c's leaders, or the cross groups
 * of its zero-copy path): an allreduce of one buffer among one rank per node,
 * in place -- recursive doubling or Rabenseifner over a transport of that
 * group, or scaleout's TCP ring between hosts. Its own file so both hier
 * paths call down to it.
 *
 * Accepts: any number of nodes, any count and element type (the TCP ring:
 *          F32, from 64 KiB), SUM / MAX / MIN.
 * Cost:    recursive doubling (latency-bound, <= 64 KiB) or Rabenseifner
 *          (bandwidth-bound above) over the nodes; the TCP ring
 *          2(n-1) alpha + 2(n-1)/n bytes beta with both link directions busy. */
#include "coll_internal.h"

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

int so_hier_across(so_coll_ctx *x, so_tcp_slot *slot, void *buf, size_t count, so_reduce_op op, MPI_Comm comm,
                   int nodes)
{
    if (x->dt == SO_DTYPE_F32 && so_tcp_wanted(count)) {
        int rc = 0;
        if (!slot->tried) { /* the same call on every member: its first large step */
            slot->tried = 1;
            rc = so_tcp_ring_open(comm, x->w, &slot->ring);
        }
        if (rc)
            return rc;
        if (slot->ring) {
            atomic_fetch_add_explicit(&n_tcp, 1, memory_order_relaxed);
            return so_tcp_allreduce(slot->ring, buf, count, op, x->w);
        }
    }
    atomic_fetch_add_explicit(&n_mpi, 1, memory_order_relaxed);
    so_tp *tp;
    int rc = so_tp_get(comm, SO_TRANSPORT_MPI, x->w, &tp);
    if (rc)
        return rc;
    so_coll_ctx across = *x;
    across.tp = tp;
    across.comm = comm;
    across.rank = tp->rank;
    across.size = tp->size;
    so_allreduce_algo a = so_allreduce_leaders_algo(count * x->esz, nodes);
    return (a == SO_ALLREDUCE_RD ? so_allreduce_rd : so_allreduce_rabenseifner)(&across, buf, buf, count, op);
}

