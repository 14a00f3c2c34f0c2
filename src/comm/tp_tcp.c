/* The tcp transport (tp.h): scaleout's own sockets, one authenticated
 * connection per direction and pair of the group (tcp_setup: a fresh secret
 * over MPI, HMAC-SHA256 both ways), carrying the point-to-point mesh's
 * framing (tcp_p2p.c: every message behind a header whose length must equal
 * the posted receive's before a byte is read into it). No thread: whoever
 * tests moves every posted message, as the tp contract asks, and idles in
 * poll() on the sockets. Every algorithm of the vocabulary runs over it;
 * hier's step across hosts is the ring algorithm over it (allreduce_hier_across.c).
 *
 * Why sockets of our own when MPI has a TCP transport: Open MPI's keeps an
 * emulated full-duplex link about half used during an allreduce, whatever
 * the algorithm over it (docs/CLUSTER.md); plain sockets fill both
 * directions, as gloo's and NCCL's socket transports do. */
#include "tcp_internal.h"
#include "tp.h"

#include "scaleout/err.h"

#include <stdlib.h>

#define TCP_MIN_BYTES ((size_t)64 << 10) /* hier's step across hosts: below, latency rules (MPI's rd) */

typedef struct {
    so_tp base;
    so_tcp_mesh *mesh;
} tp_tcp;

static int tcp_post(so_tp *t, void *buf, size_t bytes, int peer, int tag, int send, so_tp_req *r)
{
    tp_tcp *c = (tp_tcp *)t;
    r->slot = -1, r->msg = NULL;
    if (peer == SO_TP_NONE)
        return 0;
    if (bytes > SO_TP_MAX_BYTES || peer < 0 || peer >= t->size || peer == t->rank)
        return so_err(SO_EINVAL, "tcp transport: message of %zu bytes to rank %d of %d (at most %zu bytes, another rank)",
                      bytes, peer, t->size, SO_TP_MAX_BYTES);
    so_tcp_msg *m;
    int rc = so_tcp_mesh_post(c->mesh, buf, bytes, peer, tag, send, &m);
    if (!rc)
        r->msg = m;
    return rc;
}

static int tcp_test(so_tp *t, so_tp_req *r, int n, int *done)
{
    tp_tcp *c = (tp_tcp *)t;
    int rc = c->mesh ? so_tcp_mesh_progress(c->mesh, 0) : 0;
    *done = 1;
    for (int i = 0; i < n && !rc && *done; i++) {
        int one = 1;
        if (r[i].msg)
            rc = so_tcp_msg_test(c->mesh, r[i].msg, &one);
        *done = one;
    }
    if (rc || !*done)
        return rc;
    for (int i = 0; i < n; i++) { /* all complete: released */
        free(r[i].msg);
        r[i].msg = NULL;
    }
    return 0;
}

static void tcp_idle(so_tp *t, double max_s)
{
    tp_tcp *c = (tp_tcp *)t;
    if (c->mesh)
        (void)so_tcp_mesh_progress(c->mesh, (int)(max_s * 1000)); /* an error shows at the next test */
}

static void tcp_free(so_tp *t)
{
    so_tcp_mesh_free(((tp_tcp *)t)->mesh);
    free(t);
}

static const so_tp_ops tcp_ops = {tcp_post, tcp_test, tcp_idle, tcp_free};

int so_tp_tcp_new(MPI_Comm comm, so_waiter *w, so_tp **out)
{
    *out = NULL;
    tp_tcp *c = calloc(1, sizeof *c);
    if (!c)
        return so_err(SO_ENOMEM, "tcp transport: out of memory");
    c->base = (so_tp){&tcp_ops, SO_TRANSPORT_TCP, 0, 0, comm, 1};
    MPI_Comm_rank(comm, &c->base.rank);
    MPI_Comm_size(comm, &c->base.size);
    int rc = c->base.size > 1 ? so_tcp_mesh_open_polled(comm, w, &c->mesh) : 0;
    if (!rc && c->base.size > 1 && !c->mesh)
        rc = so_err(SO_EUNSUP, "tcp transport: not every rank of the group could connect (see the warnings)");
    if (rc) {
        free(c);
        return rc;
    }
    *out = &c->base;
    return 0;
}

int so_tcp_wanted(size_t bytes)
{
    return bytes >= TCP_MIN_BYTES && tcp_enabled();
}
