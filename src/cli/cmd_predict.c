/* `scaleout predict`: data-parallel scaling of a zoo model from one rank's
 * per-layer times measured here, the trainer's bucket plan, and the allreduce
 * cost model at each scale: node-local levels from the tuning table, the
 * link between nodes from --link/--latency (or all of it from --tune). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "jread.h"
#include "predict_profile.h"
#include "scaleout/job.h"
#include "scaleout/cpu.h"
#include "scaleout/err.h"
#include "scaleout/file.h"
#include "scaleout/json.h"
#include "scaleout/mem.h"
#include "scaleout/pipeline.h"
#include "scaleout/predict.h"
#include "scaleout/threads.h"
#include "scaleout/zoo.h"
#include "strategy_table.h"
#ifdef SCALEOUT_HAVE_MPI
#include "scaleout/comm.h"
#endif

#define MAX_POINTS 32

typedef struct {
    const char *model, *nodes_arg, *link_arg, *latency_arg, *tune, *json, *bucket_mb_arg, *compute_from;
    int batch, ranks_per_node, threads, steps, warmup;
    float measure_seconds;       /* per batch timed; the timed steps stop after this long (0: all --steps) */
    const char *measure_memory;  /* --measure-memory BYTES (NULL: half the available memory) */
    size_t measure_bytes;
    int stages, microbatches;    /* --pipeline-stages P (> 1: also predict P stages x replicas) and M */
    const char *partition, *schedule, *placement;
    const char *layer_costs;     /* "measured" (here or --compute-from) or "flops" (no measurement) */
    const char *strategy, *optimizer, *max_memory; /* --strategy: the sharded strategies at each scale */
    double max_bytes;
    int virtual_stages;          /* v chunks per pipeline rank (interleaved) */
    int measure_batch;           /* the batch the layers are timed at (0: chosen to fit memory and time) */
    float rank_rate;             /* > 0: one rank's images/s, the measured layers scaled to it */
    int nodes[MAX_POINTS], npoints;
    double link_bytes_per_s, latency_s;
    double bucket_mb;            /* < 0: the trainer's automatic choice */
} pred_args;

/* One scale's pipeline prediction (--pipeline-stages). */
typedef struct {
    int valid;                   /* the ranks split into the stages */
    int replicas;
    double images_per_sec;
    so_pipe_prediction p;
} pipe_point;

/* "10gbit", "25gbit", "100gbit", "800mbit": bits per second -> bytes per second. */
static int parse_rate(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    double unit = !strcmp(end, "gbit") ? 1e9 : !strcmp(end, "mbit") ? 1e6 : !strcmp(end, "tbit") ? 1e12 : 0;
    if (end == s || !unit || !(v > 0 && v * unit <= 1e13))
        return -1;
    *out = v * unit / 8;
    return 0;
}

/* "1.5us", "800ns", "0.2ms" -> seconds. */
static int parse_latency(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    double unit = !strcmp(end, "ns") ? 1e-9 : !strcmp(end, "us") ? 1e-6 : !strcmp(end, "ms") ? 1e-3 : 0;
    if (end == s || !unit || !(v >= 0 && v * unit < 1))
        return -1;
    *out = v * unit;
    return 0;
}

/* "1,2,4,8": ascending positive node counts, at most MAX_POINTS. */
static int parse_nodes(const char *s, int *nodes, int *n)
{
    *n = 0;
    for (const char *p = s; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1000000 || (*n && v <= nodes[*n - 1]) || *n == MAX_POINTS ||
            (*end && *end != ','))
            return -1;
        nodes[(*n)++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return *n ? 0 : -1;
}

/* Why P stages x replicas do not fit `world` ranks ("" when they do). */
static const char *no_layout(int world, int stages)
{
    return world < stages ? "fewer ranks than stages" : world % stages ? "ranks not a multiple of the stages" : "";
}

/* --pipeline-stages P must fit at least one of the scales asked for. */
static int some_layout(const pred_args *a)
{
    for (int i = 0; i < a->npoints; i++)
        if (!*no_layout(a->nodes[i] * a->ranks_per_node, a->stages))
            return CLI_OK;
    return cli_error("predict", CLI_USAGE, "--pipeline-stages %d: no layout fits --nodes %s with --ranks-per-node "
                     "%d: the ranks (nodes x ranks per node: %d .. %d) must be a multiple of %d; give node counts "
                     "that make one, or more --ranks-per-node", a->stages, a->nodes_arg, a->ranks_per_node,
                     a->nodes[0] * a->ranks_per_node, a->nodes[a->npoints - 1] * a->ranks_per_node, a->stages);
}

/* Flags that do nothing without another (cli_check_needs). */
static int pipe_on(const void *p) { return ((const pred_args *)p)->stages > 1; }
/* One chunk per rank is what no pipeline does anyway (the schedule is checked below). */
static int chunked(const void *p) { return pipe_on(p) || ((const pred_args *)p)->virtual_stages <= 1; }
/* The layers are timed here (not read from a profile, not from FLOPs). */
static int measured_here(const void *p)
{
    const pred_args *a = p;
    return !a->compute_from && strcmp(a->layer_costs, "flops") != 0;
}
static int strategies(const void *p) { return ((const pred_args *)p)->strategy != NULL; }
static const cli_need predict_needs[] = {
    {"microbatches", pipe_on, "--pipeline-stages P (P > 1)"},
    {"partition", pipe_on, "--pipeline-stages P (P > 1)"},
    {"schedule", pipe_on, "--pipeline-stages P (P > 1)"},
    {"placement", pipe_on, "--pipeline-stages P (P > 1)"},
    {"virtual-stages", chunked, "--pipeline-stages P (P > 1)"},
    {"measure-batch", measured_here, "layers timed here (not --compute-from, not --layer-costs flops)"},
    {"measure-memory", measured_here, "layers timed here (not --compute-from, not --layer-costs flops)"},
    {"optimizer", strategies, "--strategy"},
    {"max-memory", strategies, "--strategy"},
    {NULL, NULL, NULL}};

static int parse(pred_args *a, int argc, char **argv)
{
    *a = (pred_args){.nodes_arg = "1,2,4,8,16,32,64,128,256,512,1024", .batch = 64, .ranks_per_node = 1,
                     .threads = 1, .steps = 10, .warmup = 3, .measure_seconds = 4, .link_arg = "100gbit", .latency_arg = "1.5us",
                     .bucket_mb_arg = "25", .stages = 1, .microbatches = 4, .partition = "time",
                     .schedule = "1f1b", .virtual_stages = 1, .placement = "stage-major", .layer_costs = "measured",
                     .optimizer = "momentum"};
    static const char *const placements[] = {"stage-major", "replica-major", NULL};
    static const char *const schedules[] = {"gpipe", "1f1b", "interleaved", NULL};
    static const char *const layer_cost_kinds[] = {"measured", "flops", NULL};
    const cli_opt opts[] = {
        {"model", OPT_STR, &a->model, "NAME", "zoo model (see `scaleout models`)", 0, -1, NULL},
        {"batch-size", OPT_INT, &a->batch, "N", "samples per rank per step", 1, 65536, NULL},
        {"nodes", OPT_STR, &a->nodes_arg, "LIST", "node counts, ascending (e.g. 1,2,4,8)", 0, -1, NULL},
        {"ranks-per-node", OPT_INT, &a->ranks_per_node, "K", "ranks on each node", 1, 1024, NULL},
        {"link", OPT_STR, &a->link_arg, "RATE", "link between nodes: 10gbit, 100gbit, 800mbit ...", 0, -1, NULL},
        {"latency", OPT_STR, &a->latency_arg, "TIME", "one-way latency between nodes: 1.5us, 50us ...", 0, -1, NULL},
        {"tune", OPT_STR, &a->tune, "FILE", "tuning table measured on the target (`scaleout tune`): replaces --link/--latency", 0, -1, NULL},
        {"bucket-mb", OPT_STR, &a->bucket_mb_arg, "MB|auto", "gradient bucket size as in train (auto: the trainer's joint choice)", 0, -1, NULL},
        {"threads", OPT_INT, &a->threads, "N", "compute threads per rank while measuring", 1, 1024, NULL},
        {"steps", OPT_INT, &a->steps, "N", "timed steps of the measurement, at most", 1, 100000, NULL},
        {"measure-memory", OPT_STR, &a->measure_memory, "BYTES", "memory the measurement may take (K/M/G suffixes; default: half of what is available)", 0, -1, NULL},
        {"measure-seconds", OPT_FLOAT, &a->measure_seconds, "S", "stop timing a batch after S seconds of steps (at least 2 steps; 0: all --steps)", 0, 3600, NULL},
        {"rank-images-per-sec", OPT_FLOAT, &a->rank_rate, "X", "one rank's training images/s on the target (e.g. a GPU's, from its vendor): the layers' measured proportions scaled to it", 0, 1e9, NULL},
        {"measure-batch", OPT_INT, &a->measure_batch, "N", "time the layers at this batch and scale them to --batch-size (0: --batch-size when it fits half the available memory and a step of ~2 s, else the largest power of two that does)", 0, 65536, NULL},
        {"layer-costs", OPT_CHOICE, &a->layer_costs, "HOW", "per-layer times: measured (here, or --compute-from) or flops (proportional to each layer's FLOPs, backward 2x forward; needs --rank-images-per-sec; nothing is timed, so the prediction does not depend on this machine or its load)", 0, -1, layer_cost_kinds},
        {"compute-from", OPT_STR, &a->compute_from, "PROFILE", "per-layer times from a profile.json of `train --profile` (same model and batch) instead of measuring here", 0, -1, NULL},
        {"pipeline-stages", OPT_INT, &a->stages, "P", "also predict P pipeline stages x ranks/P replicas at the same global batch, and name the faster", 1, 4096, NULL},
        {"microbatches", OPT_INT, &a->microbatches, "M", "pipeline micro-batches per step (each batch-size x P / M)", 1, 65536, NULL},
        {"partition", OPT_STR, &a->partition, "time|memory|LIST", "pipeline cuts as in train (time: from the layers measured here)", 0, -1, NULL},
        {"schedule", OPT_CHOICE, &a->schedule, "NAME", "pipeline schedule as in train (gpipe and 1f1b take the same time)", 0, -1, schedules},
        {"placement", OPT_CHOICE, &a->placement, "HOW", "pipeline ranks as in train: stage-major (a replica's stages on one node) or replica-major (a stage's replicas)", 0, -1, placements},
        {"virtual-stages", OPT_INT, &a->virtual_stages, "V", "model chunks per pipeline rank (--schedule interleaved)", 1, 4096, NULL},
        {"json", OPT_STR, &a->json, "FILE", "write the prediction as JSON", 0, -1, NULL},
        {"strategy", OPT_STR, &a->strategy, "LIST", "also dp, zero1, zero2, zero3 (a comma list, or all) at each scale: memory per rank, step time, the fastest that fits --max-memory", 0, -1, NULL},
        {"optimizer", OPT_STR, &a->optimizer, "NAME", "--strategy: the optimizer whose state is counted", 0, -1, NULL},
        {"max-memory", OPT_STR, &a->max_memory, "BYTES", "--strategy: what a rank may hold (K/M/G suffixes)", 0, -1, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    unsigned char seen[sizeof opts / sizeof *opts] = {0};
    int rc = cli_parse_seen("predict", "Predicts data-parallel scaling from per-layer times measured here and the "
                            "allreduce cost model.", opts, argc, argv, seen);
    if (rc || (rc = cli_check_needs("predict", opts, seen, predict_needs, a)))
        return rc;
    if (!a->model)
        return cli_error("predict", CLI_USAGE, "--model is required");
    if (so_zoo_check(a->model))
        return cli_error("predict", CLI_USAGE, "--model: %s (see `scaleout models`)", so_errmsg());
    if (parse_nodes(a->nodes_arg, a->nodes, &a->npoints))
        return cli_error("predict", CLI_USAGE, "--nodes: '%s' is not an ascending list of node counts", a->nodes_arg);
    if (a->measure_memory && (cli_parse_bytes(a->measure_memory, &a->measure_bytes) || !a->measure_bytes))
        return cli_error("predict", CLI_USAGE, "--measure-memory: '%s' is not a size like 512M or 2G", a->measure_memory);
    if (parse_rate(a->link_arg, &a->link_bytes_per_s))
        return cli_error("predict", CLI_USAGE, "--link: '%s' is not a rate like 10gbit or 800mbit", a->link_arg);
    if (parse_latency(a->latency_arg, &a->latency_s))
        return cli_error("predict", CLI_USAGE, "--latency: '%s' is not a time like 1.5us or 0.2ms", a->latency_arg);
    if (a->stages > 1 && (a->batch * a->stages) % a->microbatches)
        return cli_error("predict", CLI_USAGE, "--microbatches %d does not divide a replica's batch %d (--batch-size "
                         "x --pipeline-stages, the same global batch as data parallelism)", a->microbatches,
                         a->batch * a->stages);
    if (a->virtual_stages > 1 && strcmp(a->schedule, "interleaved"))
        return cli_error("predict", CLI_USAGE, "--virtual-stages %d: only with --schedule interleaved",
                         a->virtual_stages);
    size_t cap = 0;
    if (a->max_memory && cli_parse_max_memory("predict", a->max_memory, &cap))
        return CLI_USAGE;
    a->max_bytes = (double)cap;
    if (!strcmp(a->layer_costs, "flops") && !(a->rank_rate > 0))
        return cli_error("predict", CLI_USAGE, "--layer-costs flops: needs --rank-images-per-sec (FLOPs give the "
                         "layers' proportions, not their speed)");
    if (!strcmp(a->layer_costs, "flops") && a->compute_from)
        return cli_error("predict", CLI_USAGE, "--layer-costs flops: not with --compute-from");
    if (a->stages > 1 && a->compute_from)
        return cli_error("predict", CLI_USAGE, "--pipeline-stages: measures the layers at the micro-batch here; "
                         "not with --compute-from");
    if (a->stages > 1 && (rc = some_layout(a)))
        return rc;
    return cli_parse_bucket_mb("predict", a->bucket_mb_arg, &a->bucket_mb);
}

#ifdef SCALEOUT_HAVE_MPI
/* The cost of one gradient allreduce at one scale. */
typedef struct {
    int nodes, rpn;
    const so_comm_tuning *table; /* --tune without levels: the whole job from the table */
    so_comm_tuning node, link;   /* else: node-local level, and the link with its alpha and beta */
} pred_cost;

/* Without a table: reduce inside the node and broadcast back (one node-local
 * allreduce's cost, what hier's window steps move) plus the leaders'
 * allreduce over the link with the best of the algorithms that suit it. */
static double allreduce_cost(void *ctx, size_t bytes)
{
    const pred_cost *c = ctx;
    if (c->table)
        return so_comm_predict(SO_ALLREDUCE_AUTO, bytes, c->nodes * c->rpn, c->rpn, c->table);
    double t = c->rpn > 1 ? so_comm_predict(SO_ALLREDUCE_AUTO, bytes, c->rpn, 0, &c->node) : 0;
    if (c->nodes > 1) {
        const so_allreduce_algo algos[] = {SO_ALLREDUCE_RING, SO_ALLREDUCE_RD, SO_ALLREDUCE_RABENSEIFNER};
        double best = -1;
        for (int i = 0; i < 3; i++) {
            double v = so_comm_predict(algos[i], bytes, c->nodes, 0, &c->link);
            best = best < 0 || v < best ? v : best;
        }
        t += best;
    }
    return t;
}

static void link_table(const pred_args *a, so_comm_tuning *t)
{
    so_comm_tuning_default(t);
    for (int i = 0; i < SO_ALLREDUCE_AUTO; i++)
        t->fit[i] = (so_comm_fit){.alpha = a->latency_s, .beta = 1.0 / a->link_bytes_per_s, .valid = 1};
}

/* --compute-from: the per-layer times of a profile (predict_profile.c). */
static int from_profile(const pred_args *a, const so_graph *g, double *t, double *t_other)
{
    void *text;
    size_t len;
    int rc = so_file_read_all(a->compute_from, (size_t)1 << 30, &text, &len);
    if (rc)
        return so_err(rc, "--compute-from: %s", so_errmsg());
    rc = predict_profile_times(text, len, a->compute_from, g, a->model, a->batch, t, t_other);
    free(text);
    return rc;
}

/* --rank-images-per-sec: the per-layer times (measured at --measure-batch,
 * or read) scaled so that one rank's step of `batch` samples (--batch-size;
 * a pipeline's micro-batch) takes batch / X seconds: this machine's
 * proportions between layers, the target's speed. */
static void scale_to_rate(const pred_args *a, int batch, const so_graph *g, double *t, double *t_other)
{
    int n = so_graph_size(g);
    double sum = *t_other;
    for (int i = 0; i < 2 * n; i++)
        sum += t[i];
    double f = sum > 0 ? ((double)batch / a->rank_rate) / sum : 0;
    for (int i = 0; i < 2 * n; i++)
        t[i] *= f;
    *t_other *= f;
}

/* --layer-costs flops: each node's forward FLOPs plus one per output value
 * (what an element-wise node, the loss or a pooling costs: they have no
 * multiply-adds, yet a pipeline stage of them takes time), twice that
 * backward (the data and the weight gradient); only the proportions count,
 * scale_to_rate gives them a speed. */
static void flop_costs(const so_graph *g, double *t, double *t_other)
{
    int n = so_graph_size(g);
    for (int i = 0; i < n; i++) {
        so_shape o = so_graph_node(g, i)->out;
        t[i] = so_node_flops(g, i) + (double)o.c * o.h * o.w;
        t[n + i] = 2 * t[i];
    }
    *t_other = 0;
}

/* Per-layer times of one rank at `batch` (--batch-size, or a pipeline's
 * micro-batch): timed here at a batch that fits (so_job_measure_model:
 * what was timed lands in *lt; measure_batch 0: chosen there), read from
 * --compute-from, or in proportion
 * to FLOPs; scaled to --rank-images-per-sec when given. g: the model's
 * graph; *t gets 2 x so_graph_size entries, forward then backward (free it). */
static int measure(const pred_args *a, int batch, int measure_batch, const so_graph *g, so_job_layer_times *lt,
                   double **t, double *t_other)
{
    int n = so_graph_size(g), rc = 0;
    memset(lt, 0, sizeof *lt);
    if (!(*t = calloc(2 * (size_t)n, sizeof **t)))
        return so_err(SO_ENOMEM, "out of memory for %d node times", n);
    if (!strcmp(a->layer_costs, "flops")) {
        flop_costs(g, *t, t_other);
    } else if (a->compute_from) {
        rc = from_profile(a, g, *t, t_other);
    } else {
        so_job_config c;
        so_job_defaults(&c);
        c.model = a->model;
        c.threads = a->threads;
        so_job_measure_config mc = {.batch = batch, .measure_batch = measure_batch, .check = 1,
                                    .max_bytes = (double)a->measure_bytes,
                                    .run = {.warmup = a->warmup, .steps = a->steps, .max_seconds = a->measure_seconds},
                                    .progress = cli_measure_progress, .progress_ctx = (void *)"predict"};
        if (!(rc = so_job_measure_model(&c, &mc, lt))) {
            memcpy(*t, lt->t_fwd, (size_t)n * sizeof **t);
            memcpy(*t + n, lt->t_bwd, (size_t)n * sizeof **t);
            *t_other = lt->t_other;
        }
    }
    if (!rc && a->rank_rate > 0)
        scale_to_rate(a, batch, g, *t, t_other);
    return rc;
}

/* What the layer times are, for the table's heading and the JSON. */
static void describe_source(const pred_args *a, const so_job_layer_times *lt, char *src, size_t len)
{
    if (!strcmp(a->layer_costs, "flops"))
        snprintf(src, len, "per-layer times in proportion to their FLOPs");
    else if (a->compute_from)
        snprintf(src, len, "per-layer times from %s", a->compute_from);
    else if (lt->measured_batch == a->batch)
        snprintf(src, len, "per-layer times measured here (%s, %d thread(s), layers timed at batch %d)",
                 so_isa_label(so_cpu_isa()), a->threads, lt->measured_batch);
    else
        snprintf(src, len, "per-layer times measured here (%s, %d thread(s), layers timed at batch %d, scaled "
                 "to %d%s)", so_isa_label(so_cpu_isa()), a->threads, lt->measured_batch, a->batch,
                 lt->check_batch ? "" : "; linearity not checked");
    if (a->rank_rate > 0)
        snprintf(src + strlen(src), len - strlen(src), ", scaled to %g images/s per rank", a->rank_rate);
}

static void print_table(const pred_args *a, const so_job_layer_times *lt, const so_predict_point *pt,
                        const char *link)
{
    char src[256];
    describe_source(a, lt, src, sizeof src);
    printf("%s, batch %d per rank, %d rank(s) per node; %s; %s\n", a->model, a->batch, a->ranks_per_node, src, link);
    printf("%7s %7s %10s %12s %10s %10s %11s %8s\n", "nodes", "ranks", "step ms", "images/s", "efficiency",
           "comm ms", "exposed ms", "buckets");
    double one = pt[0].images_per_sec / (a->nodes[0] * a->ranks_per_node);
    for (int i = 0; i < a->npoints; i++) {
        int ranks = a->nodes[i] * a->ranks_per_node;
        printf("%7d %7d %10.2f %12.1f %9.1f%% %10.2f %11.2f %8d\n", a->nodes[i], ranks, pt[i].step_seconds * 1e3,
               pt[i].images_per_sec, 100 * pt[i].images_per_sec / (ranks * one), pt[i].comm_seconds * 1e3,
               pt[i].comm_exposed_seconds * 1e3, pt[i].nbuckets);
    }
    cli_print_linearity(lt);
}

/* What the layer times are and what measuring them took. */
static void json_layer_times(so_json *js, const pred_args *a, const so_job_layer_times *lt)
{
    char src[256];
    describe_source(a, lt, src, sizeof src);
    so_json_obj_begin(js, "layer_times");
    so_json_str(js, "source", !strcmp(a->layer_costs, "flops") ? "flops" : a->compute_from ? "profile" : "measured");
    so_json_str(js, "description", src);
    if (lt->measured_batch) {
        so_json_int(js, "measured_batch", lt->measured_batch);
        so_json_int(js, "check_batch", lt->check_batch);
        so_json_num(js, "linearity", lt->linearity);
        so_json_int(js, "timed_steps", lt->timed_steps);
        so_json_num(js, "estimated_bytes_at_batch", lt->batch_bytes);
        so_json_num(js, "estimated_bytes_measured", lt->measure_bytes);
        so_json_num(js, "available_bytes", lt->avail_bytes);
    }
    so_json_int(js, "peak_rss_bytes", (int64_t)so_peak_rss());
    so_json_obj_end(js);
}

static int write_json(const pred_args *a, const so_job_layer_times *lt, const so_predict_point *pt,
                      const pipe_point *pp, const char *link)
{
    FILE *f = fopen(a->json, "w");
    if (!f)
        return cli_error("predict", CLI_USAGE, "--json: cannot write '%s'", a->json);
    so_json js;
    so_json_init(&js, f, 1);
    so_json_obj_begin(&js, NULL);
    so_json_str(&js, "kind", "predict");
    so_json_str(&js, "model", a->model);
    so_json_int(&js, "batch_size", a->batch);
    so_json_int(&js, "ranks_per_node", a->ranks_per_node);
    so_json_str(&js, "communication", link);
    so_json_str(&js, "isa", so_isa_name(so_cpu_isa()));
    json_layer_times(&js, a, lt);
    so_json_arr_begin(&js, "points");
    double one = pt[0].images_per_sec / (a->nodes[0] * a->ranks_per_node);
    for (int i = 0; i < a->npoints; i++) {
        int ranks = a->nodes[i] * a->ranks_per_node;
        so_json_obj_begin(&js, NULL);
        so_json_int(&js, "nodes", a->nodes[i]);
        so_json_int(&js, "ranks", ranks);
        so_json_num(&js, "step_seconds", pt[i].step_seconds);
        so_json_num(&js, "images_per_sec", pt[i].images_per_sec);
        so_json_num(&js, "efficiency", pt[i].images_per_sec / (ranks * one));
        so_json_num(&js, "comm_seconds", pt[i].comm_seconds);
        so_json_num(&js, "comm_exposed_seconds", pt[i].comm_exposed_seconds);
        so_json_int(&js, "buckets", pt[i].nbuckets);
        so_json_int(&js, "first_bucket_bytes", (int64_t)pt[i].first_bucket_bytes);
        so_json_int(&js, "bucket_bytes", (int64_t)pt[i].bucket_bytes);
        if (a->stages > 1 && pp[i].valid) {
            so_json_obj_begin(&js, "pipeline");
            so_json_int(&js, "stages", a->stages);
            so_json_int(&js, "replicas", pp[i].replicas);
            so_json_int(&js, "microbatches", a->microbatches);
            so_json_str(&js, "schedule", a->schedule);
            so_json_str(&js, "placement", a->placement);
            so_json_int(&js, "virtual_stages", a->virtual_stages);
            so_json_num(&js, "step_seconds", pp[i].p.step_seconds);
            so_json_num(&js, "images_per_sec", pp[i].images_per_sec);
            so_json_num(&js, "bubble", pp[i].p.bubble);
            so_json_num(&js, "slowest_cut_seconds", pp[i].p.slowest_cut_seconds);
            so_json_num(&js, "replica_seconds", pp[i].p.replica_seconds);
            so_json_obj_end(&js);
            so_json_str(&js, "faster", pp[i].images_per_sec > pt[i].images_per_sec ? "pipeline" : "data");
        }
        so_json_obj_end(&js);
    }
    so_json_arr_end(&js);
    so_json_obj_end(&js);
    return fclose(f) ? cli_error("predict", CLI_FAIL, "--json: error writing '%s'", a->json) : CLI_OK;
}

/* The cost model of one scale's communication: --tune's table (per level
 * when it has levels) or --link/--latency. link: a line saying which. */
static void make_cost(const pred_args *a, const so_comm_tuning *table, pred_cost *cost, char *link, size_t len)
{
    *cost = (pred_cost){.rpn = a->ranks_per_node, .table = table};
    if (table && table->level[SO_LEVEL_LINK].valid) {
        /* Measured per level (tune --levels): the same composition as
         * --link/--latency, each level from its own fits, at any scale. */
        so_comm_tuning_default(&cost->node);
        so_comm_tuning_default(&cost->link);
        memcpy(cost->link.fit, table->level[SO_LEVEL_LINK].fit, sizeof cost->link.fit);
        if (table->level[SO_LEVEL_NODE].valid)
            memcpy(cost->node.fit, table->level[SO_LEVEL_NODE].fit, sizeof cost->node.fit);
        cost->node.gamma = cost->link.gamma = table->gamma;
        cost->table = NULL;
        snprintf(link, len, "allreduce per level from the tuning table %s (node: %s, link: measured on %d nodes)",
                 a->tune, table->level[SO_LEVEL_NODE].valid ? "measured" : "built-in model",
                 table->level[SO_LEVEL_LINK].p);
    } else if (table) {
        snprintf(link, len, "allreduce from the tuning table %s", a->tune);
    } else {
        so_comm_tuning_default(&cost->node);
        link_table(a, &cost->link);
        snprintf(link, len, "nodes joined by %s, %s latency; node-local levels from the built-in model",
                 a->link_arg, a->latency_arg);
    }
}

/* table: --tune's, loaded before anything was measured (NULL: --link/--latency). */
static int predict_points(const pred_args *a, const so_comm_tuning *table, const so_predict_compute *c,
                          so_predict_point *pt, char *link, size_t len)
{
    pred_cost cost;
    make_cost(a, table, &cost, link, len);
    for (int i = 0; i < a->npoints; i++) {
        cost.nodes = a->nodes[i];
        int rc = so_predict_step(c, a->nodes[i] * a->ranks_per_node, allreduce_cost, &cost, &pt[i]);
        if (rc)
            return cli_error("predict", cli_exit_code(rc), "%s", so_errmsg());
    }
    return CLI_OK;
}

/* ---- pipeline stages beside data parallelism ---------------------------------- */

/* Shared memory between ranks of one node: what a point-to-point copy of a
 * stage's activations costs there (a fixed assumption, docs/PARALLELISM.md). */
#define SHM_BYTES_PER_S 5e9
#define SHM_LATENCY_S 2e-6

typedef struct {
    const pred_args *a;
    pred_cost cost;              /* the scale's cost model; nodes/rpn set per call */
    double link_alpha, link_beta;
    int replicas;
} pipe_cost;

/* The node of device d of replica 0 (where train puts it: so_pipe_world_rank). */
static int device_node(const pipe_cost *c, int d)
{
    so_pipe_ranks shape = {.stages = c->a->stages, .replicas = c->replicas};
    so_pipe_placement pl = (so_pipe_placement)so_pipe_placement_parse(c->a->placement);
    return so_pipe_world_rank(&shape, pl, d, 0) / c->a->ranks_per_node;
}

/* A cut crosses the link when its two devices are on different nodes. */
static double cut_seconds(void *ctx, int cut, size_t bytes)
{
    const pipe_cost *c = ctx;
    int P = c->a->stages;
    if (device_node(c, cut % P) != device_node(c, (cut + 1) % P))
        return c->link_alpha + (double)bytes * c->link_beta;
    return SHM_LATENCY_S + (double)bytes / SHM_BYTES_PER_S;
}

/* A stage's replicas: rpn / P of them share a node (stage-major) or up to
 * rpn (replica-major); the rest are spread over nodes. */
static double replica_seconds(void *ctx, size_t bytes)
{
    pipe_cost *c = ctx;
    int per_node = strcmp(c->a->placement, "replica-major") ? c->a->ranks_per_node / c->a->stages
                                                            : c->a->ranks_per_node;
    per_node = per_node < 1 ? 1 : per_node > c->replicas ? c->replicas : per_node;
    c->cost.rpn = per_node;
    c->cost.nodes = (c->replicas + per_node - 1) / per_node;
    return allreduce_cost(&c->cost, bytes);
}

/* The plan of --partition from per-node seconds at one micro-batch. */
static int pipe_plan(const pred_args *a, const so_graph *g, const double *secs, so_pipe_plan *plan)
{
    int first[4097], n = 0, rc, S = a->stages * a->virtual_stages;
    if (S > 4096)
        return cli_error("predict", CLI_USAGE, "--virtual-stages: %d stages, more than 4096", S);
    if (!strcmp(a->partition, "time") || !strcmp(a->partition, "memory")) {
        so_pipe_costs pc = {.seconds = secs, .microbatch = a->batch * a->stages / a->microbatches,
                            .microbatches = a->microbatches, .schedule = so_pipe_schedule_parse(a->schedule),
                            .devices = a->stages, .optim_slots = 1};
        rc = so_pipe_balance(g, S, !strcmp(a->partition, "time") ? SO_PIPE_BY_TIME : SO_PIPE_BY_MEMORY, &pc, first);
    } else if (!(rc = so_pipe_parse_list(g, a->partition, first, S, &n)) && n != S) {
        rc = so_err(SO_EINVAL, "%d stage starts for %d stages", n, S);
    }
    if (!rc)
        rc = so_pipe_plan_init(plan, g, first, S);
    if (rc)
        return cli_error("predict", CLI_USAGE, "--partition: %s", so_errmsg());
    so_pipe_plan_set_costs(plan, secs);
    return CLI_OK;
}

/* P stages x world/P replicas at every scale where they fit, at the global
 * batch of data parallelism (a replica's batch = --batch-size x P). */
static int predict_pipeline(const pred_args *a, const so_graph *g, const so_comm_tuning *table, pipe_point *pp)
{
    int mb = a->batch * a->stages / a->microbatches, n = so_graph_size(g);
    double *t = NULL, other = 0, *secs = NULL;
    so_pipe_plan plan = {0};
    so_job_layer_times lt;
    int rc = measure(a, mb, 0, g, &lt, &t, &other);
    so_job_layer_times_free(&lt);
    if (rc)
        rc = cli_error("predict", cli_exit_code(rc), "measuring at the micro-batch %d: %s", mb, so_errmsg());
    if (!rc && !(secs = calloc((size_t)n, sizeof *secs)))
        rc = cli_error("predict", CLI_FAIL, "out of memory");
    for (int i = 0; !rc && i < n; i++)
        secs[i] = t[i] + t[n + i];
    if (!rc)
        rc = pipe_plan(a, g, secs, &plan);
    char link[512];
    pipe_cost pc = {.a = a};
    make_cost(a, table, &pc.cost, link, sizeof link);
    const so_comm_fit *lf = &pc.cost.link.fit[SO_ALLREDUCE_RING];
    pc.link_alpha = table && !table->level[SO_LEVEL_LINK].valid ? a->latency_s : lf->alpha;
    pc.link_beta = table && !table->level[SO_LEVEL_LINK].valid ? 1.0 / a->link_bytes_per_s : lf->beta;
    for (int i = 0; !rc && i < a->npoints; i++) {
        int world = a->nodes[i] * a->ranks_per_node;
        pp[i].valid = world >= a->stages && world % a->stages == 0;
        if (!pp[i].valid)
            continue;
        pc.replicas = pp[i].replicas = world / a->stages;
        so_pipe_predict_config c = {.microbatches = a->microbatches, .replicas = pc.replicas, .devices = a->stages,
                                    .optimizer_seconds = other, .cut_seconds = cut_seconds,
                                    .replica_seconds = replica_seconds, .ctx = &pc};
        if ((rc = so_pipe_predict(&plan, mb, &c, &pp[i].p)))
            rc = cli_error("predict", cli_exit_code(rc), "%s", so_errmsg());
        pp[i].images_per_sec = (double)world * a->batch / pp[i].p.step_seconds;
    }
    so_pipe_plan_deinit(&plan);
    free(secs);
    free(t);
    return rc;
}

/* --strategy: dp and the sharded strategies at every scale, with the
 * scale's cost model; activations as measured (so_job_layer_times). */
static int predict_strategies(const pred_args *a, const so_comm_tuning *table, const so_predict_compute *c,
                              const so_job_layer_times *lt)
{
    const so_strategy_kind *kinds[STRAT_MAX];
    int nk = 0, nslots = 0, rc = strat_parse(a->strategy, kinds, &nk);
    so_optim_kind kind;
    if (!rc && !(rc = so_optim_parse(a->optimizer, &kind)))
        nslots = kind == SO_OPT_SGD ? 0 : kind == SO_OPT_ADAM || kind == SO_OPT_ADAMW ? 2 : 1;
    if (rc)
        return cli_error("predict", CLI_USAGE, "%s", so_errmsg());
    char link[512];
    pred_cost cost;
    make_cost(a, table, &cost, link, sizeof link);
    so_strategy_config sc = {.bucket_bytes = c->bucket_bytes ? c->bucket_bytes : 25u << 20,
                             .first_bucket_bytes = c->first_bucket_bytes ? c->first_bucket_bytes : 1u << 20,
                             .auto_buckets = !c->bucket_bytes, .shard_prefetch = 2, .accumulate = 1};
    printf("\nstrategies (%s; memory per rank: weights, gradients and optimizer state by the trainer's accounting, "
           "activations measured here):\n", a->optimizer);
    for (int i = 0; i < a->npoints && !rc; i++) {
        cost.nodes = a->nodes[i];
        strat_row rows[STRAT_MAX];
        int best;
        strat_query q = {c, a->nodes[i] * a->ranks_per_node, nslots, lt->act_bytes, a->max_bytes, &sc,
                         allreduce_cost, &cost};
        if ((rc = strat_rows(&q, kinds, nk, rows, &best)))
            return cli_error("predict", cli_exit_code(rc), "%s", so_errmsg());
        strat_print_scale(a->nodes[i], q.world, rows, nk, best, i == 0);
    }
    return rc;
}

static void print_pipeline(const pred_args *a, const so_predict_point *pt, const pipe_point *pp)
{
    char chunks[48] = "";
    if (a->virtual_stages > 1)
        snprintf(chunks, sizeof chunks, " x %d chunks", a->virtual_stages);
    printf("\npipeline: %d stages%s x ranks/%d replicas (%s), %s, %d micro-batches of %d, partition %s; "
           "the same global batch\n", a->stages, chunks, a->stages, a->placement, a->schedule, a->microbatches,
           a->batch * a->stages / a->microbatches, a->partition);
    printf("%7s %7s %9s %10s %12s %8s %12s %14s  %s\n", "nodes", "ranks", "replicas", "step ms", "images/s", "bubble",
           "cut ms/mb", "data-par img/s", "faster");
    for (int i = 0; i < a->npoints; i++) {
        int world = a->nodes[i] * a->ranks_per_node;
        if (!pp[i].valid) {
            printf("%7d %7d  (no layout: %s)\n", a->nodes[i], world, no_layout(world, a->stages));
            continue;
        }
        printf("%7d %7d %9d %10.2f %12.1f %7.1f%% %12.3f %14.1f  %s\n", a->nodes[i], a->nodes[i] * a->ranks_per_node,
               pp[i].replicas, pp[i].p.step_seconds * 1e3, pp[i].images_per_sec, 100 * pp[i].p.bubble,
               pp[i].p.slowest_cut_seconds * 1e3, pt[i].images_per_sec,
               pp[i].images_per_sec > pt[i].images_per_sec ? "pipeline" : "data parallel");
    }
}
#endif

int cmd_predict(int argc, char **argv)
{
    pred_args a;
    int rc = parse(&a, argc, argv);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
#ifndef SCALEOUT_HAVE_MPI
    return cli_error("predict", CLI_FAIL, "this build has no communication layer (SCALEOUT_MPI=OFF)");
#else
    so_comm_tuning table;
    if (a.tune && so_comm_tuning_load(a.tune, &table))
        return cli_error("predict", CLI_USAGE, "--tune: %s", so_errmsg());
    so_job_config jc; /* the graph measure() times: a GPT-2 at train's default --seq-len */
    so_job_defaults(&jc);
    jc.model = a.model;
    so_graph *g = NULL;
    if (so_job_model_graph(&jc, &g))
        return cli_error("predict", cli_exit_code(SO_EINVAL), "%s", so_errmsg());
    double *t = NULL, other = 0;
    so_job_layer_times lt;
    so_predict_point pt[MAX_POINTS];
    pipe_point pp[MAX_POINTS] = {{0}};
    char link[512];
    if ((rc = measure(&a, a.batch, a.measure_batch, g, &lt, &t, &other)))
        rc = cli_error("predict", cli_exit_code(rc), "%s", so_errmsg());
    if (!rc) {
        int n = so_graph_size(g);
        size_t mb = a.bucket_mb > 0 ? (size_t)(a.bucket_mb * (1 << 20)) : 0;
        so_predict_compute c = {g, t, t + n, other, a.batch, mb ? (1u << 20) : 0, mb};
        rc = predict_points(&a, a.tune ? &table : NULL, &c, pt, link, sizeof link);
    }
    if (!rc && a.stages > 1)
        rc = predict_pipeline(&a, g, a.tune ? &table : NULL, pp);
    if (!rc) {
        print_table(&a, &lt, pt, link);
        if (a.stages > 1)
            print_pipeline(&a, pt, pp);
        if (a.strategy) {
            int n = so_graph_size(g);
            size_t mb = a.bucket_mb > 0 ? (size_t)(a.bucket_mb * (1 << 20)) : 0;
            so_predict_compute c = {g, t, t + n, other, a.batch, mb ? (1u << 20) : 0, mb};
            rc = predict_strategies(&a, a.tune ? &table : NULL, &c, &lt);
        }
        if (a.json)
            rc = write_json(&a, &lt, pt, pp, link);
    }
    so_job_layer_times_free(&lt);
    free(t);
    so_graph_destroy(g);
    return rc;
#endif
}
