/* Selectors of the other collectives (reduce-scatter, allgather, broadcast):
 * name tables, argument checks, AVG scaling, and the generic so_comm_coll
 * entry with the blocking MPI reference that the benchmark compares against. */
#include "coll_internal.h"

#include "scaleout/err.h"

#include <limits.h>
#include <string.h>

static const struct {
    const char *name;
    so_rs_fn *fn;
} rs_algos[SO_RS_COUNT] = {[SO_RS_MPI] = {"mpi", so_reduce_scatter_mpi},
                           [SO_RS_RING] = {"ring", so_reduce_scatter_ring}};

static const struct {
    const char *name;
    so_ag_fn *fn;
} ag_algos[SO_AG_COUNT] = {[SO_AG_MPI] = {"mpi", so_allgather_mpi},
                           [SO_AG_RING] = {"ring", so_allgather_ring}};

static const struct {
    const char *name;
    so_bcast_fn *fn;
} bc_algos[SO_BCAST_COUNT] = {[SO_BCAST_MPI] = {"mpi", so_bcast_mpi},
                              [SO_BCAST_BINOMIAL] = {"binomial", so_bcast_binomial},
                              [SO_BCAST_PIPELINE] = {"pipeline", so_bcast_pipeline}};

static const char *const kind_names[SO_COLL_KINDS] = {"allreduce", "reduce-scatter", "allgather", "bcast"};
static const char *const ref_names[SO_COLL_KINDS] = {"MPI_Allreduce", "MPI_Reduce_scatter",
                                                     "MPI_Allgatherv", "MPI_Bcast"};

void so_comm_block(size_t count, int p, int i, size_t *off, size_t *len) { so_blk(count, p, i, off, len); }

const char *so_coll_kind_name(so_coll_kind kind)
{
    return (unsigned)kind < SO_COLL_KINDS ? kind_names[kind] : NULL;
}

int so_coll_algo_count(so_coll_kind kind)
{
    static const int n[SO_COLL_KINDS] = {SO_ALLREDUCE_COUNT, SO_RS_COUNT, SO_AG_COUNT, SO_BCAST_COUNT};
    return (unsigned)kind < SO_COLL_KINDS ? n[kind] : 0;
}

const char *so_coll_algo_name(so_coll_kind kind, int algo)
{
    if ((unsigned)kind >= SO_COLL_KINDS)
        return NULL;
    if (algo == SO_COLL_REFERENCE)
        return ref_names[kind];
    if (algo < 0 || algo >= so_coll_algo_count(kind))
        return NULL;
    switch (kind) {
    case SO_COLL_ALLREDUCE: return so_allreduce_algo_name((so_allreduce_algo)algo);
    case SO_COLL_REDUCE_SCATTER: return rs_algos[algo].name;
    case SO_COLL_ALLGATHER: return ag_algos[algo].name;
    default: return bc_algos[algo].name;
    }
}

int so_coll_algo_parse(so_coll_kind kind, const char *name, int *out)
{
    for (int i = SO_COLL_REFERENCE; i < so_coll_algo_count(kind); i++) {
        const char *n = so_coll_algo_name(kind, i);
        if (name && n && strcmp(name, n) == 0) {
            *out = i;
            return 0;
        }
    }
    return so_err(SO_EINVAL, "unknown %s algorithm '%s'", so_coll_kind_name(kind) ? so_coll_kind_name(kind) : "?",
                  name ? name : "");
}

/* Common checks of the typed calls. */
static int check(so_comm *c, int algo, int nalgo, so_reduce_op op, const void *a, const void *b,
                 size_t count, const char *what)
{
    int rc = so_comm_check_idle(c);
    if (rc)
        return rc;
    if (algo < 0 || algo >= nalgo)
        return so_err(SO_EINVAL, "%s: invalid algorithm %d", what, algo);
    if ((unsigned)op > SO_REDUCE_MIN)
        return so_err(SO_EINVAL, "%s: invalid reduce op %d", what, (int)op);
    if (count && (!a || !b))
        return so_err(SO_EINVAL, "%s of %zu floats with a NULL buffer", what, count);
    return 0;
}

int so_comm_reduce_scatter(so_comm *c, so_rs_algo algo, const float *send, float *recv, size_t count,
                           so_reduce_op op)
{
    size_t off, len;
    so_blk(count, c->size, c->rank, &off, &len);
    int rc = check(c, (int)algo, SO_RS_COUNT, op, send, len ? (const void *)recv : send, count, "reduce-scatter");
    if (rc || count == 0)
        return rc;
    so_waiter w;
    so_waiter_init(&w, c, "reduce-scatter");
    rc = rs_algos[algo].fn(send, recv, count, op == SO_REDUCE_AVG ? SO_REDUCE_SUM : op, c->mcomm, &w);
    if (!rc && op == SO_REDUCE_AVG)
        so_scale(recv, len, 1.0f / (float)c->size);
    return rc;
}

int so_comm_allgather(so_comm *c, so_ag_algo algo, const float *send, float *recv, size_t count)
{
    size_t off, len;
    so_blk(count, c->size, c->rank, &off, &len);
    int rc = check(c, (int)algo, SO_AG_COUNT, SO_REDUCE_SUM, len ? (const void *)send : recv, recv, count,
                   "allgather");
    if (rc || count == 0)
        return rc;
    so_waiter w;
    so_waiter_init(&w, c, "allgather");
    return ag_algos[algo].fn(send, recv, count, c->mcomm, &w);
}

int so_comm_bcast_algo(so_comm *c, so_bcast_algo algo, float *buf, size_t count, int root)
{
    int rc = check(c, (int)algo, SO_BCAST_COUNT, SO_REDUCE_SUM, buf, buf, count, "bcast");
    if (rc || count == 0)
        return rc;
    if (root < 0 || root >= c->size)
        return so_err(SO_EINVAL, "bcast root %d out of range (size %d)", root, c->size);
    so_waiter w;
    so_waiter_init(&w, c, "bcast");
    return bc_algos[algo].fn(buf, count, root, c->mcomm, &w);
}

/* The MPI library's blocking collective: the benchmark's baseline (no watchdog). */
static int reference(so_comm *c, so_coll_kind kind, const float *send, float *recv, size_t count,
                     so_reduce_op op, int root)
{
    int rc = 0, p = c->size, counts[64], displs[64];
    MPI_Op mop = op == SO_REDUCE_MAX ? MPI_MAX : op == SO_REDUCE_MIN ? MPI_MIN : MPI_SUM;
    if (count > INT_MAX || p > 64)
        return so_err(SO_EINVAL, "reference %s: at most 2^31 floats and 64 ranks", kind_names[kind]);
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
    switch (kind) {
    case SO_COLL_ALLREDUCE: {
        if (algo < 0 || algo >= SO_ALLREDUCE_COUNT)
            return so_err(SO_EINVAL, "invalid allreduce algorithm %d", algo);
        int rc = so_comm_check_idle(c);
        if (rc)
            return rc;
        so_waiter w;
        so_waiter_init(&w, c, "allreduce");
        return so_allreduce_run(c, (so_allreduce_algo)algo, send, recv, count, op, c->mcomm, &w);
    }
    case SO_COLL_REDUCE_SCATTER: return so_comm_reduce_scatter(c, (so_rs_algo)algo, send, recv, count, op);
    case SO_COLL_ALLGATHER: return so_comm_allgather(c, (so_ag_algo)algo, send, recv, count);
    default: return so_comm_bcast_algo(c, (so_bcast_algo)algo, recv, count, root);
    }
}
