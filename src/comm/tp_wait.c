/* The one wait loop of every transport (tp.h): spin on the transport's test
 * while a step of a few microseconds may still finish, then let the core go
 * -- in the transport's own idle (poll() on sockets) or in short sleeps that
 * back off -- honouring the stall warning, the timeout and the progress hook
 * of the waiter (the communication thread's messages move from here). */
#include "tp.h"

#include "scaleout/log.h"
#include "scaleout/timer.h"

#include <sched.h>
#include <time.h>

#define BACKOFF_MIN_NS 5000L
#define BACKOFF_MAX_NS 200000L
#define IDLE_MAX_S 0.1 /* the watchdog looks at least this often */
/* Spin budget of a transport that can sleep until its data moves (tcp:
 * poll() on the sockets wakes within microseconds). A step across a slow
 * link lasts milliseconds, and the communication thread shares its core
 * with the training thread: the full budget (SCALEOUT_COLL_SPIN_US, 2 ms)
 * took that much of forward and backward per step from the sharded
 * strategies at 1 Gbit/s (docs/PERFORMANCE.md). */
#define IDLE_SPIN_S 20e-6

/* Spins up to the budget; 1 when done, 0 when the budget ran out, < 0 on error. */
static int spin(so_tp *t, so_waiter *w, so_tp_req *r, int n)
{
    int yield = so_coll_yield(), done = 0;
    double budget = so_coll_spin_s(), t0 = so_now();
    unsigned every = 63; /* tests between looks at the clock */
    if (t->ops->idle && budget > IDLE_SPIN_S) /* each test is a poll(): look every few */
        budget = IDLE_SPIN_S, every = 3;
    for (unsigned it = 1;; it++) {
        int rc = t->ops->test(t, r, n, &done);
        if (rc)
            return rc;
        if (done)
            return 1;
        so_waiter_progress(w);
        if (yield)
            sched_yield();
        if ((it & every) == 0 && so_now() - t0 >= budget)
            return 0;
    }
}

/* Lets the core go for a while: the transport's idle, else a sleep that doubles. */
static void rest(so_tp *t, long *ns)
{
    if (t->ops->idle) {
        t->ops->idle(t, IDLE_MAX_S);
        return;
    }
    struct timespec ts = {0, *ns};
    nanosleep(&ts, NULL);
    *ns = *ns * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : *ns * 2;
}

int so_tp_wait(so_tp *t, so_waiter *w, so_tp_req *r, int n)
{
    int rc = spin(t, w, r, n);
    if (rc)
        return rc < 0 ? rc : 0;
    double t0 = so_now();
    long ns = BACKOFF_MIN_NS;
    int done = 0, warned = 0;
    if (w)
        w->timed_out = 0;
    for (;;) {
        if ((rc = t->ops->test(t, r, n, &done)))
            return rc;
        if (done)
            break;
        so_waiter_progress(w);
        if (w && (rc = so_waiter_tick(w, so_now() - t0, &warned)))
            return rc;
        rest(t, &ns);
    }
    if (warned)
        so_log(SO_LOG_INFO, "%s completed after %.1f s", w->what, so_now() - t0);
    return 0;
}
