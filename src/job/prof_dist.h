/* The trainer's blocking collectives timed for the profiler (private to
 * src/job): a so_dist that forwards every call to the job's and records
 * each sum, max, broadcast and batchnorm allsum as a communication event.
 * The gradient engine's requests are recorded from its own statistics
 * (prof_glue.c), so grad_submit and grad_wait only forward. */
#ifndef SCALEOUT_JOB_PROF_DIST_H
#define SCALEOUT_JOB_PROF_DIST_H
#include "prof_clock.h"
#include "scaleout/prof.h"
#include "scaleout/train.h"

typedef struct {
    so_dist dist;                 /* what the trainer calls */
    const so_dist *inner;         /* the job's, untimed */
    so_prof *p;
    const prof_clock_test *test;  /* the profiler's clock (skewed in tests) */
    int rank;
} prof_dist;

/* d's calls through t, recorded into p; d itself when d is NULL. t must
 * outlive the trainer's use of the result. */
const so_dist *prof_dist_wrap(prof_dist *t, so_prof *p, const prof_clock_test *test, int rank, const so_dist *d);

#endif
