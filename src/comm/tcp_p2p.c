/* A group's point-to-point over scaleout's own TCP connections, for the
 * peers on other hosts: pipeline stages send activations one way and their
 * diffs the other at the same time, which Open MPI's TCP transport does at
 * about half the link (docs/PERFORMANCE.md). One connection per direction
 * and pair, made and authenticated by tcp_setup; a progress thread of its
 * own (so-comm-tcp) moves every message, so transfers go on while the
 * training thread computes.
 *
 * Every message travels behind a header (tcp_wire.h: magic, tag, bytes).
 * The length in it decides nothing until tcp_msg_admit allowed it: it must
 * equal the posted receive's size, and a message that comes before its
 * receive is buffered only within EARLY_ROOM bytes per peer; a larger one
 * waits in the socket until its receive is posted. Anything else ends the
 * mesh with one message naming the peer and the violation. */
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
#include <sys/uio.h>
#include <unistd.h>

#define POLL_SLICE_MS 100
#define EARLY_ROOM ((uint64_t)64 << 20) /* bytes of messages from one peer buffered before their receive */
/* Polled (the collectives' transport): none. An algorithm posts its receives
 * as it goes, so an early message waits in the socket for a moment instead of
 * costing an allocation and two more copies. */
#define EARLY_ROOM_POLLED 0

/* A posted send or receive, or a message that arrived before its receive. */
struct so_tcp_msg {
    struct so_tcp_msg *next;
    char *buf;
    size_t bytes, moved;  /* payload size, bytes sent or received so far */
    uint8_t head[TCP_HEAD_BYTES]; /* send: the header */
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
    uint8_t hb[TCP_HEAD_BYTES]; /* the header's bytes */
    size_t head_got;
    tcp_msg_head head;          /* parsed */
    int waiting;                /* admitted as TCP_RX_WAIT: the payload stays in the socket */
    so_tcp_msg *cur;
} rx_state;

struct so_tcp_mesh {
    tcp_links links;        /* out[j], in[j]: connections to / from peer j, -1: that peer is on MPI */
    int n, me;
    msg_queue *sends;       /* [n] posted sends, in order */
    msg_queue *posted;      /* [n] posted receives not yet matched */
    msg_queue *early;       /* [n] unexpected messages, in arrival order */
    uint64_t *early_bytes;  /* [n] their payload bytes (<= early_room) */
    uint64_t early_room;    /* EARLY_ROOM, or EARLY_ROOM_POLLED */
    rx_state *rx;           /* [n] the thread's own */
    pthread_mutex_t mu;     /* the queues and early_bytes; the thread does I/O outside it */
    int wake[2];            /* a pipe: a new send, or a receive a waiting message needs, wakes the poll */
    pthread_t thread;
    int running;            /* the thread was started (else the owner calls so_tcp_mesh_progress) */
    struct pollfd *poll_fds; /* [2n + 1] the poll set of whoever progresses the mesh */
    int *poll_who;          /* [2n + 1] peer j of each entry: j incoming, -1 - j outgoing */
    int garbage;            /* test only: the first header sent is not one (tcp_test_garbage) */
    atomic_int stop, failed, nwaiting;
    char why[320];          /* the failure, for every later request */
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

/* The first receive posted in q for tag, left in place, or NULL. */
static so_tcp_msg *q_find(const msg_queue *q, int tag)
{
    so_tcp_msg *m = q->head;
    while (m && m->tag != tag)
        m = m->next;
    return m;
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

/* Every pending request fails (a connection broke, a peer broke the protocol):
 * nobody waits forever, and every later call says why. mu held. */
static void fail_locked(so_tcp_mesh *t, const char *why)
{
    if (!atomic_load(&t->failed))
        snprintf(t->why, sizeof t->why, "%s", why);
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
}

static void fail_all(so_tcp_mesh *t, const char *why)
{
    pthread_mutex_lock(&t->mu);
    fail_locked(t, why);
    pthread_mutex_unlock(&t->mu);
}

/* The connection with peer j broke (err: errno, 0 when the peer closed it);
 * the reason into why; -1. */
static int peer_broke(so_tcp_mesh *t, int j, int incoming, int err, char *why, size_t len)
{
    char peer[64];
    tcp_peer_name(&t->links, j, incoming, peer, sizeof peer);
    if (!err)
        snprintf(why, len, "tcp: connection to %s closed by peer", peer);
    else
        snprintf(why, len, "tcp: connection %s %s broke: %s", incoming ? "from" : "to", peer, strerror(err));
    return -1;
}

/* "tcp: rank 3 (10.0.0.2:40123) sent a message of 2147483648 bytes for a
 * receive of 4096 (tag 7): protocol violation", into why; -1. */
static int size_violation(so_tcp_mesh *t, int j, uint64_t got, size_t want, int tag, char *why, size_t len)
{
    char peer[64];
    tcp_peer_name(&t->links, j, 1, peer, sizeof peer);
    snprintf(why, len, "tcp: %s sent a message of %llu bytes for a receive of %zu (tag %d): protocol violation",
             peer, (unsigned long long)got, want, tag);
    return -1;
}

/* Writes what the socket takes of peer j's sends, in order (header and
 * payload of each in one call), until the socket is full or none is left;
 * -1 on a broken connection. */
static int push_send(so_tcp_mesh *t, int j, char *why, size_t wl)
{
    for (;;) {
        pthread_mutex_lock(&t->mu);
        so_tcp_msg *m = t->sends[j].head;
        pthread_mutex_unlock(&t->mu);
        if (!m)
            return 0;
        size_t hl = TCP_HEAD_BYTES - m->head_moved, pl = m->bytes - m->moved;
        struct iovec iov[2] = {{m->head + m->head_moved, hl}, {m->buf + m->moved, pl < TCP_IO_MAX ? pl : TCP_IO_MAX}};
        struct msghdr mh = {.msg_iov = hl ? iov : iov + 1, .msg_iovlen = hl ? 2 : 1};
        ssize_t k = sendmsg(t->links.out[j], &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : peer_broke(t, j, 0, errno, why, wl);
        size_t h = (size_t)k < hl ? (size_t)k : hl;
        m->head_moved += h;
        m->moved += (size_t)k - h;
        if (m->head_moved < TCP_HEAD_BYTES || m->moved < m->bytes)
            return 0; /* the socket is full (or the next slice waits for the next round) */
        pthread_mutex_lock(&t->mu);
        t->sends[j].head = m->next;
        if (!m->next)
            t->sends[j].tail = NULL;
        pthread_mutex_unlock(&t->mu);
        finish(m, 1);
    }
}

/* A message whose header came in from j, as tcp_msg_admit decides: into its
 * posted receive, into a buffer of ours within early_room, or left waiting
 * in the socket (r->waiting) until its receive is posted. -1 (why) when the
 * peer broke the protocol or a buffer could not be had. */
static int admit_incoming(so_tcp_mesh *t, int j, char *why, size_t wl)
{
    rx_state *r = &t->rx[j];
    tcp_rx_action act;
    int rc = 0, tag = (int)r->head.tag;
    pthread_mutex_lock(&t->mu);
    so_tcp_msg *m = q_find(&t->posted[j], tag);
    if (tcp_msg_admit(&r->head, m ? (int64_t)m->bytes : -1, t->early_room - t->early_bytes[j], &act) != TCP_OK) {
        rc = size_violation(t, j, r->head.bytes, m->bytes, tag, why, wl);
    } else if (act == TCP_RX_RECEIVE) {
        q_remove(&t->posted[j], m);
        r->cur = m;
    } else if (act == TCP_RX_BUFFER) {
        so_tcp_msg *e = calloc(1, sizeof *e);
        char *b = e ? malloc(r->head.bytes ? (size_t)r->head.bytes : 1) : NULL;
        if (!b) {
            free(e);
            snprintf(why, wl, "tcp point-to-point: out of memory for a message of %llu bytes from rank %d",
                     (unsigned long long)r->head.bytes, t->links.world[j]);
            rc = -1;
        } else {
            e->buf = b, e->bytes = (size_t)r->head.bytes, e->peer = j, e->tag = tag, e->unexpected = 1;
            q_push(&t->early[j], e);
            t->early_bytes[j] += e->bytes;
            r->cur = e;
        }
    } else {
        r->waiting = 1;
        atomic_fetch_add(&t->nwaiting, 1);
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
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
    if (u) {
        q_remove(&t->early[j], m);
        t->early_bytes[j] -= m->bytes;
    }
    pthread_mutex_unlock(&t->mu);
    if (u) {
        memcpy(u->buf, m->buf, m->bytes);
        finish(u, 1);
        free(m->buf);
        free(m);
    }
}

/* A header is in: parse it, admit it; -1 (why) on a violation. */
static int header_in(so_tcp_mesh *t, int j, char *why, size_t wl)
{
    rx_state *r = &t->rx[j];
    tcp_verdict v = tcp_msg_head_parse(r->hb, &r->head);
    if (v != TCP_OK) {
        char peer[64];
        tcp_peer_name(&t->links, j, 1, peer, sizeof peer);
        snprintf(why, wl, "tcp: %s sent %s instead of a message header: protocol violation", peer,
                 v == TCP_BAD_TAG ? "a tag out of range" : tcp_verdict_str(v));
        return -1;
    }
    if (admit_incoming(t, j, why, wl))
        return -1;
    if (r->cur && r->cur->moved == r->cur->bytes) /* an empty message */
        deliver(t, j);
    return 0;
}

/* Reads what peer j's connection has; -1 (why) on a broken connection or a
 * violation. After a header it reads on into the payload at once, after a
 * whole payload into the next header. */
static int pull_recv(so_tcp_mesh *t, int j, char *why, size_t wl)
{
    rx_state *r = &t->rx[j];
    for (;;) {
        int head = !r->cur;
        if (head && r->waiting)
            return 0;
        char *p = head ? (char *)r->hb + r->head_got : r->cur->buf + r->cur->moved;
        size_t len = head ? TCP_HEAD_BYTES - r->head_got : r->cur->bytes - r->cur->moved;
        ssize_t k = recv(t->links.in[j], p, len < TCP_IO_MAX ? len : TCP_IO_MAX, MSG_DONTWAIT);
        if (k == 0)
            return peer_broke(t, j, 1, 0, why, wl);
        if (k < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : peer_broke(t, j, 1, errno, why, wl);
        if (!head) {
            if ((r->cur->moved += (size_t)k) < r->cur->bytes)
                return 0;
            deliver(t, j); /* and read on: the next header may be in */
            continue;
        }
        if ((r->head_got += (size_t)k) < TCP_HEAD_BYTES)
            return 0;
        if (header_in(t, j, why, wl))
            return -1;
        if (!r->cur) /* delivered (empty), or waiting for its receive */
            return 0;
    }
}

/* Messages left waiting in their socket: admitted again (a receive may be posted now). */
static int retry_waiting(so_tcp_mesh *t, char *why, size_t wl)
{
    for (int j = 0; j < t->n; j++) {
        if (!t->rx[j].waiting)
            continue;
        t->rx[j].waiting = 0;
        atomic_fetch_sub(&t->nwaiting, 1);
        if (admit_incoming(t, j, why, wl))
            return -1;
        if (t->rx[j].cur && t->rx[j].cur->moved == t->rx[j].cur->bytes)
            deliver(t, j);
    }
    return 0;
}

static void drain_wake(int fd)
{
    char b[64];
    while (read(fd, b, sizeof b) > 0) {
    }
}

/* The poll set: every incoming connection not left waiting, every outgoing one with a send. */
static int poll_set(so_tcp_mesh *t, struct pollfd *p, int *who)
{
    int np = 0;
    p[np++] = (struct pollfd){t->wake[0], POLLIN, 0};
    pthread_mutex_lock(&t->mu);
    for (int j = 0; j < t->n; j++) {
        if (t->links.in[j] >= 0 && !t->rx[j].waiting)
            who[np] = j, p[np++] = (struct pollfd){t->links.in[j], POLLIN, 0};
        if (t->links.out[j] >= 0 && t->sends[j].head)
            who[np] = -1 - j, p[np++] = (struct pollfd){t->links.out[j], POLLOUT, 0};
    }
    pthread_mutex_unlock(&t->mu);
    return np;
}

/* One round: retries messages left waiting, polls every connection that has
 * work for up to timeout_ms, moves what is ready. A failure is recorded on
 * the mesh (fail_all) for every request and later call; -1 then. */
static int mesh_round(so_tcp_mesh *t, struct pollfd *p, int *who, int timeout_ms)
{
    char why[sizeof t->why];
    if (atomic_load(&t->nwaiting) && retry_waiting(t, why, sizeof why)) {
        fail_all(t, why);
        return -1;
    }
    int np = poll_set(t, p, who);
    if (poll(p, (nfds_t)np, timeout_ms) <= 0)
        return 0;
    if (p[0].revents)
        drain_wake(t->wake[0]);
    for (int i = 1; i < np && !atomic_load(&t->failed); i++) {
        if (!p[i].revents)
            continue;
        int j = who[i] >= 0 ? who[i] : -1 - who[i];
        if ((who[i] >= 0 ? pull_recv(t, j, why, sizeof why) : push_send(t, j, why, sizeof why)) != 0)
            fail_all(t, why);
    }
    return atomic_load(&t->failed) ? -1 : 0;
}

static void *progress(void *arg)
{
    so_tcp_mesh *t = arg;
    while (!atomic_load(&t->stop) && !atomic_load(&t->failed))
        mesh_round(t, t->poll_fds, t->poll_who, POLL_SLICE_MS);
    return NULL;
}

int so_tcp_mesh_progress(so_tcp_mesh *t, int timeout_ms)
{
    if (!atomic_load(&t->failed))
        mesh_round(t, t->poll_fds, t->poll_who, timeout_ms);
    return atomic_load(&t->failed) ? so_err(SO_ECOMM, "%s", t->why) : 0;
}

/* ---- set-up -------------------------------------------------------------------------- */

/* Every peer on another host (SCALEOUT_COLL_TCP=1: every peer), both ways. */
static void mesh_plan(const tcp_card *cards, int n, int me, unsigned char *call, unsigned char *expect)
{
    int forced = so_comm_env_get()->coll_tcp == 1;
    for (int j = 0; j < n; j++)
        call[j] = expect[j] = j != me && (forced || !tcp_same_host(&cards[j], &cards[me]));
}

static int mesh_alloc(so_tcp_mesh *t, int threaded)
{
    int n = t->links.n;
    t->n = n, t->me = t->links.me;
    t->early_room = threaded ? EARLY_ROOM : EARLY_ROOM_POLLED;
    t->sends = calloc((size_t)n, sizeof *t->sends);
    t->posted = calloc((size_t)n, sizeof *t->posted);
    t->early = calloc((size_t)n, sizeof *t->early);
    t->early_bytes = calloc((size_t)n, sizeof *t->early_bytes);
    t->rx = calloc((size_t)n, sizeof *t->rx);
    t->poll_fds = calloc((size_t)(2 * n + 1), sizeof *t->poll_fds);
    t->poll_who = calloc((size_t)(2 * n + 1), sizeof *t->poll_who);
    if (!t->sends || !t->posted || !t->early || !t->early_bytes || !t->rx || !t->poll_fds || !t->poll_who)
        return so_err(SO_ENOMEM, "tcp point-to-point: out of memory");
    pthread_mutex_init(&t->mu, NULL);
    if (pipe2(t->wake, O_NONBLOCK | O_CLOEXEC) != 0)
        return so_err(SO_ECOMM, "tcp point-to-point: pipe: %s", strerror(errno));
    if (!threaded)
        return 0;
    if (pthread_create(&t->thread, NULL, progress, t) != 0)
        return so_err(SO_ECOMM, "tcp point-to-point: cannot start its thread");
    t->running = 1;
    pthread_setname_np(t->thread, "so-comm-tcp");
    return 0;
}

/* Every other member, both ways: the collectives' transport (tp_tcp.c). */
static void all_plan(const tcp_card *cards, int n, int me, unsigned char *call, unsigned char *expect)
{
    (void)cards;
    for (int j = 0; j < n; j++)
        call[j] = expect[j] = j != me;
}

static int mesh_open(MPI_Comm comm, so_waiter *w, uint16_t kind, const char *name, tcp_plan_fn *plan,
                     int threaded, so_tcp_mesh **out)
{
    *out = NULL;
    so_tcp_mesh *t = calloc(1, sizeof *t);
    if (!t)
        return so_err(SO_ENOMEM, "%s: out of memory", name);
    t->wake[0] = t->wake[1] = -1;
    int all_ok = 0, rc = tcp_setup(comm, w, kind, name, plan, &t->links, &all_ok);
    if (!rc && all_ok) {
        t->garbage = tcp_test_garbage();
        rc = mesh_alloc(t, threaded); /* a failure here is the job's end: the others' mesh is up */
    }
    if (rc || !all_ok) {
        so_tcp_mesh_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

int so_tcp_mesh_open(MPI_Comm comm, so_waiter *w, so_tcp_mesh **out)
{
    return mesh_open(comm, w, TCP_KIND_MESH, "tcp point-to-point", mesh_plan, 1, out);
}

int so_tcp_mesh_open_polled(MPI_Comm comm, so_waiter *w, so_tcp_mesh **out)
{
    return mesh_open(comm, w, TCP_KIND_RING, "tcp transport", all_plan, 0, out);
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
    for (int j = 0; t->early && j < t->n; j++)
        for (so_tcp_msg *m = t->early[j].head, *next; m; m = next) {
            next = m->next;
            free(m->buf);
            free(m);
        }
    for (int k = 0; k < 2; k++)
        if (t->wake[k] >= 0)
            close(t->wake[k]);
    if (t->rx)
        pthread_mutex_destroy(&t->mu);
    tcp_links_close(&t->links);
    free(t->sends), free(t->posted), free(t->early), free(t->early_bytes), free(t->rx);
    free(t->poll_fds), free(t->poll_who);
    free(t);
}

int so_tcp_mesh_has(const so_tcp_mesh *t, int peer) { return t && t->links.out[peer] >= 0; }

void so_tcp_mesh_peer_name(const so_tcp_mesh *t, int peer, char *buf, size_t len)
{
    tcp_peer_name(&t->links, peer, 1, buf, len);
}

/* A receive: an early message of that tag is taken (copied now if it is all
 * in, else claimed for the thread to hand over); otherwise it waits in posted.
 * mu held; *wake = 1 when the thread must look at a message left waiting. */
static int claim_or_post(so_tcp_mesh *t, so_tcp_msg *m, int *wake)
{
    so_tcp_msg *e = t->early[m->peer].head;
    while (e && (e->tag != m->tag || e->user))
        e = e->next;
    if (!e) {
        q_push(&t->posted[m->peer], m);
        *wake = atomic_load(&t->nwaiting) > 0;
        return 0;
    }
    if (e->bytes != m->bytes) {
        char why[sizeof t->why];
        size_violation(t, m->peer, e->bytes, m->bytes, m->tag, why, sizeof why);
        fail_locked(t, why);
        return so_err(SO_ECOMM, "%s", why);
    }
    if (!e->arrived) {
        e->user = m;
        return 0;
    }
    q_remove(&t->early[m->peer], e);
    t->early_bytes[m->peer] -= e->bytes;
    memcpy(m->buf, e->buf, e->bytes);
    free(e->buf);
    free(e);
    finish(m, 1);
    return 0;
}

/* A send's header: its tag and size, or (test only, once) garbage. mu held. */
static void send_head(so_tcp_mesh *t, so_tcp_msg *m)
{
    tcp_msg_head_make((uint32_t)m->tag, t->garbage == 2 ? (uint64_t)1 << 31 : m->bytes, m->head);
    if (t->garbage == 1)
        tcp_random(m->head, sizeof m->head);
    t->garbage = 0;
}

int so_tcp_mesh_post(so_tcp_mesh *t, void *buf, size_t bytes, int peer, int tag, int sending, so_tcp_msg **out)
{
    *out = NULL;
    so_tcp_msg *m = calloc(1, sizeof *m);
    if (!m)
        return so_err(SO_ENOMEM, "tcp point-to-point: out of memory");
    m->buf = buf, m->bytes = bytes, m->peer = peer, m->tag = tag;
    int rc = 0, wake = sending;
    pthread_mutex_lock(&t->mu);
    if (atomic_load(&t->failed)) {
        rc = so_err(SO_ECOMM, "%s", t->why);
    } else if (sending) {
        send_head(t, m);
        q_push(&t->sends[peer], m);
    } else {
        rc = claim_or_post(t, m, &wake);
    }
    pthread_mutex_unlock(&t->mu);
    if (rc) {
        free(m);
        return rc;
    }
    if (wake && t->running)
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
