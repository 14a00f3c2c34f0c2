/* The environment a benchmark ran in (machine, libraries, build, threads),
 * written into every `scaleout bench` --json record so a result can be
 * reproduced and compared later (see docs/FORMATS.md). */
#ifndef SCALEOUT_CLI_ENV_H
#define SCALEOUT_CLI_ENV_H
#include <stddef.h>

#include "scaleout/json.h"

typedef struct {
    char hostname[256], date[32], kernel[256], cpu_model[256], mpi[256];
    int cpu_logical, cpu_online;
} env_info;

void env_collect(env_info *e);
/* Writes the "environment" object; threads/pin are the run's compute-thread settings. */
void env_write_json(so_json *js, const env_info *e, int threads, int pin);

#endif
