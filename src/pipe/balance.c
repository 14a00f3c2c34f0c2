/* Choosing the cuts of a pipeline: one dynamic programme over contiguous
 * splits that minimises the most expensive stage, fed with time, memory, or
 * time under a memory cap -- the idea of torchgpipe's balance_by_time and
 * balance_by_size (Kim et al. 2020), written here for the graph's
 * topological order. Also the schedules' bubble and in-flight formulas. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/pipeline.h"

/* Cost of stage s holding nodes [a, b) (stage 0: a = 0). Must not decrease
 * as a decreases (INFINITY: not allowed), which lets the search stop early. */
typedef double (*stage_cost_fn)(const void *ctx, int s, int a, int b);

/* dp[b]: the smallest possible largest cost of nodes [0, b) split into the
 * stages so far; arg[s][b] the start of stage s in that split. */
static void dp_stage(int s, int n, stage_cost_fn cost, const void *ctx, const double *prev, double *cur, int *arg)
{
    for (int b = 0; b <= n; b++) {
        cur[b] = INFINITY;
        arg[b] = -1;
        for (int a = b - 1; a >= s + 1; a--) {
            double c = cost(ctx, s, a, b);
            if (c >= cur[b])
                break; /* smaller a only raises this stage's cost */
            double m = prev[a] > c ? prev[a] : c;
            if (m < cur[b]) {
                cur[b] = m;
                arg[b] = a;
            }
        }
    }
}

/* The optimal split of nodes [0, n) into P stages, stage 0 holding node 0 and
 * at least one more. *best: its largest stage cost (INFINITY: none allowed). */
static int dp_split(int n, int P, stage_cost_fn cost, const void *ctx, int *first, double *best)
{
    if (P < 1 || P > n - 1)
        return so_err(SO_EINVAL, "%d stages: the model has %d layers", P, n - 1);
    double *dp = malloc(2 * ((size_t)n + 1) * sizeof *dp);
    int *arg = malloc((size_t)P * ((size_t)n + 1) * sizeof *arg);
    if (!dp || !arg) {
        free(dp);
        free(arg);
        return so_err(SO_ENOMEM, "out of memory for balancing %d nodes into %d stages", n, P);
    }
    double *prev = dp, *cur = dp + n + 1;
    for (int b = 0; b <= n; b++)
        prev[b] = b >= 2 ? cost(ctx, 0, 0, b) : INFINITY;
    for (int s = 1; s < P; s++) {
        dp_stage(s, n, cost, ctx, prev, cur, arg + (size_t)s * (n + 1));
        double *t = prev;
        prev = cur;
        cur = t;
    }
    *best = prev[n];
    first[0] = 0;
    for (int s = P - 1, b = n; s >= 1 && isfinite(*best); s--)
        b = first[s] = arg[(size_t)s * (n + 1) + b];
    free(dp);
    free(arg);
    return 0;
}

/* A plain cost vector: prefix sums. */
static double vector_cost(const void *ctx, int s, int a, int b)
{
    const double *prefix = ctx;
    (void)s;
    return prefix[b] - prefix[a];
}

int so_pipe_balance_vector(const double *cost, int n, int nstages, int *first)
{
    double *prefix = malloc(((size_t)n + 1) * sizeof *prefix), best;
    if (!prefix)
        return so_err(SO_ENOMEM, "out of memory for %d costs", n);
    prefix[0] = 0;
    for (int i = 0; i < n; i++)
        prefix[i + 1] = prefix[i] + cost[i];
    int rc = dp_split(n, nstages, vector_cost, prefix, first, &best);
    free(prefix);
    return rc;
}

/* Prefix sums of a graph's nodes for the three balancers. */
typedef struct {
    const so_pipe_costs *c;
    int nstages;
    double *seconds, *params, *act; /* n + 1 prefix sums each */
    so_pipe_balance_kind kind;
} graph_costs;

static double memory_cost(const graph_costs *gc, int s, int a, int b)
{
    so_pipe_stage st = {.params = (size_t)(gc->params[b] - gc->params[a]),
                        .act_bytes = (size_t)(gc->act[b] - gc->act[a])};
    return so_pipe_stage_memory(&st, s, gc->nstages, gc->c);
}

static double graph_cost(const void *ctx, int s, int a, int b)
{
    const graph_costs *gc = ctx;
    if (gc->kind == SO_PIPE_BY_MEMORY)
        return memory_cost(gc, s, a, b);
    if (gc->kind == SO_PIPE_BY_AUTO && gc->c->max_bytes && memory_cost(gc, s, a, b) > (double)gc->c->max_bytes)
        return INFINITY;
    return gc->seconds[b] - gc->seconds[a];
}

static int prefix_sums(const so_graph *g, const so_pipe_costs *c, graph_costs *gc)
{
    int n = so_graph_size(g);
    double *buf = calloc(3 * ((size_t)n + 1), sizeof *buf);
    if (!buf)
        return so_err(SO_ENOMEM, "out of memory for balancing %d nodes", n);
    gc->seconds = buf;
    gc->params = buf + n + 1;
    gc->act = buf + 2 * (n + 1);
    for (int i = 0; i < n; i++) {
        const so_node *nd = so_graph_node(g, i);
        gc->seconds[i + 1] = gc->seconds[i] + (c->seconds ? c->seconds[i] : 0);
        gc->params[i + 1] = gc->params[i] + (double)nd->nparam;
        gc->act[i + 1] = gc->act[i] + 4.0 * nd->out.c * nd->out.h * nd->out.w;
    }
    return 0;
}

/* No split fits the cap: say how close the best memory balance gets. */
static int cap_error(const so_graph *g, int nstages, graph_costs *gc, int *first)
{
    double best = INFINITY;
    gc->kind = SO_PIPE_BY_MEMORY;
    dp_split(so_graph_size(g), nstages, graph_cost, gc, first, &best);
    return so_err(SO_EINVAL, "no split into %d stages keeps every stage within %.3g MiB: the best memory balance "
                  "needs %.3g MiB in its largest stage", nstages, gc->c->max_bytes / 1048576.0, best / 1048576.0);
}

int so_pipe_balance(const so_graph *g, int nstages, so_pipe_balance_kind kind, const so_pipe_costs *c,
                    int *first)
{
    if (kind != SO_PIPE_BY_MEMORY && !c->seconds)
        return so_err(SO_EINVAL, "the time and auto balancers need per-node times");
    graph_costs gc = {.c = c, .nstages = nstages, .kind = kind};
    int rc = prefix_sums(g, c, &gc);
    double best = INFINITY;
    if (!rc)
        rc = dp_split(so_graph_size(g), nstages, graph_cost, &gc, first, &best);
    if (!rc && kind == SO_PIPE_BY_MEMORY && c->max_bytes && best > (double)c->max_bytes)
        best = INFINITY;
    if (!rc && !isfinite(best))
        rc = cap_error(g, nstages, &gc, first);
    free(gc.seconds);
    return rc;
}

double so_pipe_stage_memory(const so_pipe_stage *st, int s, int nstages, const so_pipe_costs *c)
{
    double state = (double)st->params * sizeof(float) * (2 + c->optim_slots);
    return state + (double)st->act_bytes * c->microbatch * so_pipe_in_flight(c, s, nstages);
}

int so_pipe_in_flight(const so_pipe_costs *c, int s, int nstages)
{
    int M = c->microbatches;
    if (c->schedule == SO_PIPE_GPIPE)
        return M;
    if (c->schedule == SO_PIPE_1F1B)
        return nstages - s < M ? nstages - s : M;
    int P = c->devices > 0 ? c->devices : nstages, v = nstages / P > 0 ? nstages / P : 1;
    return so_pipe_slots(c->schedule, s % P, P, M, v);
}

double so_pipe_bubble(so_pipe_schedule s, int devices, int microbatches, int virtual_stages)
{
    int v = s == SO_PIPE_INTERLEAVED && virtual_stages > 1 ? virtual_stages : 1;
    return (double)(devices - 1) / ((double)v * microbatches + devices - 1);
}

static const char *const schedule_names[] = {"gpipe", "1f1b", "interleaved"};

int so_pipe_schedule_parse(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, schedule_names[i]))
            return i;
    return -1;
}

const char *so_pipe_schedule_name(so_pipe_schedule s)
{
    return (unsigned)s < 3 ? schedule_names[s] : "?";
}
