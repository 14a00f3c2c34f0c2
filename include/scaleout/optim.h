/* Optimizers and learning-rate schedules over the model's flat buffers.
 * Each step is one vector loop over all parameters, with the update rules
 * exactly as PyTorch 1.13 defines them (torch.optim), so results compare. */
#ifndef SCALEOUT_OPTIM_H
#define SCALEOUT_OPTIM_H
#include <stddef.h>

typedef enum {
    SO_OPT_SGD,       /* p -= lr * (g + wd p) */
    SO_OPT_MOMENTUM,  /* b = mu b + g';  p -= lr b      (torch SGD momentum, dampening 0) */
    SO_OPT_NESTEROV,  /* b = mu b + g';  p -= lr (g' + mu b) */
    SO_OPT_ADAGRAD,   /* s += g'^2;      p -= lr g' / (sqrt(s) + eps), eps 1e-10 */
    SO_OPT_RMSPROP,   /* v = a v + (1-a) g'^2; p -= lr g' / (sqrt(v) + eps), a 0.99, eps 1e-8 */
    SO_OPT_ADAM,      /* bias-corrected Adam, L2 weight decay added to g */
    SO_OPT_ADAMW      /* Adam with decoupled decay: p *= 1 - lr wd first */
} so_optim_kind;

typedef struct {
    so_optim_kind kind;
    float momentum;      /* momentum / nesterov (default 0.9) */
    float weight_decay;  /* 0 = off */
    float beta1, beta2;  /* Adam(W): 0.9, 0.999 */
    float alpha;         /* RMSProp smoothing: 0.99 */
    float eps;           /* 0 = the kind's PyTorch default */
} so_optim_config;

typedef struct so_optim so_optim;

/* Sets the PyTorch defaults for `kind`. */
void so_optim_defaults(so_optim_config *c, so_optim_kind kind);
/* "sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adam", "adamw". */
int so_optim_parse(const char *name, so_optim_kind *kind);
const char *so_optim_name(so_optim_kind kind);

/* Optimizer for n parameters; state buffers zeroed. */
int so_optim_create(const so_optim_config *c, size_t n, so_optim **out);
void so_optim_destroy(so_optim *o);
/* One update of p[0..n) with gradient g at learning rate lr. */
void so_optim_step(so_optim *o, float *p, const float *g, float lr);
/* The optimizer state for checkpoints: `nslots` buffers of n floats each,
 * plus the step counter. slot(i) returns buffer i. */
int so_optim_nslots(const so_optim *o);
float *so_optim_slot(so_optim *o, int i);
long so_optim_steps(const so_optim *o);
void so_optim_set_steps(so_optim *o, long steps);

/* ---- learning-rate schedules ---- */
typedef enum { SO_LR_CONSTANT, SO_LR_STEP, SO_LR_COSINE } so_lr_kind;

typedef struct {
    so_lr_kind kind;
    float base_lr;
    long warmup_steps;   /* linear warm-up from warmup_start*base_lr to base_lr (Goyal et al.) */
    float warmup_start;  /* fraction of base_lr at step 0 of warm-up (default 0.1... set by caller) */
    long step_size;      /* step decay: multiply by gamma every step_size steps */
    float gamma;
    long total_steps;    /* cosine: anneal to min_lr at total_steps */
    float min_lr;
} so_lr_schedule;

/* "constant", "step", "cosine". */
int so_lr_parse(const char *name, so_lr_kind *kind);
/* Learning rate to use for optimizer step `step` (0-based). */
float so_lr_at(const so_lr_schedule *s, long step);

#endif
