/* `scaleout plan`: the pipeline partition of a zoo model, without training:
 * per stage its nodes, parameters, FLOPs, activations, time (measured here
 * for --partition time|auto) and peak memory under the schedule, the tensors
 * crossing each cut, and the schedule's bubble. The library decides
 * (scaleout/pipeline.h); this file parses, measures and prints. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "scaleout/gpt2.h"
#include "scaleout/dtype.h"
#include "scaleout/err.h"
#include "scaleout/job.h"
#include "scaleout/json.h"
#include "scaleout/pipeline.h"
#include "scaleout/zoo.h"
#include "strategy_table.h"

#define MAX_STAGES 1024

typedef struct {
    const char *model, *schedule, *partition, *max_memory, *optimizer, *json;
    const char *strategy, *shard_unit, *tune;  /* --strategy: sharded data parallelism instead (strategy_table.c) */
    const char *shard_gather;                  /* --strategy: zero3's gather wire, fp32|bf16|fp16 */
    int world, ranks_per_node, shard_prefetch, accumulate;
    int cores;               /* --strategy: cores per node (0: this machine's) */
    int stages, microbatches, batch, virtual_stages, threads, steps;
    int seq_len;             /* GPT-2: tokens per sequence of the run planned (0: train's default) */
    size_t max_bytes;
    int measure;             /* --partition time or auto */
    so_job_layer_times timed; /* what was timed for it */
    so_pipe_costs costs;
} plan_args;

static const char *const schedules[] = {"gpipe", "1f1b", "interleaved", NULL};
static const char *const gather_wires[] = {"fp32", "bf16", "fp16", NULL};
static const char *const optimizers[] = {"sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adam", "adamw", NULL};
static const int optimizer_slots[] = {0, 1, 1, 1, 1, 2, 2}; /* fp32 state per parameter (so_optim_nslots) */

static int optim_slots(const char *name)
{
    for (int i = 0; optimizers[i]; i++)
        if (!strcmp(optimizers[i], name))
            return optimizer_slots[i];
    return 0;
}

/* The sharded plan's flags do nothing without --strategy, the pipeline's
 * nothing with it (cli_check_needs). */
static int strategies(const void *p) { return ((const plan_args *)p)->strategy != NULL; }
static int pipeline(const void *p) { return !strategies(p); }
static const cli_need plan_needs[] = {
    {"world", strategies, "--strategy"},
    {"ranks-per-node", strategies, "--strategy"},
    {"tune", strategies, "--strategy"},
    {"shard-unit", strategies, "--strategy"},
    {"shard-prefetch", strategies, "--strategy"},
    {"accumulate", strategies, "--strategy"},
    {"cores", strategies, "--strategy"},
    {"shard-gather", strategies, "--strategy"},
    {"pipeline-stages", pipeline, "a pipeline plan (not --strategy)"},
    {"microbatches", pipeline, "a pipeline plan (not --strategy)"},
    {"schedule", pipeline, "a pipeline plan (not --strategy)"},
    {"virtual-stages", pipeline, "a pipeline plan (not --strategy)"},
    {"partition", pipeline, "a pipeline plan (not --strategy)"},
    {NULL, NULL, NULL}};

/* --seq-len: a GPT-2's sequences, at most its context. */
static int check_seq_len(const plan_args *a)
{
    so_gpt2_config g;
    if (!a->seq_len)
        return CLI_OK;
    if (so_gpt2_parse(a->model, &g) != 1)
        return cli_error("plan", CLI_USAGE, "--seq-len: only for a GPT-2 model, not %s", a->model);
    if (a->seq_len > g.context)
        return cli_error("plan", CLI_USAGE, "--seq-len %d is above the context of %s (%d tokens)", a->seq_len,
                         a->model, g.context);
    return CLI_OK;
}

/* The job configuration a measurement of the plan's model starts from. */
static void plan_job(const plan_args *a, so_job_config *c)
{
    so_job_defaults(c);
    c->model = a->model;
    c->threads = a->threads;
    c->optimizer = a->optimizer;
    if (a->seq_len)
        c->seq_len = a->seq_len;
}

static int parse(plan_args *a, int argc, char **argv)
{
    *a = (plan_args){.schedule = "1f1b", .partition = "auto", .optimizer = "momentum", .microbatches = 4,
                     .batch = 64, .virtual_stages = 1, .threads = 1, .steps = 3, .world = 1, .shard_prefetch = 2,
                     .accumulate = 1};
    const cli_opt opts[] = {
        {"model", OPT_STR, &a->model, "NAME", "zoo model (see `scaleout models`)", 0, -1, NULL},
        {"pipeline-stages", OPT_INT, &a->stages, "P", "pipeline ranks (0: the length of the --partition list)", 1, MAX_STAGES, NULL},
        {"microbatches", OPT_INT, &a->microbatches, "M", "micro-batches per step; must divide --batch-size", 1, 65536, NULL},
        {"batch-size", OPT_INT, &a->batch, "B", "samples per step of one pipeline replica", 1, 1 << 20, NULL},
        {"seq-len", OPT_INT, &a->seq_len, "T", "GPT-2: tokens per sequence of the run planned (default: train's; at most the model's context)", 1, 1 << 24, NULL},
        {"schedule", OPT_CHOICE, &a->schedule, "NAME", "pipeline schedule", 0, -1, schedules},
        {"virtual-stages", OPT_INT, &a->virtual_stages, "V", "model chunks per rank (interleaved)", 1, 64, NULL},
        {"partition", OPT_STR, &a->partition, "auto|time|memory|LIST", "how to cut: balance time (measured here), "
         "memory, time within --max-memory, or the first node of each stage (indices or names)", 0, -1, NULL},
        {"max-memory", OPT_STR, &a->max_memory, "BYTES", "memory cap per stage for auto and memory (K/M/G suffixes)", 0, -1, NULL},
        {"optimizer", OPT_CHOICE, &a->optimizer, "NAME", "optimizer whose state is counted", 0, -1, optimizers},
        {"threads", OPT_INT, &a->threads, "N", "compute threads while measuring", 1, 1024, NULL},
        {"steps", OPT_INT, &a->steps, "N", "timed steps of the measurement (time, auto)", 1, 100000, NULL},
        {"json", OPT_STR, &a->json, "FILE", "write the plan as JSON", 0, -1, NULL},
        {"strategy", OPT_STR, &a->strategy, "LIST", "plan sharded data parallelism instead: dp, zero1, zero2, zero3 (a comma list, or all) over --world ranks: memory per rank, time per step, the fastest that fits --max-memory", 0, -1, NULL},
        {"world", OPT_INT, &a->world, "N", "--strategy: ranks", 1, 1 << 20, NULL},
        {"ranks-per-node", OPT_INT, &a->ranks_per_node, "K", "--strategy: ranks per node in the cost model (0: one node)", 0, 1 << 20, NULL},
        {"tune", OPT_STR, &a->tune, "FILE", "--strategy: the cost model from a tuning table (`scaleout tune`)", 0, -1, NULL},
        {"shard-unit", OPT_STR, &a->shard_unit, "auto|layer|block|MB", "--strategy: units as in train", 0, -1, NULL},
        {"shard-prefetch", OPT_INT, &a->shard_prefetch, "K", "--strategy: zero3's units gathered at once", 1, 1 << 20, NULL},
        {"accumulate", OPT_INT, &a->accumulate, "K", "--strategy: micro-batches per step", 1, 1 << 16, NULL},
        {"shard-gather", OPT_CHOICE, &a->shard_gather, "fp32|bf16|fp16", "--strategy: zero3's parameter gathers on "
         "that wire, as train's (half the bytes, a unit's conversion scratch)", 0, -1, gather_wires},
        {"cores", OPT_INT, &a->cores, "N", "--strategy: cores per node (default: this machine's); a node's ranks x "
         "--threads beyond them share cores and their layers take longer in proportion", 1, 1 << 20, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    unsigned char seen[sizeof opts / sizeof *opts] = {0};
    int rc = cli_parse_seen("plan", "Prints a pipeline partition of a model: stages, parameters, FLOPs, activations, "
                            "tensors crossing each cut, and the schedule's bubble; or, with --strategy, each "
                            "strategy's memory per rank and step time. Trains nothing.", opts, argc, argv, seen);
    if (rc || (rc = cli_check_needs("plan", opts, seen, plan_needs, a)))
        return rc;
    if (!a->model)
        return cli_error("plan", CLI_USAGE, "--model is required");
    if (so_zoo_check(a->model))
        return cli_error("plan", CLI_USAGE, "--model: %s (see `scaleout models`)", so_errmsg());
    if (a->max_memory && cli_parse_max_memory("plan", a->max_memory, &a->max_bytes))
        return CLI_USAGE;
    if (check_seq_len(a))
        return CLI_USAGE;
    if (a->strategy)
        return CLI_OK; /* the pipeline's options do not apply */
    if (a->batch % a->microbatches)
        return cli_error("plan", CLI_USAGE, "--microbatches %d: does not divide --batch-size %d", a->microbatches,
                         a->batch);
    if (a->virtual_stages > 1 && strcmp(a->schedule, "interleaved"))
        return cli_error("plan", CLI_USAGE, "--virtual-stages %d: only with --schedule interleaved",
                         a->virtual_stages);
    a->measure = !strcmp(a->partition, "time") || !strcmp(a->partition, "auto");
    if (a->max_bytes && strcmp(a->partition, "auto") && strcmp(a->partition, "memory"))
        return cli_error("plan", CLI_USAGE, "--max-memory: only with --partition auto or memory");
    return CLI_OK;
}

/* A --partition list: stage starts by index or name; it also gives P when
 * --pipeline-stages is absent. */
static int read_list(plan_args *a, const so_graph *g, int *first)
{
    int n;
    int rc = so_pipe_parse_list(g, a->partition, first, MAX_STAGES, &n);
    if (rc && !strchr(a->partition, ','))
        return cli_error("plan", CLI_USAGE, "--partition: unknown value '%s' (auto, time, memory, or the first node "
                         "of each stage, e.g. 0,conv2,fc1)", a->partition);
    if (rc)
        return cli_error("plan", CLI_USAGE, "--partition: %s", so_errmsg());
    int want = a->stages * a->virtual_stages;
    if (a->stages && n != want)
        return cli_error("plan", CLI_USAGE, "--partition: %d stage starts, but --pipeline-stages %d%s needs %d", n,
                         a->stages, a->virtual_stages > 1 ? " x --virtual-stages" : "", want);
    if (!a->stages && n % a->virtual_stages)
        return cli_error("plan", CLI_USAGE, "--partition: %d stage starts are not a multiple of --virtual-stages %d",
                         n, a->virtual_stages);
    if (!a->stages)
        a->stages = n / a->virtual_stages;
    return CLI_OK;
}

/* P and v against the model's layers (nodes after the input). */
static int check_stages(const plan_args *a, const so_graph *g)
{
    int layers = so_graph_size(g) - 1;
    if (!a->stages)
        return cli_error("plan", CLI_USAGE, "--pipeline-stages is required (or a --partition list)");
    if (a->stages > layers)
        return cli_error("plan", CLI_USAGE, "--pipeline-stages %d: the model has %d layers", a->stages, layers);
    if (a->stages * a->virtual_stages > MAX_STAGES)
        return cli_error("plan", CLI_USAGE, "--virtual-stages %d: %d x %d stages, more than %d", a->virtual_stages,
                         a->virtual_stages, a->stages, MAX_STAGES);
    if (a->stages * a->virtual_stages > layers)
        return cli_error("plan", CLI_USAGE, "--virtual-stages %d: %d x %d stages, but the model has %d layers",
                         a->virtual_stages, a->virtual_stages, a->stages, layers);
    return CLI_OK;
}

/* Forward + backward seconds of every node at one micro-batch, timed here
 * as `predict` does (synthetic data, a few steps, at a batch that fits in
 * memory and scaled to the micro-batch when it does not). secs: n entries. */
static int measure(plan_args *a, int n, double *secs)
{
    so_job_config c;
    plan_job(a, &c);
    so_job_measure_config mc = {.batch = a->batch / a->microbatches, .check = 1,
                                .run = {.warmup = 1, .steps = a->steps, .max_seconds = 4},
                                .progress = cli_measure_progress, .progress_ctx = (void *)"plan"};
    so_job_layer_times *lt = &a->timed;
    int rc = so_job_measure_model(&c, &mc, lt);
    if (!rc && lt->n != n)
        rc = so_err(SO_EINVAL, "the measured model has %d nodes, the planned one %d", lt->n, n);
    for (int i = 0; !rc && i < n; i++)
        secs[i] = lt->t_fwd[i] + lt->t_bwd[i];
    return rc ? cli_error("plan", cli_exit_code(rc), "measuring %s: %s", a->model, so_errmsg()) : CLI_OK;
}

/* Stage starts from a balancer (a --partition list was read before). */
static int choose_split(plan_args *a, const so_graph *g, int *first)
{
    if (!a->measure && strcmp(a->partition, "memory"))
        return CLI_OK;
    so_pipe_balance_kind kind = !strcmp(a->partition, "memory") ? SO_PIPE_BY_MEMORY
                                : !strcmp(a->partition, "time") ? SO_PIPE_BY_TIME : SO_PIPE_BY_AUTO;
    if (so_pipe_balance(g, a->stages * a->virtual_stages, kind, &a->costs, first))
        return cli_error("plan", CLI_USAGE, "%s: %s", a->max_bytes ? "--max-memory" : "--partition", so_errmsg());
    return CLI_OK;
}

static double stage_work(const plan_args *a, const so_pipe_stage *st)
{
    return a->measure ? st->seconds : st->flops;
}

/* The slowest rank (by time when measured, else by FLOPs): a rank holds
 * stages d, d + P, ... (v of them). *total: the work of every stage. */
static int slowest_device(const plan_args *a, const so_pipe_plan *p, double *worst, double *total)
{
    int slow = 0;
    *worst = *total = 0;
    for (int d = 0; d < a->stages; d++) {
        double w = 0;
        for (int s = d; s < p->nstages; s += a->stages)
            w += stage_work(a, &p->stages[s]);
        *total += w;
        if (w > *worst) {
            *worst = w;
            slow = d;
        }
    }
    return slow;
}

static void shape_str(const so_node *nd, char *buf, size_t len)
{
    snprintf(buf, len, "(%d,%d,%d)", nd->out.c, nd->out.h, nd->out.w);
}

static void print_stages(const plan_args *a, const so_pipe_plan *p)
{
    const so_pipe_costs *c = &a->costs;
    printf("%5s %4s  %-44s %6s %10s %10s %10s %9s %6s %12s %10s\n", "stage", "rank", "nodes", "count", "params",
           "GFLOP/smp", "act MB/mb", "time ms", "in-fl", "peak act MB", "memory MB");
    for (int s = 0; s < p->nstages; s++) {
        const so_pipe_stage *st = &p->stages[s];
        char range[2 * SO_NAME_LEN + 8], t[32] = "-";
        snprintf(range, sizeof range, "%s .. %s", so_graph_node(p->g, st->first)->name,
                 so_graph_node(p->g, st->last)->name);
        if (a->measure)
            snprintf(t, sizeof t, "%.3f", st->seconds * 1e3);
        int fl = so_pipe_in_flight(c, s, p->nstages);
        double act = (double)st->act_bytes * c->microbatch;
        printf("%5d %4d  %-44s %6d %10zu %10.4f %10.2f %9s %6d %12.2f %10.2f\n", s, s % a->stages, range,
               st->last - st->first + 1, st->params, st->flops * 1e-9, act / 1048576, t, fl, act * fl / 1048576,
               so_pipe_stage_memory(st, s, p->nstages, c) / 1048576);
    }
}

static void print_cuts(const plan_args *a, const so_pipe_plan *p)
{
    for (int cut = 0; cut + 1 < p->nstages; cut++) {
        size_t bytes;
        int n = so_pipe_cut_tensors(p, cut, &bytes);
        printf("cut %d | %d: %d tensor%s, %.1f KiB per micro-batch\n", cut, cut + 1, n, n == 1 ? "" : "s",
               (double)bytes * a->costs.microbatch / 1024);
        for (int t = 0; t < p->ntensors; t++) {
            const so_pipe_tensor *x = &p->tensors[t];
            if (!so_pipe_tensor_crosses(x, cut))
                continue;
            char sh[48], to[48];
            shape_str(so_graph_node(p->g, x->node), sh, sizeof sh);
            if (x->to_last > x->to_first)
                snprintf(to, sizeof to, "stages %d and %d", x->to_first, x->to_last);
            else
                snprintf(to, sizeof to, "stage %d", x->to_first);
            printf("    %-28s %-14s %10zu B   from stage %d to %s\n", so_graph_node(p->g, x->node)->name, sh,
                   x->bytes * a->costs.microbatch, x->stage, to);
        }
    }
}

static void json_stages(so_json *js, const plan_args *a, const so_pipe_plan *p)
{
    so_json_arr_begin(js, "stages");
    for (int s = 0; s < p->nstages; s++) {
        const so_pipe_stage *st = &p->stages[s];
        int fl = so_pipe_in_flight(&a->costs, s, p->nstages);
        so_json_obj_begin(js, NULL);
        so_json_int(js, "stage", s);
        so_json_int(js, "rank", s % a->stages);
        so_json_int(js, "first", st->first);
        so_json_int(js, "last", st->last);
        so_json_str(js, "first_name", so_graph_node(p->g, st->first)->name);
        so_json_str(js, "last_name", so_graph_node(p->g, st->last)->name);
        so_json_int(js, "parameters", (int64_t)st->params);
        so_json_num(js, "flops_per_sample", st->flops);
        so_json_int(js, "activation_bytes_per_sample", (int64_t)st->act_bytes);
        so_json_int(js, "received_bytes_per_sample", (int64_t)st->recv_bytes);
        if (a->measure)
            so_json_num(js, "seconds_per_microbatch", st->seconds);
        so_json_int(js, "in_flight", fl);
        so_json_num(js, "peak_activation_bytes", (double)st->act_bytes * a->costs.microbatch * fl);
        so_json_num(js, "memory_bytes", so_pipe_stage_memory(st, s, p->nstages, &a->costs));
        so_json_obj_end(js);
    }
    so_json_arr_end(js);
}

static void json_tensors(so_json *js, const plan_args *a, const so_pipe_plan *p)
{
    so_json_arr_begin(js, "tensors");
    for (int t = 0; t < p->ntensors; t++) {
        const so_pipe_tensor *x = &p->tensors[t];
        const so_node *nd = so_graph_node(p->g, x->node);
        so_json_obj_begin(js, NULL);
        so_json_str(js, "name", nd->name);
        so_json_int(js, "node", x->node);
        so_json_arr_begin(js, "shape");
        so_json_int(js, NULL, nd->out.c);
        so_json_int(js, NULL, nd->out.h);
        so_json_int(js, NULL, nd->out.w);
        so_json_arr_end(js);
        so_json_int(js, "from_stage", x->stage);
        so_json_int(js, "to_first", x->to_first);
        so_json_int(js, "to_last", x->to_last);
        so_json_int(js, "bytes_per_microbatch", (int64_t)(x->bytes * a->costs.microbatch));
        so_json_obj_end(js);
    }
    so_json_arr_end(js);
}

static int write_json(const plan_args *a, const so_pipe_plan *p, double bubble, double speedup, int slow)
{
    FILE *f = fopen(a->json, "w");
    if (!f)
        return cli_error("plan", CLI_USAGE, "--json: cannot write '%s'", a->json);
    so_json js;
    so_json_init(&js, f, 1);
    so_json_obj_begin(&js, NULL);
    so_json_str(&js, "kind", "plan");
    so_json_str(&js, "model", a->model);
    so_json_int(&js, "nodes", so_graph_size(p->g));
    so_json_int(&js, "parameters", (int64_t)so_graph_nparams(p->g));
    so_json_int(&js, "pipeline_stages", a->stages);
    so_json_int(&js, "virtual_stages", a->virtual_stages);
    so_json_int(&js, "microbatches", a->microbatches);
    so_json_int(&js, "batch_size", a->batch);
    so_json_int(&js, "microbatch", a->costs.microbatch);
    so_json_str(&js, "schedule", a->schedule);
    so_json_str(&js, "partition", a->partition);
    so_json_bool(&js, "measured", a->measure);
    if (a->measure) {
        so_json_int(&js, "measured_batch", a->timed.measured_batch);
        so_json_int(&js, "check_batch", a->timed.check_batch);
        so_json_num(&js, "linearity", a->timed.linearity);
    }
    so_json_num(&js, "bubble", bubble);
    so_json_num(&js, "ideal_speedup", speedup);
    so_json_int(&js, "slowest_rank", slow);
    json_stages(&js, a, p);
    json_tensors(&js, a, p);
    so_json_obj_end(&js);
    return fclose(f) ? cli_error("plan", CLI_FAIL, "--json: error writing '%s'", a->json) : CLI_OK;
}

static int report(const plan_args *a, const so_pipe_plan *p)
{
    double worst, total;
    int slow = slowest_device(a, p, &worst, &total);
    double bubble = so_pipe_bubble(a->costs.schedule, a->stages, a->microbatches, a->virtual_stages);
    double speedup = worst > 0 ? total / worst * (1 - bubble) : 1;
    char chunks[48] = "";
    if (a->virtual_stages > 1)
        snprintf(chunks, sizeof chunks, " x %d virtual stages", a->virtual_stages);
    char timed[160] = "";
    const so_job_layer_times *lt = &a->timed;
    if (a->measure && lt->measured_batch == a->costs.microbatch)
        snprintf(timed, sizeof timed, "; times: forward+backward per micro-batch, measured here");
    else if (a->measure)
        snprintf(timed, sizeof timed, "; times: forward+backward per micro-batch, layers timed here at batch %d "
                 "and scaled to %d", lt->measured_batch, a->costs.microbatch);
    printf("%s: %d pipeline rank(s)%s, %s, %d micro-batches of %d (batch %d); partition %s%s\n", a->model,
           a->stages, chunks, a->schedule, a->microbatches, a->costs.microbatch, a->batch, a->partition, timed);
    print_stages(a, p);
    print_cuts(a, p);
    cli_print_linearity(lt);
    printf("slowest rank: %d (%s %.4g %s); bubble %.1f%% ((P-1)/(%sM+P-1)); ideal speed-up "
           "over one rank %.2fx\n",
           slow, a->measure ? "time" : "FLOPs", a->measure ? worst * 1e3 : worst * 1e-9,
           a->measure ? "ms per micro-batch" : "GFLOP per sample", 100 * bubble, a->virtual_stages > 1 ? "v" : "", speedup);
    return a->json ? write_json(a, p, bubble, speedup, slow) : CLI_OK;
}

/* --strategy: the sharded data-parallel plan (strategy_table.c). */
static int plan_strategies(const plan_args *a)
{
    strat_plan_args s = {.model = a->model, .optimizer = a->optimizer, .strategies = a->strategy, .json = a->json,
                         .tune = a->tune, .batch = a->batch, .world = a->world, .ranks_per_node = a->ranks_per_node,
                         .threads = a->threads, .steps = a->steps, .accumulate = a->accumulate, .seq_len = a->seq_len,
                         .cores = a->cores, .max_bytes = (double)a->max_bytes,
                         .sc = {.bucket_bytes = 25u << 20, .first_bucket_bytes = 1u << 20, .shard_unit = a->shard_unit,
                                .shard_prefetch = a->shard_prefetch}};
    if (a->shard_gather && so_dtype_parse(a->shard_gather, &s.sc.shard_gather)) /* a choice: parses */
        return cli_error("plan", CLI_USAGE, "--shard-gather: %s", so_errmsg());
    return strat_plan(&s);
}

int cmd_plan(int argc, char **argv)
{
    plan_args a;
    int rc = parse(&a, argc, argv);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    if (a.strategy)
        return plan_strategies(&a);
    so_job_config jc;
    plan_job(&a, &jc);
    so_graph *g = NULL;
    if (so_job_model_graph(&jc, &g))
        return cli_error("plan", cli_exit_code(SO_EINVAL), "--model: %s", so_errmsg());
    int n = so_graph_size(g), *first = calloc(MAX_STAGES, sizeof *first);
    double *secs = calloc((size_t)n, sizeof *secs);
    so_pipe_plan p = {0};
    if (!first || !secs)
        rc = cli_error("plan", CLI_FAIL, "out of memory");
    int is_list = !a.measure && strcmp(a.partition, "memory");
    if (!rc && is_list)
        rc = read_list(&a, g, first);
    if (!rc)
        rc = check_stages(&a, g);
    a.costs = (so_pipe_costs){.seconds = a.measure ? secs : NULL, .microbatch = a.batch / a.microbatches,
                              .microbatches = a.microbatches, .schedule = so_pipe_schedule_parse(a.schedule),
                              .devices = a.stages, .optim_slots = optim_slots(a.optimizer), .max_bytes = a.max_bytes};
    if (!rc && a.measure)
        rc = measure(&a, n, secs);
    if (!rc)
        rc = choose_split(&a, g, first);
    if (!rc && so_pipe_plan_init(&p, g, first, a.stages * a.virtual_stages))
        rc = cli_error("plan", CLI_USAGE, "--partition: %s", so_errmsg());
    if (!rc && a.measure)
        so_pipe_plan_set_costs(&p, secs);
    if (!rc)
        rc = report(&a, &p);
    so_pipe_plan_deinit(&p);
    so_job_layer_times_free(&a.timed);
    free(first);
    free(secs);
    so_graph_destroy(g);
    return rc;
}
