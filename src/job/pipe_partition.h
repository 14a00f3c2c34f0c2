/* The partition every rank of a pipelined job agrees on (private to
 * src/job): rank 0 takes the cuts its checkpoints were written with when
 * resuming, else chooses them (so_pipe_choose_cuts, timing the nodes on a
 * model of its own), records them beside the checkpoints, and every rank
 * receives them. */
#ifndef SCALEOUT_JOB_PIPE_PARTITION_H
#define SCALEOUT_JOB_PIPE_PARTITION_H
#include "dist.h"
#include "scaleout/job.h"
#include "scaleout/pipeline.h"

/* Rank 0's decision: the P v stage starts of r into first and how they
 * were chosen (*basis, static text). ds gives the input shape the nodes
 * are timed at. No communication. */
int pipe_partition_choose(const so_job_config *c, const so_dataset *ds, const so_graph *whole,
                          const so_pipe_cut_request *r, int *first, const char **basis);
/* Rank 0's n stage starts on every rank (collective). */
int pipe_partition_share(dist_handle *dh, int rank, int *first, int n);

#endif
