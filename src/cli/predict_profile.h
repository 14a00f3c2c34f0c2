/* The per-layer times `scaleout predict --compute-from` reads from a
 * profile.json of `train --profile` (docs/PROFILING.md). Its own file so the
 * reader can be fuzzed on its own (fuzz/fuzz_predict_profile.c). */
#ifndef SCALEOUT_CLI_PREDICT_PROFILE_H
#define SCALEOUT_CLI_PREDICT_PROFILE_H
#include <stddef.h>

#include "scaleout/graph.h"

/* From the profile's text (len bytes; `path` names it in messages): the mean
 * over its ranks of every layer's seconds per step, forward in t[0..n) and
 * backward in t[n..2n) (n = so_graph_size(g), t zeroed by the caller), and
 * in *t_other the rest of a step (the profile's compute time minus its
 * layers'). The profile must be of `model` at `batch`. 0, or SO_EFORMAT /
 * SO_EINVAL with one line naming path. */
int predict_profile_times(const char *text, size_t len, const char *path, const so_graph *g, const char *model,
                          int batch, double *t, double *t_other);

#endif
