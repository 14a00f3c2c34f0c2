/* The profiler inside a job (so_job_prof_config, SCALEOUT_TIMELINE=FILE),
 * private to src/job: wires scaleout/prof.h to the trainer's spans and the
 * communication engine, aligns the ranks' clocks and merges every rank's
 * timeline and statistics onto rank 0 (docs/PROFILING.md). */
#ifndef SCALEOUT_JOB_PROF_GLUE_H
#define SCALEOUT_JOB_PROF_GLUE_H
#include "dist.h"
#include "prof_sched.h"
#include "scaleout/ckpt.h"
#include "scaleout/job.h"
#include "scaleout/model.h"

typedef struct prof_glue prof_glue;

/* Collective. Returns 0 with *out == NULL when profiling is off. Otherwise
 * creates the output directory (rank 0), measures clock offsets to rank 0
 * and attaches to the model. allreduce names the gradient algorithm for the
 * statistics; build_id goes into profile.json. Bad options or an unwritable
 * directory fail on every rank (SO_EINVAL). */
int prof_glue_start(const so_job_prof_config *o, const char *allreduce, const char *build_id, dist_handle *dh,
                    so_model *m, prof_glue **out);
/* The trainer's spans (g may be NULL). */
void prof_glue_span(prof_glue *g, so_span_kind kind, long step, int id, double t0, double t1);
/* The so_dist to train with: d with its blocking collectives timed (d itself
 * when g or d is NULL). */
const so_dist *prof_glue_dist(prof_glue *g, const so_dist *d);
/* Collective, after a successful so_train: gathers and writes the timeline
 * and profile.json on rank 0 and keeps the short summary there. config is
 * the run's key=value configuration text. */
int prof_glue_finish(prof_glue *g, const so_train_result *r, const char *config);
/* Rank 0's summary lines after the finish ("" before, elsewhere, or g NULL). */
const char *prof_glue_summary(const prof_glue *g);
/* With pipeline stages: this rank's place and the schedule, so profile.json
 * gets "pipeline_schedule" (g may be NULL). Call on every rank or none. */
void prof_glue_pipeline(prof_glue *g, const prof_sched_layout *l);
/* With pipeline stages: the whole model, so each rank's per-layer figures
 * carry the layer's place in it (so_prof_set_layer_order; g may be NULL). */
void prof_glue_layer_order(prof_glue *g, const so_graph *whole);
/* Detaches from the model and frees. Accepts NULL. */
void prof_glue_free(prof_glue *g, so_model *m);
/* A checkpoint stall [t0, t1] on the compute track (so_ckpt_span_fn; arg is the prof_glue). */
void prof_glue_checkpoint_span(void *arg, double t0, double t1);
/* A checkpoint writer or flush thread's piece of I/O on the rank's "checkpoint
 * I/O" (tid 2) or "checkpoint flush" (tid 3) track (so_ckpt_io_fn; any thread). */
void prof_glue_checkpoint_io(void *arg, const so_ckpt_io_event *e);

#endif
