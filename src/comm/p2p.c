/* Byte-level point-to-point for CLI features (checkpoint partner copies):
 * a channel on its own duplicated communicator, so its messages never match
 * the collectives' tags, and a non-blocking send+receive pair that is posted
 * and tested by the training thread between steps. Under
 * MPI_THREAD_SERIALIZED the requests may stay outstanding while the async
 * engine's thread makes its own MPI calls (Open MPI and MPICH progress all
 * requests from any call), as long as the two threads never call MPI at the
 * same time: the training thread only posts and tests here while the engine
 * is idle (so_comm_check_idle). */
#include "comm_internal.h"

#include <stdlib.h>

#include "scaleout/err.h"

#define TAG_XFER 0x5cf0

struct so_comm_p2p {
    so_comm *c;
    MPI_Comm comm;
};

struct so_comm_xfer {
    int n;               /* requests: ceil(rn / chunk) receives, then ceil(sn / chunk) sends */
    int nr;
    MPI_Request req[];
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
    SO_MPI_TRY(MPI_Comm_dup(c->world, &p->comm));
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

static size_t chunks(size_t n) { return n ? (n + SO_MPI_CHUNK - 1) / SO_MPI_CHUNK : 0; }

/* Posts byte chunks of buf: sends (send = 1) or receives. */
static int post(so_comm_p2p *p, void *buf, size_t n, int peer, int send, MPI_Request *req)
{
    char *b = buf;
    for (size_t off = 0, i = 0; off < n; off += SO_MPI_CHUNK, i++) {
        int len = (int)(n - off < SO_MPI_CHUNK ? n - off : SO_MPI_CHUNK);
        int mrc = send ? MPI_Isend(b + off, len, MPI_BYTE, peer, TAG_XFER, p->comm, &req[i])
                       : MPI_Irecv(b + off, len, MPI_BYTE, peer, TAG_XFER, p->comm, &req[i]);
        if (mrc != MPI_SUCCESS)
            return so_mpi_err(mrc, send ? "MPI_Isend" : "MPI_Irecv");
    }
    return 0;
}

int so_comm_exchange_recv(so_comm_p2p *p, void *rbuf, size_t rn, int src, size_t sn, so_comm_xfer **out)
{
    *out = NULL;
    int rc = so_comm_check_idle(p->c);
    if (rc)
        return rc;
    size_t ns = chunks(sn), nr = chunks(rn);
    so_comm_xfer *x = calloc(1, sizeof *x + (ns + nr) * sizeof(MPI_Request));
    if (!x)
        return so_err(SO_ENOMEM, "out of memory");
    x->n = (int)(ns + nr);
    x->nr = (int)nr;
    for (int i = 0; i < x->n; i++)
        x->req[i] = MPI_REQUEST_NULL;
    rc = post(p, rbuf, rn, src, 0, x->req);
    if (rc) { /* not expected after a successful start-up; the caller aborts the job */
        free(x);
        return rc;
    }
    *out = x;
    return 0;
}

int so_comm_exchange_send(so_comm_p2p *p, so_comm_xfer *x, const void *sbuf, size_t sn, int dst)
{
    int rc = so_comm_check_idle(p->c);
    if (!rc && chunks(sn) > (size_t)(x->n - x->nr))
        rc = so_err(SO_EINVAL, "partner exchange: %zu bytes to send, room for %d chunks", sn, x->n - x->nr);
    return rc ? rc : post(p, (void *)sbuf, sn, dst, 1, x->req + x->nr);
}

int so_comm_exchange_test(so_comm_p2p *p, so_comm_xfer *x, int wait, int *done)
{
    int rc = so_comm_check_idle(p->c), flag = 0;
    *done = 0;
    if (rc)
        return rc;
    if (wait) {
        so_waiter w;
        so_waiter_init(&w, p->c, "checkpoint partner exchange");
        rc = so_waiter_wait(&w, x->n, x->req);
        flag = !rc;
    } else {
        SO_IGNORE_STATUSES_BEGIN
        int mrc = MPI_Testall(x->n, x->req, &flag, MPI_STATUSES_IGNORE);
        SO_IGNORE_STATUSES_END
        if (mrc != MPI_SUCCESS)
            rc = so_mpi_err(mrc, "MPI_Testall");
    }
    if (!rc && flag) {
        free(x);
        *done = 1;
    }
    return rc;
}

struct so_comm_isum {
    MPI_Request req;
};

int so_comm_isum_start(so_comm_p2p *p, int64_t *v, int n, so_comm_isum **out)
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
    *out = r;
    return 0;
}

int so_comm_isum_wait(so_comm_p2p *p, so_comm_isum *r)
{
    int rc = so_comm_check_idle(p->c);
    if (rc)
        return rc;
    so_waiter w;
    so_waiter_init(&w, p->c, "checkpoint progress agreement");
    rc = so_waiter_wait(&w, 1, &r->req);
    free(r);
    return rc;
}
