/* Private to libscaleout_comm: the tuning table's text parser (tune_text.c,
 * also built into fuzz/fuzz_tuning.c). `auto` resolves per call from its
 * group's table (so_comm_auto_algo, tune.c). */
#ifndef SCALEOUT_TUNE_INTERNAL_H
#define SCALEOUT_TUNE_INTERNAL_H

#include "scaleout/comm.h"

/* Parses a tuning table from len bytes of text (`path` names it in messages);
 * so_comm_tuning_load reads the file and calls this. SO_EFORMAT. */
int so_comm_tuning_parse(const char *text, size_t len, const char *path, so_comm_tuning *t);

#endif
