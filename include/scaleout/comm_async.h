/* The collective vocabulary with handles, run by the communication thread.
 *
 * Every call below returns at once with a handle; one background thread per
 * process (the communication thread, "so-comm") runs the operations of every
 * group, reaches the network, and completes the handles. The training thread
 * goes on computing: gradients are reduced while backward runs, parameters
 * gathered while forward runs.
 *
 *   allreduce          recv = op over ranks of send                  (count elements)
 *   reduce-scatter(v)  recv = block `rank` of op over ranks of send  (even blocks, or counts[])
 *   allgather(v)       recv = every rank's block, block i from rank i
 *   broadcast          buf  = root's buf
 *   send / receive     bytes of count elements to / from one rank, matched by tag
 *
 * on any group (so_comm_init's, so_comm_split's, the node / leaders / cross
 * subgroups), on F32, BF16, F16, F64 and I64 buffers (BF16 / F16 reduced in
 * FP32, rounded once per hop: docs/COLLECTIVES.md, "Element types"), with
 * any algorithm and transport of comm.h.
 *
 * Handles. Each call hands the caller one handle, which it gives back
 * exactly once, by one of:
 *   so_handle_test   (*done = 1: the handle is gone, the result returned),
 *   so_handle_wait   (blocks, returns the result, frees the handle),
 *   so_handle_then   (a continuation; its own handle replaces this one),
 *   so_handle_release (not interested: the operation still completes).
 * The buffers belong to the communication thread until the handle completes.
 *
 * Continuations. so_handle_then(h, fn, arg, &next) runs fn(arg, status,
 * &follow) ON THE COMMUNICATION THREAD once h completes. fn may submit
 * further operations (PowerSGD: the P allreduce's continuation computes Q
 * and submits the Q allreduce) and set *follow to one of their handles:
 * `next` then completes when that one does, with its result. fn must not
 * wait for a handle (the thread that would complete it is running fn) and
 * should be short: collectives queue behind it.
 *
 * Order. Collectives run one at a time, in submission order; so every rank
 * must submit the collectives of a group in the same order, and, as with
 * blocking MPI collectives, collectives of overlapping groups in an order
 * that has no cycle. A continuation runs as soon as its operation completes,
 * before any operation that has not started yet, and what it submits runs
 * before those too (depth first). So when the continuation is attached to a
 * collective before anything else is submitted, every rank runs the same
 * sequence whatever the timing. Messages (send / receive) are posted as soon
 * as the thread sees them, even while a collective runs, and complete in any
 * order; a continuation of a message completes at a different moment on
 * each rank, so it should submit messages, not collectives.
 *
 * Errors: calls return 0 or SO_EINVAL / SO_ENOMEM for bad arguments (then no
 * handle); a failed operation's code comes back from test / wait / the
 * continuation's status. A collective that times out (comm.h's stall
 * warning and timeout) aborts the job naming the ranks that never arrived,
 * as a blocking one would leave the job out of step.
 *
 * Threads: submit, test, wait, then and release may be called from any
 * thread, the continuations included. While any operation is outstanding
 * the communication thread owns MPI: the blocking so_comm_* calls of comm.h
 * return SO_EINVAL until every handle completed (MPI_THREAD_SERIALIZED). */
#ifndef SCALEOUT_COMM_ASYNC_H
#define SCALEOUT_COMM_ASYNC_H

#include "scaleout/comm.h"

#include <stddef.h>
#include <stdint.h>

typedef struct so_handle so_handle;

/* Per-call choices; NULL means all defaults. Start from SO_COLL_OPTS_INIT. */
typedef struct {
    int algo;               /* SO_ALGO_DEFAULT: the group's (so_comm_set_allreduce_algo, else
                             * ring for reduce-scatter / allgather, binomial for bcast); else an
                             * index of the kind's enum (so_allreduce_algo, so_rs_algo, so_ag_algo,
                             * so_bcast_algo) */
    so_dtype wire;          /* F32 buffers only: SO_DTYPE_BF16 / F16 send them as that type
                             * (rounded once on the way in, reduced in FP32 per hop, widened on
                             * the way out: the same bits on every rank); SO_DTYPE_F32 = as they are */
    so_transport transport; /* SO_TRANSPORT_AUTO: the group's (so_comm_set_transport) */
    int tag;                /* the caller's id: in stall messages and in the operation log */
} so_coll_opts;

#define SO_ALGO_DEFAULT (-1)
#define SO_COLL_OPTS_INIT {SO_ALGO_DEFAULT, SO_DTYPE_F32, SO_TRANSPORT_AUTO, -1}

/* ---- collectives ---------------------------------------------------------------
 * count is in elements of dt; buffers of different ranks may differ in
 * address but not in count. In place as in comm.h: allreduce and bcast when
 * send == recv; reduce-scatter when recv == send + block offset (elements);
 * allgather when send == recv + block offset. */

int so_comm_iallreduce(so_comm *c, const void *send, void *recv, size_t count, so_dtype dt, so_reduce_op op,
                       const so_coll_opts *o, so_handle **out);
/* Even blocks (so_comm_block): rank r receives block r, its length in recv. */
int so_comm_ireduce_scatter(so_comm *c, const void *send, void *recv, size_t count, so_dtype dt,
                            so_reduce_op op, const so_coll_opts *o, so_handle **out);
/* Blocks of counts[0..size) elements, laid out in rank order (block i starts
 * at counts[0] + ... + counts[i-1]): rank r receives counts[r] elements.
 * counts is read by the communication thread: keep it until completion. */
int so_comm_ireduce_scatterv(so_comm *c, const void *send, void *recv, const size_t *counts, so_dtype dt,
                             so_reduce_op op, const so_coll_opts *o, so_handle **out);
/* recv (count elements) = the ranks' blocks; this rank's comes from send. */
int so_comm_iallgather(so_comm *c, const void *send, void *recv, size_t count, so_dtype dt,
                       const so_coll_opts *o, so_handle **out);
int so_comm_iallgatherv(so_comm *c, const void *send, void *recv, const size_t *counts, so_dtype dt,
                        const so_coll_opts *o, so_handle **out);
int so_comm_ibcast(so_comm *c, void *buf, size_t count, so_dtype dt, int root, const so_coll_opts *o,
                   so_handle **out);

/* ---- messages ------------------------------------------------------------------
 * count elements of dt to / from group rank peer. Messages between one pair
 * with one tag (0..32767) match in posting order; counts must match. They
 * never meet the collectives' traffic, nor comm.h's so_comm_isend / irecv. */
int so_comm_isend_to(so_comm *c, const void *buf, size_t count, so_dtype dt, int peer, int tag,
                     so_handle **out);
int so_comm_irecv_from(so_comm *c, void *buf, size_t count, so_dtype dt, int peer, int tag,
                       so_handle **out);
/* *arrived = 1 when a message from peer with tag waits for its receive
 * (so_comm_irecv_from then completes without waiting for the peer). Never
 * blocks; on the calling thread, so only while no handle of this process is
 * outstanding (SO_EINVAL otherwise): a receive posted early would stay
 * outstanding across the caller's step-end agreements. */
int so_comm_probe_from(so_comm *c, int peer, int tag, int *arrived);

/* ---- handles -------------------------------------------------------------------- */

/* *done = 0 (the handle stays the caller's) or 1 (it is freed; the result
 * returned). Never blocks. */
int so_handle_test(so_handle *h, int *done);
/* Blocks until h completes; returns its result and frees it. */
int so_handle_wait(so_handle *h);
/* Waits for n handles (in order) and frees them all; the first error. */
int so_handle_wait_all(so_handle **h, size_t n);

/* A continuation: see the top of this file. status is h's result. Return 0,
 * or an SO_E* code that `next` completes with. *follow starts NULL; set it
 * to a handle of an operation fn submitted to make `next` complete with
 * that one (fn gives the handle up). */
typedef int (*so_then_fn)(void *arg, int status, so_handle **follow);
/* Takes h over. *next (NULL: not wanted) completes after fn ran and the
 * operation it named in *follow completed. */
int so_handle_then(so_handle *h, so_then_fn fn, void *arg, so_handle **next);
/* Gives h up without waiting; the operation completes all the same. */
void so_handle_release(so_handle *h);

/* ---- the operation log -------------------------------------------------------------
 * The communication thread records every completed operation: profilers and
 * benchmarks read what ran, where, with which algorithm and how long. */
typedef struct {
    uint64_t id;           /* 1, 2, ... in completion order, over the process's life */
    uint64_t seq;          /* the collective's number on its group from 0, the same on every
                            * rank (UINT64_MAX for messages) */
    const so_comm *group;
    const char *kind;      /* "allreduce", "reduce-scatter", "allgather", "bcast", "send", "recv" */
    const char *algo;      /* the algorithm that ran ("hier", "ring", ...; "mpi" for messages) */
    const char *transport; /* "mpi", "shm", "tcp" */
    so_dtype dtype, wire;
    so_reduce_op op;
    int tag;
    size_t count, bytes;   /* elements; bytes of the buffer (count x element size) */
    double t_queued;       /* so_now() at submit */
    double t_started;      /* the communication thread began it */
    double t_finished;     /* it completed */
    int status;            /* 0 or the SO_E* code */
} so_op_stat;

/* Copies the log's entries with id > *cursor (oldest first, at most max)
 * into out and returns how many; *cursor moves past them. The log keeps the
 * last 4096 operations: older ones are skipped. */
size_t so_comm_op_log(uint64_t *cursor, so_op_stat *out, size_t max);

/* ---- the gradient rounds of data parallelism (earlier interface) ---------------------
 * A round of in-place allreduces of float buckets, submitted during
 * backward and waited for all at once before the optimizer step; built on
 * the calls above (every bucket is one so_comm_iallreduce). The profiler reads
 * a round's timings; the bucket planner the totals.
 *
 * Ordering contract: every rank submits the SAME buckets (same count, op and
 * tag) in the SAME order. Submit, wait_all, stats and destroy are called from
 * one thread. */
typedef struct so_async so_async;

/* Timing of one request. Times are so_now() seconds. */
typedef struct {
    uint64_t seq;      /* collective number on the group, same on every rank */
    int tag;           /* the caller's bucket id, for messages */
    so_reduce_op op;
    size_t count;      /* floats */
    size_t bytes;
    double t_queued;   /* submit */
    double t_started;  /* the communication thread began the collective */
    double t_finished; /* it completed (0 while outstanding) */
    const char *algo;  /* the algorithm that ran (auto resolved), NULL while outstanding */
} so_async_stat;

/* Totals over the round tracker's life. */
typedef struct {
    uint64_t requests;
    uint64_t bytes;
    double comm_s;   /* sum of (finished - started) */
    double waited_s; /* sum of the time wait_all blocked: exposed communication */
} so_async_totals;

/* A round tracker over c with allreduce algorithm `algo` (auto: c's tuning
 * table, loaded here). Call between steps, while no operation is outstanding. */
int so_async_create(so_comm *c, so_allreduce_algo algo, so_async **out);

/* Waits for outstanding requests and frees the tracker. Accepts NULL. */
void so_async_destroy(so_async *a);

/* An in-place allreduce of buf[0..count) floats. buf belongs to the
 * communication thread until the wait_all that completes it. The first
 * submit after a wait_all starts a new round: the previous round's stats are
 * dropped. SO_EINVAL for a bad op, SO_ENOMEM. */
int so_async_submit(so_async *a, float *buf, size_t count, so_reduce_op op, int tag);

/* The same for an in-place SUM of doubles with the MPI library's own
 * allreduce (synchronised batchnorm's statistics). */
int so_async_submit_sum_double(so_async *a, double *buf, size_t count, int tag);

/* Blocks until every submitted request has completed. *waited_s (may be NULL)
 * receives the seconds spent blocked. timeout_s <= 0 waits without limit (the
 * watchdog still bounds a stuck collective); otherwise SO_ECOMM after
 * timeout_s with requests still outstanding (the caller should so_comm_abort). */
int so_async_wait_all(so_async *a, double timeout_s, double *waited_s);

/* Blocks until request i of the round (0-based, in submission order) has
 * completed, leaving the later ones in flight: a caller can use the first
 * buckets while the last are still reduced. The round still ends with
 * wait_all (at once when everything was waited for). *waited_s as wait_all's.
 * SO_EINVAL when no request i is outstanding in this round. */
int so_async_wait_one(so_async *a, size_t i, double *waited_s);

/* The current round's requests in submission order, valid until the next
 * submit. Read after wait_all. */
void so_async_stats(const so_async *a, const so_async_stat **stats, size_t *n);

void so_async_get_totals(so_async *a, so_async_totals *out);

#endif
