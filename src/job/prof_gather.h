/* The profiler's exchanges at the end of a run (private to src/job): every
 * rank's totals, per-step compute, checkpoint I/O and text parts (trace
 * events, statistics, schedule lanes) brought together, and the pipeline
 * step the lanes show agreed on. Every rank calls them in the same order. */
#ifndef SCALEOUT_JOB_PROF_GATHER_H
#define SCALEOUT_JOB_PROF_GATHER_H
#include <stdio.h>

#include "dist.h"
#include "scaleout/prof.h"

/* Who takes part: d is the job's untimed so_dist (NULL on one process). */
typedef struct {
    dist_handle *dh;
    const so_dist *d;
    int rank, world;
} prof_ranks;

/* Every rank's totals on every rank (all: world entries). */
int prof_gather_totals(const prof_ranks *r, const so_prof *p, so_prof_totals *all);
/* The per-step load balance of the last steps every rank measured, into pop. */
int prof_gather_step_balance(const prof_ranks *r, const so_prof *p, so_prof_pop *pop);
/* Count, bytes and seconds of each checkpoint I/O kind summed over ranks
 * (v: 3 x SO_CKPT_IO_KINDS). */
int prof_gather_io(const prof_ranks *r, so_prof *p, double *v);
/* Rank 0 receives every rank's text as written by fn(ctx, f) into a memory
 * stream, concatenated in rank order with the parts' sizes (world
 * entries); the other ranks get *out NULL. Free *out. */
int prof_gather_text(const prof_ranks *r, int (*fn)(void *ctx, FILE *f), void *ctx, char **out, size_t *sizes);
/* The pipeline step the lanes show (rank 0's choice, prof_sched_choose)
 * and its start on rank 0's clock: the earliest rank's (clock: this rank's
 * model). *step -1: none. */
int prof_gather_sched_step(const prof_ranks *r, const so_prof *p, int skip, const so_prof_clock *clock, long *step,
                           double *ref);

#endif
