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

/* ---- a run's clocks: measured at its start and end -------------------------- */
typedef struct {
    prof_clock_test test;         /* SCALEOUT_PROF_TEST_CLOCK (tests only) */
    int rank, world;
    double origin;                /* rank 0's start on rank 0's clock (after the start) */
    double start_offset, start_at;/* the offset to rank 0 measured at the start, and when */
    so_prof_clock clock;          /* this rank's clock -> rank 0's (after the end) */
    so_prof_clock *clocks;        /* every rank's (after the end) */
} prof_clocks;

/* The start of the run on this rank's (profiler's) clock, the test hook
 * read; no communication. SO_ENOMEM. */
int prof_clocks_init(prof_clocks *c, int rank, int world);
/* The profiler's view of this rank's time t. */
double prof_clocks_skew(const prof_clocks *c, double t);
/* Collective: the offset to rank 0 at the start, and rank 0's origin on every rank. */
int prof_clocks_start(prof_clocks *c, dist_handle *dh);
/* Collective: the offset at the end, this rank's model, and every rank's
 * models on every rank (summed over d, the untimed so_dist; NULL on one process). */
int prof_clocks_end(prof_clocks *c, dist_handle *dh, const so_dist *d);
void prof_clocks_deinit(prof_clocks *c);

#endif
