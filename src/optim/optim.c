/* Optimizers: one update rule per function, each a single branch-free loop over
 * the flat parameter buffer, written in the operation order of torch.optim 1.13
 * (single-tensor path) so float results agree with PyTorch to a few ulps.
 * State lives in one aligned allocation, `nslots` buffers of n floats. */
#include "scaleout/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/vec_clones.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"

struct so_optim {
    so_optim_config c;   /* with eps resolved to the kind's default */
    size_t n;
    size_t stride;       /* floats between slots: n rounded up to SO_ALIGN */
    int nslots;
    long steps;          /* completed steps; Adam's bias correction uses steps+1 */
    float *state;        /* nslots * stride floats, zeroed */
    int masked;          /* so_optim_set_decay was called: decay only inside `decay` */
    size_t *decay;       /* sorted [lo, hi) pairs of the flat buffer */
    int ndecay;
};

static const struct {
    const char *name;
    int nslots;
    float eps; /* torch.optim default */
} kinds[] = {
    [SO_OPT_SGD] = {"sgd", 0, 0.0f},
    [SO_OPT_MOMENTUM] = {"momentum", 1, 0.0f},
    [SO_OPT_NESTEROV] = {"nesterov", 1, 0.0f},
    [SO_OPT_ADAGRAD] = {"adagrad", 1, 1e-10f},
    [SO_OPT_RMSPROP] = {"rmsprop", 1, 1e-8f},
    [SO_OPT_ADAM] = {"adam", 2, 1e-8f},
    [SO_OPT_ADAMW] = {"adamw", 2, 1e-8f},
};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

void so_optim_defaults(so_optim_config *c, so_optim_kind kind)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->momentum = (kind == SO_OPT_MOMENTUM || kind == SO_OPT_NESTEROV) ? 0.9f : 0.0f;
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    c->alpha = 0.99;
    c->eps = (kind >= 0 && (int)kind < NKINDS) ? kinds[kind].eps : 0.0f;
}

int so_optim_parse(const char *name, so_optim_kind *kind)
{
    for (int k = 0; name && k < NKINDS; k++)
        if (!strcmp(name, kinds[k].name)) {
            *kind = (so_optim_kind)k;
            return 0;
        }
    return so_err(SO_EINVAL, "unknown optimizer '%s' (choose sgd, momentum, nesterov, adagrad, rmsprop, adam, adamw)",
                  name ? name : "(null)");
}

const char *so_optim_name(so_optim_kind kind)
{
    return (kind >= 0 && (int)kind < NKINDS) ? kinds[kind].name : "?";
}

/* 1 if x is in [0,1): momentum, betas and alpha; NaN fails. */
static int unit(double x) { return x >= 0.0 && x < 1.0; }

static int check_config(const so_optim_config *c)
{
    if (c->kind < 0 || (int)c->kind >= NKINDS)
        return so_err(SO_EINVAL, "unknown optimizer kind %d", (int)c->kind);
    const char *k = kinds[c->kind].name;
    if (!(c->weight_decay >= 0.0f))
        return so_err(SO_EINVAL, "%s: weight_decay %g must be >= 0", k, (double)c->weight_decay);
    if (!(c->eps >= 0.0f))
        return so_err(SO_EINVAL, "%s: eps %g must be >= 0", k, (double)c->eps);
    if ((c->kind == SO_OPT_MOMENTUM || c->kind == SO_OPT_NESTEROV) && !unit(c->momentum))
        return so_err(SO_EINVAL, "%s: momentum %g must be in [0,1)", k, (double)c->momentum);
    if (c->kind == SO_OPT_NESTEROV && c->momentum == 0.0f) /* torch refuses it too */
        return so_err(SO_EINVAL, "nesterov: needs momentum > 0");
    if ((c->kind == SO_OPT_ADAM || c->kind == SO_OPT_ADAMW) && !(unit(c->beta1) && unit(c->beta2)))
        return so_err(SO_EINVAL, "%s: betas (%g, %g) must be in [0,1)", k, c->beta1, c->beta2);
    if (c->kind == SO_OPT_RMSPROP && !unit(c->alpha))
        return so_err(SO_EINVAL, "%s: alpha %g must be in [0,1)", k, c->alpha);
    return 0;
}

int so_optim_create(const so_optim_config *c, size_t n, so_optim **out)
{
    *out = NULL;
    int rc = check_config(c);
    if (rc)
        return rc;
    so_optim *o = calloc(1, sizeof *o);
    if (!o)
        return so_err(SO_ENOMEM, "optimizer: out of memory");
    o->c = *c;
    o->c.decay_ranges = NULL; /* copied below: the caller's array is borrowed */
    if (o->c.eps == 0.0f)
        o->c.eps = kinds[c->kind].eps;
    o->n = n;
    size_t per_line = SO_ALIGN / sizeof(float);
    o->stride = (n + per_line - 1) / per_line * per_line; /* every slot starts aligned */
    o->nslots = kinds[c->kind].nslots;
    o->state = so_alloc((size_t)o->nslots * o->stride * sizeof(float));
    if (!o->state) {
        free(o);
        return so_err(SO_ENOMEM, "%s: cannot allocate %d state buffers of %zu floats", kinds[c->kind].name,
                      kinds[c->kind].nslots, n);
    }
    if (c->decay_ranges && (rc = so_optim_set_decay(o, c->decay_ranges, c->ndecay_ranges))) {
        so_optim_destroy(o);
        return rc;
    }
    *out = o;
    return 0;
}

void so_optim_destroy(so_optim *o)
{
    if (!o)
        return;
    free(o->decay);
    so_free(o->state);
    free(o);
}

/* ---- update rules; g' = g + wd p is torch's L2 term (exact no-op for wd = 0) ---- */

/* torch SGD without momentum: p += -lr g'. */
SO_VEC_CLONES static void step_sgd(size_t n, float *restrict p, const float *restrict g, float lr, float wd)
{
    for (size_t i = 0; i < n; i++) {
        float d = g[i] + wd * p[i];
        p[i] = p[i] + -lr * d;
    }
}

/* torch SGD with momentum, dampening 0: b = mu b + g' (b starts at 0, so the
 * first step gives b = g' exactly as torch's clone(g')); plain p += -lr b,
 * Nesterov p += -lr (g' + mu b). `nest` is 0 or 1 and selects arithmetically. */
SO_VEC_CLONES static void step_momentum(size_t n, float *restrict p, const float *restrict g, float *restrict b, float lr,
                          float wd, float mu, float nest)
{
    float keep = 1.0f - nest; /* weight of b alone in the update */
    for (size_t i = 0; i < n; i++) {
        float d = g[i] + wd * p[i];
        float bi = b[i] * mu + d;
        b[i] = bi;
        p[i] = p[i] + -lr * (keep * bi + nest * (d + mu * bi));
    }
}

/* torch Adagrad (lr_decay 0, initial accumulator 0): s += g'^2; p += -lr g'/(sqrt(s)+eps). */
SO_VEC_CLONES static void step_adagrad(size_t n, float *restrict p, const float *restrict g, float *restrict s, float lr,
                         float wd, float eps)
{
    for (size_t i = 0; i < n; i++) {
        float d = g[i] + wd * p[i];
        float si = s[i] + d * d;
        s[i] = si;
        p[i] = p[i] + -lr * (d / (sqrtf(si) + eps));
    }
}

/* torch RMSprop (not centered, no momentum): v = a v + (1-a) g'^2; p += -lr g'/(sqrt(v)+eps). */
SO_VEC_CLONES static void step_rmsprop(size_t n, float *restrict p, const float *restrict g, float *restrict v, float lr,
                         float wd, double alpha_d, float eps)
{
    float alpha = (float)alpha_d, one_minus = (float)(1.0 - alpha_d);
    for (size_t i = 0; i < n; i++) {
        float d = g[i] + wd * p[i];
        float vi = v[i] * alpha + one_minus * (d * d);
        v[i] = vi;
        p[i] = p[i] + -lr * (d / (sqrtf(vi) + eps));
    }
}

/* torch Adam / AdamW: p *= decay (AdamW: 1 - lr wd, Adam: 1); g' = g + l2 p
 * (Adam: wd, AdamW: 0); m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2;
 * p += -(lr/bc1) m / (sqrt(v)/sqrt(bc2) + eps). The scalars are hoisted by the caller. */
typedef struct {
    float decay, l2, b1, c1, b2, c2, step_size, bc2_sqrt, eps;
} adam_scalars;

SO_VEC_CLONES static void step_adam(size_t n, float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                      adam_scalars k)
{
    for (size_t i = 0; i < n; i++) {
        float pi = p[i] * k.decay;
        float d = g[i] + k.l2 * pi;
        float mi = m[i] * k.b1 + k.c1 * d;
        float vi = v[i] * k.b2 + k.c2 * (d * d);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi + -k.step_size * (mi / (sqrtf(vi) / k.bc2_sqrt + k.eps));
    }
}

/* Bias corrections in double, as torch computes them in Python, then rounded
 * once to float like the scalar arguments of torch's kernels. */
static adam_scalars adam_setup(const so_optim_config *c, long t, float lr)
{
    int w = c->kind == SO_OPT_ADAMW;
    double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
    return (adam_scalars){
        .decay = w ? (float)(1.0 - (double)lr * c->weight_decay) : 1.0f,
        .l2 = w ? 0.0f : c->weight_decay,
        .b1 = (float)c->beta1,
        .c1 = (float)(1.0 - c->beta1),
        .b2 = (float)c->beta2,
        .c2 = (float)(1.0 - c->beta2),
        .step_size = (float)((double)lr / bc1),
        .bc2_sqrt = (float)sqrt(bc2),
        .eps = c->eps,
    };
}

int so_optim_set_decay(so_optim *o, const size_t *lohi, int n)
{
    for (int r = 0; r < n; r++)
        if (lohi[2 * r] >= lohi[2 * r + 1] || (r && lohi[2 * r] < lohi[2 * r - 1]))
            return so_err(SO_EINVAL, "weight decay range %d [%zu, %zu) is empty or unsorted", r, lohi[2 * r],
                          lohi[2 * r + 1]);
    size_t *copy = n ? malloc(2 * (size_t)n * sizeof *copy) : NULL;
    if (n && !copy)
        return so_err(SO_ENOMEM, "out of memory for %d weight decay ranges", n);
    if (n)
        memcpy(copy, lohi, 2 * (size_t)n * sizeof *copy);
    free(o->decay);
    o->decay = copy;
    o->ndecay = n;
    o->masked = 1;
    return 0;
}

/* The scalars of one step, with and without weight decay (Adam's bias
 * correction uses the step count, which moves once per step). */
typedef struct {
    float lr, wd;
    adam_scalars adam[2]; /* [0] no decay, [1] with it */
} step_scalars;

/* n parameters with their state at state_off, decayed or not. */
static void step_piece(so_optim *o, const step_scalars *k, float *p, const float *g, size_t state_off, size_t n,
                       int decay)
{
    const so_optim_config *c = &o->c;
    float *s0 = o->state + state_off, *s1 = o->state + o->stride + state_off, wd = decay ? k->wd : 0.0f;
    switch (c->kind) {
    case SO_OPT_SGD:
        step_sgd(n, p, g, k->lr, wd);
        break;
    case SO_OPT_MOMENTUM:
    case SO_OPT_NESTEROV:
        step_momentum(n, p, g, s0, k->lr, wd, c->momentum, c->kind == SO_OPT_NESTEROV ? 1.0f : 0.0f);
        break;
    case SO_OPT_ADAGRAD:
        step_adagrad(n, p, g, s0, k->lr, wd, c->eps);
        break;
    case SO_OPT_RMSPROP:
        step_rmsprop(n, p, g, s0, k->lr, wd, c->alpha, c->eps);
        break;
    case SO_OPT_ADAM:
    case SO_OPT_ADAMW:
        step_adam(n, p, g, s0, s1, k->adam[decay]);
        break;
    }
}

/* The parameters at flat offsets [off, off + n) (state from state_off), cut
 * where the decay ranges begin and end. */
static void step_masked(so_optim *o, const step_scalars *k, float *p, const float *g, size_t off, size_t state_off,
                        size_t n)
{
    if (!o->masked) {
        step_piece(o, k, p, g, state_off, n, 1);
        return;
    }
    size_t at = off, end = off + n;
    for (int r = 0; r <= o->ndecay && at < end; r++) {
        size_t lo = r < o->ndecay ? o->decay[2 * r] : end, hi = r < o->ndecay ? o->decay[2 * r + 1] : end;
        for (int decay = 0; decay < 2; decay++) { /* the gap before the range, then the range */
            size_t stop = (decay ? hi : lo) < end ? (decay ? hi : lo) : end;
            if (stop > at) {
                step_piece(o, k, p + (at - off), g + (at - off), state_off + (at - off), stop - at, decay);
                at = stop;
            }
        }
    }
}

int so_optim_step_ranges(so_optim *o, const so_optim_range *r, int nr, float lr)
{
    for (int i = 0; i < nr; i++)
        if (r[i].state_off > o->n || r[i].n > o->n - r[i].state_off)
            return so_err(SO_EINVAL, "optimizer step: state [%zu, %zu) outside the %zu it holds", r[i].state_off,
                          r[i].state_off + r[i].n, o->n);
    o->steps++;
    so_optim_config nodecay = o->c;
    nodecay.weight_decay = 0.0f;
    step_scalars k = {.lr = lr, .wd = o->c.weight_decay};
    if (o->c.kind == SO_OPT_ADAM || o->c.kind == SO_OPT_ADAMW) {
        k.adam[0] = adam_setup(&nodecay, o->steps, lr);
        k.adam[1] = adam_setup(&o->c, o->steps, lr);
    }
    for (int i = 0; i < nr; i++) /* flat_off: where the piece meets the decay ranges */
        step_masked(o, &k, r[i].p, r[i].g, r[i].flat_off, r[i].state_off, r[i].n);
    return 0;
}

void so_optim_step(so_optim *o, float *p, const float *g, float lr)
{
    so_optim_range whole = {p, g, 0, 0, o->n};
    so_optim_step_ranges(o, &whole, 1, lr);
}

size_t so_optim_size(const so_optim *o) { return o->n; }

SO_VEC_CLONES static double sqnorm_f32(const float *g, size_t n)
{
    double lane[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            lane[k] += (double)g[i + k] * (double)g[i + k];
    for (int k = 0; i < n; i++, k++)
        lane[k] += (double)g[i] * (double)g[i];
    double s = 0;
    for (int k = 0; k < 8; k++)
        s += lane[k];
    return s;
}

SO_VEC_CLONES static void scale_f32(float *g, size_t n, float f)
{
    for (size_t i = 0; i < n; i++)
        g[i] *= f;
}

/* The exported names call static clones: clang 14 does not emit an
 * externally visible symbol for a target_clones function. */
double so_optim_sqnorm(const float *g, size_t n) { return sqnorm_f32(g, n); }

void so_optim_scale(float *g, size_t n, float f) { scale_f32(g, n, f); }

int so_optim_nslots(const so_optim *o) { return o->nslots; }

float *so_optim_slot(so_optim *o, int i)
{
    return (i >= 0 && i < o->nslots) ? o->state + (size_t)i * o->stride : NULL;
}

long so_optim_steps(const so_optim *o) { return o->steps; }
void so_optim_set_steps(so_optim *o, long steps) { o->steps = steps; }
