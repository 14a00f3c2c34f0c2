/* Progress display for `scaleout train` (see progress.c). */
#ifndef SCALEOUT_CLI_PROGRESS_H
#define SCALEOUT_CLI_PROGRESS_H
#include "scaleout/train.h"

typedef struct {
    int enabled, bar;
    double last;   /* elapsed time of the last redraw */
} progress_state;

/* mode: "auto" (the bar when stdout reaches a terminal, also through
 * mpirun; else lines), "bar", "lines" ("plain" is the same), "none"; only
 * rank 0 prints. */
void progress_init(progress_state *p, const char *mode, int rank);
/* so_progress_fn: pass a progress_state* as arg. */
void progress_update(void *arg, const so_progress *s);

#endif
