/* scaleout's own TCP transport for the node leaders' step of "hier": a ring
 * of sockets, one connection per direction, driven with poll(). Open MPI's
 * TCP transport keeps an emulated full-duplex link about half used during an
 * allreduce, whatever the algorithm over it (docs/CLUSTER.md); plain sockets
 * fill both directions, as gloo's and NCCL's socket transports do. */
#include "tcp_internal.h"

#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/timer.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define POLL_SLICE_MS 100                  /* the watchdog looks this often */
#define REDUCE_SEG ((size_t)64 << 10)      /* received bytes reduced at a time */
#define TCP_MIN_BYTES ((size_t)64 << 10)   /* below, latency rules: MPI's recursive doubling */

struct so_tcp_ring {
    tcp_links links;  /* the two connections below, and how to name the neighbours */
    int n, i;         /* members of the ring, my position */
    int next, prev;   /* (i + 1) % n, (i - 1 + n) % n */
    int to_next;      /* the connection I send on */
    int from_prev;    /* the connection I receive on */
    uint32_t sent_frames, rcvd_frames; /* frames so far on each connection */
    int garbage;      /* test only: my first frame is not one (tcp_test_garbage) */
    float *staging;   /* a received block before it is reduced into the result */
    size_t staging_n;
};

/* The ring: member i calls i + 1 and answers i - 1. */
static void ring_plan(const tcp_card *cards, int n, int me, unsigned char *call, unsigned char *expect)
{
    (void)cards;
    call[(me + 1) % n] = 1;
    expect[(me + n - 1) % n] = 1;
}

int so_tcp_ring_open(MPI_Comm leaders, so_waiter *w, so_tcp_ring **out)
{
    *out = NULL;
    so_tcp_ring *t = calloc(1, sizeof *t);
    if (!t)
        return so_err(SO_ENOMEM, "tcp transport: out of memory");
    t->to_next = t->from_prev = -1;
    int all_ok = 0, rc = tcp_setup(leaders, w, TCP_KIND_RING, "tcp ring", ring_plan, &t->links, &all_ok);
    if (rc || !all_ok) {
        so_tcp_ring_free(t);
        return rc;
    }
    t->n = t->links.n, t->i = t->links.me;
    t->next = (t->i + 1) % t->n, t->prev = (t->i + t->n - 1) % t->n;
    t->to_next = t->links.out[t->next];
    t->from_prev = t->links.in[t->prev];
    t->garbage = tcp_test_garbage();
    *out = t;
    return 0;
}

int so_tcp_wanted(size_t count)
{
    return count * sizeof(float) >= TCP_MIN_BYTES && tcp_enabled();
}

void so_tcp_ring_free(so_tcp_ring *t)
{
    if (!t)
        return;
    tcp_links_close(&t->links); /* closes to_next and from_prev */
    free(t->staging);
    free(t);
}

/* ---- one step of the ring -----------------------------------------------------
 * Every block travels behind a frame (magic, the connection's frame number,
 * the block's bytes; tcp_wire.h). Both ends know which block must come and
 * how long it is, so a frame that says anything else ends the job, naming
 * the sender, before a byte of its payload is read. */

/* One step's transfer: send sbuf while receiving rbuf, both at once. When acc
 * is set, rbuf is staging and every REDUCE_SEG received is reduced into acc. */
typedef struct {
    uint8_t shead[TCP_HEAD_BYTES], rhead[TCP_HEAD_BYTES]; /* the frames out and in */
    size_t shead_done, rhead_done;
    const char *sbuf;
    size_t slen, sent;
    char *rbuf;
    size_t rlen, rcvd, reduced; /* bytes */
    float *acc;
    so_reduce_op op;
    char why[256]; /* what broke, when pump fails */
} tcp_step;

static void reduce_ready(tcp_step *s, int all)
{
    size_t ready = s->rcvd / sizeof(float) * sizeof(float);
    if (!s->acc || (!all && ready - s->reduced < REDUCE_SEG))
        return;
    so_reduce_acc(s->acc + s->reduced / sizeof(float), (const float *)(s->rbuf + s->reduced),
                  (ready - s->reduced) / sizeof(float), s->op);
    s->reduced = ready;
}

/* Why the connection with a neighbour broke, into s->why (err: the errno of
 * the failed call, 0 when the peer closed it); returns -1 for the pumps. */
static int broke(so_tcp_ring *t, tcp_step *s, int incoming, int err)
{
    char peer[64];
    tcp_peer_name(&t->links, incoming ? t->prev : t->next, incoming, peer, sizeof peer);
    if (!err)
        snprintf(s->why, sizeof s->why, "tcp: connection to %s closed by peer", peer);
    else
        snprintf(s->why, sizeof s->why, "tcp: connection %s %s broke: %s", incoming ? "from" : "to", peer,
                 strerror(err));
    return -1;
}

/* The next frame out: mine, or (test only) garbage in its place. */
static void frame_out(so_tcp_ring *t, tcp_step *s)
{
    uint64_t bytes = t->garbage == 2 ? (uint64_t)1 << 31 : s->slen;
    tcp_frame_make(t->sent_frames++, bytes, s->shead);
    if (t->garbage == 1)
        tcp_random(s->shead, sizeof s->shead);
    t->garbage = 0;
}

/* The frame that came in must announce this step's block. */
static int frame_in(so_tcp_ring *t, tcp_step *s)
{
    tcp_frame got;
    tcp_verdict v = tcp_frame_check(s->rhead, t->rcvd_frames, s->rlen, &got);
    char peer[64];
    if (v == TCP_OK) {
        t->rcvd_frames++;
        return 0;
    }
    tcp_peer_name(&t->links, t->prev, 1, peer, sizeof peer);
    if (v == TCP_BAD_SIZE)
        snprintf(s->why, sizeof s->why, "tcp: %s sent a ring block of %llu bytes where %zu were due: protocol violation",
                 peer, (unsigned long long)got.bytes, s->rlen);
    else if (v == TCP_BAD_SEQ)
        snprintf(s->why, sizeof s->why, "tcp: %s sent ring frame %u where frame %u was due: protocol violation",
                 peer, got.seq, t->rcvd_frames);
    else
        snprintf(s->why, sizeof s->why, "tcp: %s sent %s instead of a ring frame: protocol violation", peer,
                 tcp_verdict_str(v));
    return -1;
}

/* Sends what the socket takes of the frame and the block, in one call. */
static int pump_send(so_tcp_ring *t, tcp_step *s)
{
    size_t hl = TCP_HEAD_BYTES - s->shead_done, pl = s->slen - s->sent;
    struct iovec iov[2] = {{s->shead + s->shead_done, hl}, {(char *)s->sbuf + s->sent, pl < TCP_IO_MAX ? pl : TCP_IO_MAX}};
    struct msghdr mh = {.msg_iov = hl ? iov : iov + 1, .msg_iovlen = hl ? 2 : 1};
    ssize_t k = sendmsg(t->to_next, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : broke(t, s, 0, errno);
    size_t h = (size_t)k < hl ? (size_t)k : hl;
    s->shead_done += h;
    s->sent += (size_t)k - h;
    return 0;
}

/* Receives the frame, checks it, then the block (never more than it); after
 * a good frame it reads on at once rather than wait for the next poll. */
static int pump_recv(so_tcp_ring *t, tcp_step *s)
{
    for (;;) {
        int head = s->rhead_done < TCP_HEAD_BYTES;
        char *p = head ? (char *)s->rhead + s->rhead_done : s->rbuf + s->rcvd;
        size_t len = head ? TCP_HEAD_BYTES - s->rhead_done : s->rlen - s->rcvd;
        if (!len)
            return 0;
        ssize_t k = recv(t->from_prev, p, len < TCP_IO_MAX ? len : TCP_IO_MAX, MSG_DONTWAIT);
        if (k == 0)
            return broke(t, s, 1, 0);
        if (k < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : broke(t, s, 1, errno);
        if (!head) {
            s->rcvd += (size_t)k;
            reduce_ready(s, 0);
            return 0;
        }
        if ((s->rhead_done += (size_t)k) < TCP_HEAD_BYTES)
            return 0;
        if (frame_in(t, s))
            return -1;
    }
}

static int send_pending(const tcp_step *s) { return s->shead_done < TCP_HEAD_BYTES || s->sent < s->slen; }
static int recv_pending(const tcp_step *s) { return s->rhead_done < TCP_HEAD_BYTES || s->rcvd < s->rlen; }

static int run_step(so_tcp_ring *t, tcp_step *s, so_waiter *w)
{
    double t0 = so_now();
    int warned = 0;
    if (w)
        w->timed_out = 0;
    frame_out(t, s);
    while (send_pending(s) || recv_pending(s)) {
        struct pollfd p[2] = {{send_pending(s) ? t->to_next : -1, POLLOUT, 0},
                              {recv_pending(s) ? t->from_prev : -1, POLLIN, 0}};
        int r = poll(p, 2, POLL_SLICE_MS);
        if (r < 0 && errno != EINTR)
            return so_err(SO_ECOMM, "tcp transport: poll: %s", strerror(errno));
        if (r > 0 && (((p[0].revents & (POLLOUT | POLLERR | POLLHUP)) && pump_send(t, s)) ||
                      ((p[1].revents & (POLLIN | POLLERR | POLLHUP)) && pump_recv(t, s))))
            return so_err(SO_ECOMM, "%s", s->why);
        if (r == 0 && w && so_waiter_tick(w, so_now() - t0, &warned)) {
            char what[256], peer[64];
            snprintf(what, sizeof what, "%s", so_errmsg()); /* so_err must not format its own buffer */
            tcp_peer_name(&t->links, recv_pending(s) ? t->prev : t->next, recv_pending(s), peer, sizeof peer);
            return so_err(SO_ECOMM, "%s; the tcp ring was waiting for %s", what, peer);
        }
    }
    reduce_ready(s, 1);
    return 0;
}

static int ensure_staging(so_tcp_ring *t, size_t n)
{
    if (t->staging_n >= n)
        return 0;
    float *p = realloc(t->staging, n * sizeof *p);
    if (!p)
        return so_err(SO_ENOMEM, "tcp transport: out of memory for %zu floats", n);
    t->staging = p, t->staging_n = n;
    return 0;
}

/* Ring allreduce in place: n - 1 reduce-scatter steps (block i - s out, block
 * i - s - 1 in and reduced), then n - 1 allgather steps. Each block is
 * reduced on one leader and copied to the others: identical bits everywhere. */
int so_tcp_allreduce(so_tcp_ring *t, float *buf, size_t count, so_reduce_op op, so_waiter *w)
{
    int n = t->n, rc;
    if (n == 1)
        return 0;
    if ((rc = ensure_staging(t, count / (size_t)n + 1)))
        return rc;
    for (int phase = 0; phase < 2; phase++)
        for (int s = 0; s < n - 1; s++) {
            int out = ((t->i - s + (phase ? 1 : 0)) % n + n) % n, in = ((t->i - s - 1 + (phase ? 1 : 0)) % n + n) % n;
            size_t so, sl, ro, rl;
            so_blk(count, n, out, &so, &sl);
            so_blk(count, n, in, &ro, &rl);
            tcp_step st = {.sbuf = (const char *)(buf + so), .slen = sl * sizeof(float),
                           .rbuf = phase ? (char *)(buf + ro) : (char *)t->staging, .rlen = rl * sizeof(float),
                           .acc = phase ? NULL : buf + ro, .op = op};
            if ((rc = run_step(t, &st, w)))
                return rc;
        }
    return 0;
}
