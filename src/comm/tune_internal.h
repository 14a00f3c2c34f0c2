/* Private to libscaleout_comm: how `auto` resolves an algorithm per call
 * from the process's active tuning table (tune.c). */
#ifndef SCALEOUT_TUNE_INTERNAL_H
#define SCALEOUT_TUNE_INTERNAL_H

#include "scaleout/comm.h"

/* The concrete algorithm for an allreduce of `bytes` on p ranks with the
 * given emulated ranks-per-node. Loads SCALEOUT_TUNING on first use. */
so_allreduce_algo so_tuning_pick(size_t bytes, int p, int ranks_per_node);

#endif
