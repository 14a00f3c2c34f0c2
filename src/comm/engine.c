/* The communication thread ("so-comm"): one per process, for every group. It
 * runs the collectives of comm_async.h one at a time in submission order
 * (the dispatcher, on each group's own communicator ecomm), posts and tests
 * messages as soon as it sees them -- from its idle loop and from inside the
 * waits of a running collective (the waiter's progress hook), so one loop
 * moves everything -- and completes handles, running their continuations.
 * Also the stall inspector: when a collective stalls, the ranks exchange
 * small "stuck at #seq" reports, so the timeout message can say which ranks
 * never arrived (dead, hung, or not submitting that collective).
 *
 * A handle's life: the caller holds one reference until test (done), wait,
 * then or release; the engine one until the operation finished. The mutex
 * guards the queues, states, references and the log; the MPI calls are
 * made by this thread only, outside the mutex, while the process-wide busy
 * count keeps the training thread's blocking calls out (comm.c). */
#include "engine.h"

#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/timer.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

/* Point-to-point tag of stall reports on a group's ecomm (collectives' own
 * messages use SO_TAG_*, never this one). */
#define STALL_TAG 7331
#define LOG_CAP 4096
#define IDLE_MAX_NS 200000L /* the longest sleep while only messages are in flight */

typedef enum { OP_COLL, OP_SEND, OP_RECV, OP_THEN } op_kind;
typedef enum { ST_QUEUED, ST_RUNNING, ST_FOLLOWING, ST_DONE } op_state;

struct so_handle {
    so_handle *next; /* in the queue, a message list or the free list */
    so_comm *c;
    op_kind kind;
    op_state state;  /* FOLLOWING: a continuation whose fn ran, waiting for its follow */
    int status;
    int refs;        /* the caller's and the engine's */
    double warn_s, timeout_s; /* the group's, at submit */
    so_coll_call call;        /* OP_COLL */
    char *buf;                /* messages */
    size_t bytes;
    int peer, nreq, warned;
    MPI_Request *reqs, req1;  /* one per chunk of the message (req1 when one) */
    so_then_fn fn;            /* OP_THEN */
    void *arg;
    int ante_status;          /* the result it continues from, once known */
    so_handle *cont;          /* the continuation to run (or complete) when this one finishes */
    so_op_stat st;
};

typedef struct {
    int64_t seq, tag, count;
    int have;
} stall_report;

static struct {
    pthread_once_t once;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    pthread_t thread, self; /* self: valid while running */
    int running, stop;
    so_handle *q_head, *q_tail; /* collectives and continuations, in the order they run */
    so_handle *f_head, *f_tail; /* submitted by the continuation running now: go first */
    so_handle *m_head, *m_tail; /* messages not posted yet */
    so_handle *inflight;        /* messages posted (communication thread only) */
    _Atomic int msgs;           /* messages submitted, not finished: the progress hook's quick check */
    double last_move;           /* a message was posted or finished (communication thread) */
    so_handle *free_list;
    int outstanding;            /* handles not finished, continuations included */
    int in_cont;                /* the thread is inside a continuation */
    so_op_stat log[LOG_CAP];
    uint64_t logged;            /* entries ever written (ids 1..logged) */
    so_scratch scratch;         /* the dispatcher's conversions (communication thread) */
    /* stall inspector (communication thread) */
    stall_report *peer;
    MPI_Request *sreq;
    int peer_cap;
    int64_t report[3];
    so_handle *cur;
    char what[160];
} E = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static void init_sync(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&E.work_cv, &ca);
    pthread_cond_init(&E.done_cv, &ca);
    pthread_condattr_destroy(&ca);
}

static int on_thread(void) { return E.running && pthread_equal(pthread_self(), E.self); }
static int uses_mpi(const so_handle *h) { return h->kind != OP_THEN; }

/* ---- handles (mu held) -------------------------------------------------------------- */

static so_handle *op_new(so_comm *c, op_kind kind)
{
    so_handle *h = E.free_list;
    if (h)
        E.free_list = h->next;
    else if (!(h = malloc(sizeof *h)))
        return NULL;
    *h = (so_handle){.c = c, .kind = kind, .state = ST_QUEUED, .refs = 2};
    h->st.status = 0;
    return h;
}

static void unref(so_handle *h)
{
    if (--h->refs > 0)
        return;
    if (h->reqs && h->reqs != &h->req1)
        free(h->reqs);
    h->next = E.free_list;
    E.free_list = h;
}

static void push_back(so_handle **head, so_handle **tail, so_handle *h)
{
    h->next = NULL;
    if (*tail)
        (*tail)->next = h;
    else
        *head = h;
    *tail = h;
}

static void push_front(so_handle *h)
{
    h->next = E.q_head;
    E.q_head = h;
    if (!E.q_tail)
        E.q_tail = h;
}

static void log_push(const so_handle *h)
{
    so_op_stat *e = &E.log[E.logged % LOG_CAP];
    *e = h->st;
    e->id = ++E.logged;
}

/* ---- finishing and continuations ------------------------------------------------------ */

static void finish(so_handle *h, int status);

/* t (a continuation) follows a finished operation: complete it, or queue
 * its fn to run before anything not started yet (mu held). */
static void continue_with(so_handle *t, int status)
{
    if (t->state == ST_FOLLOWING) {
        pthread_mutex_unlock(&E.mu);
        finish(t, status);
        pthread_mutex_lock(&E.mu);
        return;
    }
    t->ante_status = status;
    push_front(t);
    pthread_cond_signal(&E.work_cv);
}

/* The operation is over: record, wake waiters, hand over to what follows. */
static void finish(so_handle *h, int status)
{
    pthread_mutex_lock(&E.mu);
    h->status = status;
    h->st.status = status;
    h->st.t_finished = so_now();
    if (h->kind != OP_THEN)
        log_push(h);
    if (uses_mpi(h)) /* our last MPI call for it is behind us: MPI back to the training thread */
        atomic_fetch_sub_explicit(h->c->async_busy, 1, memory_order_release);
    h->state = ST_DONE;
    if (h->kind == OP_SEND || h->kind == OP_RECV)
        atomic_fetch_sub_explicit(&E.msgs, 1, memory_order_relaxed);
    E.outstanding--;
    so_handle *t = h->cont;
    h->cont = NULL;
    unref(h);
    if (t)
        continue_with(t, status);
    pthread_cond_broadcast(&E.done_cv);
    pthread_mutex_unlock(&E.mu);
}

/* Runs continuation t's fn (communication thread, mu not held). What it
 * submits goes before everything queued (depth first). */
static void run_then(so_handle *t)
{
    so_handle *follow = NULL;
    E.in_cont = 1;
    int rc = t->fn(t->arg, t->ante_status, &follow);
    E.in_cont = 0;
    pthread_mutex_lock(&E.mu);
    if (E.f_head) { /* splice the continuation's submissions in front */
        E.f_tail->next = E.q_head;
        if (!E.q_head)
            E.q_tail = E.f_tail;
        E.q_head = E.f_head;
        E.f_head = E.f_tail = NULL;
    }
    if (!rc && follow && follow->state != ST_DONE) {
        follow->cont = t; /* finish(follow) completes t */
        t->state = ST_FOLLOWING;
        unref(follow); /* fn gave its reference up */
        pthread_mutex_unlock(&E.mu);
        return;
    }
    int st = rc ? rc : follow ? follow->status : 0;
    if (follow)
        unref(follow);
    pthread_mutex_unlock(&E.mu);
    finish(t, st);
}

/* ---- messages (communication thread) ---------------------------------------------------- */

static void msg_timeout(so_handle *h, double age)
{
    int expired = h->timeout_s > 0 && age >= h->timeout_s;
    if (!expired && (h->warned || h->warn_s <= 0 || age < h->warn_s))
        return;
    char what[96]; /* the peer by world rank: what mpirun shows */
    snprintf(what, sizeof what, "%s of %zu bytes %s rank %d (tag %d)", h->kind == OP_SEND ? "send" : "receive",
             h->bytes, h->kind == OP_SEND ? "to" : "from", so_world_rank(h->c->mcomm, h->peer), h->st.tag);
    if (expired) {
        so_err(SO_ECOMM, "%s timed out after %.0f s (comm timeout)", what, age);
        h->status = SO_ECOMM;
    } else {
        so_log(SO_LOG_WARN, "%s has not completed after %.1f s (timeout %.0f s)", what, age, h->timeout_s);
        h->warned = 1;
    }
}

/* Posts a message as MPI requests of at most the group's chunk each. */
static int msg_post(so_handle *h)
{
    size_t chunk = h->c->p2p_chunk, k = h->bytes ? (h->bytes - 1) / chunk + 1 : 1;
    h->reqs = k == 1 ? &h->req1 : malloc(k * sizeof *h->reqs);
    if (!h->reqs)
        return so_err(SO_ENOMEM, "message of %zu bytes: out of memory", h->bytes);
    h->nreq = (int)k;
    for (size_t i = 0; i < k; i++) {
        size_t off = i * chunk;
        int len = (int)(h->bytes - off < chunk ? h->bytes - off : chunk);
        int mrc = h->kind == OP_SEND ? MPI_Isend(h->buf + off, len, MPI_BYTE, h->peer, h->st.tag, h->c->ep2p, &h->reqs[i])
                                     : MPI_Irecv(h->buf + off, len, MPI_BYTE, h->peer, h->st.tag, h->c->ep2p, &h->reqs[i]);
        if (mrc != MPI_SUCCESS) /* not expected once MPI is up; the caller aborts the job */
            return so_mpi_err(mrc, h->kind == OP_SEND ? "MPI_Isend" : "MPI_Irecv");
    }
    return 0;
}

/* Posts what was submitted, tests what is in flight; finishes the done. */
static void progress_msgs(void *unused)
{
    (void)unused;
    if (atomic_load_explicit(&E.msgs, memory_order_relaxed) == 0)
        return;
    pthread_mutex_lock(&E.mu);
    so_handle *todo = E.m_head;
    E.m_head = E.m_tail = NULL;
    pthread_mutex_unlock(&E.mu);
    for (so_handle *h = todo, *nx; h; h = nx) {
        nx = h->next;
        h->st.t_started = so_now();
        int rc = msg_post(h);
        if (rc) {
            finish(h, rc);
            continue;
        }
        h->next = E.inflight;
        E.inflight = h;
        E.last_move = h->st.t_started;
    }
    double now = so_now();
    for (so_handle **pp = &E.inflight; *pp;) {
        so_handle *h = *pp;
        int done = 0;
        SO_IGNORE_STATUSES_BEGIN
        int mrc = MPI_Testall(h->nreq, h->reqs, &done, MPI_STATUSES_IGNORE);
        SO_IGNORE_STATUSES_END
        int rc = mrc == MPI_SUCCESS ? 0 : so_mpi_err(mrc, "MPI_Testall");
        if (!rc && !done)
            msg_timeout(h, now - h->st.t_started);
        if (rc || done || h->status) {
            *pp = h->next;
            E.last_move = now;
            finish(h, rc ? rc : h->status);
        } else {
            pp = &h->next;
        }
    }
}

/* ---- stall inspector (communication thread) ---------------------------------------------- */

/* Receives every pending stall report on the current group; keeps those
 * about #min_seq or later. */
static void recv_reports(so_comm *c, uint64_t min_seq)
{
    for (int guard = 0; guard < 4 * c->size; guard++) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, STALL_TAG, c->ecomm, &flag, &st) != MPI_SUCCESS || !flag)
            return;
        int64_t r[3];
        if (MPI_Recv(r, 3, MPI_INT64_T, st.MPI_SOURCE, STALL_TAG, c->ecomm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
        if (r[0] >= (int64_t)min_seq && st.MPI_SOURCE < E.peer_cap)
            E.peer[st.MPI_SOURCE] = (stall_report){r[0], r[1], r[2], 1};
    }
}

/* Before each collective: room for the group, no old reports. */
static int reset_reports(so_comm *c, uint64_t seq)
{
    if (E.peer_cap < c->size) {
        for (int r = 0; r < E.peer_cap; r++) /* tiny eager sends, long out of our buffer */
            if (E.sreq[r] != MPI_REQUEST_NULL)
                MPI_Request_free(&E.sreq[r]);
        free(E.peer);
        free(E.sreq);
        E.peer = calloc((size_t)c->size, sizeof *E.peer);
        E.sreq = malloc((size_t)c->size * sizeof *E.sreq);
        E.peer_cap = E.peer && E.sreq ? c->size : 0;
        for (int r = 0; r < E.peer_cap; r++)
            E.sreq[r] = MPI_REQUEST_NULL;
        if (!E.peer_cap)
            return so_err(SO_ENOMEM, "stall inspector: out of memory");
    }
    for (int r = 0; r < E.peer_cap; r++)
        E.peer[r].have = 0;
    recv_reports(c, seq);
    return 0;
}

/* Tells every other rank of the group we are stuck in the current
 * collective. Skipped while our previous reports are still in flight. */
static void send_reports(so_comm *c)
{
    for (int r = 0; r < E.peer_cap; r++) {
        int done = 1;
        if (MPI_Test(&E.sreq[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done)
            return;
    }
    E.report[0] = (int64_t)E.cur->st.seq;
    E.report[1] = E.cur->st.tag;
    E.report[2] = (int64_t)E.cur->st.count;
    for (int r = 0; r < c->size; r++)
        if (r != c->rank && MPI_Isend(E.report, 3, MPI_INT64_T, r, STALL_TAG, c->ecomm, &E.sreq[r]) != MPI_SUCCESS)
            E.sreq[r] = MPI_REQUEST_NULL;
}

/* so_waiter hook: runs on every poll once the stall warning has passed. */
static void on_stall(so_waiter *w, double elapsed_s, int first)
{
    (void)elapsed_s;
    so_comm *c = w->ctx;
    if (first)
        send_reports(c);
    recv_reports(c, E.cur->st.seq);
}

/* Appends "1,3,4" (the world ranks of the group's ranks r with pick(r) true:
 * what mpirun shows, also in a replica or stage group) to buf; returns how many. */
static int list_ranks(const so_comm *c, int (*pick)(const so_comm *, int), char *buf, size_t len)
{
    int k = 0;
    size_t used = strlen(buf);
    for (int r = 0; r < c->size && used + 16 < len; r++)
        if (pick(c, r))
            used += (size_t)snprintf(buf + used, len - used, "%s%d", k++ ? "," : "", so_world_rank(c->mcomm, r));
    return k;
}

/* Rank r is stuck in our current collective (we are, by definition). */
static int pick_same(const so_comm *c, int r)
{
    return r == c->rank || (E.peer[r].have && E.peer[r].seq == (int64_t)E.cur->st.seq);
}
/* Rank r sent no stall report since our current collective started. */
static int pick_silent(const so_comm *c, int r) { return r != c->rank && !E.peer[r].have; }

/* The timeout message: the collective, who is stuck with us, who never reported. */
static void timeout_message(const so_comm *c, const so_waiter *w, char *msg, size_t len)
{
    snprintf(msg, len, "%s timed out after %.0f s (comm timeout) on rank %d; stuck in it: ranks ", E.what,
             w->timeout_s, so_world_rank(c->mcomm, c->rank));
    list_ranks(c, pick_same, msg, len);
    size_t used = strlen(msg);
    snprintf(msg + used, len - used, "; no stall report from ranks ");
    if (!list_ranks(c, pick_silent, msg, len))
        snprintf(msg + strlen(msg), len - strlen(msg), "(none)");
    for (int r = 0; r < c->size; r++)
        if (r != c->rank && E.peer[r].have && E.peer[r].seq != (int64_t)E.cur->st.seq) {
            used = strlen(msg);
            snprintf(msg + used, len - used, "; rank %d is stuck in #%lld (tag %lld)", so_world_rank(c->mcomm, r),
                     (long long)E.peer[r].seq, (long long)E.peer[r].tag);
        }
    used = strlen(msg);
    snprintf(msg + used, len - used, " -- a rank may have died, hung, or submitted different "
                                     "collectives; aborting the job");
}

/* ---- collectives (communication thread) ------------------------------------------------------ */

/* Runs one collective; any failure aborts the job (the peers would hang in it). */
static void run_coll(so_handle *h)
{
    so_comm *c = h->c;
    pthread_mutex_lock(&E.mu);
    h->state = ST_RUNNING;
    h->st.seq = c->eng_seq++;
    h->st.t_started = so_now();
    pthread_mutex_unlock(&E.mu);
    E.cur = h;
    snprintf(E.what, sizeof E.what, "%s #%llu (tag %d, %zu elements of %s)", h->st.kind,
             (unsigned long long)h->st.seq, h->st.tag, h->st.count, so_dtype_name(h->st.dtype));
    so_waiter w = {h->warn_s, h->timeout_s, E.what, on_stall, c, 0, progress_msgs, NULL};
    int rc = reset_reports(c, h->st.seq);
    if (!rc)
        rc = so_coll_run(c, c->ecomm, &h->call, &w, &E.scratch, &h->st.algo, &h->st.transport);
    if (rc) {
        char msg[1024];
        if (w.timed_out)
            timeout_message(c, &w, msg, sizeof msg);
        else
            snprintf(msg, sizeof msg, "%s failed: %s", E.what, so_errmsg());
        so_comm_abort(c, SO_COMM_EXIT_COMM, msg);
    }
    E.cur = NULL;
    finish(h, 0);
}

/* ---- the thread ------------------------------------------------------------------------------- */

/* Only messages in flight: wait a little (spin budget first, then sleeps
 * that double up to IDLE_MAX_NS), woken early by a submit. mu held. */
static void idle_wait(long *ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += *ns;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&E.work_cv, &E.mu, &ts);
    *ns = *ns * 2 > IDLE_MAX_NS ? IDLE_MAX_NS : *ns * 2;
}

static void *engine_main(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "so-comm", 0, 0, 0); /* perf, top */
#ifdef PR_SET_TIMERSLACK
    /* 1 us timer slack so the 5-200 us backoff sleeps are what they say (wait.c). */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
    long ns = 1000;
    pthread_mutex_lock(&E.mu);
    for (;;) {
        if (E.q_head) {
            so_handle *h = E.q_head;
            E.q_head = h->next;
            if (!E.q_head)
                E.q_tail = NULL;
            pthread_mutex_unlock(&E.mu);
            if (h->kind == OP_THEN)
                run_then(h);
            else
                run_coll(h);
            progress_msgs(NULL);
            pthread_mutex_lock(&E.mu);
            ns = 1000;
        } else if (E.m_head || E.inflight) {
            /* Only messages: spin while they may still arrive soon (a pipeline
             * stage waits on them), as the collectives' waits do, then sleep. */
            pthread_mutex_unlock(&E.mu);
            progress_msgs(NULL);
            int spinning = so_now() - E.last_move < so_coll_spin_s();
            if (spinning && so_coll_yield())
                sched_yield();
            pthread_mutex_lock(&E.mu);
            if (spinning)
                ns = 1000;
            else if (!E.q_head && !E.m_head)
                idle_wait(&ns);
        } else if (E.stop) {
            break;
        } else {
            pthread_cond_wait(&E.work_cv, &E.mu);
        }
    }
    pthread_mutex_unlock(&E.mu);
    return NULL;
}

/* Starts the thread with every signal blocked: signals go to the training thread. mu held. */
static int start_thread(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    E.stop = 0;
    int err = pthread_create(&E.thread, NULL, engine_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err)
        return so_err(SO_ENOMEM, "communication thread: pthread_create failed (%s)", strerror(err));
    E.self = E.thread;
    E.running = 1;
    return 0;
}

/* Queues h (mu held): a continuation's submissions first, messages on their own list. */
static int enqueue(so_handle *h)
{
    int rc = E.running ? 0 : start_thread();
    if (rc)
        return rc;
    h->st.t_queued = so_now();
    h->warn_s = h->c->stall_warning_s;
    h->timeout_s = h->c->timeout_s;
    E.outstanding++;
    if (uses_mpi(h))
        atomic_fetch_add_explicit(h->c->async_busy, 1, memory_order_relaxed);
    if (h->kind == OP_SEND || h->kind == OP_RECV) {
        atomic_fetch_add_explicit(&E.msgs, 1, memory_order_relaxed);
        push_back(&E.m_head, &E.m_tail, h);
    } else if (on_thread() && E.in_cont) {
        push_back(&E.f_head, &E.f_tail, h);
    } else {
        push_back(&E.q_head, &E.q_tail, h);
    }
    pthread_cond_signal(&E.work_cv);
    return 0;
}

/* ---- submitting --------------------------------------------------------------------------------- */

int so_engine_coll(so_comm *c, const so_coll_call *call, int tag, so_handle **out)
{
    *out = NULL;
    int rc = so_coll_check(c, call);
    if (rc)
        return rc;
    pthread_once(&E.once, init_sync);
    pthread_mutex_lock(&E.mu);
    so_handle *h = op_new(c, OP_COLL);
    if (!h) {
        pthread_mutex_unlock(&E.mu);
        return so_err(SO_ENOMEM, "%s: out of memory", so_coll_kind_name(call->kind));
    }
    h->call = *call;
    h->st = (so_op_stat){.group = c, .kind = so_coll_kind_name(call->kind), .dtype = call->dt, .wire = call->wire,
                         .op = call->op, .tag = tag, .count = call->count,
                         .bytes = call->count * so_dtype_size(call->dt)};
    if ((rc = enqueue(h)))
        unref(h), unref(h);
    else
        *out = h;
    pthread_mutex_unlock(&E.mu);
    return rc;
}

static int message(so_comm *c, void *buf, size_t count, so_dtype dt, int peer, int tag, int send, so_handle **out)
{
    *out = NULL;
    size_t esz = so_dtype_size(dt);
    if (!esz)
        return so_err(SO_EINVAL, "message: invalid element type %d", (int)dt);
    if (peer < 0 || peer >= c->size)
        return so_err(SO_EINVAL, "message peer %d out of range (group of %d)", peer, c->size);
    if (tag < 0 || tag > 32767)
        return so_err(SO_EINVAL, "message tag %d outside 0..32767", tag);
    if (count && !buf)
        return so_err(SO_EINVAL, "message of %zu elements with a NULL buffer", count);
    pthread_once(&E.once, init_sync);
    pthread_mutex_lock(&E.mu);
    so_handle *h = op_new(c, send ? OP_SEND : OP_RECV);
    int rc = h ? 0 : so_err(SO_ENOMEM, "message: out of memory");
    if (h) {
        h->buf = buf;
        h->bytes = count * esz;
        h->peer = peer;
        h->st = (so_op_stat){.seq = UINT64_MAX, .group = c, .kind = send ? "send" : "recv", .algo = "mpi", .transport = "mpi",
                             .dtype = dt, .wire = dt, .tag = tag, .count = count, .bytes = count * esz};
        if ((rc = enqueue(h)))
            unref(h), unref(h);
        else
            *out = h;
    }
    pthread_mutex_unlock(&E.mu);
    return rc;
}

int so_comm_isend_to(so_comm *c, const void *buf, size_t count, so_dtype dt, int peer, int tag, so_handle **out)
{
    return message(c, (void *)buf, count, dt, peer, tag, 1, out);
}

int so_comm_irecv_from(so_comm *c, void *buf, size_t count, so_dtype dt, int peer, int tag, so_handle **out)
{
    return message(c, buf, count, dt, peer, tag, 0, out);
}

/* Called by the training thread while the engine is idle (SERIALIZED: the
 * engine makes no MPI call then), so a caller can keep no receive posted
 * across its own step ends and still take a peer's message whenever it comes. */
int so_comm_probe_from(so_comm *c, int peer, int tag, int *arrived)
{
    *arrived = 0;
    if (peer < 0 || peer >= c->size)
        return so_err(SO_EINVAL, "probe: peer %d out of range (group of %d)", peer, c->size);
    int rc = so_comm_check_idle(c);
    if (rc)
        return rc;
    int mrc = MPI_Iprobe(peer, tag, c->ep2p, arrived, MPI_STATUS_IGNORE);
    return mrc == MPI_SUCCESS ? 0 : so_mpi_err(mrc, "MPI_Iprobe");
}

/* ---- handles ---------------------------------------------------------------------------------- */

int so_handle_test(so_handle *h, int *done)
{
    pthread_mutex_lock(&E.mu);
    int rc = 0;
    *done = h->state == ST_DONE;
    if (*done) {
        rc = h->status;
        unref(h);
    }
    pthread_mutex_unlock(&E.mu);
    return rc;
}

/* CLOCK_MONOTONIC (so_now's clock) time `s` seconds from now. */
static struct timespec deadline_in(double s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = ts.tv_nsec + (long long)((s - (double)(long long)s) * 1e9);
    ts.tv_sec += (time_t)s + (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    return ts;
}

int so_handle_wait_until(so_handle *h, double timeout_s, so_op_stat *st)
{
    pthread_mutex_lock(&E.mu);
    if (h->state != ST_DONE && on_thread()) {
        pthread_mutex_unlock(&E.mu);
        return so_err(SO_EINVAL, "so_handle_wait inside a continuation: the thread that would complete the "
                                 "handle is running it (return the handle in *follow instead)");
    }
    struct timespec dl = deadline_in(timeout_s > 0 ? timeout_s : 0);
    while (h->state != ST_DONE)
        if (timeout_s <= 0)
            pthread_cond_wait(&E.done_cv, &E.mu);
        else if (pthread_cond_timedwait(&E.done_cv, &E.mu, &dl) == ETIMEDOUT && h->state != ST_DONE) {
            pthread_mutex_unlock(&E.mu);
            return so_err(SO_ECOMM, "%s still outstanding after %.1f s", h->st.kind, timeout_s);
        }
    int rc = h->status;
    if (st)
        *st = h->st;
    unref(h);
    pthread_mutex_unlock(&E.mu);
    return rc;
}

int so_handle_wait_stat(so_handle *h, so_op_stat *st) { return so_handle_wait_until(h, 0, st); }

int so_handle_wait(so_handle *h) { return so_handle_wait_until(h, 0, NULL); }

int so_handle_wait_all(so_handle **h, size_t n)
{
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        int r = h[i] ? so_handle_wait(h[i]) : 0;
        rc = rc ? rc : r;
    }
    return rc;
}

void so_handle_release(so_handle *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&E.mu);
    unref(h);
    pthread_mutex_unlock(&E.mu);
}

int so_handle_then(so_handle *h, so_then_fn fn, void *arg, so_handle **next)
{
    if (next)
        *next = NULL;
    if (!fn)
        return so_err(SO_EINVAL, "so_handle_then without a function");
    pthread_mutex_lock(&E.mu);
    so_handle *t = op_new(h->c, OP_THEN);
    if (!t) {
        pthread_mutex_unlock(&E.mu);
        return so_err(SO_ENOMEM, "continuation: out of memory");
    }
    t->fn = fn;
    t->arg = arg;
    t->refs = next ? 2 : 1;
    t->st = (so_op_stat){.group = h->c, .kind = "then", .tag = h->st.tag};
    t->st.t_queued = so_now();
    E.outstanding++;
    if (h->state == ST_DONE) { /* already over: run fn before anything not started */
        t->ante_status = h->status;
        if (on_thread() && E.in_cont)
            push_back(&E.f_head, &E.f_tail, t);
        else
            push_front(t);
        pthread_cond_signal(&E.work_cv);
    } else {
        h->cont = t;
    }
    unref(h); /* the caller's reference moves to t */
    if (next)
        *next = t;
    pthread_mutex_unlock(&E.mu);
    return 0;
}

/* ---- the log, draining, stopping ---------------------------------------------------------------- */

size_t so_comm_op_log(uint64_t *cursor, so_op_stat *out, size_t max)
{
    pthread_mutex_lock(&E.mu);
    uint64_t first = *cursor + 1, oldest = E.logged > LOG_CAP ? E.logged - LOG_CAP + 1 : 1;
    if (first < oldest)
        first = oldest;
    size_t n = 0;
    for (uint64_t id = first; id <= E.logged && n < max; id++)
        out[n++] = E.log[(id - 1) % LOG_CAP];
    if (n)
        *cursor = out[n - 1].id;
    pthread_mutex_unlock(&E.mu);
    return n;
}

void so_engine_drain(void)
{
    pthread_once(&E.once, init_sync);
    pthread_mutex_lock(&E.mu);
    while (E.outstanding > 0 && !on_thread())
        pthread_cond_wait(&E.done_cv, &E.mu);
    pthread_mutex_unlock(&E.mu);
}

void so_engine_stop(void)
{
    so_engine_drain();
    pthread_mutex_lock(&E.mu);
    if (!E.running) {
        pthread_mutex_unlock(&E.mu);
        return;
    }
    E.stop = 1;
    pthread_cond_signal(&E.work_cv);
    pthread_mutex_unlock(&E.mu);
    pthread_join(E.thread, NULL);
    pthread_mutex_lock(&E.mu);
    E.running = 0;
    while (E.free_list) {
        so_handle *h = E.free_list;
        E.free_list = h->next;
        free(h);
    }
    pthread_mutex_unlock(&E.mu);
    for (int r = 0; r < E.peer_cap; r++) /* reports nobody received: tiny eager sends */
        if (E.sreq[r] != MPI_REQUEST_NULL && MPI_Request_free(&E.sreq[r]) != MPI_SUCCESS)
            so_log(SO_LOG_WARN, "communication thread: MPI_Request_free of a stall report failed");
    free(E.peer);
    free(E.sreq);
    E.peer = NULL;
    E.sreq = NULL;
    E.peer_cap = 0;
    so_scratch_free(&E.scratch);
}
