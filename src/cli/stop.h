/* Graceful stop of `scaleout train` on SIGTERM (Slurm's scancel, time limit
 * and requeue; mpirun passing the signal on): all ranks stop after the same
 * step, take a checkpoint there and exit with CLI_REQUEUE. */
#ifndef SCALEOUT_CLI_STOP_H
#define SCALEOUT_CLI_STOP_H
#include "ckpt_glue.h"
#include "dist.h"
#include "scaleout/train.h"

/* Installs the SIGTERM handler (it only sets a flag). */
void stop_install(void);

typedef struct stop_hook stop_hook;

/* Chains a step_end hook into tc that agrees on the flag over dh's ranks
 * (collective: every rank calls it) and, when any rank was signalled, asks
 * cg (may be NULL) for a checkpoint at the step where they agree and stops
 * training after it. Returns 0 or CLI_FAIL (message printed). */
int stop_hook_open(so_train_config *tc, dist_handle *dh, ckpt_glue *cg, stop_hook **out);
/* The step after which training stopped on SIGTERM, or -1. */
long stop_hook_step(const stop_hook *h);
/* On every rank after training (it may complete an agreement). Accepts NULL. */
void stop_hook_close(stop_hook *h);

#endif
