/* The CLI's bridge between the training loop's so_dist hooks and the MPI
 * comm module. Without MPI (not built, or not launched by mpirun/srun) every
 * function degrades to the single-process behaviour. */
#ifndef SCALEOUT_CLI_DIST_H
#define SCALEOUT_CLI_DIST_H
#include "scaleout/train.h"

typedef struct dist_handle dist_handle;

typedef struct {
    double stall_warning;   /* seconds before a stuck collective is reported (<= 0: off) */
    double comm_timeout;    /* seconds before a stuck collective aborts the job (<= 0: off) */
    const char *allreduce;  /* algorithm name for gradient buckets ("mpi", ...) */
    int ranks_per_node;     /* > 0: emulate nodes of this many ranks (so_comm_set_ranks_per_node) */
} dist_options;

/* Starts MPI when the process was launched by an MPI launcher. */
int dist_open(const dist_options *o, dist_handle **out);
/* The hooks for so_train, or NULL for a single process. */
const so_dist *dist_get(dist_handle *h);
/* Every rank passes its set-up status (0 or an exit code) and message; if any
 * rank failed, the failing ranks print their message and all return the
 * largest code. Returns 0 when all ranks are fine. */
int dist_agree(dist_handle *h, const char *cmd, int code, const char *msg);
/* Compares the configuration text across ranks; on mismatch rank 0 prints the
 * first differing key and every rank returns 2. */
int dist_check_config(dist_handle *h, const char *cmd, const char *config);
/* A failure during training on this rank: prints it and, with more than one
 * rank, aborts the job (the other ranks may be inside a collective). */
int dist_fail(dist_handle *h, const char *cmd, int code, const char *msg);
/* Seconds the communication engine spent in collectives (0 without MPI). */
int dist_comm_seconds(dist_handle *h, double *comm_s);
void dist_close(dist_handle *h);

#ifdef SCALEOUT_HAVE_MPI
#include "scaleout/comm.h"
#include "scaleout/comm_async.h"
/* The communicator and gradient engine behind the hooks (NULL for a single
 * process), for CLI features that need more than so_dist offers. */
so_comm *dist_comm(dist_handle *h);
so_async *dist_async(dist_handle *h);
#endif

#endif
