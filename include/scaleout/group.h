/* A process group as the engine sees it: the collective vocabulary of the
 * communication layer behind a table of function pointers, so strategies
 * (src/train) reduce-scatter, gather and reduce without including MPI or the
 * comm headers. src/job/dist.c fills it from libscaleout_comm
 * (scaleout/comm_async.h: same semantics, documented there and in
 * docs/COLLECTIVES.md); a test may fill it with a fake of its own (struct
 * so_handle is then the fake's).
 *
 * Everything is non-blocking and returns a handle that the caller gives back
 * exactly once: test (when it says done), wait, then (a continuation run by
 * the communication thread; its handle replaces this one) or release. The
 * buffers belong to the communication layer until the handle completes.
 * Collectives of a group run one at a time in submission order, so every
 * rank submits them in the same order. BF16 / F16 buffers are reduced in
 * FP32 and rounded once per hop.
 *
 * Example, ZeRO-style: reduce-scatter a gradient bucket as backward closes it,
 * step the shard, gather the parameters back:
 *     so_group_ireduce_scatter(g, grads, my_shard, n, counts, SO_DTYPE_F32, SO_REDUCE_AVG, NULL, &h);
 *     ... backward goes on ...
 *     so_group_wait(g, h);   optimizer over my shard;
 *     so_group_iallgather(g, my_params, params, n, counts, SO_DTYPE_F32, NULL, &h); */
#ifndef SCALEOUT_GROUP_H
#define SCALEOUT_GROUP_H

#include <stddef.h>

#include "scaleout/dtype.h"

typedef struct so_handle so_handle; /* the implementation's handle */
typedef struct so_group so_group;

/* A continuation (comm_async.h): runs on the communication thread with the
 * result of the handle it follows; may submit operations and name one in
 * *follow, whose completion then completes the continuation's own handle.
 * Must not wait for a handle. Returns 0 or an SO_E* code. */
typedef int (*so_then_fn)(void *arg, int status, so_handle **follow);

/* Subgroups of a group, owned by it. */
typedef enum {
    SO_GROUP_NODE,    /* the ranks of my node */
    SO_GROUP_CROSS,   /* the ranks with my node rank, one per node (HYBRID_SHARD's replicas) */
    SO_GROUP_LEADERS  /* node rank 0 of every node (NULL on the other ranks) */
} so_group_kind;

/* Per-call choices; NULL = defaults. Zero-initialised = defaults too. */
typedef struct {
    so_dtype wire; /* F32 buffers sent as SO_DTYPE_BF16 / F16 (rounded once on the way in,
                    * the same bits on every rank after); SO_DTYPE_F32 = as they are */
    int tag;       /* an id for stall messages and the operation log */
} so_group_opts;

/* counts: NULL for even blocks of count (the first count % size one longer,
 * block i for rank i), else counts[0..size) laid out in rank order, summing
 * to count; read until the handle completes. In place: reduce-scatter when
 * recv == send + block offset; allgather when send == recv + block offset;
 * allreduce and bcast when send == recv. */
typedef struct so_group_ops {
    int (*iallreduce)(so_group *g, const void *send, void *recv, size_t count, so_dtype dt, so_reduce_op op,
                      const so_group_opts *o, so_handle **out);
    int (*ireduce_scatter)(so_group *g, const void *send, void *recv, size_t count, const size_t *counts,
                           so_dtype dt, so_reduce_op op, const so_group_opts *o, so_handle **out);
    int (*iallgather)(so_group *g, const void *send, void *recv, size_t count, const size_t *counts, so_dtype dt,
                      const so_group_opts *o, so_handle **out);
    int (*ibcast)(so_group *g, void *buf, size_t count, so_dtype dt, int root, const so_group_opts *o,
                  so_handle **out);
    int (*isend)(so_group *g, const void *buf, size_t count, so_dtype dt, int peer, int tag, so_handle **out);
    int (*irecv)(so_group *g, void *buf, size_t count, so_dtype dt, int peer, int tag, so_handle **out);
    int (*test)(so_group *g, so_handle *h, int *done);
    int (*wait)(so_group *g, so_handle *h);
    int (*then)(so_group *g, so_handle *h, so_then_fn fn, void *arg, so_handle **next);
    void (*release)(so_group *g, so_handle *h);
    /* The subgroup of g (owned by g); *out = NULL where this rank is not in
     * one (leaders). SO_GROUP_CROSS is made on first use: collective over g. */
    int (*sub)(so_group *g, so_group_kind kind, so_group **out);
    /* *arrived = 1 when peer's message with tag waits for its irecv; only
     * while none of this process's handles is outstanding (comm_async.h's
     * so_comm_probe_from). NULL in a group that cannot. */
    int (*probe)(so_group *g, int peer, int tag, int *arrived);
} so_group_ops;

struct so_group {
    const so_group_ops *ops;
    void *impl;     /* the implementation's group (libscaleout_comm: a so_comm) */
    int rank, size; /* this rank's number in the group, and the group's size */
};

/* The calls, spelled as functions. */
static inline int so_group_iallreduce(so_group *g, const void *send, void *recv, size_t count, so_dtype dt,
                                      so_reduce_op op, const so_group_opts *o, so_handle **out)
{
    return g->ops->iallreduce(g, send, recv, count, dt, op, o, out);
}
static inline int so_group_ireduce_scatter(so_group *g, const void *send, void *recv, size_t count,
                                           const size_t *counts, so_dtype dt, so_reduce_op op,
                                           const so_group_opts *o, so_handle **out)
{
    return g->ops->ireduce_scatter(g, send, recv, count, counts, dt, op, o, out);
}
static inline int so_group_iallgather(so_group *g, const void *send, void *recv, size_t count,
                                      const size_t *counts, so_dtype dt, const so_group_opts *o, so_handle **out)
{
    return g->ops->iallgather(g, send, recv, count, counts, dt, o, out);
}
static inline int so_group_ibcast(so_group *g, void *buf, size_t count, so_dtype dt, int root,
                                  const so_group_opts *o, so_handle **out)
{
    return g->ops->ibcast(g, buf, count, dt, root, o, out);
}
static inline int so_group_isend(so_group *g, const void *buf, size_t count, so_dtype dt, int peer, int tag,
                                 so_handle **out)
{
    return g->ops->isend(g, buf, count, dt, peer, tag, out);
}
static inline int so_group_irecv(so_group *g, void *buf, size_t count, so_dtype dt, int peer, int tag,
                                 so_handle **out)
{
    return g->ops->irecv(g, buf, count, dt, peer, tag, out);
}
static inline int so_group_test(so_group *g, so_handle *h, int *done) { return g->ops->test(g, h, done); }
static inline int so_group_wait(so_group *g, so_handle *h) { return g->ops->wait(g, h); }
static inline int so_group_then(so_group *g, so_handle *h, so_then_fn fn, void *arg, so_handle **next)
{
    return g->ops->then(g, h, fn, arg, next);
}
static inline void so_group_release(so_group *g, so_handle *h) { g->ops->release(g, h); }
static inline int so_group_sub(so_group *g, so_group_kind kind, so_group **out)
{
    return g->ops->sub(g, kind, out);
}
static inline int so_group_probe(so_group *g, int peer, int tag, int *arrived)
{
    return g->ops->probe(g, peer, tag, arrived);
}

/* Blocking in-place reduction of a few values (losses, counters, norms):
 * iallreduce + wait. */
static inline int so_group_allreduce(so_group *g, void *buf, size_t count, so_dtype dt, so_reduce_op op)
{
    so_handle *h;
    int rc = so_group_iallreduce(g, buf, buf, count, dt, op, NULL, &h);
    return rc ? rc : so_group_wait(g, h);
}

#endif
