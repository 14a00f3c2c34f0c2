/* The typed entry points of the collective vocabulary (comm_async.h): each
 * turns its arguments into one collective call for the communication thread
 * (engine.c). Reduce-scatter and allgather with per-rank counts carry the
 * caller's array; their total is summed here. */
#include "engine.h"

#include "scaleout/err.h"

static const so_coll_opts defaults = SO_COLL_OPTS_INIT;

static int submit(so_comm *c, so_coll_kind kind, const void *send, void *recv, size_t count,
                  const size_t *counts, so_dtype dt, so_reduce_op op, int root, const so_coll_opts *o,
                  so_handle **out)
{
    if (!o)
        o = &defaults;
    so_dtype wire = o->wire == SO_DTYPE_F32 ? dt : o->wire;
    so_coll_call k = {kind, o->algo, send, recv, count, counts, dt, wire, op, root, o->transport};
    return so_engine_coll(c, &k, o->tag, out);
}

/* The total of counts[0..size), after a check that every block is there. */
static int total(const so_comm *c, const size_t *counts, size_t *out, so_handle **h)
{
    *h = NULL;
    if (!counts)
        return so_err(SO_EINVAL, "reduce-scatterv / allgatherv without counts");
    size_t n = 0;
    for (int i = 0; i < c->size; i++)
        n += counts[i];
    *out = n;
    return 0;
}

int so_comm_iallreduce(so_comm *c, const void *send, void *recv, size_t count, so_dtype dt, so_reduce_op op,
                       const so_coll_opts *o, so_handle **out)
{
    return submit(c, SO_COLL_ALLREDUCE, send, recv, count, NULL, dt, op, 0, o, out);
}

int so_comm_ireduce_scatter(so_comm *c, const void *send, void *recv, size_t count, so_dtype dt,
                            so_reduce_op op, const so_coll_opts *o, so_handle **out)
{
    return submit(c, SO_COLL_REDUCE_SCATTER, send, recv, count, NULL, dt, op, 0, o, out);
}

int so_comm_ireduce_scatterv(so_comm *c, const void *send, void *recv, const size_t *counts, so_dtype dt,
                             so_reduce_op op, const so_coll_opts *o, so_handle **out)
{
    size_t n = 0;
    int rc = total(c, counts, &n, out);
    return rc ? rc : submit(c, SO_COLL_REDUCE_SCATTER, send, recv, n, counts, dt, op, 0, o, out);
}

int so_comm_iallgather(so_comm *c, const void *send, void *recv, size_t count, so_dtype dt,
                       const so_coll_opts *o, so_handle **out)
{
    return submit(c, SO_COLL_ALLGATHER, send, recv, count, NULL, dt, SO_REDUCE_SUM, 0, o, out);
}

int so_comm_iallgatherv(so_comm *c, const void *send, void *recv, const size_t *counts, so_dtype dt,
                        const so_coll_opts *o, so_handle **out)
{
    size_t n = 0;
    int rc = total(c, counts, &n, out);
    return rc ? rc : submit(c, SO_COLL_ALLGATHER, send, recv, n, counts, dt, SO_REDUCE_SUM, 0, o, out);
}

int so_comm_ibcast(so_comm *c, void *buf, size_t count, so_dtype dt, int root, const so_coll_opts *o,
                   so_handle **out)
{
    return submit(c, SO_COLL_BCAST, buf, buf, count, NULL, dt, SO_REDUCE_SUM, root, o, out);
}
