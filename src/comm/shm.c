/* The node shared-memory context behind the hierarchical collectives: the
 * (possibly emulated) node communicator, one MPI-3 shared window holding a
 * step counter and data areas per rank, and a flag barrier over it. Cached on
 * the communicator as an attribute (MPICH caches its node sub-communicators
 * the same way), so a collective pays the set-up once per communicator. */
#include "comm_env.h"
#include "coll_internal.h"

#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/timer.h"

#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FLAG_BYTES 256          /* the step counter's own cache lines (no false sharing) */
#define PUB_OFFSET 128          /* zero-copy publication: in the flag area, off the polled line */

static int ctx_key = MPI_KEYVAL_INVALID, color_key = MPI_KEYVAL_INVALID;

static void shm_free(so_shm *s)
{
    if (!s)
        return;
    if (s->win != MPI_WIN_NULL) {
        MPI_Win_unlock_all(s->win);
        MPI_Win_free(&s->win);
    }
    if (s->leaders != MPI_COMM_NULL)
        MPI_Comm_free(&s->leaders);
    if (s->cross != MPI_COMM_NULL)
        MPI_Comm_free(&s->cross);
    if (s->group != MPI_GROUP_NULL)
        MPI_Group_free(&s->group);
    if (s->node != MPI_COMM_NULL)
        MPI_Comm_free(&s->node);
    free(s->flag);
    free(s->small);
    free(s->contrib);
    free(s->result);
    free(s->pub);
    free(s->zc_in);
    free(s->zc_out);
    free(s->zc_tmp);
    free(s);
}

/* Attribute delete callback: runs when the communicator is freed (collective). */
static int ctx_delete(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)comm, (void)key, (void)extra;
    shm_free(val);
    return MPI_SUCCESS;
}

static int make_keys(void)
{
    int rc = 0;
    /* SERIALIZED: one thread in MPI at a time, so this lazy set-up cannot race. */
    if (ctx_key == MPI_KEYVAL_INVALID)
        SO_MPI_TRY(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, ctx_delete, &ctx_key, NULL));
    /* The node colour + 1 is stored in the pointer itself; MPI_COMM_DUP_FN
     * copies it to duplicates (the async engine's communicator). */
    if (color_key == MPI_KEYVAL_INVALID)
        SO_MPI_TRY(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &color_key, NULL));
out:
    return rc;
}

int so_shm_set_node_color(MPI_Comm comm, int color)
{
    int rc = make_keys(), flag = 0;
    void *val;
    if (rc)
        return rc;
    SO_MPI_TRY(MPI_Comm_set_attr(comm, color_key, (void *)(intptr_t)(color + 1)));
    SO_MPI_TRY(MPI_Comm_get_attr(comm, ctx_key, &val, &flag));
    if (flag)
        SO_MPI_TRY(MPI_Comm_delete_attr(comm, ctx_key));
out:
    return rc;
}

/* The node colour recorded on comm; -1 when none (real nodes only). */
static int node_color(MPI_Comm comm)
{
    void *val;
    int flag = 0;
    if (make_keys() || MPI_Comm_get_attr(comm, color_key, &val, &flag) != MPI_SUCCESS || !flag)
        return -1;
    return (int)(intptr_t)val - 1;
}

/* Splits comm into nodes: shared memory, cut by the group's node colour (its
 * so_comm's node id: emulated nodes, and a split group keeps its parent's). */
static int split_nodes(MPI_Comm comm, so_shm *s, so_waiter *w)
{
    int rc = 0, rank, color = node_color(comm), ids[2] = {0, 0};
    MPI_Comm shared = MPI_COMM_NULL;
    MPI_Request req;
    SO_MPI_TRY(MPI_Comm_rank(comm, &rank));
    SO_MPI_TRY(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared));
    if (color >= 0) {
        SO_MPI_TRY(MPI_Comm_split(shared, color, rank, &s->node));
        SO_MPI_TRY(MPI_Comm_free(&shared));
    } else {
        s->node = shared;
    }
    shared = MPI_COMM_NULL;
    SO_MPI_TRY(MPI_Comm_size(s->node, &s->q));
    SO_MPI_TRY(MPI_Comm_rank(s->node, &s->r));
    SO_MPI_TRY(MPI_Comm_group(s->node, &s->group));
    SO_MPI_TRY(MPI_Comm_split(comm, s->r == 0 ? 0 : MPI_UNDEFINED, rank, &s->leaders));
    SO_MPI_TRY(MPI_Comm_split(comm, s->r, rank, &s->cross)); /* keyed by rank: nodes in order */
    SO_MPI_TRY(MPI_Comm_size(s->cross, &ids[0])); /* node rank 0's is the node count */
    /* Sizes must agree across the node; node rank 0's environment decides. */
    ids[1] = (int)(so_comm_env_get()->shm_chunk / 64);
    int small = (int)(so_comm_env_get()->shm_small / 64);
    int all[3] = {ids[0], ids[1], small}, qq[2] = {s->q, -s->q};
    SO_MPI_TRY(MPI_Ibcast(all, 3, MPI_INT, 0, s->node, &req));
    if ((rc = so_coll_wait(w, 1, &req)))
        goto out;
    SO_MPI_TRY(MPI_Iallreduce(MPI_IN_PLACE, qq, 2, MPI_INT, MPI_MAX, comm, &req));
    if ((rc = so_coll_wait(w, 1, &req)))
        goto out;
    s->nodes = all[0];
    s->equal_q = qq[0] == -qq[1];
    s->chunk_bytes = (size_t)all[1] * 64;
    s->small_bytes = (size_t)all[2] * 64;
out:
    if (shared != MPI_COMM_NULL)
        MPI_Comm_free(&shared);
    return rc;
}

/* Allocates the window and finds every rank's areas in it. */
static int map_window(so_shm *s, so_waiter *w)
{
    int rc = 0;
    MPI_Info info = MPI_INFO_NULL;
    size_t data = 2 * s->small_bytes + 2 * s->chunk_bytes;
    size_t bytes = (FLAG_BYTES + data + 4095) & ~(size_t)4095;
    char *base;
    s->flag = calloc((size_t)s->q, sizeof *s->flag);
    s->small = calloc((size_t)s->q, sizeof *s->small);
    s->contrib = calloc((size_t)s->q, sizeof *s->contrib);
    s->result = calloc((size_t)s->q, sizeof *s->result);
    s->pub = calloc((size_t)s->q, sizeof *s->pub);
    s->zc_in = calloc((size_t)s->q, sizeof *s->zc_in);
    s->zc_out = calloc((size_t)s->q, sizeof *s->zc_out);
    s->zc_tmp = aligned_alloc(64, SO_ZC_SUB * sizeof(double)); /* the widest element type */
    if (!s->flag || !s->small || !s->contrib || !s->result || !s->pub || !s->zc_in || !s->zc_out || !s->zc_tmp)
        return so_err(SO_ENOMEM, "shared-memory context: out of memory");
    SO_MPI_TRY(MPI_Info_create(&info));
    SO_MPI_TRY(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    SO_MPI_TRY(MPI_Win_allocate_shared((MPI_Aint)bytes, 1, info, s->node, &base, &s->win));
    atomic_init((_Atomic uint64_t *)base, 0);
    for (int j = 0; j < s->q; j++) {
        MPI_Aint sz;
        int disp;
        char *b;
        SO_MPI_TRY(MPI_Win_shared_query(s->win, j, &sz, &disp, &b));
        s->flag[j] = (_Atomic uint64_t *)b;
        s->pub[j] = (so_zc_pub *)(b + PUB_OFFSET);
        s->small[j] = b + FLAG_BYTES;
        s->contrib[j] = s->small[j] + 2 * s->small_bytes;
        s->result[j] = s->contrib[j] + s->chunk_bytes;
    }
    /* A passive-target epoch for the window's life: the standard's condition
     * for direct load/store; ordering itself comes from the C11 atomics. */
    SO_MPI_TRY(MPI_Win_lock_all(MPI_MODE_NOCHECK, s->win));
    MPI_Request req;
    SO_MPI_TRY(MPI_Ibarrier(s->node, &req)); /* every counter is zeroed before use */
    rc = so_coll_wait(w, 1, &req);
out:
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    return rc;
}

int so_shm_get(MPI_Comm comm, so_waiter *w, so_shm **out)
{
    int rc = make_keys(), flag = 0;
    void *val;
    if (rc)
        return rc;
    SO_MPI_TRY(MPI_Comm_get_attr(comm, ctx_key, &val, &flag));
    if (flag) {
        *out = val;
        return 0;
    }
    so_shm *s = calloc(1, sizeof *s);
    if (!s)
        return so_err(SO_ENOMEM, "shared-memory context: out of memory");
    static uint64_t serials; /* SERIALIZED: one thread in MPI, so no race */
    s->serial = ++serials;
    s->node = s->leaders = s->cross = MPI_COMM_NULL;
    s->group = MPI_GROUP_NULL;
    s->win = MPI_WIN_NULL;
    if ((rc = split_nodes(comm, s, w)) || (rc = map_window(s, w))) {
        shm_free(s);
        return rc;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    /* Spinning wins on one node. Across nodes the non-leaders wait here while the
     * leaders' traffic needs the kernel, which a spinning rank starves on a busy
     * machine: then yield like so_coll_wait (docs/CLUSTER.md). */
    s->yield = (cpus > 0 && s->q > cpus) || (s->nodes > 1 && so_coll_yield());
    int mrc = MPI_Comm_set_attr(comm, ctx_key, s);
    if (mrc != MPI_SUCCESS) {
        shm_free(s);
        return so_mpi_err(mrc, "MPI_Comm_set_attr");
    }
    *out = s;
out:
    return rc;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Slow path of the barrier: waits for rank j's counter to reach target,
 * spinning, then yielding / sleeping, honouring w's stall warning and timeout. */
static int wait_flag(so_shm *s, int j, uint64_t target, so_waiter *w)
{
    double t0 = 0, budget = so_coll_spin_s();
    long ns = 1000;
    int warned = 0;
    for (unsigned it = 1; atomic_load_explicit(s->flag[j], memory_order_acquire) < target; it++) {
        if (s->yield)
            sched_yield(); /* the rank we wait for may need this core */
        else
            cpu_relax();
        if (it & 255)
            continue;
        so_waiter_progress(w);
        double now = so_now();
        if (t0 == 0)
            t0 = now;
        double el = now - t0;
        if (w && w->timeout_s > 0 && el >= w->timeout_s) {
            w->timed_out = 1;
            return so_err(SO_ECOMM, "%s timed out after %.1f s waiting for rank %d (node rank %d)",
                          w->what ? w->what : "shared-memory step", el, so_world_rank(s->node, j), j);
        }
        if (w && w->stall_warning_s > 0 && el >= w->stall_warning_s) {
            if (!warned)
                so_log(SO_LOG_WARN, "%s has not completed after %.1f s: waiting for rank %d (node rank %d)",
                       w->what ? w->what : "shared-memory step", el, so_world_rank(s->node, j), j);
            if (w->on_stall)
                w->on_stall(w, el, !warned);
            warned = 1;
        }
        if (el > budget) { /* long wait: give the core back, like so_waiter_wait */
            struct timespec ts = {0, ns};
            nanosleep(&ts, NULL);
            ns = ns * 2 > 100000 ? 100000 : ns * 2;
        }
    }
    return 0;
}

int so_shm_barrier(so_shm *s, so_waiter *w)
{
    uint64_t target = ++s->epoch;
    atomic_store_explicit(s->flag[s->r], target, memory_order_release);
    for (int j = 0; j < s->q; j++) {
        if (j == s->r || atomic_load_explicit(s->flag[j], memory_order_acquire) >= target)
            continue;
        int rc = wait_flag(s, j, target, w);
        if (rc)
            return rc;
    }
    return 0;
}
