/* Connection set-up shared by scaleout's TCP transports (tp_tcp.c's collectives,
 * tcp_p2p.c's point-to-point mesh). Over MPI: a fresh secret from the
 * group's rank 0 and every member's card (addresses, port). Then one event
 * loop per member calls the members it must call and answers the members
 * that call it, all at once (a ring where everyone first called and then
 * answered would wait on itself, since the caller now waits for an answer),
 * and runs the handshake of tcp_wire.h on every connection. Each accepted
 * connection has its own deadline, so a stranger that connects and says
 * nothing, or says anything but the proof, is closed and counted while the
 * real members get through. */
#include "comm_env.h"
#include "tcp_internal.h"

#include "core/sha256.h"
#include "core/test_hooks.h"
#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/timer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#define ACCEPT_GRACE_S 10.0 /* beyond the callers' tries: then they gave up */
#define MAX_PENDING 64      /* accepted connections still proving themselves */
#define POLL_MAX_MS 100

/* Connections closed during set-up, over the process's life (so_comm_tcp_rejected). */
static atomic_uint_fast64_t rejected_total;

uint64_t so_comm_tcp_rejected(void) { return (uint64_t)atomic_load(&rejected_total); }

/* ---- sockets and cards ------------------------------------------------------------------ */

/* My IPv4 addresses, loopback last (it only reaches members on this host, and
 * the handshake refuses any other job). SCALEOUT_TCP_IF keeps one interface. */
static void my_addrs(tcp_card *c)
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

/* A listening socket on every interface, on a port the kernel picks. */
static int listen_any(uint16_t *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, MAX_PENDING) ||
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

static void format_addr(const struct sockaddr_in *sa, char out[TCP_ADDR_LEN])
{
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof ip);
    snprintf(out, TCP_ADDR_LEN, "%s:%u", ip, (unsigned)ntohs(sa->sin_port));
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

int tcp_random(void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t k = getrandom(p, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

/* ---- test hooks --------------------------------------------------------------------------- */

static int world_rank(void)
{
    int r = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int tcp_test_garbage(void)
{
    const char *s = so_test_hook("SCALEOUT_TCP_TEST_GARBAGE"); /* "RANK" or "RANK:size" */
    if (!s || !*s || atoi(s) != world_rank())
        return 0;
    return strstr(s, ":size") ? 2 : 1;
}

/* SCALEOUT_TCP_TEST_DELAY_MS: calls start this late, so a test can reach the
 * listening sockets first (the set-up window, widened without strace). */
static double test_delay_s(void)
{
    const char *s = so_test_hook("SCALEOUT_TCP_TEST_DELAY_MS");
    return s ? atof(s) * 1e-3 : 0;
}

/* SCALEOUT_TCP_TEST_ANNOUNCE=FILE: one line per member once it listens, so a
 * test knows where to send its strangers: what an attacker learns from
 * /proc/net/tcp and `ip addr`, nothing more. */
static void test_announce(const char *name, const tcp_links *l, const tcp_card *c)
{
    const char *path = so_test_hook("SCALEOUT_TCP_TEST_ANNOUNCE");
    if (!path || !*path)
        return;
    char line[512];
    int len = snprintf(line, sizeof line, "%s member %d of %d world %d port %u addrs", name, l->me, l->n,
                       l->world[l->me], (unsigned)ntohs(c->port));
    for (uint32_t k = 0; k < c->naddr && len < (int)sizeof line - 24; k++) {
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &c->addr[k], ip, sizeof ip);
        len += snprintf(line + len, sizeof line - (size_t)len, "%c%s", k ? ',' : ' ', ip);
    }
    line[len++] = '\n';
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        (void)!write(fd, line, (size_t)len); /* one write: lines of several ranks never mix */
        close(fd);
    }
}

/* ---- the links ---------------------------------------------------------------------------- */

static int links_alloc(tcp_links *l, int n, int me)
{
    memset(l, 0, sizeof *l);
    l->n = n, l->me = me;
    l->out = malloc((size_t)n * sizeof *l->out);
    l->in = malloc((size_t)n * sizeof *l->in);
    l->world = calloc((size_t)n, sizeof *l->world);
    l->out_addr = calloc((size_t)n, sizeof *l->out_addr);
    l->in_addr = calloc((size_t)n, sizeof *l->in_addr);
    if (!l->out || !l->in || !l->world || !l->out_addr || !l->in_addr)
        return so_err(SO_ENOMEM, "tcp transport: out of memory");
    for (int j = 0; j < n; j++)
        l->out[j] = l->in[j] = -1, l->world[j] = j;
    return 0;
}

void tcp_links_close(tcp_links *l)
{
    for (int j = 0; l->out && l->in && j < l->n; j++) {
        if (l->out[j] >= 0)
            close(l->out[j]);
        if (l->in[j] >= 0)
            close(l->in[j]);
    }
    free(l->out), free(l->in), free(l->world), free(l->out_addr), free(l->in_addr);
    memset(l, 0, sizeof *l);
}

void tcp_peer_name(const tcp_links *l, int j, int incoming, char *buf, size_t len)
{
    const char *a = incoming ? l->in_addr[j] : l->out_addr[j];
    if (*a)
        snprintf(buf, len, "rank %d (%s)", l->world[j], a);
    else
        snprintf(buf, len, "rank %d", l->world[j]);
}

/* World ranks of the group's members: what mpirun and the user see. */
static int translate_world(MPI_Comm comm, tcp_links *l)
{
    MPI_Group g, wg;
    int *ranks = malloc((size_t)l->n * sizeof *ranks), rc = 0;
    if (!ranks)
        return so_err(SO_ENOMEM, "tcp transport: out of memory");
    for (int j = 0; j < l->n; j++)
        ranks[j] = j;
    if (MPI_Comm_group(comm, &g) != MPI_SUCCESS || MPI_Comm_group(MPI_COMM_WORLD, &wg) != MPI_SUCCESS) {
        free(ranks);
        return so_err(SO_ECOMM, "tcp transport: MPI_Comm_group failed");
    }
    if (MPI_Group_translate_ranks(g, l->n, ranks, wg, l->world) != MPI_SUCCESS)
        rc = so_err(SO_ECOMM, "tcp transport: MPI_Group_translate_ranks failed");
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    free(ranks);
    return rc;
}

/* ---- the set-up's event loop ---------------------------------------------------------------- */

/* Why a connection was closed during set-up (counted, and summed up in one line). */
enum { REJ_MALFORMED, REJ_FOREIGN, REJ_MAC, REJ_DUPLICATE, REJ_CLOSED, REJ_SILENT, REJ_UNFINISHED,
       REJ_CROWDED, REJ_ERROR, REJ_N };
static const char *const rej_what[REJ_N] = {
    "malformed hello", "hello for another member or set-up", "wrong MAC", "second call from a member",
    "closed before proving", "silent past the handshake time-out", "unfinished when set-up ended",
    "crowded out", "socket error"};

static int rej_of(tcp_verdict v)
{
    switch (v) {
    case TCP_BAD_MAGIC:
    case TCP_BAD_VERSION: return REJ_MALFORMED;
    case TCP_BAD_MAC: return REJ_MAC;
    default: return REJ_FOREIGN;
    }
}

/* Answerer: a connection accepted, not yet proven. */
enum { ANS_HELLO, ANS_CHALLENGE, ANS_PROOF };
typedef struct {
    int fd, stage;
    double until;            /* closed as silent after this */
    char addr[TCP_ADDR_LEN]; /* the caller's */
    tcp_hello hello;
    uint8_t nonce[TCP_NONCE_BYTES];
    uint8_t msg[TCP_CHALLENGE_BYTES]; /* the message being read or written */
    size_t len, done;
} answer_st;

/* Caller: my call to member j, through its addresses in turn. */
enum { CALL_IDLE, CALL_CONNECT, CALL_HELLO, CALL_CHALLENGE, CALL_PROOF, CALL_DONE, CALL_FAILED };
typedef struct {
    int j, fd, stage;
    uint32_t addr_i;  /* the address being tried */
    double until;     /* this try's deadline */
    tcp_hello hello;
    uint8_t msg[TCP_CHALLENGE_BYTES];
    size_t len, done;
} call_st;

typedef struct {
    const tcp_auth *auth;
    const char *name;
    const tcp_card *cards;
    const unsigned char *expect;
    tcp_links *l;
    int lfd;
    call_st *calls;
    int ncalls;
    answer_st pend[MAX_PENDING];
    int npend, nexpected, arrived;
    unsigned rejected[REJ_N];
    char first_stranger[TCP_ADDR_LEN];
} setup_st;

/* Moves what the socket takes or gives of a message: 1 complete, 0 not yet,
 * -1 closed (errno 0) or failed. */
static int io_step(int fd, uint8_t *msg, size_t len, size_t *done, int writing)
{
    while (*done < len) {
        ssize_t k = writing ? send(fd, msg + *done, len - *done, MSG_NOSIGNAL) : recv(fd, msg + *done, len - *done, 0);
        if (k > 0) {
            *done += (size_t)k;
            continue;
        }
        if (k == 0) {
            errno = 0;
            return -1;
        }
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
    return 1;
}

static void reject(setup_st *s, answer_st *a, int why)
{
    close(a->fd);
    a->fd = -1; /* removed from pend after the pass */
    s->rejected[why]++;
    if (!s->first_stranger[0])
        memcpy(s->first_stranger, a->addr, TCP_ADDR_LEN);
    atomic_fetch_add(&rejected_total, 1);
}

static void accept_member(setup_st *s, answer_st *a)
{
    int j = (int)a->hello.from;
    if (s->l->in[j] >= 0) { /* it already proved itself on another connection */
        reject(s, a, REJ_DUPLICATE);
        return;
    }
    tune_socket(a->fd);
    s->l->in[j] = a->fd;
    memcpy(s->l->in_addr[j], a->addr, TCP_ADDR_LEN);
    s->arrived++;
    a->fd = -1;
}

/* One accepted connection's handshake, as far as its bytes allow. */
static void answer_progress(setup_st *s, answer_st *a)
{
    for (;;) {
        int r = io_step(a->fd, a->msg, a->len, &a->done, a->stage == ANS_CHALLENGE);
        if (a->stage == ANS_HELLO && r >= 0) { /* refuse a stranger's bytes as soon as they show */
            tcp_verdict v = tcp_hello_check(s->auth, -1, a->msg, a->done, &a->hello);
            if (v == TCP_OK && r == 1 && !s->expect[a->hello.from])
                v = TCP_BAD_MEMBER;
            if (v != TCP_OK) {
                reject(s, a, rej_of(v));
                return;
            }
        }
        if (r <= 0) {
            if (r < 0)
                reject(s, a, errno ? REJ_ERROR : REJ_CLOSED);
            return;
        }
        a->done = 0;
        if (a->stage == ANS_HELLO) {
            if (tcp_random(a->nonce, sizeof a->nonce)) {
                reject(s, a, REJ_ERROR);
                return;
            }
            tcp_challenge_make(s->auth, &a->hello, a->nonce, a->msg);
            a->len = TCP_CHALLENGE_BYTES, a->stage = ANS_CHALLENGE;
        } else if (a->stage == ANS_CHALLENGE) {
            a->len = TCP_PROOF_BYTES, a->stage = ANS_PROOF;
        } else {
            if (tcp_proof_check(s->auth, &a->hello, a->nonce, a->msg) != TCP_OK)
                reject(s, a, REJ_MAC);
            else
                accept_member(s, a);
            return;
        }
    }
}

/* Starts connecting to the call's current address, or the next one that is not
 * my own listener; CALL_FAILED when none is left. */
static void call_start(setup_st *s, call_st *c)
{
    const tcp_card *card = &s->cards[c->j], *me = &s->cards[s->l->me];
    for (; c->addr_i < card->naddr; c->addr_i++) {
        if (is_me(me, card->addr[c->addr_i], card->port))
            continue;
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = card->port, .sin_addr.s_addr = card->addr[c->addr_i]};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            break;
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 || errno == EINPROGRESS) {
            c->fd = fd, c->stage = CALL_CONNECT;
            c->until = so_now() + TCP_CONNECT_TIMEOUT_MS * 1e-3;
            return;
        }
        close(fd);
    }
    c->stage = CALL_FAILED;
}

/* This address did not work out (refused, silent, or not the member): the next. */
static void call_retry(setup_st *s, call_st *c)
{
    close(c->fd);
    c->fd = -1;
    c->addr_i++;
    call_start(s, c);
}

static void call_done(setup_st *s, call_st *c)
{
    const tcp_card *card = &s->cards[c->j];
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = card->port, .sin_addr.s_addr = card->addr[c->addr_i]};
    tune_socket(c->fd);
    s->l->out[c->j] = c->fd;
    format_addr(&sa, s->l->out_addr[c->j]);
    c->fd = -1, c->stage = CALL_DONE;
}

/* One call's connect and handshake, as far as the socket allows. */
static void call_progress(setup_st *s, call_st *c, short revents)
{
    if (c->stage == CALL_CONNECT) {
        int err = 0;
        socklen_t el = sizeof err;
        uint8_t nonce[TCP_NONCE_BYTES];
        if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
            return;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) || err || tcp_random(nonce, sizeof nonce)) {
            call_retry(s, c);
            return;
        }
        tcp_hello_make(s->auth, (uint32_t)c->j, nonce, &c->hello, c->msg);
        c->len = TCP_HELLO_BYTES, c->done = 0, c->stage = CALL_HELLO;
        c->until = so_now() + TCP_HANDSHAKE_TIMEOUT_MS * 1e-3;
    }
    for (;;) {
        int r = io_step(c->fd, c->msg, c->len, &c->done, c->stage != CALL_CHALLENGE);
        if (r < 0)
            call_retry(s, c);
        if (r <= 0)
            return;
        c->done = 0;
        if (c->stage == CALL_HELLO) {
            c->len = TCP_CHALLENGE_BYTES, c->stage = CALL_CHALLENGE;
        } else if (c->stage == CALL_CHALLENGE) {
            uint8_t nonce[TCP_NONCE_BYTES];
            if (tcp_challenge_check(s->auth, &c->hello, c->msg, nonce) != TCP_OK) {
                so_log(SO_LOG_DEBUG, "%s: the listener at address %u of rank %d did not prove the secret",
                       s->name, c->addr_i, s->l->world[c->j]);
                call_retry(s, c);
                return;
            }
            tcp_proof_make(s->auth, &c->hello, nonce, c->msg);
            c->len = TCP_PROOF_BYTES, c->stage = CALL_PROOF;
        } else {
            call_done(s, c);
            return;
        }
    }
}

/* Accepts what the listening socket has; a full table drops its oldest entry. */
static void accept_new(setup_st *s, double now)
{
    for (;;) {
        struct sockaddr_in sa;
        socklen_t sl = sizeof sa;
        int fd = accept4(s->lfd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return; /* EAGAIN: nothing more now; anything else: try at the next poll */
        }
        if (s->npend == MAX_PENDING) {
            reject(s, &s->pend[0], REJ_CROWDED);
            memmove(s->pend, s->pend + 1, (MAX_PENDING - 1) * sizeof *s->pend);
            s->npend--;
        }
        answer_st *a = &s->pend[s->npend++];
        memset(a, 0, sizeof *a);
        a->fd = fd, a->stage = ANS_HELLO, a->len = TCP_HELLO_BYTES;
        a->until = now + TCP_HANDSHAKE_TIMEOUT_MS * 1e-3;
        format_addr(&sa, a->addr);
    }
}

/* Drops the entries a pass closed or handed over (fd -1), keeping the order. */
static void compact_pending(setup_st *s)
{
    int k = 0;
    for (int i = 0; i < s->npend; i++)
        if (s->pend[i].fd >= 0)
            s->pend[k++] = s->pend[i];
    s->npend = k;
}

/* Deadlines: silent strangers are closed, stalled calls try their next address. */
static void expire(setup_st *s, double now)
{
    for (int i = 0; i < s->npend; i++)
        if (now >= s->pend[i].until)
            reject(s, &s->pend[i], REJ_SILENT);
    compact_pending(s);
    for (int i = 0; i < s->ncalls; i++)
        if (s->calls[i].stage >= CALL_CONNECT && s->calls[i].stage <= CALL_PROOF && now >= s->calls[i].until)
            call_retry(s, &s->calls[i]);
}

/* One poll over the listener, the pending answers and the calls, and what it found. */
static void poll_once(setup_st *s, struct pollfd *p)
{
    int np = 0;
    p[np++] = (struct pollfd){s->lfd, POLLIN, 0};
    for (int i = 0; i < s->npend; i++)
        p[np++] = (struct pollfd){s->pend[i].fd, s->pend[i].stage == ANS_CHALLENGE ? POLLOUT : POLLIN, 0};
    for (int i = 0; i < s->ncalls; i++) {
        call_st *c = &s->calls[i];
        int live = c->stage >= CALL_CONNECT && c->stage <= CALL_PROOF;
        p[np++] = (struct pollfd){live ? c->fd : -1, c->stage == CALL_CHALLENGE ? POLLIN : POLLOUT, 0};
    }
    if (poll(p, (nfds_t)np, POLL_MAX_MS) <= 0)
        return;
    int npend = s->npend;
    for (int i = 0; i < npend; i++)
        if (p[1 + i].revents)
            answer_progress(s, &s->pend[i]);
    for (int i = 0; i < s->ncalls; i++)
        if (p[1 + npend + i].revents)
            call_progress(s, &s->calls[i], p[1 + npend + i].revents);
    compact_pending(s);
    if (p[0].revents) /* the handshake deadline counts from the accept, not from before the poll */
        accept_new(s, so_now());
}

/* Runs the calls and answers until every planned connection is made, the
 * calls are over and the expected callers had their time, or deadline. */
static int run_setup(setup_st *s, double calls_from, double accept_until, double deadline)
{
    struct pollfd *p = calloc((size_t)(1 + MAX_PENDING + s->ncalls), sizeof *p);
    if (!p)
        return -1;
    for (;;) {
        double now = so_now();
        int open = 0;
        for (int i = 0; i < s->ncalls; i++) {
            if (s->calls[i].stage == CALL_IDLE && now >= calls_from)
                call_start(s, &s->calls[i]);
            open += s->calls[i].stage != CALL_DONE && s->calls[i].stage != CALL_FAILED;
        }
        if ((!open && (s->arrived == s->nexpected || now >= accept_until)) || now >= deadline)
            break;
        expire(s, now);
        poll_once(s, p);
    }
    free(p);
    for (int i = 0; i < s->npend; i++)
        reject(s, &s->pend[i], REJ_UNFINISHED);
    s->npend = 0;
    int ok = s->arrived == s->nexpected;
    for (int i = 0; i < s->ncalls; i++) {
        call_st *c = &s->calls[i];
        if (c->stage != CALL_DONE) {
            if (c->fd >= 0)
                close(c->fd);
            so_log(SO_LOG_WARN, "%s: cannot reach rank %d at any of its %u addresses", s->name,
                   s->l->world[c->j], s->cards[c->j].naddr);
            ok = 0;
        }
    }
    for (int j = 0; j < s->l->n; j++)
        if (s->expect[j] && s->l->in[j] < 0)
            so_log(SO_LOG_WARN, "%s: rank %d did not call (or could not prove it belongs to this job)", s->name,
                   s->l->world[j]);
    return ok ? 0 : -1;
}

/* One line for the strangers this set-up closed, if any. */
static void report_rejected(const setup_st *s)
{
    unsigned total = 0;
    char what[256] = "";
    size_t used = 0;
    for (int k = 0; k < REJ_N; k++) {
        total += s->rejected[k];
        if (s->rejected[k] && used < sizeof what)
            used += (size_t)snprintf(what + used, sizeof what - used, "%s%u %s", used ? ", " : "", s->rejected[k],
                                     rej_what[k]);
    }
    if (total)
        so_log(SO_LOG_WARN, "%s: rank %d closed %u connection(s) during set-up that did not prove they belong "
                            "to this job (%s; first from %s)",
               s->name, s->l->world[s->l->me], total, what, s->first_stranger);
}

/* The latest time a caller with this card can still be trying. */
static double caller_tries_s(const tcp_card *c)
{
    return c->naddr * (TCP_CONNECT_TIMEOUT_MS + TCP_HANDSHAKE_TIMEOUT_MS) * 1e-3 + ACCEPT_GRACE_S;
}

/* Calls and answers what the plan says, authenticated with key; 0 when all connected. */
static int connect_planned(setup_st *s, tcp_plan_fn *plan, double deadline)
{
    int n = s->l->n, rc = -1;
    unsigned char *call = calloc((size_t)n, 1), *expect = calloc((size_t)n, 1);
    s->calls = calloc((size_t)n, sizeof *s->calls);
    if (call && expect && s->calls) {
        plan(s->cards, n, s->l->me, call, expect);
        call[s->l->me] = expect[s->l->me] = 0;
        double now = so_now(), delay = test_delay_s(), accept_until = now;
        for (int j = 0; j < n; j++) {
            if (call[j])
                s->calls[s->ncalls++] = (call_st){.j = j, .fd = -1, .stage = CALL_IDLE};
            if (expect[j] && now + delay + caller_tries_s(&s->cards[j]) > accept_until)
                accept_until = now + delay + caller_tries_s(&s->cards[j]);
            s->nexpected += expect[j];
        }
        s->expect = expect;
        rc = run_setup(s, now + delay, accept_until < deadline ? accept_until : deadline, deadline);
        report_rejected(s);
    }
    free(call), free(expect), free(s->calls);
    return rc;
}

/* ---- MPI: the secret and the cards ------------------------------------------------------------ */

/* Rank 0's fresh secret on every member, over MPI only; key[TCP_KEY_BYTES] = 1
 * when rank 0 could make one. */
static int share_secret(MPI_Comm comm, int me, so_waiter *w, uint8_t key[TCP_KEY_BYTES + 1])
{
    MPI_Request req;
    if (me == 0)
        key[TCP_KEY_BYTES] = tcp_random(key, TCP_KEY_BYTES) == 0;
    int rc = MPI_Ibcast(key, TCP_KEY_BYTES + 1, MPI_BYTE, 0, comm, &req);
    if (rc != MPI_SUCCESS)
        return so_mpi_err(rc, "MPI_Ibcast");
    return so_waiter_wait(w, 1, &req);
}

static int exchange_cards(MPI_Comm comm, const tcp_card *mine, tcp_card *all, so_waiter *w)
{
    MPI_Request req;
    int rc = MPI_Iallgather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine, MPI_BYTE, comm, &req);
    if (rc != MPI_SUCCESS)
        return so_mpi_err(rc, "MPI_Iallgather");
    return so_waiter_wait(w, 1, &req);
}

/* *all_ok = the minimum of ok over comm. */
static int agree(MPI_Comm comm, int ok, so_waiter *w, int *all_ok)
{
    MPI_Request req;
    int rc = MPI_Iallreduce(&ok, all_ok, 1, MPI_INT, MPI_MIN, comm, &req);
    if (rc != MPI_SUCCESS)
        return so_mpi_err(rc, "MPI_Iallreduce");
    return so_waiter_wait(w, 1, &req);
}

int tcp_setup(MPI_Comm comm, so_waiter *w, uint16_t kind, const char *name, tcp_plan_fn *plan, tcp_links *l,
              int *all_ok)
{
    int n, me, ok = 0, rc;
    uint8_t key[TCP_KEY_BYTES + 1] = {0};
    *all_ok = 0;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    tcp_card mine = {0}, *cards = calloc((size_t)n, sizeof *cards);
    /* Out of memory here aborts the job: the others' exchange is not met. */
    if ((rc = links_alloc(l, n, me)) || (!cards && (rc = so_err(SO_ENOMEM, "tcp transport: out of memory"))) ||
        (rc = translate_world(comm, l))) {
        free(cards);
        return rc;
    }
    int lfd = listen_any(&mine.port);
    my_addrs(&mine);
    if (!(rc = share_secret(comm, me, w, key)) && !(rc = exchange_cards(comm, &mine, cards, w))) {
        tcp_auth auth = {key, kind, (uint32_t)n, (uint32_t)me};
        setup_st s = {.auth = &auth, .name = name, .cards = cards, .l = l, .lfd = lfd};
        if (lfd < 0)
            so_log(SO_LOG_WARN, "%s: cannot listen: %s", name, strerror(errno));
        else if (!key[TCP_KEY_BYTES])
            so_log(SO_LOG_WARN, "%s: rank %d could not draw a random secret", name, l->world[0]);
        else {
            test_announce(name, l, &mine);
            ok = connect_planned(&s, plan, so_now() + (w && w->timeout_s > 0 ? w->timeout_s : 60.0)) == 0;
        }
    }
    so_wipe(key, sizeof key);
    if (lfd >= 0)
        close(lfd);
    free(cards);
    if (!rc)
        rc = agree(comm, ok, w, all_ok);
    if (!rc && !*all_ok)
        so_log(SO_LOG_WARN, "%s: not every member could connect; it stays on MPI", name);
    return rc;
}
