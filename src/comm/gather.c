/* Byte-level point-to-point and gather for tools that need more than the
 * collectives on floats: the profiler's clock ping-pong and the merge of every
 * rank's timeline onto rank 0. Non-blocking MPI calls completed by the
 * watched wait, so a lost rank ends in a timeout, not a hang. */
#include <limits.h>
#include <stdlib.h>

#include "comm_internal.h"
#include "scaleout/err.h"

/* A tag space of our own on the group's communicator (so_comm_isend uses another dup). */
#define SO_P2P_TAG_BASE 4242

static int check_peer(const so_comm *c, int peer, size_t n)
{
    if (peer < 0 || peer >= c->size || peer == c->rank)
        return so_err(SO_EINVAL, "point-to-point peer %d invalid (rank %d of %d)", peer, c->rank, c->size);
    if (n > INT_MAX)
        return so_err(SO_EINVAL, "point-to-point message of %zu bytes too large", n);
    return so_comm_check_idle(c);
}

int so_comm_send_bytes(so_comm *c, const void *buf, size_t n, int dest, int tag)
{
    int rc = check_peer(c, dest, n);
    if (rc)
        return rc;
    so_waiter w;
    so_waiter_init(&w, c, "send");
    MPI_Request req;
    SO_MPI_TRY(MPI_Isend(buf, (int)n, MPI_BYTE, dest, SO_P2P_TAG_BASE + tag, c->mcomm, &req));
    rc = so_waiter_wait(&w, 1, &req);
out:
    return rc;
}

int so_comm_recv_bytes(so_comm *c, void *buf, size_t n, int src, int tag)
{
    int rc = check_peer(c, src, n);
    if (rc)
        return rc;
    so_waiter w;
    so_waiter_init(&w, c, "recv");
    MPI_Request req;
    SO_MPI_TRY(MPI_Irecv(buf, (int)n, MPI_BYTE, src, SO_P2P_TAG_BASE + tag, c->mcomm, &req));
    rc = so_waiter_wait(&w, 1, &req);
out:
    return rc;
}

/* Gathers the sizes, then the bytes (MPI_Igatherv); the root's buffer is one
 * allocation holding every rank's bytes in rank order. */
int so_comm_gather_bytes(so_comm *c, const void *buf, size_t n, int root, void **out, size_t *sizes)
{
    if (root < 0 || root >= c->size)
        return so_err(SO_EINVAL, "gather root %d out of range (size %d)", root, c->size);
    int rc = so_comm_check_idle(c);
    if (rc)
        return rc;
    int p = c->size, me = c->rank == root;
    uint64_t mine = n, *all = me ? calloc((size_t)p, sizeof *all) : NULL;
    int *counts = me ? calloc((size_t)p, sizeof *counts) : NULL, *displs = me ? calloc((size_t)p, sizeof *displs) : NULL;
    char *data = NULL;
    so_waiter w;
    so_waiter_init(&w, c, "gather");
    MPI_Request req;
    if (me && (!all || !counts || !displs)) {
        rc = so_err(SO_ENOMEM, "out of memory in gather");
        goto out;
    }
    SO_MPI_TRY(MPI_Igather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, root, c->mcomm, &req));
    if ((rc = so_waiter_wait(&w, 1, &req)))
        goto out;
    uint64_t total = 0;
    for (int i = 0; me && i < p; i++) {
        displs[i] = (int)total;
        counts[i] = (int)all[i];
        total += all[i];
        sizes[i] = (size_t)all[i];
    }
    /* Every rank must enter the Igatherv even if the root cannot take it, so
     * the root reports the overflow after the exchange of sizes only. */
    int too_big = me && total > INT_MAX;
    if (me && !too_big && !(data = malloc(total ? total : 1)))
        too_big = -1;
    SO_MPI_TRY(MPI_Ibcast(&too_big, 1, MPI_INT, root, c->mcomm, &req));
    if ((rc = so_waiter_wait(&w, 1, &req)))
        goto out;
    if (too_big) {
        rc = so_err(too_big > 0 ? SO_EINVAL : SO_ENOMEM, "gather of more than 2 GiB (or out of memory) on rank %d",
                    root);
        goto out;
    }
    if (n > INT_MAX) {
        rc = so_err(SO_EINVAL, "gather of %zu bytes from one rank too large", n);
        goto out;
    }
    SO_MPI_TRY(MPI_Igatherv(buf, (int)n, MPI_BYTE, data, counts, displs, MPI_BYTE, root, c->mcomm, &req));
    rc = so_waiter_wait(&w, 1, &req);
out:
    if (me && !rc)
        *out = data;
    else
        free(data);
    free(all);
    free(counts);
    free(displs);
    return rc;
}
