/* Graceful stop on request (SIGTERM from Slurm's scancel, its time limit or
 * requeue; mpirun passing the signal on): all ranks stop after the same
 * step, with a checkpoint there when the job writes checkpoints. Private to
 * src/job; the public entry is so_job_request_stop. */
#ifndef SCALEOUT_JOB_STOP_H
#define SCALEOUT_JOB_STOP_H
#include "dist.h"
#include "scaleout/train.h"

typedef struct stop_state stop_state;

/* Sets the process's flag (async-signal-safe). */
void stop_request(void);
/* Collective: every rank calls it (a channel for the agreement), with the
 * same lead (so_strategy.lead: steps its ranks may run ahead of the slowest). */
int stop_open(dist_handle *dh, int lead, stop_state **out);
/* At every step end, first among the observers: *stop = 1 when the ranks
 * agree to stop after step s (the same answer on every rank). */
int stop_step_end(stop_state *st, const so_train_state *s, int *stop);
/* Records the step training stopped after. */
void stop_mark(stop_state *st, long step);
/* The step after which training stopped on a request, or -1. */
long stop_step(const stop_state *st);
/* On every rank after training (it may complete an agreement). Accepts NULL. */
void stop_close(stop_state *st);
/* For the signal thread (signals.c): a job exists (1: so_job_create
 * succeeded) or no longer does (0: so_job_free began). */
void signals_job_phase(int live);

#endif
