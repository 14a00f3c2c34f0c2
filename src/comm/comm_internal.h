/* Private to libscaleout_comm: the so_comm struct, the watched wait every
 * collective blocks in, and the one signature all allreduce algorithms share
 * (one file per algorithm, like MPICH's coll/allreduce/allreduce_intra_*.c). */
#ifndef SCALEOUT_COMM_INTERNAL_H
#define SCALEOUT_COMM_INTERNAL_H

#include "scaleout/comm.h"

#include <mpi.h>
#include <stdatomic.h>

/* A process group: the whole job (so_comm_init) or a subset (so_comm_split,
 * and the node / leaders subgroups every group owns). */
struct so_comm {
    MPI_Comm mcomm;  /* this group's ranks (a dup of MPI_COMM_WORLD for the job): collectives */
    MPI_Comm p2p;    /* a dup of mcomm: so_comm_isend / irecv, so user tags never meet collectives */
    MPI_Comm ecomm;  /* a dup of mcomm for the communication thread's collectives (engine.c) */
    MPI_Comm ep2p;   /* a dup of mcomm for its messages (so_comm_isend_to / irecv_from) */
    uint64_t eng_seq; /* collectives the communication thread ran on this group (engine thread only) */
    struct so_tcp_mesh *tcp_mesh; /* so_comm_isend / irecv with peers on other hosts (so_comm_p2p_connect), or NULL */
    int rank, size;
    so_comm_node topo;
    so_comm *node_group;    /* the ranks of my node: c itself when c is one node; owned otherwise */
    so_comm *leaders_group; /* rank 0 of every node (NULL on other ranks): c itself when every
                             * rank is its own node; owned otherwise */
    so_comm *cross_group;   /* my node rank on every node (so_comm_cross_group, made on first
                             * use): c itself when every rank is its own node; owned otherwise */
    so_transport transport; /* the hand-written algorithms' transport when a call names none */
    int owns_mpi;    /* so_comm_init called MPI_Init_thread, so finalize calls MPI_Finalize */
    int is_job;      /* the group of so_comm_init: its finalize stops the communication thread */
    double stall_warning_s, timeout_s;
    so_allreduce_algo algo;
    size_t p2p_chunk; /* bytes per MPI message of so_comm_isend / irecv (SO_MPI_CHUNK) */
    so_comm_tuning tuning; /* the table `auto` uses on this group */
    int tuning_state;      /* 0: SCALEOUT_TUNING not looked at yet, 1: set, 2: built-in */
    /* Requests outstanding in async engines of ANY group of this process (they
     * own MPI meanwhile): MPI_THREAD_SERIALIZED is per process, so every group
     * points at the job's counter (busy_store of the so_comm_init group). */
    atomic_int *async_busy;
    atomic_int busy_store;
};

/* A watched wait. Collectives post non-blocking operations and wait here, so
 * every wait honours the stall warning and timeout. Fields are set by the caller;
 * `what` names the operation in messages. on_stall (optional) runs on every poll
 * once the stall warning has passed (first = 1 on the first call): the async
 * engine uses it to exchange stall reports. */
typedef struct so_waiter {
    double stall_warning_s, timeout_s; /* <= 0: never */
    const char *what;
    void (*on_stall)(struct so_waiter *w, double elapsed_s, int first);
    void *ctx;
    int timed_out; /* set when so_waiter_wait returned because of the timeout */
    /* Called on every poll of a wait that is not done yet (NULL: none): the
     * communication thread posts and tests its messages here while a
     * collective waits (engine.c), so one loop progresses everything. */
    void (*progress)(void *pctx);
    void *pctx;
} so_waiter;

/* w's progress hook, if any (every wait loop calls it between its polls). */
static inline void so_waiter_progress(so_waiter *w)
{
    if (w && w->progress)
        w->progress(w->pctx);
}

/* Waits for n requests. 0 when all completed; SO_ECOMM on an MPI error or when
 * the timeout passed (w->timed_out = 1, requests still active). w == NULL:
 * plain MPI_Waitall, no watchdog. Polls MPI_Testall with backoff (see wait.c). */
int so_waiter_wait(so_waiter *w, int n, MPI_Request *reqs);

/* The watched wait around any test: test(ctx, &done) until done, spinning
 * briefly, then backing off as so_waiter_wait does (which is this over
 * MPI_Testall). w must not be NULL. */
int so_waiter_poll(so_waiter *w, int (*test)(void *ctx, int *done), void *ctx);

/* One look of a wait that polls something other than MPI requests (the tcp
 * transport): SO_ECOMM (w->timed_out = 1) once elapsed passed the timeout, else
 * the stall warning and hook as in so_waiter_wait (*warned starts at 0). */
int so_waiter_tick(so_waiter *w, double elapsed, int *warned);

/* Rank r of comm as a rank of MPI_COMM_WORLD, the number mpirun and the user
 * see, for messages (r itself if MPI cannot say). Local, no communication. */
int so_world_rank(MPI_Comm comm, int r);

/* so_waiter_wait spinning first: spins on MPI_Testall (yielding the core
 * when so_coll_yield) for up to the spin budget, then the watched backoff,
 * whose sleeps keep a core free and whose timeout covers a lost peer.
 * Collectives spin first because a step of a few us would otherwise be
 * noticed one backoff sleep late, at every step. */
int so_coll_wait(so_waiter *w, int n, MPI_Request *reqs);

/* Fills a waiter with c's timeouts and no hook. */
void so_waiter_init(so_waiter *w, const so_comm *c, const char *what);

/* so_err(SO_ECOMM, "<call>: <MPI error string>"). */
int so_mpi_err(int mpi_rc, const char *call);

/* SO_EINVAL while the communication thread owns MPI (operations of the
 * vocabulary outstanding): main-thread calls must wait for their handles. */
int so_comm_check_idle(const so_comm *c);

/* ---- settings of every wait (wait.c) ---------------------------------------------- */
/* 1 when this node runs more ranks than it has cores: waits must yield. */
int so_coll_oversubscribed(void);
/* Whether a wait's spin yields the core between polls. SCALEOUT_COLL_YIELD
 * = 1 always, 0 never, auto (default) when oversubscribed or when the job spans
 * several hosts: a peer across a network link needs the kernel's network
 * processing, which a rank busy-polling starves on a busy machine
 * (docs/CLUSTER.md). Shared-memory barriers (shm.c) keep their spin. */
int so_coll_yield(void);
/* Tells the waits whether the job spans several hosts (so_comm_init sets it,
 * for every group of the process). */
void so_coll_set_multi_host(int multi_host);
int so_coll_multi_host(void);
/* Spin budget (seconds) before a wait starts sleeping (SCALEOUT_COLL_SPIN_US). */
double so_coll_spin_s(void);
/* Pipeline segment of the exchanges in bytes (SCALEOUT_COLL_SEG). */
size_t so_coll_seg_bytes(void);

/* MPI counts are int: operations on size_t counts go in chunks of this many. */
#define SO_MPI_CHUNK ((size_t)1 << 30)

/* Frees the registered buffers (regbuf.c) c still owns, oldest first:
 * so_comm_finalize's clean-up of what the caller left (collective). */
void so_regbuf_release_all(so_comm *c);

/* Records this rank's node colour on comm (its so_comm node id, -1: real
 * shared-memory nodes) for the hierarchical algorithms and registered
 * buffers, which group ranks by it within each real node (shm.c). */
int so_shm_set_node_color(MPI_Comm comm, int color);

/* Checks an MPI call inside a function with `int rc` and an `out:` label. */
#define SO_MPI_TRY(call)                                                                \
    do {                                                                                \
        int mpi_rc_ = (call);                                                           \
        if (mpi_rc_ != MPI_SUCCESS) {                                                   \
            rc = so_mpi_err(mpi_rc_, #call);                                            \
            goto out;                                                                   \
        }                                                                               \
    } while (0)

/* MPICH defines MPI_STATUSES_IGNORE as (MPI_Status *)1 and annotates the
 * statuses array, so GCC >= 11 warns "accessing 20 bytes in a region of size 0"
 * on every MPI_Testall/MPI_Waitall that ignores statuses (pmodels/mpich#5687,
 * won't fix; HDF5 silences it the same way). Only these two calls are affected. */
#if defined(__GNUC__) && !defined(__clang__)
#define SO_IGNORE_STATUSES_BEGIN \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wstringop-overflow\"")
#define SO_IGNORE_STATUSES_END _Pragma("GCC diagnostic pop")
#else
#define SO_IGNORE_STATUSES_BEGIN
#define SO_IGNORE_STATUSES_END
#endif

#endif
