/* Private to libscaleout_comm: how `auto` resolves an algorithm per call
 * from the process's active tuning table (tune.c), and the table's text
 * parser (tune_text.c, also built into fuzz/fuzz_tuning.c). */
#ifndef SCALEOUT_TUNE_INTERNAL_H
#define SCALEOUT_TUNE_INTERNAL_H

#include "scaleout/comm.h"

/* The concrete algorithm for an allreduce of `bytes` on p ranks with the
 * given emulated ranks-per-node. Loads SCALEOUT_TUNING on first use. */
so_allreduce_algo so_tuning_pick(size_t bytes, int p, int ranks_per_node);

/* Parses a tuning table from len bytes of text (`path` names it in messages);
 * so_comm_tuning_load reads the file and calls this. SO_EFORMAT. */
int so_comm_tuning_parse(const char *text, size_t len, const char *path, so_comm_tuning *t);

#endif
