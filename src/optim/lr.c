/* Learning-rate schedules: a linear warm-up (Goyal et al. 2017) composed before
 * constant, step-decay or cosine schedules. Pure functions of the step number,
 * so a resumed run needs only the step counter to continue its schedule. */
#include <math.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/optim.h"

static const char *lr_names[] = {[SO_LR_CONSTANT] = "constant", [SO_LR_STEP] = "step", [SO_LR_COSINE] = "cosine"};
#define NLR ((int)(sizeof lr_names / sizeof lr_names[0]))

int so_lr_parse(const char *name, so_lr_kind *kind)
{
    for (int k = 0; name && k < NLR; k++)
        if (!strcmp(name, lr_names[k])) {
            *kind = (so_lr_kind)k;
            return 0;
        }
    return so_err(SO_EINVAL, "unknown learning-rate schedule '%s' (choose constant, step, cosine)",
                  name ? name : "(null)");
}

const char *so_lr_name(so_lr_kind kind) { return (kind >= 0 && (int)kind < NLR) ? lr_names[kind] : "?"; }

int so_lr_check(const so_lr_schedule *s)
{
    if (s->kind < 0 || (int)s->kind >= NLR)
        return so_err(SO_EINVAL, "unknown learning-rate schedule kind %d", (int)s->kind);
    if (!(s->base_lr > 0.0f))
        return so_err(SO_EINVAL, "learning rate %g must be > 0", (double)s->base_lr);
    if (s->warmup_steps < 0)
        return so_err(SO_EINVAL, "warm-up steps %ld must be >= 0", s->warmup_steps);
    if (s->warmup_steps > 0 && !(s->warmup_start >= 0.0f && s->warmup_start <= 1.0f))
        return so_err(SO_EINVAL, "warm-up start %g must be a fraction of the learning rate in [0,1]",
                      (double)s->warmup_start);
    if (s->kind == SO_LR_STEP && s->step_size < 1)
        return so_err(SO_EINVAL, "step schedule: step size %ld must be >= 1", s->step_size);
    if (s->kind == SO_LR_STEP && !(s->gamma > 0.0f))
        return so_err(SO_EINVAL, "step schedule: gamma %g must be > 0", (double)s->gamma);
    if (s->kind == SO_LR_COSINE && s->total_steps <= s->warmup_steps)
        return so_err(SO_EINVAL, "cosine schedule: total steps %ld must exceed the %ld warm-up steps",
                      s->total_steps, s->warmup_steps);
    if (s->kind == SO_LR_COSINE && !(s->min_lr >= 0.0f && s->min_lr <= s->base_lr))
        return so_err(SO_EINVAL, "cosine schedule: min_lr %g must be in [0, %g]", (double)s->min_lr,
                      (double)s->base_lr);
    return 0;
}

/* Computed in double and rounded once, so lr(step) is the same on every rank
 * and for every resume point. Degenerate fields (unchecked schedules) fall back
 * to base_lr rather than dividing by zero. */
float so_lr_at(const so_lr_schedule *s, long step)
{
    double base = s->base_lr;
    if (step < 0)
        step = 0;
    if (step < s->warmup_steps) {
        double f = s->warmup_start + (1.0 - s->warmup_start) * (double)step / (double)s->warmup_steps;
        return (float)(base * f);
    }
    switch (s->kind) {
    case SO_LR_STEP:
        if (s->step_size < 1)
            return (float)base;
        return (float)(base * pow((double)s->gamma, (double)(step / s->step_size)));
    case SO_LR_COSINE: {
        long span = s->total_steps - s->warmup_steps, t = step - s->warmup_steps;
        if (span < 1 || t >= span)
            return span < 1 ? (float)base : s->min_lr;
        double min = s->min_lr;
        return (float)(min + (base - min) * 0.5 * (1.0 + cos(M_PI * (double)t / (double)span)));
    }
    default:
        return (float)base;
    }
}
