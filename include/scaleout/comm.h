/* scaleout communication module (libscaleout_comm): process start-up, the
 * process group (so_comm: the whole job, or a subset made by so_comm_split),
 * node topology, collectives on float buffers, point-to-point requests and
 * the configuration check of a data-parallel job. It moves buffers only and
 * knows nothing about networks of layers; this header does not include
 * mpi.h, so any code can include it.
 *
 * Threading: so_comm_* calls are made by ONE thread (the training thread).
 * The async engine (comm_async.h) owns MPI while it has outstanding requests;
 * a so_comm_* collective called in that window fails with SO_EINVAL instead of
 * racing with it (see the thread-level note in src/comm/comm.c).
 *
 * Errors: functions return 0 or a negative SO_E* code (scaleout/err.h) with a
 * message in so_errmsg(). Once MPI is up the only fatal path is
 * so_comm_abort(): a plain exit() on one rank leaves the others hanging. */
#ifndef SCALEOUT_COMM_H
#define SCALEOUT_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "scaleout/dtype.h"

typedef struct so_comm so_comm;

/* Exit codes a data-parallel program uses (also passed to MPI_Abort). */
enum {
    SO_COMM_EXIT_CONFIG = 2, /* ranks were started with different configurations */
    SO_COMM_EXIT_COMM = 3    /* a collective failed or timed out (rank lost?) */
};

/* so_reduce_op (sum, avg, max, min) and so_dtype live in scaleout/dtype.h. */

/* Allreduce algorithms: one file per algorithm in src/comm/allreduce_<name>.c
 * (docs/COLLECTIVES.md has phases, costs and the tuning-file format). */
typedef enum {
    SO_ALLREDUCE_MPI,          /* the MPI library's own MPI_Iallreduce */
    SO_ALLREDUCE_RING,         /* reduce-scatter + allgather ring, segmented */
    SO_ALLREDUCE_RD,           /* recursive doubling: small messages */
    SO_ALLREDUCE_RABENSEIFNER, /* recursive halving + recursive doubling */
    SO_ALLREDUCE_TREE,         /* binomial reduce + binomial broadcast */
    SO_ALLREDUCE_HIER,         /* node shared-memory window + leaders' allreduce */
    SO_ALLREDUCE_AUTO,         /* per message size: tuning table, else the cost model */
    SO_ALLREDUCE_COUNT
} so_allreduce_algo;

/* Transports: how the hand-written algorithms reach the other ranks of a
 * group (docs/COLLECTIVES.md, "Transports"). Every algorithm but hier and the
 * MPI library's own runs on each; hier runs its node step in its shared
 * window and its step across nodes on the group's link transport. */
typedef enum {
    SO_TRANSPORT_AUTO, /* the group's choice: MPI point-to-point (tcp for hier's step across hosts) */
    SO_TRANSPORT_MPI,  /* MPI_Isend / MPI_Irecv on a communicator of the group */
    SO_TRANSPORT_SHM,  /* channels in an MPI-3 shared window: every rank of the group on one host */
    SO_TRANSPORT_TCP,  /* scaleout's own sockets, one connection per direction and pair */
    SO_TRANSPORT_COUNT
} so_transport;

/* "auto", "mpi", "shm", "tcp"; NULL for an invalid value. */
const char *so_transport_name(so_transport t);
/* Parses so_transport_name's names; SO_EINVAL otherwise. */
int so_transport_parse(const char *name, so_transport *out);

/* ---- life cycle ------------------------------------------------------------ */

/* Initialises MPI (unless the caller already did) asking for
 * MPI_THREAD_SERIALIZED, checks the level provided, and returns a comm over
 * all ranks in *out with errors returned (not fatal) on every communicator.
 * Node topology starts as the real machines (ranks_per_node 0). Reads
 * SCALEOUT_STALL_WARNING / SCALEOUT_COMM_TIMEOUT (seconds) and
 * SCALEOUT_ALLREDUCE (algorithm name) from the environment.
 * On failure *out is NULL; if MPI is already up the caller must then call
 * so_comm_abort(NULL, ...). */
int so_comm_init(int *argc, char ***argv, so_comm **out);

/* Frees the registered buffers still allocated (collective), the node and
 * leaders subgroups, the communicators and, if so_comm_init started MPI,
 * finalises it (never for a group of so_comm_split). Collective over c.
 * Destroy every async engine of c first, and finalise c's split children
 * before c. Accepts NULL. */
int so_comm_finalize(so_comm *c);

/* ---- process groups ---------------------------------------------------------
 * Every so_comm is a process group; every call below works on any of them,
 * with ranks numbered within the group (docs/COLLECTIVES.md, "Process groups").
 * MPI_THREAD_SERIALIZED is per process: while an async engine of ANY group has
 * requests outstanding, so_comm_* calls on every group return SO_EINVAL. */

#define SO_COMM_UNDEFINED (-1)

/* MPI_Comm_split of parent: ranks passing the same color >= 0 form one new
 * group, ordered by (key, parent rank); color < 0 (SO_COMM_UNDEFINED) gives
 * *out = NULL. Collective over parent. The child inherits the parent's
 * timeouts, allreduce algorithm, p2p chunk and node grouping: child ranks that
 * were on one (possibly emulated) node of the parent are on one node of the
 * child, with ranks_per_node as in the parent (for the cost model), and it
 * starts with its own tuning table (SCALEOUT_TUNING on first auto use). The
 * caller owns the child: so_comm_finalize(child) (collective over the child)
 * frees it, and the parent must outlive its children. */
int so_comm_split(so_comm *parent, int color, int key, so_comm **out);

/* The ranks of my node, and node_rank 0 of every node (NULL on the other
 * ranks), as groups. Owned by c: built with c's topology (so_comm_init,
 * so_comm_split, so_comm_set_ranks_per_node, which frees and rebuilds them:
 * earlier handles become invalid) and freed by so_comm_finalize(c); never
 * finalise them yourself. c itself is returned where it already is that
 * group (one node; one rank per node). They inherit c's settings, and
 * so_comm_set_timeouts on c reaches them. */
so_comm *so_comm_node_group(so_comm *c);
so_comm *so_comm_leaders_group(so_comm *c);
/* The ranks with my node rank, one on every node of c (FSDP's HYBRID_SHARD
 * replicates a node's shards across them), in node order. Owned by c like
 * the two above; c itself when every rank is its own node. Made on the first
 * call: collective over c then (every rank calls it), later calls are free. */
int so_comm_cross_group(so_comm *c, so_comm **out);

/* The transport the group's hand-written algorithms use when a call does not
 * name one (SO_TRANSPORT_AUTO: MPI; SCALEOUT_COLL_TRANSPORT sets the start
 * value). Collective in effect: every rank must set the same. SO_EINVAL for
 * shm when the group spans hosts (known only when the transport is first
 * made: the operation then fails). */
int so_comm_set_transport(so_comm *c, so_transport t);
so_transport so_comm_get_transport(const so_comm *c);

/* Prints "[rank R] fatal: msg" to stderr (R: the rank in the whole job) and
 * aborts the whole job with exit status `code` (MPI_Abort on MPI_COMM_WORLD),
 * from any group. The one fatal path once MPI is up. c may be NULL (exits
 * directly if MPI is not running). */
_Noreturn void so_comm_abort(so_comm *c, int code, const char *msg);

/* This process's rank in, and the number of ranks of, the group (for the
 * group of so_comm_init: the whole job). */
int so_comm_rank(const so_comm *c);
int so_comm_size(const so_comm *c);

/* Stall warning and timeout (seconds, <= 0 disables) for every later
 * collective on c and its node / leaders groups, blocking or asynchronous.
 * Defaults 60 s and 300 s; split groups start with their parent's. */
void so_comm_set_timeouts(so_comm *c, double stall_warning_s, double timeout_s);

/* ---- node topology ----------------------------------------------------------- */

/* Groups c's ranks into nodes: K > 0 emulates nodes of K consecutive ranks
 * of c (node id = rank / K, the last node may be smaller); K = 0 uses the
 * real shared-memory nodes. Collective over c; all must pass the same K.
 * Rebuilds the node and leaders groups (so_comm_node_group) used by
 * hierarchical collectives and checkpoint partners. */
int so_comm_set_ranks_per_node(so_comm *c, int ranks_per_node);

typedef struct {
    int node_id;    /* 0 .. num_nodes-1, ordered by the nodes' lowest rank */
    int num_nodes;
    int node_rank;  /* rank within the node, 0 = the node's leader */
    int node_size;
    int ranks_per_node; /* as last set (0 = real nodes) */
} so_comm_node;

void so_comm_node_info(const so_comm *c, so_comm_node *out);

/* ---- collectives (all ranks call with the same count/op/root) -----------------
 * Each is watched: a stall warning is logged, and past the timeout the call
 * returns SO_ECOMM with the operation still posted -- the job is then out of
 * step and the caller must so_comm_abort(c, SO_COMM_EXIT_COMM, so_errmsg()). */

/* Selects the algorithm so_comm_allreduce uses (default mpi, or SCALEOUT_ALLREDUCE). */
int so_comm_set_allreduce_algo(so_comm *c, so_allreduce_algo algo);
/* "mpi", "ring", "rd", "rabenseifner", "tree", "hier", "auto"; NULL for an invalid value. */
const char *so_allreduce_algo_name(so_allreduce_algo algo);
/* Parses a name from so_allreduce_algo_name; SO_EINVAL for unknown names. */
int so_allreduce_algo_parse(const char *name, so_allreduce_algo *out);

/* recv[i] = op over ranks of send[i], for count floats; in place when
 * send == recv (otherwise the buffers must not overlap). count may be 0. */
int so_comm_allreduce(so_comm *c, const float *send, float *recv, size_t count, so_reduce_op op);

/* Broadcast from `root` in place. */
int so_comm_bcast(so_comm *c, float *buf, size_t count, int root);
int so_comm_bcast_bytes(so_comm *c, void *buf, size_t nbytes, int root);

/* In-place reductions of small counter arrays (evaluation counts, timings).
 * i64 supports sum/max/min; double also avg. */
int so_comm_allreduce_i64(so_comm *c, int64_t *vals, size_t n, so_reduce_op op);
int so_comm_allreduce_double(so_comm *c, double *vals, size_t n, so_reduce_op op);

int so_comm_barrier(so_comm *c);

/* ---- registered buffers (src/comm/regbuf.c) ------------------------------------
 * Memory that every rank of a (possibly emulated, so_comm_set_ranks_per_node)
 * node maps: an MPI-3 shared window over the node, one buffer per rank. When
 * the send and recv buffers of an allreduce live in registered memory on every
 * node rank, `hier` (and `auto` when it picks hier) reduces straight from the
 * peers' buffers into the peers' buffers, without its copies through the
 * shared window (docs/COLLECTIVES.md, "zero copy"). Any other buffer still
 * works everywhere: registration only makes it faster.
 *
 * Contract: both calls are collective over c's ranks. Every rank calls them
 * in the same order (the allocations are matched by their order; sizes may
 * differ between ranks, and hier's zero-copy path checks every peer's length
 * before it uses the buffers), while no async engine of c has requests outstanding, and frees
 * every buffer before so_comm_finalize (which frees what is left, collectively).
 * A buffer must not be freed while a collective on it runs anywhere.
 * Buffers are zero-filled and page-aligned (so 64-byte aligned). With one rank
 * per node, or if the shared window cannot be made on any node rank, the
 * memory is plain so_alloc memory (same free call). The grouping into nodes
 * is the one current at allocation time; after so_comm_set_ranks_per_node
 * the buffers stay valid but take hier's copy path. */
int so_comm_buf_alloc(so_comm *c, size_t bytes, void **out);
/* Rank `peer`'s buffer of the same allocation as `mine` (a buffer of
 * so_comm_buf_alloc on c), mapped in this process, and its usable *bytes;
 * NULL when peer is on another node or the memory is not shared (plain
 * fallback). Ranks that share memory so can pass data by load and store
 * (pipeline stages on one host do, pipeline.h). */
void *so_comm_buf_peer(so_comm *c, const void *mine, int peer, size_t *bytes);
/* Frees a buffer of so_comm_buf_alloc (collective, see above); NULL is a no-op. */
void so_comm_buf_free(so_comm *c, void *p);
/* How many of hier's calls above the small-message size (on more than one
 * node rank) ran zero-copy and how many copied through its window, in this
 * process, over all communicators: tests and benchmarks use it to know that
 * registration took effect. */
void so_comm_hier_path_counts(uint64_t *zero_copy, uint64_t *copied);
/* How many of hier's steps across nodes, in this process, went over
 * scaleout's TCP ring (SCALEOUT_COLL_TCP, docs/COLLECTIVES.md) and how many
 * over MPI point-to-point. */
void so_comm_hier_across_counts(uint64_t *tcp, uint64_t *mpi);
/* How many connections scaleout's TCP transports closed during their set-up,
 * in this process, because they did not prove they belong to the job (the
 * handshake of docs/COLLECTIVES.md, "Threat model"): strangers, silent or
 * malformed callers, replayed handshakes. Each set-up also logs its count. */
uint64_t so_comm_tcp_rejected(void);

/* ---- more collectives: reduce-scatter, allgather, broadcast algorithms ---------
 * Vectors of `count` floats are cut into size() blocks as evenly as possible:
 * the first count % p blocks are one element longer (so_comm_block). Block i
 * belongs to rank i. Same watchdog contract as above; count may be 0. */

/* Block i of count floats over p ranks: elements [*off, *off + *len). */
void so_comm_block(size_t count, int p, int i, size_t *off, size_t *len);

/* hier: one node, send buffers in registered memory (so_comm_buf_alloc):
 * every rank reads its block straight from the peers' buffers; otherwise,
 * or across nodes, the ring (docs/COLLECTIVES.md). */
typedef enum { SO_RS_MPI, SO_RS_RING, SO_RS_HIER, SO_RS_COUNT } so_rs_algo;
typedef enum { SO_AG_MPI, SO_AG_RING, SO_AG_HIER, SO_AG_COUNT } so_ag_algo;
typedef enum { SO_BCAST_MPI, SO_BCAST_BINOMIAL, SO_BCAST_PIPELINE, SO_BCAST_COUNT } so_bcast_algo;

/* recv (block-rank floats) = op over ranks of block `rank` of send (count
 * floats). In place when recv == send + block offset (NCCL's convention);
 * send is not modified otherwise. AVG scales the block by 1/size. */
int so_comm_reduce_scatter(so_comm *c, so_rs_algo algo, const float *send, float *recv, size_t count,
                           so_reduce_op op);
/* recv (count floats) = every rank's block; this rank's block comes from send
 * (block-rank floats). In place when send == recv + block offset. */
int so_comm_allgather(so_comm *c, so_ag_algo algo, const float *send, float *recv, size_t count);
/* Broadcast of count floats from root, in place, with a chosen algorithm. */
int so_comm_bcast_algo(so_comm *c, so_bcast_algo algo, float *buf, size_t count, int root);

/* Generic access for drivers such as the benchmark: a collective kind and an
 * algorithm index within it (so_allreduce_algo, so_rs_algo, ...), or
 * SO_COLL_REFERENCE: the MPI library's BLOCKING call (MPI_Allreduce,
 * MPI_Reduce_scatter, MPI_Allgatherv, MPI_Bcast) with no watchdog -- what OSU
 * measures, the baseline every algorithm is compared with. Counts < 2^31. */
typedef enum {
    SO_COLL_ALLREDUCE,
    SO_COLL_REDUCE_SCATTER,
    SO_COLL_ALLGATHER,
    SO_COLL_BCAST,
    SO_COLL_KINDS
} so_coll_kind;
#define SO_COLL_REFERENCE (-1)

const char *so_coll_kind_name(so_coll_kind kind); /* "allreduce", "reduce-scatter", ... */
int so_coll_algo_count(so_coll_kind kind);         /* valid indices are 0 .. count-1 */
/* The algorithm's name ("ring", ...; "MPI_Allreduce" etc. for the reference); NULL if invalid. */
const char *so_coll_algo_name(so_coll_kind kind, int algo);
int so_coll_algo_parse(so_coll_kind kind, const char *name, int *out);
/* Runs one collective. Buffers as the typed call of that kind: allreduce and
 * bcast use count floats in recv (bcast: in place in recv from `root`);
 * reduce-scatter / allgather as above. op is ignored by allgather / bcast. */
int so_comm_coll(so_comm *c, so_coll_kind kind, int algo, const float *send, float *recv,
                 size_t count, so_reduce_op op, int root);

/* ---- cost model, tuning table and `auto` ---------------------------------------
 * Model of one allreduce of n bytes on p ranks with algorithm A:
 *     t = a_A(p) alpha_A + n (b_A(p) beta_A + g_A(p) gamma)
 * with the textbook coefficients (ring a = 2(p-1), b = 2(p-1)/p, g = (p-1)/p;
 * rd a = b = g = lg p; Rabenseifner a = 2 lg p, b = 2(p-1)/p, g = (p-1)/p;
 * non-powers of two add the fold-in/out steps; docs/COLLECTIVES.md has all).
 * alpha_A (s per step) and beta_A (s per byte moved) are fitted per algorithm
 * by `scaleout tune`; gamma (s per byte reduced) is measured locally.
 * Without a table, built-in values for one shared-memory node are used. */
/* Piecewise model: band k holds (alpha, beta) for messages up to max_bytes
 * (inclusive, ascending; UINT64_MAX for the last band). In the octave above an
 * edge E, (E, 2E), the prediction is the straight line from band k's time at E
 * to band k+1's time at 2E, so it stays continuous and, as the fit keeps
 * t_{k+1}(2E) >= t_k(E), never decreases with size. */
#define SO_TUNING_MAX_BANDS 8
typedef struct {
    uint64_t max_bytes;
    double alpha, beta; /* seconds, seconds per byte; alpha >= 0, beta > 0 */
} so_comm_band;

typedef struct {
    double alpha, beta; /* seconds, seconds per byte: one line over all sizes */
    int valid;          /* fitted (0: built-in default) */
    int nbands;         /* 0: the line above; else band[0..nbands) replaces it */
    so_comm_band band[SO_TUNING_MAX_BANDS];
} so_comm_fit;

/* The levels of a multi-node job, fitted apart by `scaleout tune --levels`:
 * within one node (the node group: shared memory) and between nodes (the
 * node leaders, one rank per node: the network). */
typedef enum { SO_LEVEL_NODE, SO_LEVEL_LINK, SO_LEVELS } so_comm_level_kind;
typedef struct {
    int valid;          /* measured (0: the level is not in the table) */
    int p;              /* ranks of that group: ranks per node, or nodes */
    so_comm_fit fit[SO_ALLREDUCE_AUTO];
} so_comm_level;

#define SO_TUNING_MAX_RULES 64
typedef struct {
    int version;        /* 1, 2 when a fit has bands, 3 when levels are present */
    int p;              /* process count the table was measured with */
    int ranks_per_node; /* layout it was measured with (0 = real nodes) */
    double gamma;       /* seconds per byte reduced */
    int registered;     /* measured on registered buffers (hier zero-copy); else plain memory */
    so_comm_fit fit[SO_ALLREDUCE_AUTO]; /* per concrete algorithm */
    int nrules;         /* `max_bytes algo` lines, ascending max_bytes */
    struct {
        uint64_t max_bytes; /* UINT64_MAX: no limit */
        so_allreduce_algo algo;
    } rule[SO_TUNING_MAX_RULES];
    so_comm_level level[SO_LEVELS]; /* per-level fits (scaleout predict composes them) */
} so_comm_tuning;

/* Built-in table: default fits, no rules. */
void so_comm_tuning_default(so_comm_tuning *t);
/* Reads / writes the text format of docs/COLLECTIVES.md. SO_EIO / SO_EFORMAT. */
int so_comm_tuning_load(const char *path, so_comm_tuning *t);
int so_comm_tuning_save(const so_comm_tuning *t, const char *path);

/* The table `auto` uses on group c (copied; NULL = back to the built-in
 * model). Each group has its own; without a call, the file named by
 * SCALEOUT_TUNING is loaded on the group's first `auto` use. Every rank of c
 * must use the same table (the choice must agree). Call between collectives
 * (SO_EINVAL while an async engine is busy). */
int so_comm_set_tuning(so_comm *c, const so_comm_tuning *t);
/* c's table (loading SCALEOUT_TUNING the first time); valid until the next
 * so_comm_set_tuning on c. */
const so_comm_tuning *so_comm_get_tuning(so_comm *c);
/* The algorithm `auto` picks on c for an allreduce of `bytes`: so_comm_select
 * with c's size, ranks_per_node and table. */
so_allreduce_algo so_comm_auto_algo(so_comm *c, size_t bytes);

/* Predicted seconds of one allreduce of `bytes` on p ranks (ranks_per_node as
 * in so_comm_set_ranks_per_node, 0 = one real node holds them all) with algo,
 * from t (NULL: the built-in table; a group's: so_comm_get_tuning). For
 * SO_ALLREDUCE_AUTO the prediction of the algorithm auto picks. The trainer can minimise
 * sum over buckets of predict(bucket bytes) - overlap to pick the bucket size
 * and the algorithm together. */
double so_comm_predict(so_allreduce_algo algo, size_t bytes, int p, int ranks_per_node,
                       const so_comm_tuning *t);
/* The algorithm `auto` picks: the table's rules when t->p == p and its layout
 * matches, else the argmin of so_comm_predict over the concrete algorithms
 * (t NULL: the built-in table). */
so_allreduce_algo so_comm_select(size_t bytes, int p, int ranks_per_node, const so_comm_tuning *t);

/* Weighted least squares of alpha and beta (relative error, so small and
 * large sizes count alike) for algo from n measurements (bytes[i], secs[i])
 * on p ranks, with gamma fixed. SO_EINVAL when n < 2 or a time is not > 0. */
int so_comm_fit_model(so_allreduce_algo algo, int p, int ranks_per_node, double gamma,
                      const size_t *bytes, const double *secs, int n, so_comm_fit *out);

/* The single line as above, plus a piecewise fit: band edges are the subset of
 * the candidate edges edges[0..nedges) (ascending, at most
 * SO_TUNING_MAX_BANDS - 1) that minimises n ln(SSE/n) + 2 ln(n) (bands) over
 * the relative errors (BIC: one more band must cut the squared error by a
 * factor n^(-2/n), ~23 % for 25 sizes);
 * every band needs >= 2 sizes, except the last (>= 1: it keeps the alpha of
 * the band below). Per band alpha >= 0 and beta > 0 (clamped, the other
 * refitted). bytes[] ascending. out->nbands = 0 when no split helps. */
int so_comm_fit_bands(so_allreduce_algo algo, int p, int ranks_per_node, double gamma,
                      const size_t *bytes, const double *secs, int n, const uint64_t *edges, int nedges,
                      so_comm_fit *out);

/* Times `iters` runs of a collective after `warmup` untimed ones, a barrier
 * before the timed batch; *secs = this rank's mean seconds per run. Buffers
 * as so_comm_coll. Collective. */
int so_comm_time_coll(so_comm *c, so_coll_kind kind, int algo, const float *send, float *recv,
                      size_t count, int root, int warmup, int iters, double *secs);

/* Local measurements (one rank, no communication): memcpy bandwidth in
 * bytes/s over a `bytes` buffer, and gamma (s per byte) of the float sum. */
double so_comm_memcpy_bw(size_t bytes);
double so_comm_reduce_gamma(size_t bytes);

/* ---- configuration check ------------------------------------------------------ */

/* Collective. Every rank passes the configuration text it was started with
 * ("key=value\n" lines: model, shapes, batch, optimizer, seed, versions ...).
 * Returns 0 when all texts are identical. Otherwise returns SO_EINVAL on EVERY
 * rank with the same one-line message in errbuf, naming the first key (in rank
 * 0's order) that differs and its values on rank 0 and on the lowest differing
 * rank, e.g. "configuration mismatch: batch=64 on rank 0 but batch=32 on rank 3";
 * the caller then finalises and exits with SO_COMM_EXIT_CONFIG on every rank.
 * Other negative codes mean communication failed (message in so_errmsg()). */
int so_comm_check_config(so_comm *c, const char *config_text, char *errbuf, size_t len);

/* ---- bytes: point-to-point and gather (src/comm/gather.c) ----------------------
 * For tools (profiler clock alignment, timeline merge), not for gradients.
 * Watched like the collectives; n < 2^31 bytes per call. tag >= 0 selects
 * the message among several between the same pair. */
int so_comm_send_bytes(so_comm *c, const void *buf, size_t n, int dest, int tag);
int so_comm_recv_bytes(so_comm *c, void *buf, size_t n, int src, int tag);
/* Collective: rank `root` receives every rank's n bytes in rank order in one
 * malloc'ed buffer *out (caller frees) and their sizes in sizes[0..size)
 * (caller allocated); other ranks pass out/sizes unused (may be NULL). */
int so_comm_gather_bytes(so_comm *c, const void *buf, size_t n, int root, void **out, size_t *sizes);
/* The MPI library's own version string (MPI_Get_library_version; callable
 * before MPI is initialised), one line, into buf. Returns 0 or SO_EINVAL. */
int so_comm_library_version(char *buf, size_t len);

/* ---- non-blocking point-to-point requests on a group (src/comm/p2p.c) ----------
 * Sends / receives of `bytes` bytes (any size: cut into messages of at most
 * 1 GiB, or SCALEOUT_P2P_CHUNK bytes if smaller -- the same on every rank)
 * to / from group rank dst / src, on the group's own duplicated
 * communicator: tags (0..32767) never meet the collectives'. Messages between
 * one pair with one tag match in posting order; sizes must match. The buffer
 * belongs to MPI until the request completes. Test or wait for every
 * request: test sets *done = 1 and frees it on completion; wait blocks,
 * watched by the stall warning and timeout (SO_ECOMM then: the request stays
 * posted and the job must abort) and frees it. Training thread only, while
 * no async engine is busy (SO_EINVAL). Pipeline stages pass activations so. */
typedef struct so_comm_req so_comm_req;
int so_comm_isend(so_comm *c, const void *buf, size_t bytes, int dst, int tag, so_comm_req **out);
int so_comm_irecv(so_comm *c, void *buf, size_t bytes, int src, int tag, so_comm_req **out);
int so_comm_req_test(so_comm *c, so_comm_req *r, int *done);
int so_comm_req_wait(so_comm *c, so_comm_req *r);
/* Collective over c: the group's requests with peers on other hosts go over
 * scaleout's own TCP connections from now on (one per direction and pair, a
 * progress thread of their own: transfers both ways run at the link's rate
 * while the caller computes), when SCALEOUT_COLL_TCP allows (auto: the job
 * spans hosts; 1: every peer, also on one host). Connections that cannot be
 * made leave every rank on MPI, with a warning. Pipeline stages call it. */
int so_comm_p2p_connect(so_comm *c);
/* Whether c's messages with peer go over the TCP connections. */
int so_comm_p2p_on_tcp(const so_comm *c, int peer);

/* ---- byte-level point-to-point (src/comm/p2p.c) ---------------------------------
 * For CLI features such as checkpoint partner copies. A channel owns a
 * duplicated communicator (create is collective over the group's ranks). An
 * exchange sends sn bytes to dst and receives rn bytes from src without blocking; test
 * it between steps (wait = 1 blocks, watched by the stall warning/timeout);
 * the buffers belong to MPI until *done = 1, which also frees the exchange.
 * Call only from the training thread while the async engine is idle. */
typedef struct so_comm_p2p so_comm_p2p;
typedef struct so_comm_xfer so_comm_xfer;
int so_comm_p2p_create(so_comm *c, so_comm_p2p **out);
void so_comm_p2p_destroy(so_comm_p2p *p); /* accepts NULL */
/* An exchange is posted in two halves: the receive first (with room for a
 * send of up to sn bytes), the send later. A receive posted before the peer's
 * send arrives is matched, and its data copied, by whichever MPI call
 * progresses it later; one posted after can have the library copy the whole
 * message inside MPI_Irecv, on the caller's thread. */
int so_comm_exchange_recv(so_comm_p2p *p, void *rbuf, size_t rn, int src, size_t sn, so_comm_xfer **out);
int so_comm_exchange_send(so_comm_p2p *p, so_comm_xfer *x, const void *sbuf, size_t sn, int dst);
int so_comm_exchange_test(so_comm_p2p *p, so_comm_xfer *x, int wait, int *done);
/* Non-blocking in-place SUM of n int64 over all ranks on the channel's
 * communicator (progress agreements that must not make ranks wait for each
 * other). Same idle rule as the exchange; wait releases the request. `what`
 * names the agreement in a stall or time-out message ("checkpoint progress
 * agreement"); it must outlive the request (a string literal). */
typedef struct so_comm_isum so_comm_isum;
int so_comm_isum_start(so_comm_p2p *p, int64_t *v, int n, const char *what, so_comm_isum **out);
int so_comm_isum_wait(so_comm_p2p *p, so_comm_isum *r);

#endif
