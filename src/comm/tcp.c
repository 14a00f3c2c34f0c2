/* scaleout's own TCP transport for the node leaders' step of "hier": a ring
 * of sockets, one connection per direction, driven with poll(). Open MPI's
 * TCP transport keeps an emulated full-duplex link about half used during an
 * allreduce, whatever the algorithm over it (docs/CLUSTER.md); plain sockets
 * fill both directions, as gloo's and NCCL's socket transports do. */
#include "comm_env.h"
#include "coll_internal.h"

#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/timer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_ADDRS 8                        /* IPv4 addresses a leader offers */
#define CONNECT_TIMEOUT_MS 2000            /* per address tried */
#define POLL_SLICE_MS 100                  /* the watchdog looks this often */
#define IO_MAX ((size_t)4 << 20)           /* bytes per send()/recv() call */
#define REDUCE_SEG ((size_t)64 << 10)      /* received bytes reduced at a time */
#define HELLO_MAGIC 0x5c7c9a11u
#define TCP_MIN_BYTES ((size_t)64 << 10) /* below, latency rules: MPI's recursive doubling */

/* What a leader publishes to the others (MPI_Allgather over the leaders). */
typedef struct {
    uint32_t addr[MAX_ADDRS + 1]; /* network order; loopback last */
    uint32_t naddr;
    uint16_t port;                /* network order */
    uint16_t pad;
} tcp_card;

/* First bytes on a connection: who is calling, for which job. */
typedef struct {
    uint32_t magic, from;
    uint64_t token;
} tcp_hello;

struct so_tcp_ring {
    int n, i;        /* leaders in the ring, my position */
    int to_next;     /* the connection I send on, to leader (i + 1) % n */
    int from_prev;   /* the connection I receive on, from leader (i - 1 + n) % n */
    float *staging;  /* a received block before it is reduced into the result */
    size_t staging_n;
};

/* ---- set-up ----------------------------------------------------------------- */

/* My IPv4 addresses, loopback last (it only reaches leaders on this host, and
 * the hello's token rejects any other job). SCALEOUT_TCP_IF keeps one interface. */
static void my_addrs(tcp_card *c)
{
    const char *want = getenv("SCALEOUT_TCP_IF");
    struct ifaddrs *all = NULL, *a;
    c->naddr = 0;
    if (getifaddrs(&all) == 0)
        for (a = all; a && c->naddr < MAX_ADDRS; a = a->ifa_next) {
            if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP) ||
                (a->ifa_flags & IFF_LOOPBACK))
                continue;
            if (want && *want && strcmp(want, a->ifa_name) != 0)
                continue;
            c->addr[c->naddr++] = ((struct sockaddr_in *)a->ifa_addr)->sin_addr.s_addr;
        }
    freeifaddrs(all);
    c->addr[c->naddr++] = htonl(INADDR_LOOPBACK);
}

/* Milliseconds left until deadline (an so_now() time), at least 0. */
static int ms_left(double deadline)
{
    double s = deadline - so_now();
    return s <= 0 ? 0 : (int)(s * 1e3) + 1;
}

/* Waits until fd is ready for events; 0, or -1 on timeout or error. */
static int wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        struct pollfd p = {fd, events, 0};
        int left = ms_left(deadline), r = poll(&p, 1, left);
        if (r > 0)
            return (p.revents & (events | POLLHUP | POLLERR)) ? 0 : -1;
        if (r == 0 || (r < 0 && errno != EINTR))
            return -1;
    }
}

/* Writes (or reads) exactly len bytes on a non-blocking socket before deadline. */
static int io_all(int fd, void *buf, size_t len, int writing, double deadline)
{
    char *p = buf;
    while (len) {
        ssize_t k = writing ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (k > 0) {
            p += k, len -= (size_t)k;
            continue;
        }
        if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return -1;
        if (wait_fd(fd, writing ? POLLOUT : POLLIN, deadline))
            return -1;
    }
    return 0;
}

/* A listening socket on every interface, on a port the kernel picks. */
static int listen_any(uint16_t *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 16) ||
        getsockname(fd, (struct sockaddr *)&sa, &len)) {
        close(fd);
        return -1;
    }
    *port = sa.sin_port;
    return fd;
}

static void tune_socket(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* a step's last bytes go at once */
}

/* Connects to one of the card's addresses and introduces itself; the fd or -1. */
static int call_next(const tcp_card *c, const tcp_hello *hello, double deadline)
{
    for (uint32_t k = 0; k < c->naddr; k++) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = c->port, .sin_addr.s_addr = c->addr[k]};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            return -1;
        double try_until = so_now() + CONNECT_TIMEOUT_MS * 1e-3;
        int err = 0;
        socklen_t el = sizeof err;
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 &&
            (errno != EINPROGRESS || wait_fd(fd, POLLOUT, try_until < deadline ? try_until : deadline) ||
             getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) || err)) {
            close(fd);
            continue;
        }
        tune_socket(fd);
        if (io_all(fd, (void *)hello, sizeof *hello, 1, deadline) == 0)
            return fd;
        close(fd);
    }
    return -1;
}

/* Accepts connections until the previous leader of this job introduces itself. */
static int answer_prev(int lfd, uint32_t prev, uint64_t token, double deadline)
{
    while (wait_fd(lfd, POLLIN, deadline) == 0) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
                continue;
            return -1;
        }
        tcp_hello h;
        if (io_all(fd, &h, sizeof h, 0, deadline) == 0 && h.magic == HELLO_MAGIC && h.token == token &&
            h.from == prev) {
            tune_socket(fd);
            return fd;
        }
        close(fd); /* a stray caller: not ours */
    }
    return -1;
}

/* The same 64-bit value on every leader, different for every job (ports, addresses). */
static uint64_t job_token(const tcp_card *cards, int n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)cards;
    for (size_t k = 0; k < (size_t)n * sizeof *cards; k++)
        h = (h ^ b[k]) * 1099511628211ull;
    return h;
}

/* Every leader's card; collective over leaders. */
static int exchange_cards(MPI_Comm leaders, const tcp_card *mine, tcp_card *all, so_waiter *w)
{
    MPI_Request req;
    int rc = MPI_Iallgather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine, MPI_BYTE, leaders, &req);
    if (rc != MPI_SUCCESS)
        return so_mpi_err(rc, "MPI_Iallgather");
    return so_waiter_wait(w, 1, &req);
}

/* 1 on every leader when every leader's ok is 1. */
static int agree(MPI_Comm leaders, int ok, so_waiter *w, int *all_ok)
{
    MPI_Request req;
    int rc = MPI_Iallreduce(&ok, all_ok, 1, MPI_INT, MPI_MIN, leaders, &req);
    if (rc != MPI_SUCCESS)
        return so_mpi_err(rc, "MPI_Iallreduce");
    return so_waiter_wait(w, 1, &req);
}

/* Connects the ring; ok = 0 (with the reason logged) when any step failed here. */
static int connect_ring(so_tcp_ring *t, MPI_Comm leaders, so_waiter *w, int *ok)
{
    tcp_card mine = {0}, *cards = calloc((size_t)t->n, sizeof *cards);
    if (!cards)
        return so_err(SO_ENOMEM, "tcp transport: out of memory");
    int lfd = listen_any(&mine.port), rc;
    my_addrs(&mine);
    if ((rc = exchange_cards(leaders, &mine, cards, w))) {
        free(cards);
        if (lfd >= 0)
            close(lfd);
        return rc;
    }
    uint64_t token = job_token(cards, t->n);
    double deadline = so_now() + (w && w->timeout_s > 0 ? w->timeout_s : 60.0);
    tcp_hello hello = {HELLO_MAGIC, (uint32_t)t->i, token};
    const tcp_card *next = &cards[(t->i + 1) % t->n];
    *ok = 0;
    if (lfd < 0)
        so_log(SO_LOG_WARN, "tcp transport: cannot listen: %s", strerror(errno));
    else if (next->port == 0)
        so_log(SO_LOG_WARN, "tcp transport: leader %d has no listening socket", (t->i + 1) % t->n);
    else if ((t->to_next = call_next(next, &hello, deadline)) < 0)
        so_log(SO_LOG_WARN, "tcp transport: cannot reach leader %d at any of its %u addresses",
               (t->i + 1) % t->n, next->naddr);
    else if ((t->from_prev = answer_prev(lfd, (uint32_t)((t->i + t->n - 1) % t->n), token, deadline)) < 0)
        so_log(SO_LOG_WARN, "tcp transport: leader %d did not call", (t->i + t->n - 1) % t->n);
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
        rc = agree(leaders, ok, w, &all_ok);
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
    int m = so_comm_env_get()->coll_tcp; /* 1 always, 0 never, -1 auto */
    if (count * sizeof(float) < TCP_MIN_BYTES || m == 0)
        return 0;
    return m == 1 || so_coll_multi_host();
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
        size_t len = s->slen - s->sent < IO_MAX ? s->slen - s->sent : IO_MAX;
        ssize_t k = send(t->to_next, s->sbuf + s->sent, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0)
            s->sent += (size_t)k;
        else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -1;
    }
    if (s->rcvd < s->rlen && (p[1].revents & (POLLIN | POLLERR | POLLHUP))) {
        size_t len = s->rlen - s->rcvd < IO_MAX ? s->rlen - s->rcvd : IO_MAX;
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
