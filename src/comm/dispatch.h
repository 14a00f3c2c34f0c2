/* Private to libscaleout_comm, selection layer: one collective call as data
 * (so_coll_call) and the one function that runs it -- argument checks, the
 * group's algorithm and transport, AVG's last step, and the element-type
 * conversions of a wire type -- shared by the training thread's blocking
 * calls (coll.c) and the communication thread (engine.c). */
#ifndef SCALEOUT_COMM_DISPATCH_H
#define SCALEOUT_COMM_DISPATCH_H

#include "coll_internal.h"
#include "scaleout/comm_async.h"

typedef struct {
    so_coll_kind kind;
    int algo;              /* index of the kind's enum, or SO_ALGO_DEFAULT; allreduce also AUTO */
    const void *send;      /* bcast: unused (buf is recv) */
    void *recv;
    size_t count;          /* elements: the vector (allreduce, bcast) or the total of the blocks */
    const size_t *counts;  /* reduce-scatter / allgather: per-rank blocks, NULL: even */
    so_dtype dt;           /* of the buffers */
    so_dtype wire;         /* on the wire (F32 buffers may name BF16 / F16), else dt */
    so_reduce_op op;
    int root;
    so_transport transport; /* AUTO: the group's */
} so_coll_call;

/* Grow-only memory a caller keeps between calls (the conversions of a wire
 * type, block offsets); zero-initialised; so_scratch_free releases it. */
typedef struct {
    void *p;
    size_t bytes;
} so_scratch;
void so_scratch_free(so_scratch *s);

/* Checks a call against group c (SO_EINVAL with a message): buffers, counts,
 * root, element type and op. Done at submit too, so bad input never reaches
 * the communication thread. */
int so_coll_check(const so_comm *c, const so_coll_call *call);

/* Runs the call on group c over comm (c->mcomm on the training thread,
 * c->ecomm on the communication thread), every wait through w. *algo_ran
 * (may be NULL) receives the name of the algorithm that ran, *tp_ran the
 * transport's. */
int so_coll_run(so_comm *c, MPI_Comm comm, const so_coll_call *call, so_waiter *w, so_scratch *scratch,
                const char **algo_ran, const char **tp_ran);

#endif
