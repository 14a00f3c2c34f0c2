/* Pipeline stages for a job (pipe_glue.h): the lifecycle of a pipelined
 * job's parts, in the order so_job_create calls them, over the pipeline
 * module (src/pipe: where ranks sit, the cuts, tensor layouts, a device's
 * composition, metrics) and the MPI pieces beside this file (pipe_link.c:
 * the groups and the link; pipe_partition.c: the agreed cuts). */
#include "pipe_glue.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipe_link.h"
#include "pipe_partition.h"
#include "scaleout/backend.h"
#include "scaleout/err.h"
#include "scaleout/pipeline.h"

/* Per stage, after pipe_glue_bubble (the largest over the stage's replicas). */
enum { ST_ACT, ST_EDGE, ST_BUSY, STAGE_FIELDS };

struct pipe_glue {
    so_pipe_ranks at;            /* this rank's stage and replica */
    int chunks;                  /* v: the model's stages per device (interleaved; 1 otherwise) */
    so_pipe_schedule schedule;
    int microbatches, microbatch;
    so_graph *whole;             /* owned */
    so_pipe_plan plan;
    so_pipe_stage_edges edges;
    so_dist shard;               /* parts_build's view: replica rank and count */
    dist_handle *replica_dh;     /* the gradient average over this stage's replicas (D > 1) */
    so_strategy *dp, *pipe;
    so_pipe_layouts *layouts;    /* of the tensors this device receives (take_layouts) */
    double *stage_mem;           /* STAGE_FIELDS per stage (pipe_glue_bubble) */
    const char *cuts_basis;      /* how rank 0 chose the cuts (static text; "" on other ranks) */
    int wire_bf16;               /* copied tensors travel as BF16 (agree_wire) */
#ifdef SCALEOUT_HAVE_MPI
    pipe_link link;
#endif
};

static so_pipe_options options_of(const so_job_config *c)
{
    return (so_pipe_options){.stages = c->pipeline_stages, .microbatches = c->microbatches,
                             .virtual_stages = c->virtual_stages, .batch = c->batch, .accumulate = c->accumulate,
                             .schedule = c->schedule, .placement = c->placement};
}

int pipe_glue_check(const so_job_config *c, int world)
{
    so_pipe_options o = options_of(c);
    return so_pipe_options_check(&o, world);
}

/* The last error, said of the stages x chunks it is about. */
static int chunks_error(const pipe_glue *g)
{
    char why[400];
    snprintf(why, sizeof why, "%s", so_errmsg());
    return so_err(SO_EINVAL, "--pipeline-stages %d x --virtual-stages %d: %s", g->at.stages, g->chunks, why);
}

/* The stage starts every rank agrees on (rank 0 decides). first: P v entries. */
static int agree_cuts(pipe_glue *g, const so_job_config *c, dist_handle *dh, const so_dataset *ds, int *first)
{
    const so_dist *d = dist_get(dh);
    so_pipe_cut_request r = {.partition = c->partition, .devices = g->at.stages, .chunks = g->chunks,
                             .microbatch = g->microbatch, .microbatches = g->microbatches, .schedule = g->schedule,
                             .max_bytes = c->max_memory > 0 ? c->max_memory : 0};
    int rc = d->rank == 0 ? pipe_partition_choose(c, ds, g->whole, &r, first, &g->cuts_basis) : 0;
    if (rc == SO_EINVAL && g->chunks > 1)
        rc = chunks_error(g);
    if ((rc = dist_agree(dh, rc)))
        return rc;
    return pipe_partition_share(dh, d->rank, first, g->at.stages * g->chunks);
}

/* The dtype of the tensors between stages, the same on every rank: BF16
 * when every rank computes in BF16 (--precision bf16, or auto on a CPU with
 * BF16), unless SCALEOUT_PIPE_WIRE=f32 asks for FP32 (the comparison of
 * docs/PERFORMANCE.md). One sum over the world. */
static int agree_wire(pipe_glue *g, const so_job_config *c, dist_handle *dh)
{
    const so_dist *d = dist_get(dh);
    const char *env = getenv("SCALEOUT_PIPE_WIRE");
    so_precision p = SO_PRECISION_FP32;
    if (so_precision_resolve(c->precision ? c->precision : "fp32", &p))
        p = SO_PRECISION_FP32; /* the model's build reports the error */
    double fp32_ranks = p != SO_PRECISION_BF16 || (env && !strcmp(env, "f32"));
    int rc = d->sum(d->ctx, &fp32_ranks, 1);
    g->wire_bf16 = !rc && fp32_ranks == 0;
    return rc;
}

#ifdef SCALEOUT_HAVE_MPI
/* The two groups and, with replicas, the gradient average over this stage's. */
static int open_groups(pipe_glue *g, so_comm *world, const char *allreduce)
{
    int rc = pipe_link_open(&g->link, world, &g->at);
    return rc || g->at.replicas < 2 ? rc : dist_open_group(g->link.replicas, allreduce, &g->replica_dh);
}
#endif

int pipe_glue_open(const so_job_config *c, dist_handle *dh, job_parts *p, pipe_glue **out)
{
    *out = NULL;
    const so_dist *d = dist_get(dh);
    if (c->pipeline_stages <= 1)
        return 0;
    if (!d) /* pipe_glue_check saw world 1 < P */
        return so_err(SO_EINVAL, "--pipeline-stages %d: needs MPI", c->pipeline_stages);
    pipe_glue *g = calloc(1, sizeof *g);
    int v = c->virtual_stages > 0 ? c->virtual_stages : 1;
    int *first = calloc((size_t)c->pipeline_stages * v + 1, sizeof *first);
    if (!g || !first) {
        free(g);
        free(first);
        return so_err(SO_ENOMEM, "out of memory");
    }
    *out = g;
    so_pipe_ranks_of(d->rank, d->world, c->pipeline_stages, so_pipe_placement_parse(c->placement), &g->at);
    g->chunks = v;
    g->microbatches = c->microbatches > 0 ? c->microbatches : 1;
    g->microbatch = c->batch / g->microbatches;
    g->schedule = (so_pipe_schedule)so_pipe_schedule_parse(c->schedule ? c->schedule : "1f1b");
    g->whole = p->g;
    p->g = NULL;
    int rc = agree_cuts(g, c, dh, p->train, first);
    if (rc)
        goto done;
    if ((rc = so_pipe_plan_init(&g->plan, g->whole, first, g->at.stages * v)) && v > 1)
        rc = chunks_error(g);
    if (!rc)
        rc = so_pipe_stage_graph(&g->plan, g->at.stages, g->at.stage, &p->g, &g->edges);
#ifdef SCALEOUT_HAVE_MPI
    if ((rc = dist_agree(dh, rc)) || (rc = open_groups(g, dist_comm(dh), c->allreduce)))
        goto done;
#endif
    if ((rc = agree_wire(g, c, dh)))
        goto done;
    g->shard = *d;
    g->shard.rank = g->at.replica;
    g->shard.world = g->at.replicas;
    g->shard.buf_alloc = NULL;
    g->shard.buf_free = NULL;
done:
    free(first);
    return rc;
}

const so_dist *pipe_glue_shard(pipe_glue *g) { return &g->shard; }
int pipe_glue_microbatch(const pipe_glue *g) { return g->microbatch; }
const so_graph *pipe_glue_whole(const pipe_glue *g) { return g->whole; }

double pipe_glue_message_bytes(const pipe_glue *g, so_model *m)
{
    return so_pipe_message_bytes(&g->edges, g->microbatches, m, g->wire_bf16);
}

void pipe_glue_ckpt_scope(const pipe_glue *g, void **group, int *stage)
{
#ifdef SCALEOUT_HAVE_MPI
    *group = g->link.replicas;
#else
    *group = NULL;
#endif
    *stage = g->at.stage;
}

void pipe_glue_layout(const pipe_glue *g, int *stage, int *stages, int *replica, int *replicas)
{
    *stage = g->at.stage;
    *stages = g->at.stages;
    *replica = g->at.replica;
    *replicas = g->at.replicas;
}

int pipe_glue_cuts(const pipe_glue *g, int *first, int max, const char **basis)
{
    int n = g->plan.nstages < max ? g->plan.nstages : max;
    for (int s = 0; s < n; s++)
        first[s] = g->plan.first[s];
    *basis = g->cuts_basis ? g->cuts_basis : "";
    return g->plan.nstages;
}

/* ---- tensor layouts between stages (so_pipe_layouts over the link) ------------- */

#ifdef SCALEOUT_HAVE_MPI
typedef struct {
    pipe_glue *g;
    const so_job_config *c;
    dist_handle *dh;
} trial;

/* A trial model of this device with the layouts known so far (interleaved rounds). */
static int build_trial(void *ctx, so_model **m)
{
    const trial *t = ctx;
    pipe_glue *g = t->g;
    so_graph *dg = NULL;
    so_pipe_stage_edges scratch;
    so_model_opts mo = {.backend = t->c->backend, .batch = g->microbatch, .seed = (uint64_t)t->c->seed,
                        .recv_layout = so_pipe_layouts_of, .recv_layout_ctx = g->layouts, .sync_bn = t->c->sync_bn};
    int rc = so_conv_algo_parse(t->c->conv_algo ? t->c->conv_algo : "auto", &mo.conv_algo);
    if (!rc)
        rc = so_precision_resolve(t->c->precision, &mo.precision);
    if (!rc)
        rc = so_init_parse(t->c->init ? t->c->init : "torch", &mo.init);
    if (!rc && !(rc = so_pipe_stage_graph(&g->plan, g->at.stages, g->at.stage, &dg, &scratch))) {
        so_pipe_stage_edges_free(&scratch);
        rc = so_model_create_opts(dg, &mo, m); /* owns dg from here */
    }
    return rc;
}

static int world_agree(void *ctx, int rc) { return dist_agree(ctx, rc); }

static int world_sum(void *ctx, double *v, int n)
{
    const so_dist *d = dist_get(ctx);
    return d->sum(d->ctx, v, n);
}
#endif

int pipe_glue_take_layouts(pipe_glue *g, const so_job_config *c, dist_handle *dh, job_parts *p)
{
    int rc = so_pipe_layouts_create(&g->edges, &g->layouts);
    if (rc)
        return rc;
    p->recv_layout = so_pipe_layouts_of;
    p->recv_layout_ctx = g->layouts;
#ifdef SCALEOUT_HAVE_MPI
    so_pipe_link link = pipe_link_ops(&g->link);
    if (g->chunks > 1) {
        trial t = {g, c, dh};
        so_pipe_world w = {dh, world_agree, world_sum};
        return so_pipe_layouts_settle(g->layouts, &link, &w, build_trial, &t);
    }
    return so_pipe_layouts_receive(g->layouts, &link);
#else
    (void)c, (void)dh;
    return 0;
#endif
}

int pipe_glue_give_layouts(pipe_glue *g, const job_parts *p)
{
#ifdef SCALEOUT_HAVE_MPI
    if (g->chunks > 1) /* settled before the build (so_pipe_layouts_settle) */
        return 0;
    so_pipe_link link = pipe_link_ops(&g->link);
    return so_pipe_layouts_send(&g->edges, &link, p->m);
#else
    (void)g, (void)p;
    return 0;
#endif
}

/* ---- the device's model and strategy -------------------------------------------- */

#ifdef SCALEOUT_HAVE_MPI
/* --sync-bn: batchnorm statistics summed over this stage's replicas. */
static int replica_bn_allsum(void *ctx, double *v, int n)
{
    const so_dist *d = ctx;
    return d->allsum(d->ctx, v, (size_t)n);
}
#endif

int pipe_glue_start(pipe_glue *g, const so_job_config *c, dist_handle *dh, job_parts *p, so_train_config *tc)
{
    /* the stage's initial values before its strategy exists: --init-from's
     * tensors (loaded with the stage's model, parts_build), or its slice of
     * the whole model's initial values */
    int rc = c->ckpt.init_from ? 0
             : so_pipe_init_params(g->whole, &g->edges, (uint64_t)c->seed, p->m);
    if (!rc) /* now, not at the first step: the memory accounting counts every micro-batch in flight */
        rc = so_model_set_slots(p->m, so_pipe_slots(g->schedule, g->at.stage, g->at.stages, g->microbatches,
                                                    g->chunks));
    if ((rc = dist_agree(dh, rc)))
        return rc;
#ifdef SCALEOUT_HAVE_MPI
    const so_dist *rd = g->at.replicas > 1 ? dist_get(g->replica_dh) : NULL;
    if (rd && (rc = so_strategy_data_parallel(rd, &g->dp)))
        return rc;
    so_pipe_config pc = {.schedule = g->schedule, .microbatches = g->microbatches, .link = pipe_link_ops(&g->link),
                         .replicas = g->dp, .nreplicas = g->at.replicas, .bn_allsum = rd ? replica_bn_allsum : NULL,
                         .bn_allsum_arg = (void *)rd, .sum = dist_get(dh)->sum, .sum_ctx = dist_get(dh)->ctx,
                         .wire_bf16 = g->wire_bf16};
    if ((rc = so_strategy_pipeline(&pc, &g->edges, &g->pipe)))
        return rc;
    tc->accumulate = g->microbatches;
    tc->strategy = g->pipe;
    return 0;
#else
    (void)tc;
    return so_err(SO_EUNSUP, "--pipeline-stages: this build has no MPI");
#endif
}

/* ---- after training: the whole model's parameters, the bubble ------------------ */

int pipe_glue_gather_params(pipe_glue *g, const so_model *m, float **out, size_t *n)
{
    *out = NULL;
    *n = 0;
#ifdef SCALEOUT_HAVE_MPI
    if (g->at.replica != 0)
        return 0;
    size_t *sizes = calloc((size_t)g->at.stages, sizeof *sizes);
    void *all = NULL;
    size_t mine = m->nparams - (g->edges.tie_copy ? g->edges.tie_n : 0); /* a tied table's copy is not the model's */
    int rc = sizes ? so_comm_gather_bytes(g->link.pipeline, m->params, mine * sizeof(float), 0, &all, sizes)
                   : so_err(SO_ENOMEM, "out of memory");
    if (!rc && all) /* the pipeline group's rank 0: this replica's last stage */
        rc = so_pipe_model_from_group(&g->plan, g->at.stages, all, sizes, out, n);
    free(all);
    free(sizes);
    return rc;
#else
    (void)g, (void)m;
    return 0;
#endif
}

int pipe_glue_bubble(pipe_glue *g, dist_handle *dh, int skip, so_train_result *r)
{
    const so_dist *d = dist_get(dh);
    int P = g->at.stages;
    long from = r->nstep_seconds > skip ? skip : 0;
    double v[3] = {r->pipe_busy, 0, r->pipe_bytes_sent};
    for (long i = from; i < r->nstep_seconds; i++)
        v[1] += r->step_seconds[i];
    if (from == 0) /* a run shorter than the warm-up: the busy time was not counted either */
        v[0] = v[1] = 0;
    int rc = d->sum(d->ctx, v, 3);
    r->pipe_bubble = v[1] > 0 ? 1 - v[0] / v[1] : 0;
    r->pipe_bytes_sent = v[2]; /* every stage's messages */
    r->pipe_bubble_formula = so_pipe_bubble(g->schedule, P, g->microbatches, g->chunks);
    free(g->stage_mem);
    g->stage_mem = calloc(STAGE_FIELDS * (size_t)P, sizeof *g->stage_mem);
    double *busy = calloc((size_t)P, sizeof *busy);
    if (!g->stage_mem || !busy) {
        free(busy);
        return rc ? rc : so_err(SO_ENOMEM, "out of memory");
    }
    double *mine = g->stage_mem + STAGE_FIELDS * g->at.stage;
    mine[ST_ACT] = (double)r->pipe_act_bytes;
    mine[ST_EDGE] = (double)r->pipe_edge_bytes;
    mine[ST_BUSY] = from > 0 ? r->pipe_busy / (double)(r->nstep_seconds - from) : 0;
    if (!rc)
        rc = d->max(d->ctx, g->stage_mem, STAGE_FIELDS * P);
    for (int s = 0; s < P; s++)
        busy[s] = g->stage_mem[STAGE_FIELDS * s + ST_BUSY];
    r->pipe_bubble_stages = so_pipe_bubble_of_devices(busy, P, g->microbatches * g->chunks);
    free(busy);
    return rc;
}

int pipe_glue_stage_memory(const pipe_glue *g, int stage, double *act_bytes, double *edge_bytes)
{
    if (!g->stage_mem || stage < 0 || stage >= g->at.stages)
        return -1;
    *act_bytes = g->stage_mem[STAGE_FIELDS * stage + ST_ACT];
    *edge_bytes = g->stage_mem[STAGE_FIELDS * stage + ST_EDGE];
    return 0;
}

void pipe_glue_close(pipe_glue *g)
{
    if (!g)
        return;
    so_strategy_free(g->pipe);
    so_strategy_free(g->dp);
#ifdef SCALEOUT_HAVE_MPI
    dist_close(g->replica_dh);
    pipe_link_close(&g->link);
#endif
    so_pipe_layouts_destroy(g->layouts);
    free(g->stage_mem);
    so_pipe_stage_edges_free(&g->edges);
    so_pipe_plan_deinit(&g->plan);
    so_graph_destroy(g->whole);
    free(g);
}
