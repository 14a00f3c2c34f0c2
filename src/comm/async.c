/* The async engine: a queue of in-place allreduces filled by the training
 * thread and drained, in order, by one background thread that owns MPI while
 * anything is outstanding. Also the stall inspector: when a collective stalls,
 * ranks exchange small "stuck at #seq" reports, so the timeout message can say
 * which ranks never arrived (dead, hung, or not submitting that bucket). */
#include "comm_internal.h"

#include "scaleout/comm_async.h"
#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/timer.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

/* Point-to-point tag of stall reports on the engine's own communicator
 * (collectives never match point-to-point messages, so no clash). */
#define STALL_TAG 7331
#define FIRST_CAPACITY 64

/* What the engine thread needs besides the public stat of a request. */
typedef struct {
    float *buf;
    double *dbuf;             /* a double SUM request (buf NULL) */
    double warn_s, timeout_s; /* the comm's values at submit time */
} pending;

/* A peer's stall report: it has been stuck in collective #seq (have = 1). */
typedef struct {
    int64_t seq, tag, count;
    int have;
} stall_report;

struct so_async {
    so_comm *comm;
    so_allreduce_algo algo;
    MPI_Comm mcomm; /* engine-private duplicate: its collectives never meet the main thread's */
    int rank, size;

    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu; /* guards everything below up to the stall section */
    pthread_cond_t work_cv, done_cv;
    so_async_stat *stats; /* the round's requests in submission order */
    pending *pend;
    size_t cap, n, next, done; /* capacity, submitted, started, completed (this round) */
    uint64_t seq_next;
    int round_closed; /* wait_all saw everything complete: next submit starts a new round */
    int stop;
    so_async_totals totals;

    /* Stall inspector: engine thread only. */
    stall_report *peer;  /* [size] */
    MPI_Request *sreq;   /* [size] our reports in flight */
    int64_t report[3];   /* {seq, tag, count} of our stuck request */
    so_async_stat cur;   /* the request being run */
    char what[128];
};

/* ---- stall inspector (engine thread) ------------------------------------------- */

/* Receives every pending stall report; keeps those about #min_seq or later. */
static void recv_reports(so_async *a, uint64_t min_seq)
{
    for (int guard = 0; guard < 4 * a->size; guard++) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, STALL_TAG, a->mcomm, &flag, &st) != MPI_SUCCESS || !flag)
            return;
        int64_t r[3];
        if (MPI_Recv(r, 3, MPI_INT64_T, st.MPI_SOURCE, STALL_TAG, a->mcomm, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
            return;
        if (r[0] >= (int64_t)min_seq)
            a->peer[st.MPI_SOURCE] = (stall_report){r[0], r[1], r[2], 1};
    }
}

/* Before each request: forget reports about earlier collectives, keep later ones. */
static void reset_reports(so_async *a, uint64_t seq)
{
    for (int r = 0; r < a->size; r++)
        if (a->peer[r].have && a->peer[r].seq < (int64_t)seq)
            a->peer[r].have = 0;
    recv_reports(a, seq);
}

/* Tells every other rank we are stuck in the current request. Skipped if our
 * previous reports are somehow still in flight (their buffer is in use). */
static void send_reports(so_async *a)
{
    for (int r = 0; r < a->size; r++) {
        int done = 1;
        if (MPI_Test(&a->sreq[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done)
            return;
    }
    a->report[0] = (int64_t)a->cur.seq;
    a->report[1] = a->cur.tag;
    a->report[2] = (int64_t)a->cur.count;
    for (int r = 0; r < a->size; r++)
        if (r != a->rank &&
            MPI_Isend(a->report, 3, MPI_INT64_T, r, STALL_TAG, a->mcomm, &a->sreq[r]) != MPI_SUCCESS)
            a->sreq[r] = MPI_REQUEST_NULL;
}

/* so_waiter hook: runs on every poll once the stall warning has passed. */
static void on_stall(so_waiter *w, double elapsed_s, int first)
{
    (void)elapsed_s;
    so_async *a = w->ctx;
    if (first)
        send_reports(a);
    recv_reports(a, a->cur.seq);
}

/* Appends "1,3,4" (the world ranks of the group's ranks r with pick(a, r)
 * true: what mpirun shows, also in a replica or stage group) to buf; returns how many. */
static int list_ranks(const so_async *a, int (*pick)(const so_async *, int), char *buf, size_t len)
{
    int k = 0;
    size_t used = strlen(buf);
    for (int r = 0; r < a->size && used + 16 < len; r++)
        if (pick(a, r)) {
            used += (size_t)snprintf(buf + used, len - used, "%s%d", k++ ? "," : "", so_world_rank(a->mcomm, r));
        }
    return k;
}

/* Rank r is stuck in our current collective (we are, by definition). */
static int pick_same(const so_async *a, int r)
{
    return r == a->rank || (a->peer[r].have && a->peer[r].seq == (int64_t)a->cur.seq);
}
/* Rank r sent no stall report since our current collective started. */
static int pick_silent(const so_async *a, int r) { return r != a->rank && !a->peer[r].have; }

/* The timeout message: the request, who is stuck with us, who never reported. */
static void timeout_message(const so_async *a, const so_waiter *w, char *msg, size_t len)
{
    snprintf(msg, len, "%s timed out after %.0f s (comm timeout) on rank %d; stuck in it: ranks ",
             a->what, w->timeout_s, so_world_rank(a->mcomm, a->rank));
    list_ranks(a, pick_same, msg, len);
    size_t used = strlen(msg);
    snprintf(msg + used, len - used, "; no stall report from ranks ");
    if (!list_ranks(a, pick_silent, msg, len))
        snprintf(msg + strlen(msg), len - strlen(msg), "(none)");
    for (int r = 0; r < a->size; r++)
        if (r != a->rank && a->peer[r].have && a->peer[r].seq != (int64_t)a->cur.seq) {
            used = strlen(msg);
            snprintf(msg + used, len - used, "; rank %d is stuck in #%lld (tag %lld)", so_world_rank(a->mcomm, r),
                     (long long)a->peer[r].seq, (long long)a->peer[r].tag);
        }
    used = strlen(msg);
    snprintf(msg + used, len - used, " -- a rank may have died, hung, or submitted different "
                                     "buckets; aborting the job");
}

/* ---- the engine thread ------------------------------------------------------------- */

/* Runs one request; any failure aborts the job (peers would hang otherwise). */
static void run_request(so_async *a, const pending *p)
{
    double warn_s = p->warn_s, timeout_s = p->timeout_s;
    reset_reports(a, a->cur.seq);
    snprintf(a->what, sizeof a->what, "allreduce #%llu (tag %d, %zu floats)",
             (unsigned long long)a->cur.seq, a->cur.tag, a->cur.count);
    so_waiter w = {warn_s, timeout_s, a->what, on_stall, a, 0};
    int rc = p->dbuf ? so_allreduce_mpi_double(p->dbuf, a->cur.count, a->mcomm, &w)
                     : so_allreduce_run(a->comm, a->algo, p->buf, p->buf, a->cur.count, a->cur.op, a->mcomm, &w);
    if (!rc)
        return;
    char msg[1024];
    if (w.timed_out)
        timeout_message(a, &w, msg, sizeof msg);
    else
        snprintf(msg, sizeof msg, "%s failed: %s", a->what, so_errmsg());
    so_comm_abort(a->comm, SO_COMM_EXIT_COMM, msg);
}

/* Takes the next request (mu held), runs it unlocked, records its timing. */
static void engine_step(so_async *a)
{
    size_t i = a->next++;
    pending p = a->pend[i];
    a->stats[i].t_started = so_now();
    a->cur = a->stats[i];
    pthread_mutex_unlock(&a->mu);

    run_request(a, &p);
    double t = so_now();

    pthread_mutex_lock(&a->mu);
    a->stats[i].t_finished = t;
    a->totals.requests++;
    a->totals.bytes += a->stats[i].bytes;
    a->totals.comm_s += t - a->stats[i].t_started;
    a->done++;
    /* Our last MPI call for this request is behind us: release MPI to the main thread. */
    atomic_fetch_sub_explicit(a->comm->async_busy, 1, memory_order_release);
    if (a->done == a->n)
        pthread_cond_broadcast(&a->done_cv);
}

static void *engine_main(void *arg)
{
    so_async *a = arg;
    prctl(PR_SET_NAME, "so-comm-async", 0, 0, 0); /* perf, top */
#ifdef PR_SET_TIMERSLACK
    /* 1 us timer slack so the 5-200 us backoff sleeps are what they say (wait.c). */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->stop && a->next == a->n)
            pthread_cond_wait(&a->work_cv, &a->mu);
        if (a->next == a->n) /* stop, and the queue is drained */
            break;
        engine_step(a);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* ---- the training thread's side --------------------------------------------------- */

/* Initialises mutex and condition variables (done_cv on the monotonic clock). */
static int init_sync(so_async *a)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC))
        return so_err(SO_ENOMEM, "async engine: condattr init failed");
    int bad = pthread_mutex_init(&a->mu, NULL) || pthread_cond_init(&a->work_cv, NULL) ||
              pthread_cond_init(&a->done_cv, &ca);
    pthread_condattr_destroy(&ca);
    return bad ? so_err(SO_ENOMEM, "async engine: pthread init failed") : 0;
}

/* Starts the engine thread with every signal blocked: signals go to the training thread. */
static int start_thread(so_async *a)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&a->thread, NULL, engine_main, a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err)
        return so_err(SO_ENOMEM, "async engine: pthread_create failed (%s)", strerror(err));
    a->thread_started = 1;
    return 0;
}

/* Grows the request arrays (mu held). */
static int grow(so_async *a)
{
    size_t cap = a->cap ? 2 * a->cap : FIRST_CAPACITY;
    so_async_stat *s = realloc(a->stats, cap * sizeof *s);
    if (s)
        a->stats = s;
    pending *p = s ? realloc(a->pend, cap * sizeof *p) : NULL;
    if (!p)
        return so_err(SO_ENOMEM, "async engine: cannot grow the queue to %zu requests", cap);
    a->pend = p;
    a->cap = cap;
    return 0;
}

int so_async_create(so_comm *c, so_allreduce_algo algo, so_async **out)
{
    *out = NULL;
    if ((unsigned)algo >= SO_ALLREDUCE_COUNT)
        return so_err(SO_EINVAL, "invalid allreduce algorithm %d", (int)algo);
    int rc = so_comm_check_idle(c);
    if (rc)
        return rc;
    so_async *a = calloc(1, sizeof *a);
    if (!a)
        return so_err(SO_ENOMEM, "async engine: out of memory");
    a->comm = c;
    a->algo = algo;
    a->rank = c->rank;
    a->size = c->size;
    a->mcomm = MPI_COMM_NULL;
    if (algo == SO_ALLREDUCE_AUTO) /* the engine thread only reads c's table */
        so_comm_get_tuning(c);
    int mrc = MPI_Comm_dup(c->mcomm, &a->mcomm);
    if (mrc != MPI_SUCCESS) {
        free(a);
        return so_mpi_err(mrc, "MPI_Comm_dup");
    }
    a->peer = calloc((size_t)a->size, sizeof *a->peer);
    a->sreq = malloc((size_t)a->size * sizeof *a->sreq);
    rc = !a->peer || !a->sreq ? so_err(SO_ENOMEM, "async engine: out of memory") : 0;
    for (int r = 0; !rc && r < a->size; r++)
        a->sreq[r] = MPI_REQUEST_NULL;
    if (!rc)
        rc = grow(a);
    if (!rc)
        rc = init_sync(a);
    if (!rc)
        rc = start_thread(a);
    if (rc) {
        so_async_destroy(a);
        return rc;
    }
    *out = a;
    return 0;
}

void so_async_destroy(so_async *a)
{
    if (!a)
        return;
    if (a->thread_started) {
        pthread_mutex_lock(&a->mu);
        a->stop = 1;
        pthread_cond_signal(&a->work_cv);
        pthread_mutex_unlock(&a->mu);
        pthread_join(a->thread, NULL); /* it finishes the queue first */
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->work_cv);
        pthread_cond_destroy(&a->done_cv);
    }
    /* Reports nobody received: tiny eager sends, already out of our buffer. */
    for (int r = 0; a->sreq && r < a->size; r++)
        if (a->sreq[r] != MPI_REQUEST_NULL && MPI_Request_free(&a->sreq[r]) != MPI_SUCCESS)
            so_log(SO_LOG_WARN, "async engine: MPI_Request_free of a stall report failed");
    if (a->mcomm != MPI_COMM_NULL && MPI_Comm_free(&a->mcomm) != MPI_SUCCESS)
        so_log(SO_LOG_WARN, "async engine: MPI_Comm_free failed");
    free(a->peer);
    free(a->sreq);
    free(a->stats);
    free(a->pend);
    free(a);
}

static int enqueue(so_async *a, float *buf, double *dbuf, size_t count, so_reduce_op op, int tag)
{
    double t = so_now();
    int rc = 0;
    pthread_mutex_lock(&a->mu);
    if (a->round_closed) {
        a->n = a->next = a->done = 0;
        a->round_closed = 0;
    }
    if (a->n == a->cap && (rc = grow(a)))
        goto out;
    size_t bytes = count * (dbuf ? sizeof(double) : sizeof(float));
    a->stats[a->n] = (so_async_stat){a->seq_next++, tag, op, count, bytes, t, 0, 0};
    a->pend[a->n] = (pending){buf, dbuf, a->comm->stall_warning_s, a->comm->timeout_s};
    a->n++;
    atomic_fetch_add_explicit(a->comm->async_busy, 1, memory_order_relaxed);
    pthread_cond_signal(&a->work_cv);
out:
    pthread_mutex_unlock(&a->mu);
    return rc;
}

int so_async_submit(so_async *a, float *buf, size_t count, so_reduce_op op, int tag)
{
    if ((unsigned)op > SO_REDUCE_MIN)
        return so_err(SO_EINVAL, "async submit: invalid reduce op %d", (int)op);
    if (!buf && count)
        return so_err(SO_EINVAL, "async submit: NULL buffer for %zu floats", count);
    return enqueue(a, buf, NULL, count, op, tag);
}

int so_async_submit_sum_double(so_async *a, double *buf, size_t count, int tag)
{
    if (!buf && count)
        return so_err(SO_EINVAL, "async submit: NULL buffer for %zu doubles", count);
    return enqueue(a, NULL, buf, count, SO_REDUCE_SUM, tag);
}

/* Absolute CLOCK_MONOTONIC time `s` seconds from now. */
static struct timespec deadline_in(double s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = ts.tv_nsec + (long long)((s - (double)(long long)s) * 1e9);
    ts.tv_sec += (time_t)s + (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    return ts;
}

int so_async_wait_all(so_async *a, double timeout_s, double *waited_s)
{
    double t0 = so_now();
    struct timespec dl = deadline_in(timeout_s > 0 ? timeout_s : 0);
    int rc = 0;
    pthread_mutex_lock(&a->mu);
    while (!rc && a->done < a->n) {
        if (timeout_s <= 0)
            pthread_cond_wait(&a->done_cv, &a->mu);
        else if (pthread_cond_timedwait(&a->done_cv, &a->mu, &dl) == ETIMEDOUT && a->done < a->n)
            rc = so_err(SO_ECOMM, "async wait_all timed out after %.1f s with %zu of %zu requests "
                                  "outstanding", timeout_s, a->n - a->done, a->n);
    }
    double waited = so_now() - t0;
    if (!rc)
        a->round_closed = 1;
    a->totals.waited_s += waited;
    pthread_mutex_unlock(&a->mu);
    if (waited_s)
        *waited_s = waited;
    return rc;
}

void so_async_stats(const so_async *a, const so_async_stat **stats, size_t *n)
{
    *stats = a->stats;
    *n = a->n;
}

void so_async_get_totals(so_async *a, so_async_totals *out)
{
    pthread_mutex_lock(&a->mu);
    *out = a->totals;
    pthread_mutex_unlock(&a->mu);
}
