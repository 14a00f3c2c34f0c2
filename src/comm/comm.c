/* so_comm, the process group: MPI start-up and shutdown, groups made by
 * splitting (each owning its node and leaders subgroups), the fatal-error
 * hook, node topology and the blocking helpers (bcast, counter reductions,
 * barrier) of the training thread. Every MPI call's return code is checked:
 * communicators are set to MPI_ERRORS_RETURN, so errors come back as SO_ECOMM
 * instead of killing us.
 *
 * Thread level: MPI_THREAD_SERIALIZED. After start-up one background thread
 * (the async engine, Horovod-style) makes the MPI calls of the gradient
 * allreduces, and the training thread makes the start-up / evaluation ones
 * (config check, bcast of initial weights, eval counters). They never overlap:
 * the engine calls MPI only while it has outstanding requests (async_busy > 0,
 * set by submit on the training thread and cleared after the engine's last MPI
 * call, with acquire/release ordering), and every so_comm_* collective refuses
 * to run while async_busy > 0 (so_comm_check_idle). So at most one thread is
 * inside MPI at a time, which is exactly SERIALIZED. MULTIPLE would also work
 * but makes Open MPI take locks on every call and is not needed. FUNNELED is
 * not enough: the engine thread is not the thread that called MPI_Init. The
 * thread level belongs to the process, so all groups share one async_busy
 * counter: an engine busy on any group keeps every group's calls out. */
#include "comm_env.h"
#include "engine.h"
#include "tcp_internal.h"

#include "scaleout/err.h"
#include "scaleout/log.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Starts MPI if needed and checks the thread level. */
static int start_mpi(int *argc, char ***argv, int *owns)
{
    int rc = 0, inited = 0, provided = MPI_THREAD_SINGLE;
    SO_MPI_TRY(MPI_Initialized(&inited));
    if (!inited) {
        SO_MPI_TRY(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
        *owns = 1;
    } else {
        SO_MPI_TRY(MPI_Query_thread(&provided));
    }
    SO_MPI_TRY(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    if (provided < MPI_THREAD_SERIALIZED)
        rc = so_err(SO_EUNSUP, "the MPI library provides thread level %d, scaleout needs "
                               "MPI_THREAD_SERIALIZED (%d) for its communication thread",
                    provided, MPI_THREAD_SERIALIZED);
out:
    return rc;
}

/* Timeouts, the allreduce override (SCALEOUT_ALLREDUCE) and the p2p chunk
 * (SCALEOUT_P2P_CHUNK lowers it so tests reach the chunking cheaply). */
static void read_env(so_comm *c)
{
    const so_comm_env *e = so_comm_env_get();
    c->stall_warning_s = e->stall_warning_s;
    c->timeout_s = e->timeout_s;
    c->p2p_chunk = e->p2p_chunk;
    if (e->allreduce_set)
        c->algo = e->allreduce;
    c->transport = e->transport;
}

/* Frees a communicator we created, if any. */
static int free_comm(MPI_Comm *m)
{
    if (*m == MPI_COMM_NULL)
        return 0;
    int rc = MPI_Comm_free(m);
    *m = MPI_COMM_NULL;
    return rc == MPI_SUCCESS ? 0 : so_mpi_err(rc, "MPI_Comm_free");
}

/* ---- groups: creation and release ---------------------------------------------- */

static int group_free(so_comm *c);

/* A group over mcomm (owned from here on, freed on failure too) with the
 * settings of `from`, or of the environment when from is NULL. Collective
 * over mcomm. Its topology is built by the caller (build_topology). */
static int group_new(const so_comm *from, MPI_Comm mcomm, so_comm **out)
{
    *out = NULL;
    so_comm *c = calloc(1, sizeof *c);
    if (!c) {
        free_comm(&mcomm);
        return so_err(SO_ENOMEM, "process group: out of memory");
    }
    c->mcomm = mcomm;
    c->p2p = c->ecomm = c->ep2p = MPI_COMM_NULL;
    c->algo = SO_ALLREDUCE_MPI;
    atomic_init(&c->busy_store, 0);
    c->async_busy = from ? from->async_busy : &c->busy_store;
    if (from) {
        c->stall_warning_s = from->stall_warning_s;
        c->timeout_s = from->timeout_s;
        c->p2p_chunk = from->p2p_chunk;
        c->algo = from->algo;
        c->transport = from->transport;
    } else {
        read_env(c);
    }
    int rc = 0;
    SO_MPI_TRY(MPI_Comm_set_errhandler(mcomm, MPI_ERRORS_RETURN));
    SO_MPI_TRY(MPI_Comm_rank(mcomm, &c->rank));
    SO_MPI_TRY(MPI_Comm_size(mcomm, &c->size));
    SO_MPI_TRY(MPI_Comm_dup(mcomm, &c->p2p)); /* inherits MPI_ERRORS_RETURN */
    /* The communication thread's own: its collectives and messages never meet
     * the training thread's, whatever order the two threads take. */
    SO_MPI_TRY(MPI_Comm_dup(mcomm, &c->ecomm));
    SO_MPI_TRY(MPI_Comm_dup(mcomm, &c->ep2p));
out:
    if (rc) {
        group_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* Frees the subgroups c owns (the reverse of their creation). */
static int free_subgroups(so_comm *c)
{
    int rc = 0, rc2 = 0, rc3 = 0;
    if (c->cross_group && c->cross_group != c)
        rc3 = group_free(c->cross_group);
    c->cross_group = NULL;
    if (c->leaders_group && c->leaders_group != c)
        rc = group_free(c->leaders_group);
    if (c->node_group && c->node_group != c)
        rc2 = group_free(c->node_group);
    c->leaders_group = c->node_group = NULL;
    return rc ? rc : rc2 ? rc2 : rc3;
}

/* Everything c holds but MPI itself: its registered buffers, subgroups and
 * communicators (collective over c). */
static int group_free(so_comm *c)
{
    so_engine_drain(); /* nothing of the communication thread may still use c */
    so_regbuf_release_all(c);
    so_tcp_mesh_free(c->tcp_mesh);
    int rc = free_subgroups(c);
    int rc2 = free_comm(&c->p2p);
    int rc3 = free_comm(&c->ecomm);
    int rc4 = free_comm(&c->ep2p);
    int rc5 = free_comm(&c->mcomm);
    free(c);
    return rc ? rc : rc2 ? rc2 : rc3 ? rc3 : rc4 ? rc4 : rc5;
}

/* ---- topology: nodes and the node / leaders subgroups ------------------------------ */

static int build_topology(so_comm *c, int color, int ranks_per_node);

/* Two ints broadcast from the node leader: node id and node count. */
static int share_node_ids(so_comm *c, MPI_Comm node, MPI_Comm leaders)
{
    int rc = 0, ids[2] = {0, 0};
    if (c->topo.node_rank == 0) {
        SO_MPI_TRY(MPI_Comm_rank(leaders, &ids[0]));
        SO_MPI_TRY(MPI_Comm_size(leaders, &ids[1]));
    }
    SO_MPI_TRY(MPI_Bcast(ids, 2, MPI_INT, 0, node));
    c->topo.node_id = ids[0];
    c->topo.num_nodes = ids[1];
out:
    return rc;
}

/* A subgroup of c over mcomm (taken) whose nodes are `color`'s. */
static int subgroup_new(so_comm *c, MPI_Comm *mcomm, int color, so_comm **out)
{
    MPI_Comm m = *mcomm;
    *mcomm = MPI_COMM_NULL;
    int rc = group_new(c, m, out);
    if (!rc && (rc = build_topology(*out, color, c->topo.ranks_per_node))) {
        group_free(*out);
        *out = NULL;
    }
    return rc;
}

/* c's node group and leaders group from its node and leaders communicators
 * (taken when used). c stands for itself where it is that group already,
 * which also ends the recursion: a node group is one node, a leaders group
 * has one rank per node, and a group of one rank is both. */
static int make_subgroups(so_comm *c, MPI_Comm *node, MPI_Comm *leaders)
{
    int rc = 0;
    if (c->topo.num_nodes == 1)
        c->node_group = c;
    else
        rc = subgroup_new(c, node, 0, &c->node_group);
    if (c->topo.num_nodes == c->size)
        c->leaders_group = c;
    else if (!rc && *leaders != MPI_COMM_NULL) /* its ranks are on distinct nodes of c */
        rc = subgroup_new(c, leaders, c->topo.node_id, &c->leaders_group);
    return rc;
}

/* Groups c's ranks into nodes -- equal colours (>= 0) form a node, colour < 0
 * takes the real shared-memory nodes -- and rebuilds the subgroups and the
 * colour hier's shared-memory context reads. Collective over c. */
static int build_topology(so_comm *c, int color, int ranks_per_node)
{
    MPI_Comm node = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
    int rc = free_subgroups(c);
    if (rc)
        return rc;
    if (color >= 0)
        SO_MPI_TRY(MPI_Comm_split(c->mcomm, color, c->rank, &node));
    else
        SO_MPI_TRY(MPI_Comm_split_type(c->mcomm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node));
    SO_MPI_TRY(MPI_Comm_rank(node, &c->topo.node_rank));
    SO_MPI_TRY(MPI_Comm_size(node, &c->topo.node_size));
    /* Leaders keyed by rank, so their ranks (the node ids) follow the nodes' lowest ranks. */
    SO_MPI_TRY(MPI_Comm_split(c->mcomm, c->topo.node_rank == 0 ? 0 : MPI_UNDEFINED, c->rank, &leaders));
    c->topo.ranks_per_node = ranks_per_node;
    if (!(rc = share_node_ids(c, node, leaders)) && !(rc = so_shm_set_node_color(c->mcomm, c->topo.node_id)))
        rc = make_subgroups(c, &node, &leaders);
out:
    free_comm(&leaders);
    free_comm(&node);
    return rc;
}

/* ---- life cycle ------------------------------------------------------------------ */

int so_comm_init(int *argc, char ***argv, so_comm **out)
{
    *out = NULL;
    int owns = 0, rc = start_mpi(argc, argv, &owns);
    MPI_Comm m = MPI_COMM_NULL;
    so_comm *c = NULL;
    if (rc)
        return rc; /* MPI may be up: the caller aborts through so_comm_abort(NULL, ...) */
    SO_MPI_TRY(MPI_Comm_dup(MPI_COMM_WORLD, &m));
    if ((rc = group_new(NULL, m, &c)))
        return rc;
    c->owns_mpi = owns;
    so_log_set_rank(c->size > 1 ? c->rank : -1); /* the job's rank: only this group sets it */
    /* The real nodes (no emulation yet): fewer node ranks than ranks means peers
     * across a network, and the waits must leave the kernel a core (coll_util.c). */
    if ((rc = so_comm_set_ranks_per_node(c, 0))) {
        group_free(c);
        return rc;
    }
    so_coll_set_multi_host(c->topo.node_size < c->size);
    c->is_job = 1;
    *out = c;
out:
    return rc;
}

int so_comm_split(so_comm *parent, int color, int key, so_comm **out)
{
    *out = NULL;
    MPI_Comm m = MPI_COMM_NULL;
    so_comm *c = NULL;
    int rc = so_comm_check_idle(parent);
    if (rc)
        return rc;
    SO_MPI_TRY(MPI_Comm_split(parent->mcomm, color < 0 ? MPI_UNDEFINED : color, key, &m));
    if (m == MPI_COMM_NULL)
        return 0;
    if ((rc = group_new(parent, m, &c)))
        return rc;
    /* The parent's nodes, emulated or real: ranks that shared one still do. */
    if ((rc = build_topology(c, parent->topo.node_id, parent->topo.ranks_per_node))) {
        group_free(c);
        return rc;
    }
    *out = c;
out:
    return rc;
}

int so_comm_finalize(so_comm *c)
{
    if (!c)
        return 0;
    int owns = c->owns_mpi;
    if (c->is_job) /* the job's group goes last: no operation can follow */
        so_engine_stop();
    int rc = group_free(c); /* registered buffers the caller did not free too (collective) */
    if (owns) {
        int mrc = MPI_Finalize();
        if (mrc != MPI_SUCCESS && !rc)
            rc = so_mpi_err(mrc, "MPI_Finalize");
    }
    return rc;
}

int so_comm_rank(const so_comm *c) { return c->rank; }
int so_comm_size(const so_comm *c) { return c->size; }
so_comm *so_comm_node_group(so_comm *c) { return c->node_group; }
so_comm *so_comm_leaders_group(so_comm *c) { return c->leaders_group; }

int so_comm_cross_group(so_comm *c, so_comm **out)
{
    *out = NULL;
    if (c->cross_group) {
        *out = c->cross_group;
        return 0;
    }
    if (c->topo.num_nodes == c->size) { /* every rank its own node: c is its cross group */
        *out = c->cross_group = c;
        return 0;
    }
    MPI_Comm m = MPI_COMM_NULL;
    int rc = so_comm_check_idle(c);
    if (rc)
        return rc;
    /* Keyed by node id: the nodes in order. Its ranks are on distinct nodes. */
    SO_MPI_TRY(MPI_Comm_split(c->mcomm, c->topo.node_rank, c->topo.node_id, &m));
    rc = subgroup_new(c, &m, c->topo.node_id, &c->cross_group);
    *out = c->cross_group;
out:
    return rc;
}

int so_comm_set_transport(so_comm *c, so_transport t)
{
    if ((unsigned)t >= SO_TRANSPORT_COUNT)
        return so_err(SO_EINVAL, "invalid transport %d", (int)t);
    c->transport = t;
    return 0;
}

so_transport so_comm_get_transport(const so_comm *c) { return c->transport; }

void so_comm_set_timeouts(so_comm *c, double stall_warning_s, double timeout_s)
{
    c->stall_warning_s = stall_warning_s;
    c->timeout_s = timeout_s;
    if (c->node_group && c->node_group != c) /* owned subgroups follow their group */
        so_comm_set_timeouts(c->node_group, stall_warning_s, timeout_s);
    if (c->leaders_group && c->leaders_group != c)
        so_comm_set_timeouts(c->leaders_group, stall_warning_s, timeout_s);
}

int so_comm_set_ranks_per_node(so_comm *c, int ranks_per_node)
{
    if (ranks_per_node < 0)
        return so_err(SO_EINVAL, "ranks per node must be >= 0, got %d", ranks_per_node);
    int rc = so_comm_check_idle(c);
    return rc ? rc : build_topology(c, ranks_per_node > 0 ? c->rank / ranks_per_node : -1, ranks_per_node);
}

void so_comm_node_info(const so_comm *c, so_comm_node *out) { *out = c->topo; }

/* ---- blocking helpers: non-blocking MPI + the watched wait ------------------- */

int so_comm_bcast_bytes(so_comm *c, void *buf, size_t nbytes, int root)
{
    if (root < 0 || root >= c->size)
        return so_err(SO_EINVAL, "bcast root %d out of range (size %d)", root, c->size);
    int rc = so_comm_check_idle(c);
    so_waiter w;
    so_waiter_init(&w, c, "bcast");
    for (size_t off = 0; !rc && off < nbytes; off += SO_MPI_CHUNK) {
        size_t n = nbytes - off < SO_MPI_CHUNK ? nbytes - off : SO_MPI_CHUNK;
        MPI_Request req;
        SO_MPI_TRY(MPI_Ibcast((char *)buf + off, (int)n, MPI_BYTE, root, c->mcomm, &req));
        rc = so_waiter_wait(&w, 1, &req);
    }
out:
    return rc;
}

int so_comm_bcast(so_comm *c, float *buf, size_t count, int root)
{
    if (count > SIZE_MAX / sizeof *buf)
        return so_err(SO_EINVAL, "bcast count %zu too large", count);
    return so_comm_bcast_bytes(c, buf, count * sizeof *buf, root);
}

/* In-place allreduce of n elements of `type`, watched. n fits an int (counters). */
static int small_allreduce(so_comm *c, void *vals, size_t n, MPI_Datatype type, MPI_Op op,
                           const char *what)
{
    if (n > INT_MAX)
        return so_err(SO_EINVAL, "%s: %zu values is too many for a counter reduction", what, n);
    int rc = so_comm_check_idle(c);
    if (rc || n == 0)
        return rc;
    so_waiter w;
    so_waiter_init(&w, c, what);
    MPI_Request req;
    SO_MPI_TRY(MPI_Iallreduce(MPI_IN_PLACE, vals, (int)n, type, op, c->mcomm, &req));
    rc = so_waiter_wait(&w, 1, &req);
out:
    return rc;
}

/* The MPI_Op of a reduction (AVG reduces with a sum). */
static MPI_Op mpi_op(so_reduce_op op)
{
    return op == SO_REDUCE_MAX ? MPI_MAX : op == SO_REDUCE_MIN ? MPI_MIN : MPI_SUM;
}

int so_comm_allreduce_i64(so_comm *c, int64_t *vals, size_t n, so_reduce_op op)
{
    if (op != SO_REDUCE_SUM && op != SO_REDUCE_MAX && op != SO_REDUCE_MIN)
        return so_err(SO_EINVAL, "allreduce_i64 supports sum, max and min (op %d)", (int)op);
    return small_allreduce(c, vals, n, MPI_INT64_T, mpi_op(op), "allreduce_i64");
}

int so_comm_allreduce_double(so_comm *c, double *vals, size_t n, so_reduce_op op)
{
    if ((unsigned)op > SO_REDUCE_MIN)
        return so_err(SO_EINVAL, "allreduce_double: invalid op %d", (int)op);
    int rc = small_allreduce(c, vals, n, MPI_DOUBLE, mpi_op(op), "allreduce_double");
    if (!rc && op == SO_REDUCE_AVG)
        for (size_t i = 0; i < n; i++)
            vals[i] /= c->size;
    return rc;
}

int so_comm_barrier(so_comm *c)
{
    int rc = so_comm_check_idle(c);
    if (rc)
        return rc;
    so_waiter w;
    so_waiter_init(&w, c, "barrier");
    MPI_Request req;
    SO_MPI_TRY(MPI_Ibarrier(c->mcomm, &req));
    rc = so_waiter_wait(&w, 1, &req);
out:
    return rc;
}
