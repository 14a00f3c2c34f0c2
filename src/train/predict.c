/* Data-parallel step time at a scale (see scaleout/predict.h): the trainer's
 * own bucket plan and overlap simulation (buckets.c) run on measured
 * per-layer backward times, with the caller's allreduce cost at that scale;
 * and the measurement: timed steps within a time budget, at a batch chosen
 * to fit memory, scaled to the batch predicted. */
#include "scaleout/predict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/timer.h"
#include "train/buckets.h"
#include "train/shard.h"

static double sum_nodes(const so_graph *g, const double *t)
{
    double s = 0;
    for (int i = 1; i < so_graph_size(g); i++)
        s += t[i];
    return s;
}

/* The plan the trainer would run: fixed sizes, or its automatic choice. */
static int plan_for(const so_predict_compute *c, so_predict_cost_fn cost, void *ctx, so_bucket_plan *p,
                    size_t *first, size_t *bytes)
{
    if (c->first_bucket_bytes || c->bucket_bytes) {
        *first = c->first_bucket_bytes;
        *bytes = c->bucket_bytes;
        return so_bucket_plan_build(c->g, *first, *bytes, p);
    }
    double end;
    memset(p, 0, sizeof *p); /* so_bucket_plan_auto frees the plan it replaces */
    return so_bucket_plan_auto(c->g, c->t_bwd, cost, ctx, p, first, bytes, &end);
}

int so_predict_step(const so_predict_compute *c, int ranks, so_predict_cost_fn cost, void *ctx,
                    so_predict_point *out)
{
    if (!c || !c->g || !c->t_fwd || !c->t_bwd || c->batch < 1 || ranks < 1 || (ranks > 1 && !cost))
        return so_err(SO_EINVAL, "so_predict_step: bad arguments");
    memset(out, 0, sizeof *out);
    double fwd = sum_nodes(c->g, c->t_fwd), bwd = sum_nodes(c->g, c->t_bwd);
    out->compute_seconds = fwd + bwd + c->t_other;
    out->step_seconds = out->compute_seconds;
    if (ranks > 1) {
        so_bucket_plan p;
        int rc = plan_for(c, cost, ctx, &p, &out->first_bucket_bytes, &out->bucket_bytes);
        if (rc)
            return rc;
        double end = so_bucket_plan_simulate(c->g, &p, c->t_bwd, cost, ctx);
        for (int b = 0; b < p.n; b++)
            out->comm_seconds += cost(ctx, (p.b[b].hi - p.b[b].lo) * sizeof(float));
        out->nbuckets = p.n;
        so_bucket_plan_free(&p);
        out->comm_exposed_seconds = end > bwd ? end - bwd : 0;
        out->step_seconds += out->comm_exposed_seconds;
    }
    out->images_per_sec = (double)c->batch * ranks / out->step_seconds;
    return 0;
}

/* One method's bucket on the communication engine (so_predict_compress). */
typedef struct {
    const so_predict_compress_cost *m;
    so_predict_cost_fn cost;
    void *ctx;
    int ranks;
} compressed_link;

static double compressed_cost(void *arg, size_t bytes)
{
    const compressed_link *l = arg;
    const so_predict_compress_cost *m = l->m;
    double b = (double)bytes, t = m->decode_per_byte * b;
    if (m->gather)
        return t + l->cost(l->ctx, (size_t)(m->ratio * b * l->ranks / 2));
    t += l->cost(l->ctx, (size_t)(m->ratio * b));
    return m->ratio2 > 0 ? t + l->cost(l->ctx, (size_t)(m->ratio2 * b)) : t;
}

static double steps_factor(const so_predict_compress_cost *m) { return m->steps_factor > 0 ? m->steps_factor : 1; }

int so_predict_compress(const so_predict_compute *c, int ranks, so_predict_cost_fn cost, void *ctx,
                        const so_predict_compress_cost *methods, int n, double margin, double *step_seconds,
                        int *best)
{
    if (ranks < 2 || !cost || n < 1 || !methods)
        return so_err(SO_EINVAL, "so_predict_compress: %d ranks, %d methods", ranks, n);
    size_t grad_bytes = so_graph_nparams(c->g) * sizeof(float);
    *best = 0;
    for (int i = 0; i < n; i++) {
        compressed_link l = {&methods[i], cost, ctx, ranks};
        so_predict_point p;
        int rc = so_predict_step(c, ranks, compressed_cost, &l, &p);
        if (rc)
            return rc;
        step_seconds[i] = p.step_seconds + methods[i].encode_per_byte * (double)grad_bytes;
        double to_target = step_seconds[i] * steps_factor(&methods[i]);
        if (i > 0 && to_target < step_seconds[0] * steps_factor(&methods[0]) * (1 - margin) &&
            to_target < step_seconds[*best] * steps_factor(&methods[*best]))
            *best = i;
    }
    return 0;
}

/* Whether the warm-up is over: every untimed step, or a quarter of
 * max_seconds spent (after one: the first step creates the primitives). */
static int warm_enough(const so_predict_run *r, int s, double seconds)
{
    return s >= r->warmup || (r->max_seconds > 0 && s >= 1 && seconds >= r->max_seconds / 4);
}

/* Whether the timed steps are done: all of them, or max_seconds spent after at least 2. */
static int timed_enough(const so_predict_run *r, int timed, double seconds)
{
    return timed >= r->steps || (r->max_seconds > 0 && timed >= 2 && seconds >= r->max_seconds);
}

/* One training step of the measurement. */
static int train_step(so_model *m, so_optim *opt, const float *x, const int32_t *y)
{
    int rc = so_model_forward(m, x, y, m->batch, 1);
    if (!rc)
        rc = so_model_backward(m);
    if (!rc) {
        so_optim_step(opt, m->params, m->grads, 0.01f);
        so_model_params_changed(m);
    }
    return rc;
}

int so_predict_measure(so_model *m, so_optim *opt, const float *x, const int32_t *y, const so_predict_run *run,
                       double *t_fwd, double *t_bwd, double *t_other, int *timed_out)
{
    if (run->steps < 1 || run->warmup < 0)
        return so_err(SO_EINVAL, "so_predict_measure: %d steps after %d warm-up", run->steps, run->warmup);
    int n = so_graph_size(m->g), rc = 0, s = 0, timed = 0;
    double warm = 0, total = 0;
    for (; !rc && !warm_enough(run, s, warm); s++) {
        double t0 = so_now();
        rc = train_step(m, opt, x, y);
        warm += so_now() - t0;
        if (run->on_step)
            run->on_step(run->ctx, s + 1, s + 1 + run->steps);
    }
    memset(m->t_fwd, 0, (size_t)n * sizeof *m->t_fwd);
    memset(m->t_bwd, 0, (size_t)n * sizeof *m->t_bwd);
    m->timing++; /* from here on the executor times every node */
    for (; !rc && !timed_enough(run, timed, total); timed++) {
        double t0 = so_now();
        rc = train_step(m, opt, x, y);
        total += so_now() - t0;
        if (run->on_step)
            run->on_step(run->ctx, s + timed + 1, s + run->steps);
    }
    m->timing--;
    if (rc)
        return rc;
    for (int i = 0; i < n; i++) {
        t_fwd[i] = i ? m->t_fwd[i] / timed : 0;
        t_bwd[i] = i ? m->t_bwd[i] / timed : 0;
    }
    double nodes = sum_nodes(m->g, t_fwd) + sum_nodes(m->g, t_bwd);
    *t_other = total / timed > nodes ? total / timed - nodes : 0;
    if (timed_out)
        *timed_out = timed;
    return 0;
}

/* ---- per strategy ------------------------------------------------------------------- */

/* The sharded strategies' step on one communication engine: an operation
 * starts when it is submitted and the one before it is done. */
typedef struct {
    const so_predict_compute *c;
    const shard_layout *L;
    int stage, K;
    so_predict_cost_fn cost;
    void *ctx;
    double t, engine, comm;      /* the compute thread's clock, the engine free at, its busy seconds */
    double gather_width;         /* zero3's gathers: bytes per FP32 byte (--shard-gather bf16|fp16: 0.5) */
    double *ag_end, *rs_end;     /* per unit: its gather / reduce-scatter ends */
    char *resident;
} zsim;

static double submit(zsim *z, double bytes)
{
    double secs = z->cost(z->ctx, (size_t)bytes) / 2, start = z->t > z->engine ? z->t : z->engine;
    z->engine = start + secs;
    z->comm += secs;
    return z->engine;
}

static double unit_bytes(const zsim *z, int u) { return (double)(z->L->lo[u + 1] - z->L->lo[u]) * sizeof(float); }

/* zero3's window at unit u (dir 1: backward), as strategy_zero.c's. */
static void window(zsim *z, int u, int dir)
{
    int lo = dir ? u - z->K + 1 : u, hi = dir ? u : u + z->K - 1;
    for (int v = 0; v < z->L->nunits; v++)
        if (z->resident[v] && (v < lo || v > hi))
            z->resident[v] = 0;
    for (int k = 0; k < z->K; k++) {
        int v = dir ? u - k : u + k;
        if (v >= 0 && v < z->L->nunits && !z->resident[v]) {
            z->resident[v] = 1;
            z->ag_end[v] = submit(z, unit_bytes(z, v) * z->gather_width);
        }
    }
}

static void sim_forward(zsim *z)
{
    const so_graph *g = z->c->g;
    int cur = -1;
    for (int u = 0; z->stage < 3 && u < z->L->nunits; u++) /* zero1/2: every gather at the start */
        z->ag_end[u] = submit(z, unit_bytes(z, u));
    for (int i = 1; i < so_graph_size(g); i++) {
        int u = z->L->unit_of[i];
        if (u >= 0 && u != cur) {
            cur = u;
            if (z->stage == 3)
                window(z, u, 0);
            z->t = fmax(z->t, z->ag_end[u]);
        }
        z->t += z->c->t_fwd[i];
    }
}

/* Backward: zero3 gathers again; every unit's reduce-scatter is submitted
 * when its backward ends; zero2/3 start a unit only with at most one other
 * reduce-scatter in flight. Returns when the last one ends. */
static double sim_backward(zsim *z)
{
    const so_graph *g = z->c->g;
    int cur = -1, prev = -1, prev2 = -1;
    double last = 0;
    for (int i = so_graph_size(g) - 1; i >= 1; i--) {
        int u = z->L->unit_of[i];
        if (u >= 0 && u != cur) {
            cur = u;
            if (z->stage > 1 && prev2 >= 0)
                z->t = fmax(z->t, z->rs_end[prev2]);
            if (z->stage == 3) {
                window(z, u, 1);
                z->t = fmax(z->t, z->ag_end[u]);
            }
        }
        z->t += z->c->t_bwd[i];
        if (u >= 0 && i == z->L->node_lo[u]) {
            last = z->rs_end[u] = submit(z, unit_bytes(z, u));
            prev2 = prev;
            prev = u;
        }
    }
    return last;
}

static int predict_zero(const so_predict_compute *c, int stage, const so_strategy_config *sc, int ranks, int nslots,
                        so_predict_cost_fn cost, void *ctx, so_predict_strategy_point *out)
{
    shard_units u;
    shard_layout L;
    int rc = shard_units_for(sc, stage, &u);
    if (!rc)
        rc = shard_layout_build(c->g, &u, ranks, 0, &L); /* rank 0 holds the longest blocks */
    if (rc)
        return rc;
    int prefetch = sc->shard_prefetch > 0 ? sc->shard_prefetch : 2;
    shard_memory(stage, &L, so_graph_nparams(c->g), nslots, prefetch, sc->accumulate, &out->mem);
    so_dtype wire = stage == 3 ? sc->shard_gather : SO_DTYPE_F32;
    if (ranks > 1)
        out->mem.messages += shard_wire_scratch(&L, wire);
    out->units = L.nunits;
    zsim z = {.c = c, .L = &L, .stage = stage, .K = prefetch, .cost = cost, .ctx = ctx,
              .gather_width = (double)so_dtype_size(wire) / sizeof(float)};
    z.ag_end = calloc((size_t)L.nunits, sizeof *z.ag_end);
    z.rs_end = calloc((size_t)L.nunits, sizeof *z.rs_end);
    z.resident = calloc((size_t)L.nunits, 1);
    if (!z.ag_end || !z.rs_end || !z.resident)
        rc = so_err(SO_ENOMEM, "out of memory simulating a step");
    if (!rc && ranks > 1) {
        sim_forward(&z);
        double end = sim_backward(&z);
        out->step_seconds = fmax(z.t, end) + c->t_other;
        out->comm_seconds = z.comm;
        out->comm_exposed_seconds = out->step_seconds > out->compute_seconds
                                        ? out->step_seconds - out->compute_seconds : 0;
    }
    free(z.ag_end);
    free(z.rs_end);
    free(z.resident);
    shard_layout_free(&L);
    return rc;
}

int so_predict_strategy(const so_predict_compute *c, const so_strategy_kind *k, const so_strategy_config *sc,
                        int ranks, int nslots, so_predict_cost_fn cost, void *ctx, so_predict_strategy_point *out)
{
    memset(out, 0, sizeof *out);
    if (!c || !c->g || !c->t_fwd || !c->t_bwd || !k || c->batch < 1 || ranks < 1 || (ranks > 1 && !cost))
        return so_err(SO_EINVAL, "so_predict_strategy: bad arguments");
    out->compute_seconds = sum_nodes(c->g, c->t_fwd) + sum_nodes(c->g, c->t_bwd) + c->t_other;
    out->step_seconds = out->compute_seconds;
    int rc;
    if (k->zero_stage == 0) {
        double P = (double)so_graph_nparams(c->g) * sizeof(float);
        out->mem = (so_strategy_memory){.params = P, .grads = P, .optimizer = P * nslots};
        so_predict_point p;
        rc = so_predict_step(c, ranks, cost, ctx, &p);
        out->step_seconds = p.step_seconds;
        out->comm_seconds = p.comm_seconds;
        out->comm_exposed_seconds = p.comm_exposed_seconds;
        out->units = p.nbuckets;
    } else {
        rc = predict_zero(c, k->zero_stage, sc, ranks, nslots, cost, ctx, out);
    }
    out->images_per_sec = rc ? 0 : (double)c->batch * ranks / out->step_seconds;
    return rc;
}

/* ---- measuring at a batch that fits, then scaling ---------------------------- */

#define ACT_MARGIN 2.5                 /* the backend's activation bytes over the graph's outputs */
#define LIBRARY_BYTES (128.0 * 1048576) /* oneDNN, MPI, the runtime: what a tiny model's process holds */

double so_predict_train_bytes(const so_graph *g, int batch, int optim_slots)
{
    double outputs = 0; /* fp32 per sample, node 0 (the input) included */
    for (int i = 0; i < so_graph_size(g); i++) {
        so_shape o = so_graph_node(g, i)->out;
        outputs += 4.0 * o.c * o.h * o.w;
    }
    so_shape in = so_graph_input_shape(g);
    double weights = 4.0 * (double)so_graph_nparams(g) * (2 + optim_slots);
    return weights + batch * (ACT_MARGIN * outputs + 4.0 * in.c * in.h * in.w) + LIBRARY_BYTES;
}

/* A step of b samples within both limits. */
static int batch_fits(const so_graph *g, const so_predict_limits *l, int b)
{
    if (so_predict_train_bytes(g, b, l->optim_slots) > l->max_bytes)
        return 0;
    double flops = 3 * so_graph_flops(g) * b; /* forward, and backward's two products */
    return !(l->flops_per_s > 0) || b == 1 || flops / l->flops_per_s <= l->step_seconds;
}

int so_predict_choose_batch(const so_graph *g, const so_predict_limits *l, int *measure, int *check)
{
    *measure = *check = 0;
    if (l->target < 1)
        return so_err(SO_EINVAL, "so_predict_choose_batch: target batch %d", l->target);
    if (!batch_fits(g, l, 1))
        return so_err(SO_ENOMEM, "a training step at batch 1 needs about %.2f GB (estimated from the model), "
                      "%.2f GB may be used", so_predict_train_bytes(g, 1, l->optim_slots) / 1e9, l->max_bytes / 1e9);
    if (batch_fits(g, l, l->target)) {
        *measure = l->target;
        return 0;
    }
    int b = 1;
    while (b <= l->target / 2 && batch_fits(g, l, 2 * b))
        b *= 2;
    *measure = b;
    *check = b > 1 ? b / 2 : 0;
    return 0;
}

void so_predict_scale(int n, double *t_fwd, double *t_bwd, double *t_other, int from, int to, int check,
                      double other_check)
{
    double f = (double)to / from;
    for (int i = 0; i < n; i++) {
        t_fwd[i] *= f;
        t_bwd[i] *= f;
    }
    if (check > 0 && check != from) {
        double slope = (*t_other - other_check) / (from - check);
        double v = *t_other + slope * (to - from);
        *t_other = v < *t_other ? *t_other : v > *t_other * f ? *t_other * f : v;
    }
}

double so_predict_linearity(int n, const double *fwd_lo, const double *bwd_lo, int lo, const double *fwd_hi,
                            const double *bwd_hi, int hi)
{
    double a = 0, b = 0;
    for (int i = 1; i < n; i++) {
        a += fwd_lo[i] + bwd_lo[i];
        b += fwd_hi[i] + bwd_hi[i];
    }
    return a > 0 && b > 0 ? (a / lo) / (b / hi) : 0;
}
