/* The profiler's files and summary on rank 0 (private to src/job):
 * timeline.json from every rank's trace events, profile.json from the
 * run's header (configuration, environment, throughput, POP metrics,
 * clocks) followed by every rank's statistics and, with pipeline stages,
 * the lanes of one step, and the lines `train` prints after a profiled run.
 * Formatting only: the ranks' parts arrive gathered (prof_gather.h). */
#ifndef SCALEOUT_JOB_PROF_WRITE_H
#define SCALEOUT_JOB_PROF_WRITE_H
#include "prof_sched.h"
#include "scaleout/prof.h"
#include "scaleout/train.h"

/* What every file says about the run. */
typedef struct {
    int world;
    const so_prof_clock *clocks;  /* world entries: every rank's model to rank 0's clock */
    so_prof_detail detail;
    const char *timeline_steps;   /* --timeline-steps */
    const char *allreduce, *build_id;
    int skip_steps;               /* the first steps left out of the statistics */
    const char *timeline, *profile; /* the files' paths ("" when not written) */
} prof_run;

/* Text parts of the ranks, rank after rank, with their sizes. */
typedef struct {
    const char *text;
    const size_t *sizes;
} prof_parts;

/* The pipeline's lanes in profile.json ("pipeline_schedule"). */
typedef struct {
    const prof_sched_layout *layout;
    long step;                    /* the step drawn */
    double step_ms;               /* its duration on rank 0's clock (NAN: unknown) */
    prof_parts lanes;
} prof_schedule;

/* timeline.json from the ranks' trace events. 0 or SO_EIO naming the file. */
int prof_write_timeline(const prof_run *run, const prof_parts *events);
/* profile.json: the header from r, config (key=value lines) and pop, then
 * sched (NULL without stages) and the ranks' statistics. 0 or SO_EIO. */
int prof_write_profile(const prof_run *run, const so_train_result *r, const char *config, const so_prof_pop *pop,
                       const prof_schedule *sched, const prof_parts *stats);
/* The summary lines (malloc'ed into *out): efficiency, per-step phases,
 * the files, and checkpoint I/O (io: prof_gather_io's sums). SO_ENOMEM. */
int prof_write_summary(const prof_run *run, const so_train_result *r, const so_prof_totals *all,
                       const so_prof_pop *pop, const double *io, char **out);

#endif
