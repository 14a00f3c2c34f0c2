/* Private to libscaleout_comm, transport layer: point-to-point byte messages
 * among the ranks of one group behind one interface (gloo's transport Pair,
 * MPICH's generic transport), so every algorithm above (coll_util.c, the
 * allreduce_ / reduce_scatter_ / allgather_ / bcast_ files) is written once
 * and runs on each transport:
 *   mpi  tp_mpi.c  MPI_Isend / MPI_Irecv on a communicator of the group
 *   shm  tp_shm.c  a FIFO channel per ordered pair in an MPI-3 shared window
 *   tcp  tp_tcp.c  scaleout's sockets, one authenticated connection per
 *                  direction and pair, the mesh's framing (tcp_p2p.c)
 * Messages between one pair with one tag match in posting order; sizes must
 * match. A transport progresses ALL its posted messages whenever any of them
 * is tested (as MPI does), so an algorithm may wait on its receives while
 * its sends are still under way. */
#ifndef SCALEOUT_COMM_TP_H
#define SCALEOUT_COMM_TP_H

#include "comm_internal.h"

#define SO_TP_NONE (-1)                   /* no peer: the post completes at once (MPI_PROC_NULL) */
#define SO_TP_MAX_BYTES ((size_t)1 << 30) /* bytes in one message at most (MPI counts are int) */

typedef struct so_tp so_tp;

/* A posted message: an MPI request (mpi), a slot of the transport's own
 * table (shm) or a message of the tcp mesh (tcp; NULL: none). Owned by the
 * caller until a test says done. */
typedef struct {
    MPI_Request mpi;
    int slot;
    struct so_tcp_msg *msg;
} so_tp_req;

typedef struct so_tp_ops {
    /* Posts a send (send = 1) or a receive of `bytes` with group rank peer
     * (SO_TP_NONE: a request complete at once). The buffer is the transport's
     * until the request completes. */
    int (*post)(so_tp *t, void *buf, size_t bytes, int peer, int tag, int send, so_tp_req *r);
    /* Moves what can move now on every posted message of t, then *done = 1
     * when all n of r completed (and releases them), else 0. */
    int (*test)(so_tp *t, so_tp_req *r, int n, int *done);
    /* Sleeps until data may have moved, at most max_s seconds (poll() on
     * sockets). NULL: the wait backs off with short sleeps instead. */
    void (*idle)(so_tp *t, double max_s);
    void (*free)(so_tp *t);
} so_tp_ops;

struct so_tp {
    const so_tp_ops *ops;
    so_transport kind;
    int rank, size;    /* in the group */
    MPI_Comm comm;     /* the group's communicator it was made over */
    int prefers_ring;  /* one connection per direction: a ring keeps every one busy (tcp) */
};

/* Waits until the n requests complete, watched by w (stall warning, timeout,
 * the progress hook): spins first (so_coll_spin_s, yielding the core when
 * so_coll_yield), then sleeps in t->ops->idle or backs off. */
int so_tp_wait(so_tp *t, so_waiter *w, so_tp_req *r, int n);

/* The transport of `kind` over comm (SO_TRANSPORT_AUTO means mpi): made on
 * first use, collective over comm then, and cached on comm (freed with it).
 * SO_EINVAL when it cannot run on these ranks (shm across hosts). */
int so_tp_get(MPI_Comm comm, so_transport kind, so_waiter *w, so_tp **out);
/* The tcp transport over comm where every rank could connect; otherwise
 * (agreed: so_tp_tcp_new's SO_EUNSUP) one warning saying that `what` stays
 * on MPI, and MPI's transport, now and on every later call for comm. */
int so_tp_tcp_or_mpi(MPI_Comm comm, so_waiter *w, const char *what, so_tp **out);

/* The transports (tp_get.c makes them through these). */
int so_tp_mpi_new(MPI_Comm comm, so_tp **out);
int so_tp_shm_new(MPI_Comm comm, so_waiter *w, so_tp **out);
/* SO_EUNSUP (a warning logged on every rank) when some rank could not connect. */
int so_tp_tcp_new(MPI_Comm comm, so_waiter *w, so_tp **out);

#endif
