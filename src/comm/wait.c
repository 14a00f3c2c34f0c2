/* The watched wait: every blocking point of libscaleout_comm polls its MPI
 * requests here, so a stall is reported and a dead or hung peer becomes a
 * bounded timeout instead of a job that hangs forever.
 *
 * Polling design (why not MPI_Wait): both Open MPI and MPICH implement
 * MPI_Wait as a busy loop around their progress engine, so a blocked comm
 * thread would take a whole core from the compute thread (1 compute thread per
 * rank on 2 cores). We instead spin on MPI_Testall for ~20 us (small messages
 * finish inside it at full speed), then sleep with exponential backoff from
 * 5 us to 200 us between tests. Cost: a collective that completes during a
 * sleep is noticed up to 200 us late, and with non-blocking collectives whose
 * schedule only advances inside MPI_Test (Open MPI libnbc) each round can be
 * delayed by one sleep; for gradient buckets of 100 KiB-MBs (60 us-4 ms here)
 * that is a small fraction, and the core stays free for compute. The async
 * thread sets its timer slack to 1 us (async.c): with the default 50 us slack
 * a 5 us nanosleep measured 63 us on this machine, with 1 us slack 13 us.
 * Measured (np 2, rank 0 waiting 2 s for a late peer): MPI_Wait used 0.80-0.84
 * s of CPU (Open MPI and MPICH), this loop 0.07 s (3.5% of a core). */
#include "comm_env.h"
#include "comm_internal.h"

#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/timer.h"

#include <sched.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>


#define SPIN_S 20e-6
#define BACKOFF_MIN_NS 5000L
#define BACKOFF_MAX_NS 200000L
/* Between the fatal line and MPI_Abort: MPICH's hydra kills the job and exits on
 * the first abort, and one run in about twelve lost the line still in the pipe
 * to its proxy (comm_watchdog under MPICH). A job that ends anyway loses 0.3 s. */
#define ABORT_DRAIN_NS 300000000L

/* The one fatal path once MPI is up (comm.h): every layer may end the job. */
_Noreturn void so_comm_abort(so_comm *c, int code, const char *msg)
{
    int inited = 0, finalized = 0, rank = c ? c->rank : -1;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized) /* the job's rank: c may be a subgroup */
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "[rank %d] fatal: %s\n", rank, msg ? msg : "(no message)");
    fflush(stderr);
    fflush(stdout);
    if (inited && !finalized) { /* the whole job, even from a subgroup */
        nanosleep(&(struct timespec){0, ABORT_DRAIN_NS}, NULL);
        MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
    }
    _exit(code ? code : 1); /* MPI_Abort does not return; this is for no-MPI and safety */
}

int so_mpi_err(int mpi_rc, const char *call)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", mpi_rc);
    return so_err(SO_ECOMM, "%s failed: %s", call, msg);
}

int so_world_rank(MPI_Comm comm, int r)
{
    MPI_Group g, wg;
    int w = MPI_UNDEFINED;
    if (MPI_Comm_group(comm, &g) != MPI_SUCCESS)
        return r;
    if (MPI_Comm_group(MPI_COMM_WORLD, &wg) == MPI_SUCCESS) {
        MPI_Group_translate_ranks(g, 1, &r, wg, &w);
        MPI_Group_free(&wg);
    }
    MPI_Group_free(&g);
    return w == MPI_UNDEFINED ? r : w;
}

void so_waiter_init(so_waiter *w, const so_comm *c, const char *what)
{
    *w = (so_waiter){c->stall_warning_s, c->timeout_s, what, NULL, NULL, 0, NULL, NULL};
}

int so_comm_check_idle(const so_comm *c)
{
    if (atomic_load_explicit(c->async_busy, memory_order_acquire) > 0)
        return so_err(SO_EINVAL, "blocking call while operations of the communication thread are "
                                 "outstanding: wait for their handles first");
    return 0;
}

/* ---- settings read once from the environment ------------------------------------- */

size_t so_coll_seg_bytes(void) { return so_comm_env_get()->coll_seg_floats * sizeof(float); }

double so_coll_spin_s(void) { return so_comm_env_get()->coll_spin_s; }

/* More ranks on this host than cores (the launcher's count: every process
 * here competes for the cores, whichever group it is talking in). */
int so_coll_oversubscribed(void) { return so_comm_env_get()->oversubscribed; }

/* Process-wide like the oversubscription above: set once from the job's group
 * (so_comm_init) and kept for every group, since the network processing a
 * spinning rank would starve runs on this host whichever group it serves. */
static _Atomic int multi_host;

void so_coll_set_multi_host(int v) { atomic_store_explicit(&multi_host, v, memory_order_relaxed); }

int so_coll_multi_host(void) { return atomic_load_explicit(&multi_host, memory_order_relaxed); }

int so_coll_yield(void)
{
    int m = so_comm_env_get()->coll_yield; /* 1 always, 0 never, -1 auto */
    if (m >= 0)
        return m;
    return so_coll_oversubscribed() || atomic_load_explicit(&multi_host, memory_order_relaxed);
}

/* One MPI_Testall; *done set. Returns 0 or SO_ECOMM. */
static int test_all(int n, MPI_Request *reqs, int *done)
{
    SO_IGNORE_STATUSES_BEGIN
    int rc = MPI_Testall(n, reqs, done, MPI_STATUSES_IGNORE);
    SO_IGNORE_STATUSES_END
    return rc == MPI_SUCCESS ? 0 : so_mpi_err(rc, "MPI_Testall");
}

/* Sleeps *ns nanoseconds and doubles it up to the cap. */
static void backoff_sleep(long *ns)
{
    struct timespec ts = {0, *ns};
    nanosleep(&ts, NULL);
    *ns = *ns * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : *ns * 2;
}

/* Reports the stall once (log + hook) and keeps calling the hook while stalled. */
static void stall_tick(so_waiter *w, double elapsed, int *warned)
{
    if (!*warned)
        so_log(SO_LOG_WARN, "%s has not completed after %.1f s (timeout %.0f s): waiting for peers",
               w->what, elapsed, w->timeout_s);
    if (w->on_stall)
        w->on_stall(w, elapsed, !*warned);
    *warned = 1;
}

int so_waiter_tick(so_waiter *w, double elapsed, int *warned)
{
    if (w->timeout_s > 0 && elapsed >= w->timeout_s) {
        w->timed_out = 1;
        return so_err(SO_ECOMM, "%s timed out after %.1f s", w->what, elapsed);
    }
    if (w->stall_warning_s > 0 && elapsed >= w->stall_warning_s)
        stall_tick(w, elapsed, warned);
    return 0;
}

int so_waiter_poll(so_waiter *w, int (*test)(void *ctx, int *done), void *ctx)
{
    double t0 = so_now();
    long sleep_ns = BACKOFF_MIN_NS;
    int done = 0, warned = 0;
    w->timed_out = 0;
    for (;;) {
        int rc = test(ctx, &done);
        if (rc)
            return rc;
        if (done)
            break;
        so_waiter_progress(w);
        double elapsed = so_now() - t0;
        if ((rc = so_waiter_tick(w, elapsed, &warned)))
            return rc;
        if (elapsed >= SPIN_S)
            backoff_sleep(&sleep_ns);
    }
    if (warned)
        so_log(SO_LOG_INFO, "%s completed after %.1f s", w->what, so_now() - t0);
    return 0;
}

typedef struct {
    int n;
    MPI_Request *reqs;
} request_set;

static int test_set(void *ctx, int *done)
{
    request_set *r = ctx;
    return test_all(r->n, r->reqs, done);
}

int so_waiter_wait(so_waiter *w, int n, MPI_Request *reqs)
{
    if (!w) {
        SO_IGNORE_STATUSES_BEGIN
        int rc = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
        SO_IGNORE_STATUSES_END
        return rc == MPI_SUCCESS ? 0 : so_mpi_err(rc, "MPI_Waitall");
    }
    request_set r = {n, reqs};
    return so_waiter_poll(w, test_set, &r);
}

int so_coll_wait(so_waiter *w, int n, MPI_Request *reqs)
{
    if (!w)
        return so_waiter_wait(NULL, n, reqs);
    int yield = so_coll_yield();
    double budget = so_coll_spin_s(), t0 = 0;
    for (unsigned it = 1;; it++) {
        int done = 0;
        int rc = test_all(n, reqs, &done);
        if (rc || done)
            return rc;
        so_waiter_progress(w);
        if (yield)
            sched_yield();
        if ((it & 63) == 0) {
            double now = so_now();
            if (t0 == 0)
                t0 = now;
            else if (now - t0 >= budget)
                break;
        }
    }
    /* Long wait: hand over to the watched wait (backoff, stall report, timeout). */
    return so_waiter_wait(w, n, reqs);
}
