/* Bucket planning (see buckets.h). */
#include "buckets.h"

#include <stdlib.h>

#include "scaleout/err.h"

/* The bucket that closes last waits for the very end of backward, so its
 * allreduce is exposed whole (ResNet-50's remainder: ~20 MiB). Cut the
 * gradients produced last -- its lowest nodes, at least first_n floats -- into
 * a small tail bucket: the rest closes earlier and is reduced while backward
 * still works on the tail's layers. Nothing changes unless both parts hold at
 * least first_n. */
static void split_tail(const so_graph *g, size_t first_n, so_bucket_plan *p)
{
    if (p->n == 0)
        return;
    so_bucket *last = &p->b[p->n - 1];
    if (last->hi - last->lo <= first_n)
        return;
    int lowest = -1, upper = -1;
    size_t tail_hi = last->lo;
    for (int i = 0; i < so_graph_size(g); i++) {
        const so_node *nd = so_graph_node(g, i);
        if (!nd->nparam || nd->param_off < last->lo)
            continue;
        if (tail_hi - last->lo >= first_n) { /* i is the lowest node above the tail */
            upper = i;
            break;
        }
        if (lowest < 0)
            lowest = i;
        tail_hi = nd->param_off + nd->nparam;
    }
    if (upper < 0 || last->hi - tail_hi < first_n) /* a split-off crumb would cost a call, hide nothing */
        return;
    p->b[p->n] = (so_bucket){last->lo, tail_hi};
    p->closes[lowest] = p->n;
    last->lo = tail_hi;
    p->closes[upper] = p->n - 1;
    p->n++;
}

int so_bucket_plan_build(const so_graph *g, size_t first_bytes, size_t bucket_bytes, so_bucket_plan *p)
{
    int nodes = so_graph_size(g);
    p->n = 0;
    p->b = calloc((size_t)nodes, sizeof *p->b);
    p->closes = malloc((size_t)nodes * sizeof *p->closes);
    if (!p->b || !p->closes) {
        so_bucket_plan_free(p);
        return so_err(SO_ENOMEM, "out of memory planning gradient buckets");
    }
    size_t limit = first_bytes / sizeof(float), open_hi = 0;
    int open = 0, last_param_node = -1;
    for (int i = nodes - 1; i >= 0; i--) {
        p->closes[i] = -1;
        const so_node *nd = so_graph_node(g, i);
        if (!nd->nparam)
            continue;
        if (!open) {
            open_hi = nd->param_off + nd->nparam;
            open = 1;
        }
        last_param_node = i;
        if (open_hi - nd->param_off >= limit) {
            p->b[p->n] = (so_bucket){nd->param_off, open_hi};
            p->closes[i] = p->n++;
            open = 0;
            limit = bucket_bytes / sizeof(float);
        }
    }
    if (open) { /* the remainder closes at the lowest parameterised node */
        p->b[p->n] = (so_bucket){so_graph_node(g, last_param_node)->param_off, open_hi};
        p->closes[last_param_node] = p->n++;
    }
    split_tail(g, first_bytes / sizeof(float), p);
    return 0;
}

double so_bucket_plan_simulate(const so_graph *g, const so_bucket_plan *p, const double *t_bwd,
                               so_comm_cost_fn cost, void *ctx)
{
    double now = 0, comm_end = 0;
    for (int i = so_graph_size(g) - 1; i >= 1; i--) {
        now += t_bwd[i];
        int b = p->closes[i];
        if (b < 0)
            continue;
        double start = now > comm_end ? now : comm_end;
        comm_end = start + cost(ctx, (p->b[b].hi - p->b[b].lo) * sizeof(float));
    }
    return comm_end > now ? comm_end : now;
}

int so_bucket_plan_auto(const so_graph *g, const double *t_bwd, so_comm_cost_fn cost, void *ctx,
                        so_bucket_plan *p, size_t *first_bytes, size_t *bucket_bytes, double *predicted)
{
    size_t sizes[16];
    int ns = 0;
    for (size_t s = 64u << 10; s <= (256u << 20); s *= 2)
        sizes[ns++] = s;
    sizes[ns++] = 25u << 20;
    double best = -1;
    for (int f = 0; f < ns; f++)
        for (int b = 0; b < ns; b++) {
            so_bucket_plan cand;
            int rc = so_bucket_plan_build(g, sizes[f], sizes[b], &cand);
            if (rc)
                return rc;
            double t = so_bucket_plan_simulate(g, &cand, t_bwd, cost, ctx);
            /* Ties (a model whose buckets all fit one size) go to fewer buckets. */
            if (best < 0 || t < best * (1 - 1e-9) || (t <= best && cand.n < p->n)) {
                so_bucket_plan_free(p);
                *p = cand;
                best = t;
                *first_bytes = sizes[f];
                *bucket_bytes = sizes[b];
            } else {
                so_bucket_plan_free(&cand);
            }
        }
    *predicted = best;
    return 0;
}

void so_bucket_plan_lows(const so_bucket_plan *p, size_t *lo)
{
    for (int b = 0; b < p->n; b++)
        lo[b] = p->b[p->n - 1 - b].lo;
}

void so_bucket_plan_free(so_bucket_plan *p)
{
    free(p->b);
    free(p->closes);
    p->b = NULL;
    p->closes = NULL;
    p->n = 0;
}
