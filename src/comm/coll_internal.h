/* Private to libscaleout_comm, algorithm layer: the arguments every
 * hand-written collective shares (so_coll_ctx: the group's transport, the
 * element type, the watched wait), the exchanges they are built from
 * (segmented send-receive and exchange-and-reduce, over any transport), the
 * fold-in / fold-out of non-power-of-two process counts, hier's node
 * shared-memory context, and one signature per collective (one file per
 * algorithm, like MPICH's coll/allreduce/allreduce_intra_*.c). */
#ifndef SCALEOUT_COLL_INTERNAL_H
#define SCALEOUT_COLL_INTERNAL_H

#include "reduce.h"
#include "tp.h"

#include <stdatomic.h>
#include <stdint.h>

/* Tags of our point-to-point traffic. Every collective runs on a communicator
 * (and transport) of its own, and all ranks run the same collectives in the
 * same order, so one tag per algorithm only guards against mixing phases. */
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

/* One collective call's shared arguments. */
typedef struct so_coll_ctx {
    so_tp *tp;     /* the group's ranks, through the chosen transport */
    MPI_Comm comm; /* the group's communicator: the MPI library's own algorithms, hier's node context */
    so_waiter *w;  /* every wait of the call (stall warning, timeout, progress hook) */
    so_dtype dt;   /* element type of the buffers (and on the wire) */
    size_t esz;    /* its bytes */
    int rank, size;
    so_transport link; /* hier: the transport of its step across nodes (AUTO: the usual rule) */
} so_coll_ctx;

/* Element i of a buffer of x's type. */
static inline char *so_el(const so_coll_ctx *x, const void *p, size_t i) { return (char *)p + i * x->esz; }

/* ---- exchanges (coll_util.c) -------------------------------------------------------
 * Counts are elements of x->dt; peers are group ranks or SO_TP_NONE. */

/* Sends sn elements from sbuf to dst and receives rn into rbuf from src,
 * through one wait. Messages are cut into segments by a rule of their length
 * only (the same as so_xchg_reduce's), so a so_sendrecv on one side matches a
 * so_xchg_reduce on the other. Buffers must not overlap. */
int so_sendrecv(so_coll_ctx *x, const void *sbuf, size_t sn, int dst, void *rbuf, size_t rn, int src, int tag);

/* Sends sn elements from sbuf to dst while receiving rn from src and
 * combining them as out[i] = a[i] op in[i] (one rounding per element for
 * BF16 / F16: this is the hop), in segments (so_coll_seg_bytes) so the
 * reduction of one overlaps the arrival of the next. out may equal a;
 * neither may overlap sbuf. src == SO_TP_NONE leaves out alone. */
int so_xchg_reduce(so_coll_ctx *x, const void *sbuf, size_t sn, int dst, void *out, const void *a, size_t rn,
                   int src, so_reduce_op op, int tag);

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
int so_fold_in(so_coll_ctx *x, so_fold *f, const void *send, void *recv, size_t count, so_reduce_op op,
               const void **cur);
/* Fold-out: the odd partner sends the result back to the sitting-out rank. */
int so_fold_out(so_coll_ctx *x, so_fold *f, void *recv, size_t count);

/* ---- node shared-memory context (shm.c) ------------------------------------------
 * Cached on a communicator as an attribute: the ranks of this (possibly
 * emulated) node, one MPI-3 shared window with a flag line and data areas per
 * rank, and the leaders communicator. Created on first use (collective). */
/* What a rank publishes in its flag line before hier's zero-copy decision:
 * the registered regions (ids, 0 = none) and offsets of its send and recv
 * buffers, and the byte count. Zero-copy runs only if all node ranks agree. */
typedef struct {
    uint64_t send_id, send_off, recv_id, recv_off, bytes;
} so_zc_pub;

/* ---- scaleout's TCP between hosts (tp_tcp.c) ------------------------------------------
 * Whether a step across nodes of `bytes` goes over the tcp transport:
 * SCALEOUT_COLL_TCP = 1 always, 0 never, auto (default) when the job spans
 * hosts; from 64 KiB (below, latency rules). */
int so_tcp_wanted(size_t bytes);

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
    size_t small_bytes; /* bytes per small-message buffer (two per rank) */
    size_t chunk_bytes; /* bytes per pipeline chunk (contribution and result areas) */
    _Atomic uint64_t **flag; /* [q] each rank's step counter, own cache line */
    char **small;     /* [q] 2 * small_bytes: double-buffered small messages */
    char **contrib;   /* [q] chunk_bytes: the slices rank j hands to the others */
    char **result;    /* [q] chunk_bytes: rank j's reduced slice of the chunk */
    so_zc_pub **pub;  /* [q] rank j's zero-copy publication (in its flag line) */
    char *zc_tmp;     /* private: SO_ZC_SUB elements (up to 8 bytes), the zero-copy reduction's sub-chunk */
    struct so_regbuf *zc_send, *zc_recv; /* zero copy: this call's regions (NULL: none) */
    const char **zc_in; /* [q] zero copy: node rank j's send buffer (this call) */
    char **zc_out;    /* [q] zero copy: node rank j's recv buffer */
    uint64_t epoch;   /* steps this rank has signalled (same count on every rank) */
    uint64_t calls;   /* small-message calls: picks the small buffer */
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
/* A copy into the window (streaming stores unless SCALEOUT_SHM_NT=0: peers
 * then read it from memory, not from our cache; allreduce_hier.c says why). */
void so_shm_copy(void *dst, const void *src, size_t bytes);

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
/* Region id (same on every node rank; never 0), and the region of an id (NULL: none). */
uint64_t so_regbuf_id(const so_regbuf *g);
so_regbuf *so_regbuf_by_id(uint64_t id);
/* 1 when the region's node ranks are exactly s's node, in the same order, so
 * node rank j's buffer is so_regbuf_base(g, j). Cached per context. */
int so_regbuf_matches(so_regbuf *g, const so_shm *s);
/* Node rank j's buffer in this address space, and its usable bytes. */
char *so_regbuf_base(const so_regbuf *g, int j);
size_t so_regbuf_len(const so_regbuf *g, int j);

/* hier's zero-copy path (allreduce_hier_zc.c), for messages above the
 * small-message size, q > 1 and (several nodes) equal node sizes, in three
 * steps: publish writes this rank's tuple into its flag line and returns 1
 * if its buffers are registered here (0: "none"); decide is one barrier and
 * the comparison of the q tuples (and, across nodes, of the nodes' answers),
 * giving the same mode on every node rank: RUN (all registered alike: call
 * run), COPY (nobody registered), MIXED (some did, or not alike). run does
 * the whole allreduce -- divided by avg_p unless it is 0 (AVG) -- and ends
 * with a barrier. */
typedef enum { SO_ZC_RUN, SO_ZC_COPY, SO_ZC_MIXED } so_zc_mode;
int so_hier_zc_publish(so_shm *s, const void *send, const void *recv, size_t bytes);
int so_hier_zc_decide(so_shm *s, so_waiter *w, so_zc_mode *mode);
int so_hier_zc_run(so_coll_ctx *x, so_shm *s, size_t count, so_reduce_op op, int avg_p);
/* Elements per sub-chunk of the zero-copy reduction (its private temp stays in L1/L2). */
#define SO_ZC_SUB 4096

/* hier_share.c: one more call of a hier collective above its small size,
 * zero-copy or not (so_comm_hier_path_counts); and the zero-copy agreement
 * of hier's reduce-scatter and allgather: publishes where this rank's send
 * buffer (bytes) lives, one barrier, *ok = 1 on every node rank when all
 * live in one registered region usable here -- then s->zc_in[j] is node
 * rank j's send buffer. */
void so_hier_count(int zero_copy);
int so_hier_share(so_shm *s, so_waiter *w, const void *send, size_t bytes, int *ok);

/* ---- algorithm signatures (count > 0, op SUM/MAX/MIN, checked by the dispatcher) --
 * Allreduce: recv = op over the group of send, in place when send == recv. */
typedef int so_allreduce_fn(so_coll_ctx *x, const void *send, void *recv, size_t count, so_reduce_op op);
/* Reduce-scatter: block i is elements [displ[i], displ[i+1]) (displ has
 * size + 1 entries); rank i receives block i in recv (its length); in place
 * when recv == send + displ[rank] elements. */
typedef int so_rs_fn(so_coll_ctx *x, const void *send, void *recv, const size_t *displ, so_reduce_op op);
/* Allgather into displ[size] elements: rank i contributes block i from send;
 * in place when send == recv + displ[rank] elements. */
typedef int so_ag_fn(so_coll_ctx *x, const void *send, void *recv, const size_t *displ);
typedef int so_bcast_fn(so_coll_ctx *x, void *buf, size_t count, int root);

so_allreduce_fn so_allreduce_mpi, so_allreduce_ring, so_allreduce_rd, so_allreduce_rabenseifner,
    so_allreduce_tree, so_allreduce_hier;
so_rs_fn so_reduce_scatter_mpi, so_reduce_scatter_ring, so_reduce_scatter_hier;
so_ag_fn so_allgather_mpi, so_allgather_ring, so_allgather_hier;
so_bcast_fn so_bcast_mpi, so_bcast_binomial, so_bcast_pipeline;

/* hier's SUM that may also finish AVG (times 1/avg_p) inside its reduction
 * -- every path on one node, zero copy across nodes -- instead of a second
 * pass over recv. *scaled = 1 when recv is already averaged (the same bits
 * as averaging afterwards). */
int so_allreduce_hier_avg(so_coll_ctx *x, const void *send, void *recv, size_t count, int avg_p, int *scaled);

/* The point-to-point algorithm hier uses among node leaders for `bytes`. */
so_allreduce_algo so_allreduce_leaders_algo(size_t bytes, int nodes);
/* hier's step across nodes, in place on buf over comm (the leaders, or a cross
 * group): the ring over the group's tcp transport when so_tcp_wanted, else
 * so_allreduce_leaders_algo over MPI point-to-point. Collective over comm. */
int so_hier_across(so_coll_ctx *x, void *buf, size_t count, so_reduce_op op, MPI_Comm comm, int nodes);

#endif
