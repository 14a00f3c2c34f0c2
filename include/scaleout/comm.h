/* scaleout communication module (libscaleout_comm): process start-up, node
 * topology, collectives on float buffers and the configuration check of a
 * data-parallel job. It moves buffers only and knows nothing about networks
 * of layers; this header does not include mpi.h, so any code can include it.
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

typedef struct so_comm so_comm;

/* Exit codes a data-parallel program uses (also passed to MPI_Abort). */
enum {
    SO_COMM_EXIT_CONFIG = 2, /* ranks were started with different configurations */
    SO_COMM_EXIT_COMM = 3    /* a collective failed or timed out (rank lost?) */
};

typedef enum {
    SO_REDUCE_SUM,
    SO_REDUCE_AVG, /* sum, then multiply by 1/size (float and double only) */
    SO_REDUCE_MAX,
    SO_REDUCE_MIN
} so_reduce_op;

/* Allreduce algorithms: one file per algorithm in src/comm/allreduce_<name>.c. */
typedef enum {
    SO_ALLREDUCE_MPI, /* the MPI library's own MPI_Iallreduce */
    SO_ALLREDUCE_COUNT
} so_allreduce_algo;

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

/* Frees the communicators and, if so_comm_init started MPI, finalises it.
 * Destroy every async engine first. Accepts NULL. */
int so_comm_finalize(so_comm *c);

/* Prints "[rank R] fatal: msg" to stderr and aborts the whole job with exit
 * status `code` (MPI_Abort). The one fatal path once MPI is up. c may be NULL
 * (aborts MPI_COMM_WORLD; exits directly if MPI is not running). */
_Noreturn void so_comm_abort(so_comm *c, int code, const char *msg);

/* This process's rank in, and the number of ranks of, the whole job. */
int so_comm_rank(const so_comm *c);
int so_comm_size(const so_comm *c);

/* Stall warning and timeout (seconds, <= 0 disables) for every later
 * collective, blocking or asynchronous. Defaults 60 s and 300 s. */
void so_comm_set_timeouts(so_comm *c, double stall_warning_s, double timeout_s);

/* ---- node topology ----------------------------------------------------------- */

/* Groups ranks into nodes: K > 0 emulates nodes of K consecutive ranks (node
 * id = rank / K, the last node may be smaller); K = 0 uses the real shared-
 * memory nodes. Collective over all ranks; all must pass the same K.
 * Builds a node-local communicator and a leaders communicator (one rank per
 * node, node_rank 0) used by hierarchical collectives and checkpoint partners. */
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
/* "mpi", ...; NULL for an invalid value. */
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

#endif
