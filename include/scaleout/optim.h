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
    double beta1, beta2; /* Adam(W): 0.9, 0.999. Double like torch's Python floats: */
    double alpha;        /* RMSProp: 0.99.  1 - beta is formed before rounding to float */
    float eps;           /* 0 = the kind's PyTorch default */
    /* Weight decay only inside these n sorted [lo, hi) pairs of the flat
     * buffer (copied by so_optim_create; so_graph_decay_ranges gives the
     * matrices and embeddings, nanoGPT's and llm.c's choice for GPT-2).
     * NULL: every parameter, torch's default. */
    const size_t *decay_ranges;
    int ndecay_ranges;
} so_optim_config;

typedef struct so_optim so_optim;

/* Sets the PyTorch defaults for `kind` (momentum 0.9 for the momentum kinds,
 * 0 otherwise; no weight decay; eps = the kind's default). */
void so_optim_defaults(so_optim_config *c, so_optim_kind kind);
/* "sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adam", "adamw";
 * SO_EINVAL naming the choices otherwise. */
int so_optim_parse(const char *name, so_optim_kind *kind);
const char *so_optim_name(so_optim_kind kind);

/* Optimizer for n parameters; state buffers zeroed, in one aligned allocation
 * owned by the optimizer. SO_EINVAL if a hyper-parameter is out of range
 * (momentum, betas, alpha in [0,1), nesterov momentum > 0; weight_decay,
 * eps >= 0), SO_ENOMEM. */
int so_optim_create(const so_optim_config *c, size_t n, so_optim **out);
void so_optim_destroy(so_optim *o); /* accepts NULL */
/* One update of p[0..n) with gradient g at learning rate lr: a single
 * branch-free vector loop; allocates nothing. */
void so_optim_step(so_optim *o, float *p, const float *g, float lr);
/* The decay ranges of so_optim_config set after creation: n sorted,
 * disjoint [lohi[2r], lohi[2r+1]) (copied; n = 0 decays nothing).
 * Offsets are the model's flat buffer (so_optim_range.flat_off), not the
 * optimizer's state: a shard's optimizer takes the whole model's ranges.
 * SO_EINVAL for a range empty, unsorted or overlapping. */
int so_optim_set_decay(so_optim *o, const size_t *lohi, int n);
/* Part of a step: parameters p[0..n) with gradients g[0..n), which are
 * elements flat_off .. flat_off + n of the model's flat buffer, stepped with
 * the optimizer's state state_off .. state_off + n. A strategy that steps a
 * shard of the model creates the optimizer for the shard's size and passes
 * one range per piece of it. */
typedef struct {
    float *p;
    const float *g;
    size_t flat_off, state_off, n;
} so_optim_range;
/* One step over nr ranges (the step count, and with it Adam's bias
 * correction, moves once): each range exactly as so_optim_step would update
 * those elements. SO_EINVAL if a range's state lies outside the optimizer's. */
int so_optim_step_ranges(so_optim *o, const so_optim_range *r, int nr, float lr);
/* The number of parameters the optimizer holds state for (so_optim_create's n). */
size_t so_optim_size(const so_optim *o);
/* The optimizer state for checkpoints: `nslots` buffers of n floats each,
 * plus the step counter. slot(i) returns buffer i (NULL if out of range).
 * Slots: momentum, nesterov: [b]; adagrad: [sum g^2]; rmsprop: [v];
 * adam, adamw: [m, v]; sgd: none. */
/* Gradient clipping's parts: sum of g[i]^2 over n floats in double (eight
 * interleaved partial sums added in a fixed order: the same bits on every
 * CPU), and g *= f. */
double so_optim_sqnorm(const float *g, size_t n);
void so_optim_scale(float *g, size_t n, float f);
int so_optim_nslots(const so_optim *o);
float *so_optim_slot(so_optim *o, int i);
long so_optim_steps(const so_optim *o);
void so_optim_set_steps(so_optim *o, long steps);

/* ---- learning-rate schedules ----
 * lr(step) for 0-based optimizer steps. A linear warm-up (Goyal et al. 2017)
 * comes first: lr = base_lr * (warmup_start + (1 - warmup_start) * step / warmup_steps)
 * for step < warmup_steps, so step 0 uses warmup_start*base_lr and step
 * warmup_steps is the first at base_lr. Then the main schedule:
 *   constant: base_lr
 *   step:     base_lr * gamma^floor(step / step_size), counted from step 0 like
 *             the ImageNet recipe (decay at epoch 30/60/80 regardless of warm-up)
 *   cosine:   min_lr + (base_lr - min_lr) (1 + cos(pi t / T)) / 2 with
 *             t = step - warmup_steps, T = total_steps - warmup_steps; min_lr
 *             from total_steps on. */
typedef enum { SO_LR_CONSTANT, SO_LR_STEP, SO_LR_COSINE } so_lr_kind;

typedef struct {
    so_lr_kind kind;
    float base_lr;
    long warmup_steps;   /* linear warm-up from warmup_start*base_lr to base_lr (Goyal et al.); 0 = none */
    float warmup_start;  /* fraction of base_lr at step 0 of warm-up, in [0,1] (set by caller; Goyal: 0.1) */
    long step_size;      /* step decay: multiply by gamma every step_size steps */
    float gamma;
    long total_steps;    /* cosine: anneal to min_lr at total_steps */
    float min_lr;
} so_lr_schedule;

/* "constant", "step", "cosine"; SO_EINVAL naming the choices otherwise. */
int so_lr_parse(const char *name, so_lr_kind *kind);
const char *so_lr_name(so_lr_kind kind);
/* 0 if the schedule is usable; SO_EINVAL with a message naming the bad field
 * (base_lr <= 0, warmup_start outside [0,1], step_size < 1 or gamma <= 0 for
 * step decay, total_steps <= warmup_steps or min_lr outside [0,base_lr] for cosine). */
int so_lr_check(const so_lr_schedule *s);
/* Learning rate to use for optimizer step `step` (0-based). */
float so_lr_at(const so_lr_schedule *s, long step);

#endif
