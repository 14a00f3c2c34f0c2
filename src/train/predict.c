/* Data-parallel step time at a scale (see scaleout/predict.h): the trainer's
 * own bucket plan and overlap simulation (buckets.c) run on measured
 * per-layer backward times, with the caller's allreduce cost at that scale. */
#include "scaleout/predict.h"

#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/timer.h"
#include "train/buckets.h"

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

int so_predict_measure(so_model *m, so_optim *opt, const float *x, const int32_t *y, int warmup, int steps,
                       double *t_fwd, double *t_bwd, double *t_other)
{
    if (steps < 1 || warmup < 0)
        return so_err(SO_EINVAL, "so_predict_measure: %d steps after %d warm-up", steps, warmup);
    int n = so_graph_size(m->g), rc = 0, timed = 0;
    double total = 0;
    for (int s = 0; s < warmup + steps && !rc; s++) {
        if (s == warmup) { /* from here on: timed */
            memset(m->t_fwd, 0, (size_t)n * sizeof *m->t_fwd);
            memset(m->t_bwd, 0, (size_t)n * sizeof *m->t_bwd);
            m->timing++;
            timed = 1;
        }
        double t0 = so_now();
        rc = so_model_forward(m, x, y, m->batch, 1);
        if (!rc)
            rc = so_model_backward(m);
        if (!rc) {
            so_optim_step(opt, m->params, m->grads, 0.01f);
            so_model_params_changed(m);
        }
        if (s >= warmup)
            total += so_now() - t0;
    }
    if (timed)
        m->timing--;
    if (rc)
        return rc;
    for (int i = 0; i < n; i++) {
        t_fwd[i] = i ? m->t_fwd[i] / steps : 0;
        t_bwd[i] = i ? m->t_bwd[i] / steps : 0;
    }
    double nodes = sum_nodes(m->g, t_fwd) + sum_nodes(m->g, t_bwd);
    *t_other = total / steps > nodes ? total / steps - nodes : 0;
    return 0;
}
