/* The bridge between the trainer's so_dist hooks and the comm module, private
 * to src/job. Without MPI (not built, or not launched by mpirun/srun) every
 * function degrades to the single-process behaviour. */
#ifndef SCALEOUT_JOB_DIST_H
#define SCALEOUT_JOB_DIST_H
#include "scaleout/train.h"

typedef struct dist_handle dist_handle;

typedef struct {
    double stall_warning;   /* seconds before a stuck collective is reported (<= 0: off) */
    double comm_timeout;    /* seconds before a stuck collective aborts the job (<= 0: off) */
    const char *allreduce;  /* algorithm name for gradient buckets ("mpi", ...) */
    int ranks_per_node;     /* > 0: emulate nodes of this many ranks (so_comm_set_ranks_per_node) */
} dist_options;

/* Starts MPI when the process was launched by an MPI launcher. *out is set
 * even on failure (close it with dist_close). */
int dist_open(const dist_options *o, dist_handle **out);
/* The hooks for so_train, or NULL for a single process. */
const so_dist *dist_get(dist_handle *h);
/* Every rank passes its set-up status (0 or an SO_E* code, message in
 * so_errmsg()). Returns 0 when all ranks are fine; otherwise every rank
 * returns an error: its own, or one saying another rank failed (then
 * dist_failed_elsewhere is 1). Input errors outrank other failures. */
int dist_agree(dist_handle *h, int rc);
int dist_failed_elsewhere(const dist_handle *h);
/* For an error every rank found alike (the same input): counts it as
 * another rank's on this one, so that only one rank reports it. */
void dist_mark_elsewhere(dist_handle *h);
/* Compares the configuration text across ranks: SO_EINVAL on every rank with
 * the first differing key in the message (counted as "elsewhere" on ranks
 * other than 0, so one rank reports it). */
int dist_check_config(dist_handle *h, const char *config);
/* With more than one rank: aborts the job with exit status code, printing
 * line (so_comm_abort). Returns on a single process. */
void dist_abort(dist_handle *h, int code, const char *line);
/* Seconds the communication engine spent in collectives (0 without MPI). */
double dist_comm_seconds(dist_handle *h);
void dist_close(dist_handle *h);

#ifdef SCALEOUT_HAVE_MPI
#include "scaleout/comm.h"
#include "scaleout/comm_async.h"
/* The communicator and gradient engine behind the hooks (NULL for a single
 * process), for the observers that need more than so_dist offers. */
so_comm *dist_comm(dist_handle *h);
so_async *dist_async(dist_handle *h);
/* The same hooks over a subgroup (a pipeline stage's replicas), with an
 * async engine of its own (so_async_create: collective over the group) and
 * no registered memory. dist_close destroys the engine, not the group. *out
 * is set even on failure. */
int dist_open_group(so_comm *group, const char *allreduce, dist_handle **out);
/* The engine's view of c (scaleout/group.h) over the comm module's
 * vocabulary (dist_group.c); dist_group_free releases it and the subgroup
 * wrappers it made (not the so_comm groups). */
int dist_group_new(so_comm *c, so_group **out);
void dist_group_free(so_group *g); /* accepts NULL */
#endif

#endif
