/* llm.c's model file (train_gpt2.c's gpt2_build_from_checkpoint): a header
 * of 256 int32 (magic 20240326, version 3 = FP32 with a padded vocabulary,
 * maxT, V, L, NH, C, Vp) followed by the parameters as FP32 in llm.c's
 * tensor order. A private shim of scaleout's own until the shared llm.c
 * format module lands; the GPT-2 mapping (gpt2_llmc.c) is its only user. */
#ifndef SCALEOUT_MODELS_LLMC_FORMAT_H
#define SCALEOUT_MODELS_LLMC_FORMAT_H
#include <stddef.h>

#include "scaleout/zoo.h"
#include "scaleout/gpt2.h"

/* Reads `path`: *c from the header, *params (malloc'ed, *n floats) in the
 * file's order. SO_EIO when it cannot be read; SO_EFORMAT naming the file
 * for a wrong magic or version, a non-positive size in the header, or a
 * body whose length disagrees with the sizes the header gives. */
int llmc_model_read(const char *path, so_gpt2_config *c, float **params, size_t *n);
/* Writes c and params[0..n) (llm.c's order) as version 3. SO_EIO on failure. */
int llmc_model_write(const char *path, const so_gpt2_config *c, const float *params, size_t n);

#endif
