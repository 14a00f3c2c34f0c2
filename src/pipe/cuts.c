/* Where a pipeline is cut (pipeline.h, "choosing the cuts"): --partition's
 * list, or a balancer over memory, over per-node times the caller measures,
 * or over time within a memory cap, with FLOPs standing in for the times
 * when timing the whole model would itself break the cap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/pipeline.h"

/* Would timing the whole model at one micro-batch (what time and auto do)
 * break the cap? By the same accounting as a stage. */
static int timing_exceeds_cap(const so_graph *whole, const so_pipe_costs *costs, double max_bytes)
{
    if (max_bytes <= 0)
        return 0;
    so_pipe_plan all;
    int start = 0;
    if (so_pipe_plan_init(&all, whole, &start, 1))
        return 0; /* the balancer reports the problem */
    so_pipe_costs one = *costs;
    one.microbatches = 1;
    one.devices = 1;
    double bytes = so_pipe_stage_memory(&all.stages[0], 0, 1, &one);
    so_pipe_plan_deinit(&all);
    return bytes > max_bytes;
}

/* Per-node costs for the time and auto balancers: measured, or forward
 * FLOPs when measuring would not fit the cap (auto only; time insists). */
static int node_costs(const so_graph *whole, const so_pipe_cut_request *r, const char *how,
                      const so_pipe_costs *costs, double *secs, const char **basis)
{
    int n = so_graph_size(whole);
    if (!strcmp(how, "auto") && timing_exceeds_cap(whole, costs, r->max_bytes)) {
        for (int i = 0; i < n; i++)
            secs[i] = so_node_flops(whole, i);
        *basis = "FLOPs within --max-memory (timing the whole model at one micro-batch would exceed it)";
        return 0;
    }
    *basis = r->max_bytes > 0 && !strcmp(how, "auto") ? "measured time within --max-memory" : "measured time";
    return r->time_nodes ? r->time_nodes(r->ctx, secs, n) : so_err(SO_EINVAL, "--partition %s: nothing to time "
                                                                   "the layers with", how);
}

/* --partition LIST: its stage starts, as many as there are stages. */
static int read_list(const so_graph *whole, const so_pipe_cut_request *r, int *first, const char **basis)
{
    int got = 0, S = r->devices * r->chunks;
    if (so_pipe_parse_list(whole, r->partition, first, S, &got))
        return so_err(SO_EINVAL, "--partition: %s", so_errmsg());
    if (got != S)
        return so_err(SO_EINVAL, "--partition: %d stage starts for --pipeline-stages %d%s (%d stages)", got,
                      r->devices, r->chunks > 1 ? " x --virtual-stages" : "", S);
    *basis = "--partition's list";
    return 0;
}

int so_pipe_choose_cuts(const so_graph *whole, const so_pipe_cut_request *r, int *first, const char **basis)
{
    const char *how = r->partition ? r->partition : "auto";
    if (strcmp(how, "auto") && strcmp(how, "time") && strcmp(how, "memory"))
        return read_list(whole, r, first, basis);
    so_pipe_costs costs = {.microbatch = r->microbatch, .microbatches = r->microbatches, .schedule = r->schedule,
                           .devices = r->devices, .optim_slots = 1};
    double *secs = NULL;
    int rc = 0, n = so_graph_size(whole);
    *basis = "memory";
    if (strcmp(how, "memory")) {
        if (!(secs = calloc((size_t)n, sizeof *secs)))
            return so_err(SO_ENOMEM, "out of memory");
        rc = node_costs(whole, r, how, &costs, secs, basis);
        costs.seconds = secs;
    }
    so_pipe_balance_kind kind = !strcmp(how, "memory") ? SO_PIPE_BY_MEMORY : SO_PIPE_BY_TIME;
    if (!strcmp(how, "auto") && r->max_bytes > 0) {
        kind = SO_PIPE_BY_AUTO;
        costs.max_bytes = (size_t)r->max_bytes;
    }
    if (!rc && (rc = so_pipe_balance(whole, r->devices * r->chunks, kind, &costs, first)) && kind == SO_PIPE_BY_AUTO) {
        char why[400];
        snprintf(why, sizeof why, "%s", so_errmsg());
        rc = so_err(SO_EINVAL, "--max-memory: %s", why);
    }
    free(secs);
    return rc;
}
