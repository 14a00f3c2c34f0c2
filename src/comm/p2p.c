/* Non-blocking point-to-point of byte buffers: a group's requests
 * (so_comm_isend / irecv on the group's own duplicated communicator, so user
 * tags never meet the collectives'; pipeline stages pass activations with
 * them) and, built on the same requests, the checkpoint's channel (partner
 * exchanges and a non-blocking int64 sum on a communicator of its own).
 * Under MPI_THREAD_SERIALIZED the requests may stay outstanding while the
 * async engine's thread makes its own MPI calls (Open MPI and MPICH progress
 * all requests from any call), as long as the two threads never call MPI at
 * the same time: the training thread only posts and tests here while the
 * engine is idle (so_comm_check_idle). */
#include "tcp_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "scaleout/err.h"
#include "scaleout/log.h"

#define TAG_XFER 0x5cf0
#define TAG_MAX 32767 /* the MPI standard's smallest allowed MPI_TAG_UB */

/* One message cut into chunks of at most the group's p2p_chunk bytes (MPI
 * counts are int): one MPI request per chunk, and one for an empty message
 * (a notification: it still has to be matched). */
struct so_comm_req {
    so_tcp_msg *tcp; /* over the group's TCP mesh (then n = 0), or NULL */
    int peer, send;  /* for the time-out's message */
    int n;
    MPI_Request req[];
};

/* Posts buf[0..n) as sends (send = 1) or receives from / to peer on comm. */
static int req_post(MPI_Comm comm, void *buf, size_t n, size_t chunk, int peer, int tag, int send,
                    so_comm_req **out)
{
    size_t k = n ? (n - 1) / chunk + 1 : 1;
    *out = NULL;
    if (k > INT_MAX / 2)
        return so_err(SO_EINVAL, "point-to-point message of %zu bytes too large", n);
    so_comm_req *r = calloc(1, sizeof *r + k * sizeof(MPI_Request));
    if (!r)
        return so_err(SO_ENOMEM, "point-to-point request: out of memory");
    r->n = (int)k;
    r->peer = peer, r->send = send;
    char *b = buf;
    for (size_t i = 0; i < k; i++) {
        size_t off = i * chunk;
        int len = (int)(n - off < chunk ? n - off : chunk);
        int mrc = send ? MPI_Isend(b + off, len, MPI_BYTE, peer, tag, comm, &r->req[i])
                       : MPI_Irecv(b + off, len, MPI_BYTE, peer, tag, comm, &r->req[i]);
        if (mrc != MPI_SUCCESS) { /* not expected once MPI is up; the caller aborts the job */
            free(r);
            return so_mpi_err(mrc, send ? "MPI_Isend" : "MPI_Irecv");
        }
    }
    *out = r;
    return 0;
}

/* *done = 1 when every chunk of r completed (r is not freed). */
static int req_poll(so_comm_req *r, int *done)
{
    SO_IGNORE_STATUSES_BEGIN
    int mrc = MPI_Testall(r->n, r->req, done, MPI_STATUSES_IGNORE);
    SO_IGNORE_STATUSES_END
    return mrc == MPI_SUCCESS ? 0 : so_mpi_err(mrc, "MPI_Testall");
}

/* Watched wait for every chunk of r (r is not freed). It spins first, as a
 * collective's does: a pipeline stage waits here for its neighbour's
 * micro-batch, on the critical path, and a backoff sleep of up to 200 us
 * added that much to every hand-over (0.2-0.4 ms a micro-batch measured). */
static int req_block(const so_comm *c, so_comm_req *r, const char *what)
{
    so_waiter w;
    so_waiter_init(&w, c, what);
    return so_coll_wait(&w, r->n, r->req);
}

/* ---- a group's requests ---------------------------------------------------------- */

static int check_p2p(const so_comm *c, int peer, int tag, const void *buf, size_t bytes)
{
    if (peer < 0 || peer >= c->size)
        return so_err(SO_EINVAL, "point-to-point peer %d out of range (group of %d)", peer, c->size);
    if (tag < 0 || tag > TAG_MAX)
        return so_err(SO_EINVAL, "point-to-point tag %d outside 0..%d", tag, TAG_MAX);
    if (bytes && !buf)
        return so_err(SO_EINVAL, "point-to-point message of %zu bytes with a NULL buffer", bytes);
    return so_comm_check_idle(c);
}

/* A request over the group's TCP mesh (peers on other hosts, so_comm_p2p_connect). */
static int tcp_post(so_comm *c, void *buf, size_t bytes, int peer, int tag, int send, so_comm_req **out)
{
    so_comm_req *r = calloc(1, sizeof *r);
    if (!r)
        return so_err(SO_ENOMEM, "point-to-point request: out of memory");
    r->peer = peer, r->send = send;
    int rc = so_tcp_mesh_post(c->tcp_mesh, buf, bytes, peer, tag, send, &r->tcp);
    if (rc)
        free(r);
    else
        *out = r;
    return rc;
}

int so_comm_isend(so_comm *c, const void *buf, size_t bytes, int dst, int tag, so_comm_req **out)
{
    *out = NULL;
    int rc = check_p2p(c, dst, tag, buf, bytes);
    if (!rc && so_tcp_mesh_has(c->tcp_mesh, dst))
        return tcp_post(c, (void *)buf, bytes, dst, tag, 1, out);
    return rc ? rc : req_post(c->p2p, (void *)buf, bytes, c->p2p_chunk, dst, tag, 1, out);
}

int so_comm_irecv(so_comm *c, void *buf, size_t bytes, int src, int tag, so_comm_req **out)
{
    *out = NULL;
    int rc = check_p2p(c, src, tag, buf, bytes);
    if (!rc && so_tcp_mesh_has(c->tcp_mesh, src))
        return tcp_post(c, buf, bytes, src, tag, 0, out);
    return rc ? rc : req_post(c->p2p, buf, bytes, c->p2p_chunk, src, tag, 0, out);
}

static void req_free(so_comm_req *r)
{
    free(r->tcp);
    free(r);
}

int so_comm_p2p_connect(so_comm *c)
{
    if (c->tcp_mesh || c->size < 2 || !tcp_enabled())
        return 0;
    so_waiter w;
    so_waiter_init(&w, c, "connecting the tcp point-to-point mesh");
    int rc = so_tcp_mesh_open(c->p2p, &w, &c->tcp_mesh), peers = 0;
    for (int j = 0; j < c->size; j++)
        peers += so_tcp_mesh_has(c->tcp_mesh, j);
    if (!rc && peers)
        so_log(SO_LOG_INFO, "point-to-point with %d rank(s) over scaleout's tcp connections", peers);
    return rc;
}

int so_comm_p2p_on_tcp(const so_comm *c, int peer)
{
    return peer >= 0 && peer < c->size && so_tcp_mesh_has(c->tcp_mesh, peer);
}

int so_comm_req_test(so_comm *c, so_comm_req *r, int *done)
{
    *done = 0;
    int rc = so_comm_check_idle(c);
    if (!rc)
        rc = r->tcp ? so_tcp_msg_test(c->tcp_mesh, r->tcp, done) : req_poll(r, done);
    if (!rc && *done)
        req_free(r);
    return rc;
}

/* "point-to-point receive from rank 3 (10.0.0.2:40123)": the peer by world rank
 * (and its address on the TCP mesh), so a time-out names whom it waited for. */
static void req_what(const so_comm *c, const so_comm_req *r, char *buf, size_t len)
{
    char peer[64];
    if (r->tcp)
        so_tcp_mesh_peer_name(c->tcp_mesh, r->peer, peer, sizeof peer);
    else
        snprintf(peer, sizeof peer, "rank %d", so_world_rank(c->p2p, r->peer));
    snprintf(buf, len, "point-to-point %s %s", r->send ? "send to" : "receive from", peer);
}

int so_comm_req_wait(so_comm *c, so_comm_req *r)
{
    char what[96];
    int rc = so_comm_check_idle(c);
    if (!rc)
        req_what(c, r, what, sizeof what);
    if (!rc && r->tcp) {
        so_waiter w;
        so_waiter_init(&w, c, what);
        rc = so_tcp_msg_wait(c->tcp_mesh, r->tcp, &w);
    } else if (!rc) {
        rc = req_block(c, r, what);
    }
    if (!rc)
        req_free(r);
    return rc;
}

/* ---- the checkpoint's channel ------------------------------------------------------- */

struct so_comm_p2p {
    so_comm *c;
    MPI_Comm comm;
};

struct so_comm_xfer {
    so_comm_req *recv, *send; /* send is NULL until exchange_send */
    size_t room;              /* bytes the send may have */
};

int so_comm_p2p_create(so_comm *c, so_comm_p2p **out)
{
    int rc = so_comm_check_idle(c);
    *out = NULL;
    if (rc)
        return rc;
    so_comm_p2p *p = calloc(1, sizeof *p);
    if (!p)
        return so_err(SO_ENOMEM, "out of memory");
    p->c = c;
    p->comm = MPI_COMM_NULL;
    SO_MPI_TRY(MPI_Comm_dup(c->mcomm, &p->comm));
    SO_MPI_TRY(MPI_Comm_set_errhandler(p->comm, MPI_ERRORS_RETURN));
out:
    if (rc) {
        if (p->comm != MPI_COMM_NULL)
            MPI_Comm_free(&p->comm);
        free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void so_comm_p2p_destroy(so_comm_p2p *p)
{
    if (!p)
        return;
    MPI_Comm_free(&p->comm);
    free(p);
}

static void xfer_free(so_comm_xfer *x)
{
    free(x->recv);
    free(x->send);
    free(x);
}

int so_comm_exchange_recv(so_comm_p2p *p, void *rbuf, size_t rn, int src, size_t sn, so_comm_xfer **out)
{
    *out = NULL;
    int rc = so_comm_check_idle(p->c);
    if (rc)
        return rc;
    so_comm_xfer *x = calloc(1, sizeof *x);
    if (!x)
        return so_err(SO_ENOMEM, "out of memory");
    x->room = sn;
    if ((rc = req_post(p->comm, rbuf, rn, p->c->p2p_chunk, src, TAG_XFER, 0, &x->recv))) {
        xfer_free(x);
        return rc;
    }
    *out = x;
    return 0;
}

int so_comm_exchange_send(so_comm_p2p *p, so_comm_xfer *x, const void *sbuf, size_t sn, int dst)
{
    int rc = so_comm_check_idle(p->c);
    if (!rc && (sn > x->room || x->send))
        rc = so_err(SO_EINVAL, "partner exchange: %zu bytes to send, room for %zu (once)", sn, x->room);
    return rc ? rc : req_post(p->comm, (void *)sbuf, sn, p->c->p2p_chunk, dst, TAG_XFER, 1, &x->send);
}

int so_comm_exchange_test(so_comm_p2p *p, so_comm_xfer *x, int wait, int *done)
{
    int rc = so_comm_check_idle(p->c), rdone = 0, sdone = 1;
    *done = 0;
    if (rc)
        return rc;
    const char *what = "checkpoint partner exchange";
    if (wait) {
        rc = req_block(p->c, x->recv, what);
        if (!rc && x->send)
            rc = req_block(p->c, x->send, what);
        rdone = !rc;
    } else if (!(rc = req_poll(x->recv, &rdone)) && x->send) {
        rc = req_poll(x->send, &sdone);
    }
    if (!rc && rdone && sdone) {
        xfer_free(x);
        *done = 1;
    }
    return rc;
}

struct so_comm_isum {
    MPI_Request req;
    const char *what;
};

int so_comm_isum_start(so_comm_p2p *p, int64_t *v, int n, const char *what, so_comm_isum **out)
{
    *out = NULL;
    int rc = so_comm_check_idle(p->c);
    if (rc)
        return rc;
    so_comm_isum *r = malloc(sizeof *r);
    if (!r)
        return so_err(SO_ENOMEM, "out of memory");
    int mrc = MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, MPI_SUM, p->comm, &r->req);
    if (mrc != MPI_SUCCESS) {
        free(r);
        return so_mpi_err(mrc, "MPI_Iallreduce");
    }
    r->what = what;
    *out = r;
    return 0;
}

int so_comm_isum_wait(so_comm_p2p *p, so_comm_isum *r)
{
    int rc = so_comm_check_idle(p->c);
    if (rc)
        return rc;
    so_waiter w;
    so_waiter_init(&w, p->c, r->what);
    rc = so_waiter_wait(&w, 1, &r->req);
    free(r);
    return rc;
}
