/* The background communication engine (Horovod-style): the training thread
 * submits in-place allreduces of gradient buckets during backward and goes on
 * computing; one background thread owns MPI and runs them in submission order;
 * so_async_wait_all before the optimizer step exposes only the communication
 * that backward did not hide. Watchdog: a stuck collective is logged after the
 * comm's stall warning and aborts the job after its timeout (comm.h).
 *
 * Ordering contract: every rank submits the SAME buckets (same count, op and
 * tag) in the SAME order; the n-th request of every rank is one collective.
 * Submit, wait_all, stats and destroy are called from one thread (the
 * training thread); between a submit and the wait_all that completes it,
 * that thread must not call so_comm_* collectives (they return SO_EINVAL). */
#ifndef SCALEOUT_COMM_ASYNC_H
#define SCALEOUT_COMM_ASYNC_H

#include "scaleout/comm.h"

#include <stddef.h>
#include <stdint.h>

typedef struct so_async so_async;

/* Timing of one request. Times are so_now() seconds. */
typedef struct {
    uint64_t seq;      /* collective number over the engine's life, same on every rank */
    int tag;           /* the caller's bucket id, for messages */
    so_reduce_op op;
    size_t count;      /* floats */
    size_t bytes;
    double t_queued;   /* submit */
    double t_started;  /* the engine thread began the collective */
    double t_finished; /* it completed (0 while outstanding) */
} so_async_stat;

/* Totals over the engine's life. */
typedef struct {
    uint64_t requests;
    uint64_t bytes;
    double comm_s;   /* sum of (finished - started) */
    double waited_s; /* sum of the time wait_all blocked: exposed communication */
} so_async_totals;

/* Starts an engine over c, any process group (its own duplicate of c's
 * communicator), with algorithm `algo` (auto: c's tuning table, loaded here).
 * Collective over c: its ranks create their engines in the same order.
 * Call between steps, never while another engine (of any group) is busy. */
int so_async_create(so_comm *c, so_allreduce_algo algo, so_async **out);

/* Waits for outstanding requests (no timeout but the watchdog), stops the
 * thread and frees everything. Collective. Accepts NULL. */
void so_async_destroy(so_async *a);

/* Enqueues an in-place allreduce of buf[0..count) and returns at once; never
 * waits on the network. buf belongs to the engine until the wait_all that
 * completes it. The first submit after a wait_all starts a new round: the
 * previous round's stats are dropped. Allocation-free once the round's request
 * count has been seen before. SO_EINVAL for a bad op, SO_ENOMEM. */
int so_async_submit(so_async *a, float *buf, size_t count, so_reduce_op op, int tag);

/* The same for an in-place SUM of doubles, always with the MPI library's own
 * allreduce (small statistics vectors, e.g. synchronised batchnorm, where
 * float sums across ranks would lose the digits a cancellation needs). */
int so_async_submit_sum_double(so_async *a, double *buf, size_t count, int tag);

/* Blocks until every submitted request has completed. *waited_s (may be NULL)
 * receives the seconds spent blocked. timeout_s <= 0 waits without limit (the
 * engine's watchdog still bounds a stuck collective); otherwise SO_ECOMM after
 * timeout_s with requests still outstanding (the caller should so_comm_abort). */
int so_async_wait_all(so_async *a, double timeout_s, double *waited_s);

/* The current round's requests in submission order, valid until the next
 * submit. Read after wait_all (entries of outstanding requests are changing). */
void so_async_stats(const so_async *a, const so_async_stat **stats, size_t *n);

void so_async_get_totals(so_async *a, so_async_totals *out);

#endif
