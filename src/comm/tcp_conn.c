/* Connection set-up shared by scaleout's TCP transports (tcp.c's ring,
 * tcp_p2p.c's point-to-point mesh): each member's card of addresses and port,
 * exchanged over MPI; connections made with a timeout per address and a hello
 * that names the caller and the job, so a stray connection is refused. */
#include "comm_env.h"
#include "tcp_internal.h"

#include "scaleout/err.h"
#include "scaleout/timer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ACCEPT_GRACE_S 10.0 /* beyond the caller's tries: then it gave up */

/* My IPv4 addresses, loopback last (it only reaches leaders on this host, and
 * the hello's token rejects any other job). SCALEOUT_TCP_IF keeps one interface. */
void tcp_my_addrs(tcp_card *c)
{
    const char *want = getenv("SCALEOUT_TCP_IF");
    struct ifaddrs *all = NULL, *a;
    c->naddr = 0;
    if (getifaddrs(&all) == 0)
        for (a = all; a && c->naddr < TCP_MAX_ADDRS; a = a->ifa_next) {
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
int tcp_wait_fd(int fd, short events, double deadline)
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
int tcp_io_all(int fd, void *buf, size_t len, int writing, double deadline)
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
        if (tcp_wait_fd(fd, writing ? POLLOUT : POLLIN, deadline))
            return -1;
    }
    return 0;
}

/* A listening socket on every interface, on a port the kernel picks. */
int tcp_listen_any(uint16_t *port)
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

/* Whether (addr, port) is my own listening socket: a member in another network
 * namespace of this host can be given the same port number, and its loopback
 * address then reaches mine. */
static int is_me(const tcp_card *me, uint32_t addr, uint16_t port)
{
    if (port != me->port)
        return 0;
    for (uint32_t k = 0; k < me->naddr; k++)
        if (me->addr[k] == addr)
            return 1;
    return 0;
}

/* Connects to one of the card's addresses and introduces itself; the fd or -1. */
int tcp_call(const tcp_card *c, const tcp_card *me, const tcp_hello *hello, double deadline)
{
    for (uint32_t k = 0; k < c->naddr; k++) {
        if (is_me(me, c->addr[k], c->port))
            continue;
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = c->port, .sin_addr.s_addr = c->addr[k]};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            return -1;
        double try_until = so_now() + TCP_CONNECT_TIMEOUT_MS * 1e-3;
        int err = 0;
        socklen_t el = sizeof err;
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 &&
            (errno != EINPROGRESS || tcp_wait_fd(fd, POLLOUT, try_until < deadline ? try_until : deadline) ||
             getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) || err)) {
            close(fd);
            continue;
        }
        tune_socket(fd);
        if (tcp_io_all(fd, (void *)hello, sizeof *hello, 1, deadline) == 0)
            return fd;
        close(fd);
    }
    return -1;
}

/* Accepts connections until a member of this job introduces itself (want: that
 * member only, or -1: any); the fd, with the caller's position in *from, or -1. */
int tcp_answer(int lfd, int want, uint64_t token, double deadline, int *from)
{
    while (tcp_wait_fd(lfd, POLLIN, deadline) == 0) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
                continue;
            return -1;
        }
        tcp_hello h;
        if (tcp_io_all(fd, &h, sizeof h, 0, deadline) == 0 && h.magic == HELLO_MAGIC && h.token == token &&
            (want < 0 || h.from == (uint32_t)want)) {
            tune_socket(fd);
            *from = (int)h.from;
            return fd;
        }
        close(fd); /* a stray caller: not ours */
    }
    return -1;
}

/* The same 64-bit value on every leader, different for every job (ports, addresses). */
uint64_t tcp_job_token(const tcp_card *cards, int n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)cards;
    for (size_t k = 0; k < (size_t)n * sizeof *cards; k++)
        h = (h ^ b[k]) * 1099511628211ull;
    return h;
}

/* Every leader's card; collective over leaders. */
int tcp_exchange_cards(MPI_Comm leaders, const tcp_card *mine, tcp_card *all, so_waiter *w)
{
    MPI_Request req;
    int rc = MPI_Iallgather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine, MPI_BYTE, leaders, &req);
    if (rc != MPI_SUCCESS)
        return so_mpi_err(rc, "MPI_Iallgather");
    return so_waiter_wait(w, 1, &req);
}

/* 1 on every leader when every leader's ok is 1. */
int tcp_agree(MPI_Comm leaders, int ok, so_waiter *w, int *all_ok)
{
    MPI_Request req;
    int rc = MPI_Iallreduce(&ok, all_ok, 1, MPI_INT, MPI_MIN, leaders, &req);
    if (rc != MPI_SUCCESS)
        return so_mpi_err(rc, "MPI_Iallreduce");
    return so_waiter_wait(w, 1, &req);
}

/* How long to wait for the previous member's call: as long as its tries of
 * every address can take, and a grace, not the whole comm timeout (a member
 * that gave up goes on to the agreement, where the others must meet it). */
double tcp_accept_deadline(const tcp_card *prev, double deadline)
{
    double d = so_now() + prev->naddr * TCP_CONNECT_TIMEOUT_MS * 1e-3 + ACCEPT_GRACE_S;
    return d < deadline ? d : deadline;
}

int tcp_same_host(const tcp_card *a, const tcp_card *b)
{
    if (a->naddr <= 1 && b->naddr <= 1) /* loopback only on both: nothing tells them apart */
        return 1;
    for (uint32_t i = 0; i + 1 < a->naddr; i++) /* loopback (last) is everybody's */
        for (uint32_t k = 0; k + 1 < b->naddr; k++)
            if (a->addr[i] == b->addr[k])
                return 1;
    return 0;
}

int tcp_enabled(void)
{
    int m = so_comm_env_get()->coll_tcp; /* 1 always, 0 never, -1 auto: the job spans hosts */
    return m == 1 || (m < 0 && so_coll_multi_host());
}
