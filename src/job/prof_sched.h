/* The pipeline schedule of one representative step, for profile.json's
 * "pipeline_schedule" (docs/FORMATS.md): which step (chosen on rank 0) and
 * every rank's forward / backward spans of it on rank 0's clock, which
 * `scaleout report` draws as one lane per stage. Private to src/job. */
#ifndef SCALEOUT_JOB_PROF_SCHED_H
#define SCALEOUT_JOB_PROF_SCHED_H
#include <stdio.h>

#include "scaleout/prof.h"

#define PROF_SCHED_SPANS 1024 /* spans kept per rank (2 M v + 2 of them make a step) */

/* Where a rank sits in the pipeline and what its schedule is. */
typedef struct {
    char schedule[16];     /* gpipe, 1f1b, interleaved */
    int stage, stages, replica, replicas, microbatches, chunks;
} prof_sched_layout;

/* The step to draw: among the detailed steps that are neither skipped (the
 * first `skip` of the run: primitive creation) nor the window's first, the
 * one of median duration on this rank; a steady-state step rather than a
 * lucky or a stalled one. Any detailed step when that leaves none; -1 when
 * there is none at all. */
long prof_sched_choose(const so_prof *p, int skip);
/* The step's STEP span start on this rank's clock; NAN if not recorded. */
double prof_sched_step_start(const so_prof *p, long step);
/* The step's STEP span end on this rank's clock; NAN if not recorded. */
double prof_sched_step_end(const so_prof *p, long step);
/* This rank's lane as one JSON object: rank, stage, replica and its spans
 * {kind F / B / comm_wait / optimizer, micro_batch, chunk (interleaved),
 * t0_ms, t1_ms}, the times in ms of rank 0's clock (through `clock`) since
 * `ref` (seconds on rank 0's clock). 0 or SO_ENOMEM / SO_EIO. */
int prof_sched_write_rank(FILE *f, const so_prof *p, long step, int rank, const prof_sched_layout *l,
                          const so_prof_clock *clock, double ref);

#endif
