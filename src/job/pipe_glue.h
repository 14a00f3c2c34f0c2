/* Pipeline stages x data-parallel replicas for a job (private to src/job):
 * the rank's stage and replica, the partition every rank agrees on, the
 * stage's graph in place of the whole model's, the two process groups (the
 * pipeline a rank's stage talks along, the replicas its gradients are
 * averaged over) and the pipeline strategy (scaleout/pipeline.h). */
#ifndef SCALEOUT_JOB_PIPE_GLUE_H
#define SCALEOUT_JOB_PIPE_GLUE_H
#include "dist.h"
#include "parts.h"
#include "scaleout/job.h"

typedef struct pipe_glue pipe_glue;

/* Checks the pipeline options against each other and the world size (no
 * communication). 0 without --pipeline-stages. */
int pipe_glue_check(const so_job_config *c, int world);

/* After parts_load (p->g is the whole model): chooses the partition (rank 0
 * measures for time / auto and the ranks take its cuts), puts this rank's
 * stage graph in p->g and keeps the whole graph. *out NULL without a
 * pipeline. Collective. */
int pipe_glue_open(const so_job_config *c, dist_handle *dh, job_parts *p, pipe_glue **out);
/* What parts_build shards and sizes by: the replica's rank and count, no
 * registered gradient memory (stages differ in size), and the micro-batch. */
const so_dist *pipe_glue_shard(pipe_glue *g);
int pipe_glue_microbatch(const pipe_glue *g);
/* Around parts_build, which creates the stage's model: take_layouts waits
 * for the layouts of the tensors this stage receives (each sent by its
 * producing stage once built) and hands them to the model through p;
 * give_layouts sends this stage's to the stages that read them, or a
 * failure mark when the model could not be built (p->m NULL), so no stage
 * waits for ever. Point-to-point on the pipeline group. Interleaved
 * (devices send both ways), take_layouts settles them in rounds of trial
 * builds (collective) and give_layouts does nothing. */
int pipe_glue_take_layouts(pipe_glue *g, const so_job_config *c, dist_handle *dh, job_parts *p);
int pipe_glue_give_layouts(pipe_glue *g, const job_parts *p);
/* After parts_build: the stage's initial parameters (the whole model's
 * slice), the groups, the strategy, tc's accumulate. Collective. */
int pipe_glue_start(pipe_glue *g, const so_job_config *c, dist_handle *dh, job_parts *p, so_train_config *tc);
/* The whole model's graph (configuration check, reports). */
const so_graph *pipe_glue_whole(const pipe_glue *g);
/* World rank 0 receives the whole model's parameters (malloc'ed, *n floats),
 * gathered from replica 0's stages; other ranks get NULL. Collective. */
int pipe_glue_gather_params(pipe_glue *g, const so_model *m, float **out, size_t *n);
/* r's measured bubble, 1 - (forward + backward seconds summed over ranks) /
 * (ranks x the counted steps' seconds), and the schedule's formula. Collective. */
int pipe_glue_bubble(pipe_glue *g, dist_handle *dh, int skip, so_train_result *r);
/* A stage's activation memory and message buffers (the largest over its
 * replicas), known on every rank after pipe_glue_bubble; -1 before. */
int pipe_glue_stage_memory(const pipe_glue *g, int stage, double *act_bytes, double *edge_bytes);
/* Bytes of the stage's message buffers (every edge, both directions, every
 * micro-batch), for the memory accounting. */
double pipe_glue_message_bytes(const pipe_glue *g, so_model *m);
/* What a stage's checkpoints hold: the replica group (a so_comm) and the stage. */
void pipe_glue_ckpt_scope(const pipe_glue *g, void **group, int *stage);
/* Stage, stages, replica, replicas of this rank. */
void pipe_glue_layout(const pipe_glue *g, int *stage, int *stages, int *replica, int *replicas);
/* The plan's stage starts (up to max written), how rank 0 chose them ("" on
 * other ranks); returns the stage count (stages x virtual stages). */
int pipe_glue_cuts(const pipe_glue *g, int *first, int max, const char **basis);
/* Frees the strategy and the groups (collective), then the rest. Accepts NULL. */
void pipe_glue_close(pipe_glue *g);

#endif
