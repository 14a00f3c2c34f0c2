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
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define POLL_SLICE_MS 100                  /* the watchdog looks this often */
#define REDUCE_SEG ((size_t)64 << 10)      /* received bytes reduced at a time */
#define TCP_MIN_BYTES ((size_t)64 << 10)   /* below, latency rules: MPI's recursive doubling */

struct so_tcp_ring {
    int n, i;        /* leaders in the ring, my position */
    int to_next;     /* the connection I send on, to leader (i + 1) % n */
    int from_prev;   /* the connection I receive on, from leader (i - 1 + n) % n */
    float *staging;  /* a received block before it is reduced into the result */
    size_t staging_n;
};

/* Connects the ring; ok = 0 (with the reason logged) when any step failed here. */
static int connect_ring(so_tcp_ring *t, MPI_Comm leaders, so_waiter *w, int *ok)
{
    tcp_card mine = {0}, *cards = calloc((size_t)t->n, sizeof *cards);
    if (!cards)
        return so_err(SO_ENOMEM, "tcp transport: out of memory");
    int lfd = tcp_listen_any(&mine.port), rc;
    tcp_my_addrs(&mine);
    if ((rc = tcp_exchange_cards(leaders, &mine, cards, w))) {
        free(cards);
        if (lfd >= 0)
            close(lfd);
        return rc;
    }
    uint64_t token = tcp_job_token(cards, t->n);
    double deadline = so_now() + (w && w->timeout_s > 0 ? w->timeout_s : 60.0);
    tcp_hello hello = {HELLO_MAGIC, (uint32_t)t->i, token};
    const tcp_card *next = &cards[(t->i + 1) % t->n];
    int prev = (t->i + t->n - 1) % t->n, from;
    *ok = 0;
    if (lfd < 0)
        so_log(SO_LOG_WARN, "tcp transport: cannot listen: %s", strerror(errno));
    else if (next->port == 0)
        so_log(SO_LOG_WARN, "tcp transport: leader %d has no listening socket", (t->i + 1) % t->n);
    else if ((t->to_next = tcp_call(next, &mine, &hello, deadline)) < 0)
        so_log(SO_LOG_WARN, "tcp transport: cannot reach leader %d at any of its %u addresses",
               (t->i + 1) % t->n, next->naddr);
    else if ((t->from_prev = tcp_answer(lfd, prev, token, tcp_accept_deadline(&cards[prev], deadline), &from)) < 0)
        so_log(SO_LOG_WARN, "tcp transport: leader %d did not call", prev);
    else
        *ok = 1;
    if (lfd >= 0)
        close(lfd);
    free(cards);
    return 0;
}

int so_tcp_ring_open(MPI_Comm leaders, so_waiter *w, so_tcp_ring **out)
{
    *out = NULL;
    so_tcp_ring *t = calloc(1, sizeof *t);
    if (!t)
        return so_err(SO_ENOMEM, "tcp transport: out of memory");
    t->to_next = t->from_prev = -1;
    MPI_Comm_size(leaders, &t->n);
    MPI_Comm_rank(leaders, &t->i);
    int ok = 0, all_ok = 0, rc = connect_ring(t, leaders, w, &ok);
    if (!rc)
        rc = tcp_agree(leaders, ok, w, &all_ok);
    if (!rc && !all_ok)
        so_log(SO_LOG_WARN, "tcp transport: not every member of the ring could connect; "
                            "the step across nodes stays on MPI");
    if (rc || !all_ok) {
        so_tcp_ring_free(t);
        return rc;
    }
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
    if (t->to_next >= 0)
        close(t->to_next);
    if (t->from_prev >= 0)
        close(t->from_prev);
    free(t->staging);
    free(t);
}

/* ---- one step of the ring ----------------------------------------------------- */

/* One step's transfer: send sbuf while receiving rbuf, both at once. When acc
 * is set, rbuf is staging and every REDUCE_SEG received is reduced into acc. */
typedef struct {
    const char *sbuf;
    size_t slen, sent;
    char *rbuf;
    size_t rlen, rcvd, reduced; /* bytes */
    float *acc;
    so_reduce_op op;
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

/* Moves what the sockets take or give now; -1 on a broken connection. */
static int pump(so_tcp_ring *t, tcp_step *s, const struct pollfd *p)
{
    if (s->sent < s->slen && (p[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
        size_t len = s->slen - s->sent < TCP_IO_MAX ? s->slen - s->sent : TCP_IO_MAX;
        ssize_t k = send(t->to_next, s->sbuf + s->sent, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0)
            s->sent += (size_t)k;
        else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -1;
    }
    if (s->rcvd < s->rlen && (p[1].revents & (POLLIN | POLLERR | POLLHUP))) {
        size_t len = s->rlen - s->rcvd < TCP_IO_MAX ? s->rlen - s->rcvd : TCP_IO_MAX;
        ssize_t k = recv(t->from_prev, s->rbuf + s->rcvd, len, MSG_DONTWAIT);
        if (k > 0)
            s->rcvd += (size_t)k;
        else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return -1;
        reduce_ready(s, 0);
    }
    return 0;
}

static int run_step(so_tcp_ring *t, tcp_step *s, so_waiter *w)
{
    double t0 = so_now();
    int warned = 0;
    if (w)
        w->timed_out = 0;
    while (s->sent < s->slen || s->rcvd < s->rlen) {
        struct pollfd p[2] = {{s->sent < s->slen ? t->to_next : -1, POLLOUT, 0},
                              {s->rcvd < s->rlen ? t->from_prev : -1, POLLIN, 0}};
        int r = poll(p, 2, POLL_SLICE_MS);
        if (r < 0 && errno != EINTR)
            return so_err(SO_ECOMM, "tcp transport: poll: %s", strerror(errno));
        if (r > 0 && pump(t, s, p))
            return so_err(SO_ECOMM, "tcp transport: the connection to leader %d broke: %s",
                          s->sent < s->slen ? (t->i + 1) % t->n : (t->i + t->n - 1) % t->n,
                          errno ? strerror(errno) : "closed by the peer");
        if (r == 0 && w && so_waiter_tick(w, so_now() - t0, &warned))
            return SO_ECOMM;
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
            tcp_step st = {(const char *)(buf + so), sl * sizeof(float), 0,
                           phase ? (char *)(buf + ro) : (char *)t->staging, rl * sizeof(float), 0, 0,
                           phase ? NULL : buf + ro, op};
            if ((rc = run_step(t, &st, w)))
                return rc;
        }
    return 0;
}
