/* `scaleout train --profile DIR` / SCALEOUT_TIMELINE=FILE: wires the profiler
 * (scaleout/prof.h) to the trainer's hooks and the communication engine,
 * aligns the ranks' clocks and merges every rank's timeline and statistics
 * onto rank 0 (docs/PROFILING.md). */
#ifndef SCALEOUT_CLI_PROF_GLUE_H
#define SCALEOUT_CLI_PROF_GLUE_H
#include "dist.h"
#include "scaleout/ckpt.h"
#include "scaleout/model.h"
#include "scaleout/train.h"

typedef struct prof_glue prof_glue;

typedef struct {
    const char *dir;       /* --profile DIR (NULL: off unless SCALEOUT_TIMELINE is set) */
    const char *detail;    /* layer | block | step */
    const char *steps;     /* --timeline-steps A:B | all */
    const char *allreduce; /* the gradient algorithm's name, for the statistics */
} prof_options;

/* Collective. Returns 0 with *out == NULL when profiling is off. Otherwise
 * creates the output directory (rank 0), measures clock offsets to rank 0,
 * attaches to the model and chains its hooks in front of tc->hooks. On bad
 * options or an unwritable directory every rank returns an exit code (2). */
int prof_glue_start(const prof_options *o, dist_handle *dh, so_model *m, so_train_config *tc, prof_glue **out);
/* The so_dist to train with: d with its blocking collectives timed (d itself
 * when g or d is NULL). */
const so_dist *prof_glue_dist(prof_glue *g, const so_dist *d);
/* Collective, after a successful so_train: gathers and writes the timeline
 * and profile.json on rank 0 and prints the short summary there. config is
 * the run's key=value configuration text. Returns a CLI exit code. */
int prof_glue_finish(prof_glue *g, const so_train_result *r, const char *config);
/* Detaches from the model and frees. Accepts NULL. */
void prof_glue_free(prof_glue *g, so_model *m);
/* A checkpoint stall [t0, t1] on the compute track (so_ckpt_span_fn; arg is the prof_glue). */
void prof_glue_checkpoint_span(void *arg, double t0, double t1);
/* A checkpoint writer or flush thread's piece of I/O on the rank's "checkpoint
 * I/O" (tid 2) or "checkpoint flush" (tid 3) track (so_ckpt_io_fn; any thread). */
void prof_glue_checkpoint_io(void *arg, const so_ckpt_io_event *e);

#endif
