/* Private to libscaleout_comm: the pieces every hand-written collective
 * shares -- block partitions, vectorised reduction kernels, the spinning
 * watched wait, segmented exchange-and-reduce, the fold-in/fold-out of
 * non-power-of-two process counts, the node shared-memory context and the
 * per-collective algorithm signatures (one file per algorithm). */
#ifndef SCALEOUT_COLL_INTERNAL_H
#define SCALEOUT_COLL_INTERNAL_H

#include "comm_internal.h"

#include <stdatomic.h>
#include <stdint.h>

/* Tags of our point-to-point traffic. Every collective runs on a duplicated
 * communicator, and all ranks run the same collectives in the same order, so
 * one tag per algorithm only guards against mixing phases of one call. */
enum {
    SO_TAG_RING = 0x5c01,
    SO_TAG_RD,
    SO_TAG_RAB,
    SO_TAG_TREE,
    SO_TAG_FOLD,
    SO_TAG_RS,
    SO_TAG_AG,
    SO_TAG_BCAST
};



/* ---- block partition ----------------------------------------------------------
 * count elements in p blocks as even as possible: the first count % p blocks
 * are one longer. Block i is [off, off + len). Same rule everywhere (and in
 * so_comm_block), so reduce-scatter output feeds allgather input. */
static inline void so_blk(size_t count, int p, int i, size_t *off, size_t *len)
{
    size_t q = count / (size_t)p, r = count % (size_t)p, ui = (size_t)i;
    *len = q + (ui < r);
    *off = ui * q + (ui < r ? ui : r);
}

/* x[0..n) *= scale (AVG's 1/p: a multiply, one rounding per element, the same
 * bits on every rank), unless scale is 1. */
static inline void so_scale(float *x, size_t n, float scale)
{
    if (scale != 1.0f)
        for (size_t i = 0; i < n; i++)
            x[i] *= scale;
}

/* ---- reduction kernels (coll_util.c): written so -O3 -march=native vectorises them.
 * op is SUM, MAX or MIN. dst may alias a (not b) element for element. */
void so_reduce_acc(float *dst, const float *src, size_t n, so_reduce_op op); /* dst = dst op src */
void so_reduce_out(float *dst, const float *a, const float *b, size_t n, so_reduce_op op); /* dst = a op b */

/* memcpy of n floats with non-temporal stores (ends with a store fence):
 * for buffers another core reads next (coll_util.c explains why). */
void so_copy_nt(float *dst, const float *src, size_t n);

/* ---- waits -------------------------------------------------------------------
 * so_coll_wait: spins on MPI_Testall (yielding the core when ranks outnumber
 * cores) for up to the spin budget, then falls back to so_waiter_wait, whose
 * backoff keeps a core free and whose timeout covers a lost peer. Collectives
 * spin first because a ring or halving step of a few us would otherwise be
 * noticed one backoff sleep late, at every step. */
int so_coll_wait(so_waiter *w, int n, MPI_Request *reqs);
/* 1 when this node runs more ranks than it has cores: waits must yield. */
int so_coll_oversubscribed(void);
/* Whether so_coll_wait's spin yields the core between polls. SCALEOUT_COLL_YIELD
 * = 1 always, 0 never, auto (default) when oversubscribed or when the job spans
 * several hosts: a peer across a network link needs the kernel's network
 * processing, which a rank busy-polling MPI_Testall starves on a busy machine
 * (docs/CLUSTER.md). Shared-memory waits (shm.c) keep their spin. */
int so_coll_yield(void);
/* Tells the waits whether the job spans several hosts (so_comm_init sets it,
 * for every group of the process). */
void so_coll_set_multi_host(int multi_host);
int so_coll_multi_host(void);
/* Spin budget (seconds) before a wait starts sleeping (SCALEOUT_COLL_SPIN_US). */
double so_coll_spin_s(void);

/* Sends sn floats from sbuf to dst and receives rn floats from src, through
 * one watched wait. Messages are cut into segments by a rule of their length
 * only (the same as so_xchg_reduce's), so a so_sendrecv on one side matches a
 * so_xchg_reduce on the other. dst / src may be MPI_PROC_NULL. Buffers must
 * not overlap. */
int so_sendrecv(const float *sbuf, size_t sn, int dst, float *rbuf, size_t rn, int src, int tag,
                MPI_Comm comm, so_waiter *w);

/* Sends sn floats from sbuf to dst while receiving rn floats from src and
 * combining them as out[i] = a[i] op in[i], in segments of so_coll_seg()
 * floats so the reduction of one segment overlaps the arrival of the next.
 * out may equal a; neither may overlap sbuf (the send is still in flight).
 * dst / src may be MPI_PROC_NULL (then rn floats are still required of src
 * unless src is MPI_PROC_NULL, in which case out is left alone). */
int so_xchg_reduce(const float *sbuf, size_t sn, int dst, float *out, const float *a, size_t rn,
                   int src, so_reduce_op op, int tag, MPI_Comm comm, so_waiter *w);
/* Pipeline segment (floats) of so_xchg_reduce and the ring (SCALEOUT_COLL_SEG bytes). */
size_t so_coll_seg(void);

/* ---- non-power-of-two process counts: fold-in / fold-out ----------------------
 * p = p2 + rem with p2 the largest power of two <= p. Ranks below 2*rem pair
 * up: the even one sends its vector to the odd one (which reduces it) and sits
 * out; the core algorithm runs on p2 "new ranks"; at the end the odd one sends
 * the result back. Cost: two extra steps (alpha + n beta each) on 2*rem ranks. */
typedef struct {
    int p, rank, p2, rem;
    int newrank; /* -1: this rank sits out */
} so_fold;

void so_fold_init(so_fold *f, int p, int rank);
/* Real rank of a new rank. */
static inline int so_fold_real(const so_fold *f, int nr) { return nr < f->rem ? 2 * nr + 1 : nr + f->rem; }
/* Fold-in: afterwards recv holds this rank's (possibly pre-reduced) vector on
 * participating ranks; *cur is where the core algorithm reads its first step
 * (send, or recv when something was written there). */
int so_fold_in(so_fold *f, const float *send, float *recv, size_t count, so_reduce_op op,
               const float **cur, MPI_Comm comm, so_waiter *w);
/* Fold-out: the odd partner sends the result back to the sitting-out rank. */
int so_fold_out(so_fold *f, float *recv, size_t count, MPI_Comm comm, so_waiter *w);

/* ---- node shared-memory context (shm.c) ------------------------------------------
 * Cached on a communicator as an attribute: the ranks of this (possibly
 * emulated) node, one MPI-3 shared window with a flag line and data areas per
 * rank, and the leaders communicator. Created on first use (collective). */
/* What a rank publishes in its flag line before hier's zero-copy decision:
 * the registered regions (ids, 0 = none) and offsets of its send and recv
 * buffers, and the count. Zero-copy runs only if all node ranks agree. */
typedef struct {
    uint64_t send_id, send_off, recv_id, recv_off, count;
} so_zc_pub;

/* ---- scaleout's TCP ring (tcp.c) ------------------------------------------------------
 * Sockets between the members of a group, one connection per direction of a
 * ring, for the step of hier that crosses the network. */
typedef struct so_tcp_ring so_tcp_ring;
/* Collective over comm: connects the ring. *out = NULL (and a warning logged)
 * when some member could not connect, agreed by all: use MPI then. Errors
 * only for MPI failures. */
int so_tcp_ring_open(MPI_Comm comm, so_waiter *w, so_tcp_ring **out);
void so_tcp_ring_free(so_tcp_ring *t);
/* In-place ring allreduce over the sockets (reduce-scatter, allgather): every
 * member gets identical bits. Collective over the ring's members. */
int so_tcp_allreduce(so_tcp_ring *t, float *buf, size_t count, so_reduce_op op, so_waiter *w);
/* Whether a cross-node step of count floats goes over a tcp ring: SCALEOUT_COLL_TCP
 * = 1 always, 0 never, auto (default) when the job spans hosts; from 64 KiB. */
int so_tcp_wanted(size_t count);

/* A lazily opened ring of one group: opened at its first large cross-node step. */
typedef struct {
    so_tcp_ring *ring;
    int tried; /* 1 once opened or refused: a refused ring is not tried again */
} so_tcp_slot;

typedef struct so_shm {
    MPI_Comm node;    /* this node's ranks (emulated node within the real one) */
    MPI_Comm leaders; /* node_rank 0 of every node; MPI_COMM_NULL on other ranks */
    MPI_Comm cross;   /* the ranks with this node rank on every node (hier's zero-copy) */
    MPI_Group group;  /* node's group: a registered region is usable if its group is the same */
    uint64_t serial;  /* process-unique id of this context (regions cache their group check) */
    int q, r;         /* node size, node rank */
    int nodes;        /* number of nodes */
    int equal_q;      /* every node has q ranks (zero-copy across nodes needs it) */
    int yield;        /* ranks outnumber cores: polls yield the core */
    MPI_Win win;
    size_t small_n;   /* floats per small-message buffer (two per rank) */
    size_t chunk_n;   /* floats per pipeline chunk (contribution and result areas) */
    _Atomic uint64_t **flag; /* [q] each rank's step counter, own cache line */
    float **small;    /* [q] 2 * small_n floats: double-buffered small messages */
    float **contrib;  /* [q] chunk_n floats: the slices rank j hands to the others */
    float **result;   /* [q] chunk_n floats: rank j's reduced slice of the chunk */
    so_zc_pub **pub;  /* [q] rank j's zero-copy publication (in its flag line) */
    float *zc_tmp;    /* private: SO_ZC_SUB floats, the zero-copy reduction's sub-chunk */
    struct so_regbuf *zc_send, *zc_recv; /* zero copy: this call's regions (NULL: none) */
    const float **zc_in; /* [q] zero copy: node rank j's send buffer (this call) */
    float **zc_out;   /* [q] zero copy: node rank j's recv buffer */
    uint64_t epoch;   /* steps this rank has signalled (same count on every rank) */
    uint64_t calls;   /* small-message calls: picks the small buffer */
    so_tcp_slot tcp_leaders; /* the leaders' ring (copy path) */
    so_tcp_slot tcp_cross;   /* this node rank's ring across nodes (zero-copy path) */
} so_shm;

/* The context of comm (created on first use: collective over comm, waits
 * through w). Freed with the communicator (attribute delete callback). */
int so_shm_get(MPI_Comm comm, so_waiter *w, so_shm **out);
/* so_shm_set_node_color (comm_internal.h) records the node grouping on comm
 * for contexts created later on it and its duplicates, and drops comm's
 * cached context (collective when one exists). */
/* Signals this rank's next step and waits until every node rank signalled it:
 * a barrier over shared memory, watched by w. Writes before it are visible to
 * every node rank after it (release / acquire). */
int so_shm_barrier(so_shm *s, so_waiter *w);

/* ---- registered buffers (regbuf.c) ------------------------------------------------
 * A region is one so_comm_buf_alloc: an MPI-3 shared window over the node of
 * the communicator's hier context, one buffer per node rank, every one mapped
 * in this process. The registry is process-wide -- a pointer alone must find
 * its region whichever group allocated it (a mutex guards the list;
 * regions live until the collective so_comm_buf_free, which must not overlap
 * a collective that uses them). */
typedef struct so_regbuf so_regbuf;

/* The region holding [p, p + bytes) in THIS rank's buffer and the byte
 * offset of p in it; NULL if none (plain memory). */
so_regbuf *so_regbuf_find(const void *p, size_t bytes, size_t *off);
/* Region id (same on every node rank; never 0). */
uint64_t so_regbuf_id(const so_regbuf *g);
/* 1 when the region's node ranks are exactly s's node, in the same order, so
 * node rank j's buffer is so_regbuf_base(g, j). Cached per context. */
int so_regbuf_matches(so_regbuf *g, const so_shm *s);
/* Node rank j's buffer in this address space, and its usable bytes. */
char *so_regbuf_base(const so_regbuf *g, int j);
size_t so_regbuf_len(const so_regbuf *g, int j);

/* hier's zero-copy path (allreduce_hier_zc.c), for count > small_n, q > 1
 * and (several nodes) equal node sizes, in three steps:
 * publish writes this rank's tuple into its flag line and returns 1 if its
 * buffers are registered here (0: "none"); decide is one barrier and the
 * comparison of the q tuples (and, across nodes, of the nodes' answers),
 * giving the same mode on every node rank: RUN (all registered alike: call
 * run), COPY (nobody registered), MIXED (some did, or not alike). run does
 * the whole allreduce, multiplied by scale unless it is 1, and ends with a
 * barrier. */
typedef enum { SO_ZC_RUN, SO_ZC_COPY, SO_ZC_MIXED } so_zc_mode;
int so_hier_zc_publish(so_shm *s, const float *send, const float *recv, size_t count);
int so_hier_zc_decide(so_shm *s, so_waiter *w, so_zc_mode *mode);
int so_hier_zc_run(so_shm *s, size_t count, so_reduce_op op, float scale, so_waiter *w);
/* Floats per sub-chunk of the zero-copy reduction (its private temp stays in L1/L2). */
#define SO_ZC_SUB 4096

/* ---- algorithm signatures (count > 0, op SUM/MAX/MIN, checked by the dispatcher) -- */
so_allreduce_fn so_allreduce_ring, so_allreduce_rd, so_allreduce_rabenseifner, so_allreduce_tree,
    so_allreduce_hier;

/* Reduce-scatter of count floats: rank i receives block i (so_blk) in recv;
 * in place when recv == send + block offset. */
typedef int so_rs_fn(const float *send, float *recv, size_t count, so_reduce_op op, MPI_Comm comm,
                     so_waiter *w);
/* Allgather into count floats: rank i contributes block i from send; in place
 * when send == recv + block offset. */
typedef int so_ag_fn(const float *send, float *recv, size_t count, MPI_Comm comm, so_waiter *w);
typedef int so_bcast_fn(float *buf, size_t count, int root, MPI_Comm comm, so_waiter *w);

so_rs_fn so_reduce_scatter_mpi, so_reduce_scatter_ring;
so_ag_fn so_allgather_mpi, so_allgather_ring;
so_bcast_fn so_bcast_mpi, so_bcast_binomial, so_bcast_pipeline;

/* hier's SUM that may also multiply by `scale` (AVG's 1/p) where it costs
 * nothing -- in the zero-copy path, before its stores, instead of a second
 * pass over recv. *scaled = 1 when recv is already scaled (same bits as
 * scaling afterwards: one multiply per element either way). */
int so_allreduce_hier_scaled(const float *send, float *recv, size_t count, float scale, MPI_Comm comm,
                             so_waiter *w, int *scaled);

/* The p2p algorithm hier uses among node leaders for `bytes` (never hier/auto/mpi). */
so_allreduce_algo so_allreduce_leaders_algo(size_t bytes, int nodes);
/* hier's step across nodes, in place on buf over comm (the leaders, or a cross
 * group): the group's tcp ring when so_tcp_wanted, else MPI point-to-point by
 * so_allreduce_leaders_algo. Collective over comm. */
int so_hier_across(so_tcp_slot *slot, float *buf, size_t count, so_reduce_op op, MPI_Comm comm, int nodes,
                   so_waiter *w);
/* The function of a concrete algorithm (not AUTO). */
so_allreduce_fn *so_allreduce_fn_of(so_allreduce_algo algo);

#endif
