/* Aligning the ranks' clocks for the merged timeline (docs/PROFILING.md,
 * "Clocks"): each rank's offset to rank 0 is measured by ping-pong at the
 * start and at the end of the run, and the two measurements give a linear
 * model (offset + drift) that maps every timestamp onto rank 0's clock. */
#ifndef SCALEOUT_JOB_PROF_CLOCK_H
#define SCALEOUT_JOB_PROF_CLOCK_H
#include "dist.h"
#include "scaleout/prof.h"

/* What the model corrects: both (default), the start offset only, nothing. */
typedef enum { PROF_CLOCK_DRIFT, PROF_CLOCK_OFFSET, PROF_CLOCK_NONE } prof_clock_mode;

/* The test hook SCALEOUT_PROF_TEST_CLOCK=RANK:OFFSET_S:RATE[:drift|offset|none]
 * (tests only): rank RANK's profiler sees its clock as
 * t + OFFSET_S + RATE (t - start), and the model corrects what the mode says. */
typedef struct {
    int rank;          /* the skewed rank, -1: none */
    double offset, rate, start;
    prof_clock_mode mode;
} prof_clock_test;

/* Reads the environment variable; start is the run's start on this rank.
 * A malformed value is ignored (rank -1). */
void prof_clock_test_init(prof_clock_test *t, double start);
/* The profiler's view of this rank's time t (t itself unless skewed). */
double prof_clock_skew(const prof_clock_test *t, int rank, double time);

/* Collective over dh's ranks: *offset = rank 0's clock minus this rank's at
 * this rank's time *at, from the shortest of several ping-pongs (Cristian's
 * algorithm); 0 and now on rank 0 and without MPI. */
int prof_clock_measure(dist_handle *dh, const prof_clock_test *t, int rank, int world, double *offset, double *at);
/* The model from a measurement at the start (o1 at a1) and at the end (o2 at a2). */
so_prof_clock prof_clock_model(double o1, double a1, double o2, double a2, prof_clock_mode mode);

#endif
