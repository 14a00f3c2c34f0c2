/* A pipelined job's process groups and the link between its stages over
 * so_comm (private to src/job): the replica's pipeline group (its P stages,
 * stage s at group rank P - 1 - s; scaleout's TCP mesh between hosts,
 * memory shared between stages on one host) and the stage's replica group
 * (its gradient average and its checkpoints). */
#ifndef SCALEOUT_JOB_PIPE_LINK_H
#define SCALEOUT_JOB_PIPE_LINK_H
#ifdef SCALEOUT_HAVE_MPI
#include "scaleout/comm.h"
#include "scaleout/pipeline.h"

typedef struct {
    so_comm *pipeline;           /* this replica's stages */
    so_comm *replicas;           /* this stage's replicas */
    int stage, stages;
    int *node_of;                /* per pipeline group rank: its node id */
    void *shared;                /* this rank's memory for shared edges (so_comm_buf_alloc), or NULL */
} pipe_link;

/* Splits world into the two groups of rank r, connects the pipeline's TCP
 * mesh and learns its ranks' nodes. Collective over world. Close on error too. */
int pipe_link_open(pipe_link *l, so_comm *world, const so_pipe_ranks *r);
/* The so_pipe_link of the pipeline strategy and the layout exchange (l is its ctx). */
so_pipe_link pipe_link_ops(pipe_link *l);
/* Frees both groups (collective) and the shared memory with the pipeline's. */
void pipe_link_close(pipe_link *l);

#endif
#endif
