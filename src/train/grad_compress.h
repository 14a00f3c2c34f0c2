/* Data parallelism's --compress: the compressor for a model's flat gradient
 * buffer (its weight tensors as matrices for PowerSGD). Private to src/train. */
#ifndef SCALEOUT_TRAIN_GRAD_COMPRESS_H
#define SCALEOUT_TRAIN_GRAD_COMPRESS_H
#include "scaleout/compress.h"
#include "scaleout/model.h"
#include "scaleout/train.h"

/* *out = NULL when c->compress is none; SO_EINVAL for auto (the caller
 * chooses) and what so_compressor_create refuses. */
int grad_compress_create(const so_train_config *c, const so_model *m, so_compressor **out);
/* The compressor's counters into r (and destroys nothing). */
void grad_compress_report(const so_compressor *x, so_train_result *r);

#endif
