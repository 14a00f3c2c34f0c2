/* Data parallelism's --compress: the compressor for a model's flat gradient
 * buffer (its weight tensors as matrices for PowerSGD). Private to src/train. */
#ifndef SCALEOUT_TRAIN_GRAD_COMPRESS_H
#define SCALEOUT_TRAIN_GRAD_COMPRESS_H
#include "scaleout/compress.h"
#include "scaleout/model.h"
#include "scaleout/predict.h"
#include "scaleout/strategy.h"
#include "scaleout/train.h"

/* The compressor of spec for m's flat gradient buffer: *out = NULL when
 * spec is none; SO_EINVAL for auto (resolved before) and what
 * so_compressor_create refuses. */
int grad_compress_create(const so_compress_spec *spec, int error_feedback, uint64_t seed, const so_model *m,
                         so_compressor **out);
/* x's state (residuals, Q's) as the strategy's per-rank checkpoint state,
 * tagged with the method and error-feedback setting (x must outlive it). */
void grad_compress_rank_state(so_compressor *x, const so_compress_spec *spec, so_rank_state *out);
/* --compress auto: measures each candidate method on this CPU over m's
 * current gradient cut at bounds (nb buckets, ascending), agrees the costs
 * over d's ranks (collective), times a few allreduces on d->group to fit
 * the link (d->cost without a group), predicts each one's step from pc and
 * that link, and picks the soonest at the target: step x the method's
 * steps-to-target factor (FP32 unless one is 2% sooner). The methods,
 * predictions and the pick go to r; *pick = the chosen method. */
int grad_compress_auto(const so_train_config *c, const so_model *m, const so_dist *d, const so_predict_compute *pc,
                       const size_t *bounds, int nb, so_train_result *r, so_compress_spec *pick);
/* --compress auto's per-rank checkpoint state, sized before the choice so
 * the checkpoint's layout is fixed for the run: the chosen method's name in
 * GRAD_AUTO_NAME_BYTES ("" before the choice), then its compressor's state,
 * zero-padded to the largest candidate's (*bytes, each candidate made once
 * to size it). */
#define GRAD_AUTO_NAME_BYTES 32
int grad_compress_auto_state_bytes(int error_feedback, uint64_t seed, const so_model *m, uint64_t *bytes);
/* The candidate auto weighs that is spelled `name` (as so_compress_format
 * spells it) -> *spec; SO_EINVAL for any other name. */
int grad_compress_auto_method(const char *name, so_compress_spec *spec);
/* The compressor's counters into r (and destroys nothing). */
void grad_compress_report(const so_compressor *x, so_train_result *r);
/* Plain FP32 averaging's counters into r: nparams floats sent per step
 * (r->steps), as many as FP32 would, nothing spent compressing. */
void grad_compress_report_dense(size_t nparams, so_train_result *r);

#endif
