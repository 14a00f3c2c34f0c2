/* A group's point-to-point over scaleout's own TCP connections, for the
 * peers on other hosts: pipeline stages send activations one way and their
 * diffs the other at the same time, which Open MPI's TCP transport does at
 * about half the link (docs/PERFORMANCE.md). One connection per direction
 * and pair; a progress thread of its own (so-comm-tcp) moves every message,
 * so transfers go on while the training thread computes. */
#include "comm_env.h"
#include "tcp_internal.h"

#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/timer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define POLL_SLICE_MS 100

/* On the wire before every message. */
typedef struct {
    uint32_t tag, pad;
    uint64_t bytes;
} msg_head;

/* A posted send or receive, or a message that arrived before its receive. */
struct so_tcp_msg {
    struct so_tcp_msg *next;
    char *buf;
    size_t bytes, moved;  /* payload size, bytes sent or received so far */
    size_t head_moved;    /* send: header bytes written */
    int peer, tag;
    int unexpected;       /* buf is ours (malloc), no receive was posted yet */
    int arrived;          /* unexpected: every byte is in */
    struct so_tcp_msg *user; /* unexpected: the receive that claimed it while it was arriving */
    _Atomic int state;    /* 0 pending, 1 complete, -1 failed */
};

typedef struct {
    so_tcp_msg *head, *tail;
} msg_queue;

/* What arrives on one peer's connection: a header, then the payload into cur. */
typedef struct {
    msg_head head;
    size_t head_got;
    so_tcp_msg *cur;
} rx_state;

struct so_tcp_mesh {
    int n, me;
    int *out, *in;          /* [n] connections to / from each peer; -1: that peer is on MPI */
    msg_queue *sends;       /* [n] posted sends, in order */
    msg_queue *posted;      /* [n] posted receives not yet matched */
    msg_queue *early;       /* [n] unexpected messages, in arrival order */
    rx_state *rx;           /* [n] */
    pthread_mutex_t mu;     /* the queues; the thread does I/O outside it */
    int wake[2];            /* a pipe: a new send wakes the thread's poll */
    pthread_t thread;
    int running;            /* the thread was started */
    atomic_int stop, failed;
    char why[160];          /* the failure, for every later request */
};

/* ---- queues ---------------------------------------------------------------------- */

static void q_push(msg_queue *q, so_tcp_msg *m)
{
    m->next = NULL;
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
}

/* Removes and returns the first message of q from peer with tag (claimable:
 * an unexpected message no receive claimed yet), or NULL. */
static so_tcp_msg *q_take(msg_queue *q, int tag)
{
    for (so_tcp_msg **p = &q->head, *prev = NULL; *p; prev = *p, p = &(*p)->next) {
        so_tcp_msg *m = *p;
        if (m->tag != tag || m->user)
            continue;
        *p = m->next;
        if (q->tail == m)
            q->tail = prev;
        return m;
    }
    return NULL;
}

static void q_remove(msg_queue *q, so_tcp_msg *m)
{
    for (so_tcp_msg **p = &q->head, *prev = NULL; *p; prev = *p, p = &(*p)->next)
        if (*p == m) {
            *p = m->next;
            if (q->tail == m)
                q->tail = prev;
            return;
        }
}

static void finish(so_tcp_msg *m, int state)
{
    atomic_store_explicit(&m->state, state, memory_order_release);
}

/* ---- the progress thread ------------------------------------------------------------- */

/* Every pending request fails (a connection broke): nobody waits forever. */
static void fail_all(so_tcp_mesh *t, const char *why, int peer)
{
    pthread_mutex_lock(&t->mu);
    if (!atomic_load(&t->failed))
        snprintf(t->why, sizeof t->why, "tcp point-to-point with rank %d: %s", peer, why);
    atomic_store(&t->failed, 1);
    for (int j = 0; j < t->n; j++) {
        for (so_tcp_msg *m = t->sends[j].head; m; m = m->next)
            finish(m, -1);
        for (so_tcp_msg *m = t->posted[j].head; m; m = m->next)
            finish(m, -1);
        for (so_tcp_msg *m = t->early[j].head; m; m = m->next)
            if (m->user)
                finish(m->user, -1);
        if (t->rx[j].cur && !t->rx[j].cur->unexpected)
            finish(t->rx[j].cur, -1);
        t->sends[j].head = t->sends[j].tail = t->posted[j].head = t->posted[j].tail = NULL;
    }
    pthread_mutex_unlock(&t->mu);
}

/* Writes what the socket takes of peer j's first send; -1 on a broken connection. */
static int push_send(so_tcp_mesh *t, int j)
{
    pthread_mutex_lock(&t->mu);
    so_tcp_msg *m = t->sends[j].head;
    pthread_mutex_unlock(&t->mu);
    if (!m)
        return 0;
    msg_head h = {(uint32_t)m->tag, 0, m->bytes};
    const char *p = m->head_moved < sizeof h ? (const char *)&h + m->head_moved : m->buf + m->moved;
    size_t len = m->head_moved < sizeof h ? sizeof h - m->head_moved : m->bytes - m->moved;
    if (len > TCP_IO_MAX)
        len = TCP_IO_MAX;
    ssize_t k = len ? send(t->out[j], p, len, MSG_NOSIGNAL | MSG_DONTWAIT) : 0;
    if (k < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    if (m->head_moved < sizeof h)
        m->head_moved += (size_t)k;
    else
        m->moved += (size_t)k;
    if (m->head_moved == sizeof h && m->moved == m->bytes) {
        pthread_mutex_lock(&t->mu);
        t->sends[j].head = m->next;
        if (!m->next)
            t->sends[j].tail = NULL;
        pthread_mutex_unlock(&t->mu);
        finish(m, 1);
    }
    return 0;
}

/* A header came in from j: the message goes to the first receive posted for its
 * tag, or into a buffer of ours until one is. */
static int match_incoming(so_tcp_mesh *t, int j)
{
    rx_state *r = &t->rx[j];
    pthread_mutex_lock(&t->mu);
    so_tcp_msg *m = q_take(&t->posted[j], (int)r->head.tag);
    if (m && m->bytes != r->head.bytes) {
        pthread_mutex_unlock(&t->mu);
        finish(m, -1);
        return -1;
    }
    if (!m && (m = calloc(1, sizeof *m)) != NULL) {
        m->buf = malloc(r->head.bytes ? r->head.bytes : 1);
        m->bytes = r->head.bytes, m->peer = j, m->tag = (int)r->head.tag, m->unexpected = 1;
        if (!m->buf) {
            free(m);
            m = NULL;
        } else {
            q_push(&t->early[j], m);
        }
    }
    pthread_mutex_unlock(&t->mu);
    r->cur = m;
    return m ? 0 : -1;
}

/* The payload is in: complete the receive, or mark the early message arrived
 * (and hand it to a receive that claimed it meanwhile). */
static void deliver(so_tcp_mesh *t, int j)
{
    so_tcp_msg *m = t->rx[j].cur;
    t->rx[j].cur = NULL;
    t->rx[j].head_got = 0;
    if (!m->unexpected) {
        finish(m, 1);
        return;
    }
    pthread_mutex_lock(&t->mu);
    m->arrived = 1;
    so_tcp_msg *u = m->user;
    if (u)
        q_remove(&t->early[j], m);
    pthread_mutex_unlock(&t->mu);
    if (u) {
        memcpy(u->buf, m->buf, m->bytes);
        finish(u, 1);
        free(m->buf);
        free(m);
    }
}

/* Reads what peer j's connection has; -1 on a broken connection. */
static int pull_recv(so_tcp_mesh *t, int j)
{
    rx_state *r = &t->rx[j];
    char *p;
    size_t len;
    if (!r->cur)
        p = (char *)&r->head + r->head_got, len = sizeof r->head - r->head_got;
    else
        p = r->cur->buf + r->cur->moved, len = r->cur->bytes - r->cur->moved;
    if (len > TCP_IO_MAX)
        len = TCP_IO_MAX;
    ssize_t k = len ? recv(t->in[j], p, len, MSG_DONTWAIT) : 0;
    if (k == 0 && len)
        return -1;
    if (k < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    if (!r->cur) {
        r->head_got += (size_t)k;
        if (r->head_got < sizeof r->head)
            return 0;
        if (match_incoming(t, j))
            return -1;
    } else {
        r->cur->moved += (size_t)k;
    }
    if (r->cur->moved == r->cur->bytes)
        deliver(t, j);
    return 0;
}

static void drain_wake(int fd)
{
    char b[64];
    while (read(fd, b, sizeof b) > 0) {
    }
}

static void *progress(void *arg)
{
    so_tcp_mesh *t = arg;
    struct pollfd *p = calloc((size_t)(2 * t->n + 1), sizeof *p);
    int *who = calloc((size_t)(2 * t->n + 1), sizeof *who);
    if (!p || !who) {
        fail_all(t, "out of memory", t->me);
        free(p), free(who);
        return NULL;
    }
    while (!atomic_load(&t->stop) && !atomic_load(&t->failed)) {
        int np = 0;
        p[np++] = (struct pollfd){t->wake[0], POLLIN, 0};
        pthread_mutex_lock(&t->mu);
        for (int j = 0; j < t->n; j++) {
            if (t->in[j] >= 0)
                who[np] = j, p[np++] = (struct pollfd){t->in[j], POLLIN, 0};
            if (t->out[j] >= 0 && t->sends[j].head)
                who[np] = -1 - j, p[np++] = (struct pollfd){t->out[j], POLLOUT, 0};
        }
        pthread_mutex_unlock(&t->mu);
        if (poll(p, (nfds_t)np, POLL_SLICE_MS) <= 0)
            continue;
        if (p[0].revents)
            drain_wake(t->wake[0]);
        for (int i = 1; i < np && !atomic_load(&t->failed); i++) {
            if (!p[i].revents)
                continue;
            int j = who[i] >= 0 ? who[i] : -1 - who[i];
            if ((who[i] >= 0 ? pull_recv(t, j) : push_send(t, j)) != 0)
                fail_all(t, errno ? strerror(errno) : "the connection was closed or a size did not match", j);
        }
    }
    free(p), free(who);
    return NULL;
}

/* ---- set-up -------------------------------------------------------------------------- */

/* Calls every peer on another host (forced: every peer), then answers theirs. */
static int connect_mesh(so_tcp_mesh *t, const tcp_card *cards, int lfd, int forced, double deadline)
{
    uint64_t token = tcp_job_token(cards, t->n);
    tcp_hello hello = {HELLO_MAGIC, (uint32_t)t->me, token};
    int expected = 0;
    for (int j = 0; j < t->n; j++) {
        if (j == t->me || (!forced && tcp_same_host(&cards[j], &cards[t->me])))
            continue;
        expected++;
        if (cards[j].port == 0 || (t->out[j] = tcp_call(&cards[j], &cards[t->me], &hello, deadline)) < 0) {
            so_log(SO_LOG_WARN, "tcp point-to-point: cannot reach rank %d at any of its %u addresses", j,
                   cards[j].naddr);
            return -1;
        }
    }
    double until = deadline;
    for (int j = 0; j < t->n; j++)
        if (t->out[j] >= 0 && tcp_accept_deadline(&cards[j], deadline) < until)
            until = tcp_accept_deadline(&cards[j], deadline);
    for (int got = 0; got < expected; got++) {
        int from = -1, fd = tcp_answer(lfd, -1, token, until, &from);
        if (fd < 0 || from < 0 || from >= t->n || t->out[from] < 0 || t->in[from] >= 0) {
            if (fd >= 0)
                close(fd);
            so_log(SO_LOG_WARN, "tcp point-to-point: %d of %d peers called", got, expected);
            return -1;
        }
        t->in[from] = fd;
    }
    return 0;
}

static so_tcp_mesh *mesh_alloc(int n, int me)
{
    so_tcp_mesh *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->n = n, t->me = me;
    t->wake[0] = t->wake[1] = -1;
    t->out = malloc((size_t)n * sizeof *t->out);
    t->in = malloc((size_t)n * sizeof *t->in);
    t->sends = calloc((size_t)n, sizeof *t->sends);
    t->posted = calloc((size_t)n, sizeof *t->posted);
    t->early = calloc((size_t)n, sizeof *t->early);
    t->rx = calloc((size_t)n, sizeof *t->rx);
    if (!t->out || !t->in || !t->sends || !t->posted || !t->early || !t->rx) {
        so_tcp_mesh_free(t);
        return NULL;
    }
    for (int j = 0; j < n; j++)
        t->out[j] = t->in[j] = -1;
    pthread_mutex_init(&t->mu, NULL);
    return t;
}

static int start_thread(so_tcp_mesh *t)
{
    if (pipe2(t->wake, O_NONBLOCK | O_CLOEXEC) != 0)
        return -1;
    if (pthread_create(&t->thread, NULL, progress, t) != 0)
        return -1;
    t->running = 1;
    pthread_setname_np(t->thread, "so-comm-tcp");
    return 0;
}

int so_tcp_mesh_open(MPI_Comm comm, so_waiter *w, so_tcp_mesh **out)
{
    int n, me, rc, ok = 0, all_ok = 0, forced = so_comm_env_get()->coll_tcp == 1;
    *out = NULL;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    so_tcp_mesh *t = mesh_alloc(n, me);
    tcp_card mine = {0}, *cards = calloc((size_t)n, sizeof *cards);
    if (!t || !cards) { /* the job aborts on this error: the others' exchange is not met */
        so_tcp_mesh_free(t);
        free(cards);
        return so_err(SO_ENOMEM, "tcp point-to-point: out of memory");
    }
    int lfd = tcp_listen_any(&mine.port);
    tcp_my_addrs(&mine);
    if ((rc = tcp_exchange_cards(comm, &mine, cards, w)) == 0 && lfd >= 0) {
        double deadline = so_now() + (w && w->timeout_s > 0 ? w->timeout_s : 60.0);
        ok = connect_mesh(t, cards, lfd, forced, deadline) == 0 && start_thread(t) == 0;
    }
    if (lfd >= 0)
        close(lfd);
    free(cards);
    if (!rc)
        rc = tcp_agree(comm, ok, w, &all_ok);
    if (!rc && !all_ok)
        so_log(SO_LOG_WARN, "tcp point-to-point: not every rank could connect; messages stay on MPI");
    if (rc || !all_ok) {
        so_tcp_mesh_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void so_tcp_mesh_free(so_tcp_mesh *t)
{
    if (!t)
        return;
    if (t->running) {
        atomic_store(&t->stop, 1);
        (void)!write(t->wake[1], "x", 1);
        pthread_join(t->thread, NULL);
    }
    for (int j = 0; t->out && j < t->n; j++) {
        if (t->out[j] >= 0)
            close(t->out[j]);
        if (t->in[j] >= 0)
            close(t->in[j]);
        for (so_tcp_msg *m = t->early[j].head, *next; m; m = next) {
            next = m->next;
            free(m->buf);
            free(m);
        }
    }
    for (int k = 0; k < 2; k++)
        if (t->wake[k] >= 0)
            close(t->wake[k]);
    if (t->out)
        pthread_mutex_destroy(&t->mu);
    free(t->out), free(t->in), free(t->sends), free(t->posted), free(t->early), free(t->rx);
    free(t);
}

int so_tcp_mesh_has(const so_tcp_mesh *t, int peer) { return t && t->out[peer] >= 0; }

/* A receive: an early message of that tag is taken (copied now if it is all
 * in, else claimed for the thread to hand over); otherwise it waits in posted. */
static int claim_or_post(so_tcp_mesh *t, so_tcp_msg *m)
{
    so_tcp_msg *e = t->early[m->peer].head;
    while (e && (e->tag != m->tag || e->user))
        e = e->next;
    if (!e) {
        q_push(&t->posted[m->peer], m);
        return 0;
    }
    if (e->bytes != m->bytes)
        return so_err(SO_EINVAL, "tcp point-to-point: rank %d sent %zu bytes with tag %d, the receive expects %zu",
                      m->peer, e->bytes, m->tag, m->bytes);
    if (!e->arrived) {
        e->user = m;
        return 0;
    }
    q_remove(&t->early[m->peer], e);
    memcpy(m->buf, e->buf, e->bytes);
    free(e->buf);
    free(e);
    finish(m, 1);
    return 0;
}

int so_tcp_mesh_post(so_tcp_mesh *t, void *buf, size_t bytes, int peer, int tag, int sending, so_tcp_msg **out)
{
    *out = NULL;
    so_tcp_msg *m = calloc(1, sizeof *m);
    if (!m)
        return so_err(SO_ENOMEM, "tcp point-to-point: out of memory");
    m->buf = buf, m->bytes = bytes, m->peer = peer, m->tag = tag;
    int rc = 0;
    pthread_mutex_lock(&t->mu);
    if (atomic_load(&t->failed))
        rc = so_err(SO_ECOMM, "%s", t->why);
    else if (sending)
        q_push(&t->sends[peer], m);
    else
        rc = claim_or_post(t, m);
    pthread_mutex_unlock(&t->mu);
    if (rc) {
        free(m);
        return rc;
    }
    if (sending)
        (void)!write(t->wake[1], "x", 1);
    *out = m;
    return 0;
}

int so_tcp_msg_test(so_tcp_mesh *t, so_tcp_msg *m, int *done)
{
    int s = atomic_load_explicit(&m->state, memory_order_acquire);
    *done = s == 1;
    return s < 0 ? so_err(SO_ECOMM, "%s", t->why[0] ? t->why : "tcp point-to-point failed") : 0;
}

typedef struct {
    so_tcp_mesh *mesh;
    so_tcp_msg *msg;
} msg_ref;

static int test_ref(void *ctx, int *done)
{
    msg_ref *r = ctx;
    return so_tcp_msg_test(r->mesh, r->msg, done);
}

int so_tcp_msg_wait(so_tcp_mesh *t, so_tcp_msg *m, so_waiter *w)
{
    msg_ref r = {t, m};
    return so_waiter_poll(w, test_ref, &r);
}
