/* Pipeline stages for a job (pipe_glue.h). Ranks are laid out as P stages x
 * D replicas; world rank 0 holds the LAST stage of replica 0, where the loss
 * and the accuracy are computed, so what rank 0 prints is the model's. */
#include "pipe_glue.h"

#include "ckpt_glue.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/backend.h"
#include "scaleout/err.h"
#include "scaleout/pipeline.h"
#include "scaleout/zoo.h"

#ifdef SCALEOUT_HAVE_MPI
#include "scaleout/comm.h"
#endif


/* Per stage, after pipe_glue_bubble (the largest over the stage's replicas). */
enum { ST_ACT, ST_EDGE, ST_BUSY, STAGE_FIELDS };

/* One layout message between stages: fixed size, so a failure mark is a message too. */
enum { LAYOUT_MAX = 2048 };
typedef struct {
    int32_t ok;                  /* 0: the sending stage could not build its model */
    uint32_t len;                /* bytes of desc used (0: plain NCHW) */
    char desc[LAYOUT_MAX];
} layout_msg;

struct pipe_glue {
    int stage, stages, replica, replicas, microbatch;
    int chunks;                  /* v: the model's stages per device (interleaved; 1 otherwise) */
    so_pipe_schedule schedule;
    int microbatches;
    so_graph *whole;             /* owned */
    so_pipe_plan plan;
    so_pipe_stage_edges edges;
    so_dist shard;               /* parts_build's view: replica rank and count */
    dist_handle *replica_dh;     /* the gradient average over this stage's replicas (D > 1) */
    so_strategy *dp, *pipe;
    layout_msg *layouts;         /* one per recv edge (take_layouts) */
    double *stage_mem;           /* STAGE_FIELDS per stage (pipe_glue_bubble) */
    const char *cuts_basis;      /* how rank 0 chose the cuts (static text; "" on other ranks) */
#ifdef SCALEOUT_HAVE_MPI
    so_comm *pipeline;           /* this replica's stages; group rank = stages - 1 - stage */
    so_comm *replica_group;      /* this stage's replicas (its checkpoints and gradient average) */
    int *node_of;                /* per pipeline group rank: its node id (shared edges on one node) */
    void *shared;                /* this rank's memory for shared edges (so_comm_buf_alloc), or NULL */
#endif
};

int pipe_glue_check(const so_job_config *c, int world)
{
    int P = c->pipeline_stages, M = c->microbatches > 0 ? c->microbatches : 1;
    int v = c->virtual_stages > 0 ? c->virtual_stages : 1;
    if (v > 1 && (!c->schedule || strcmp(c->schedule, "interleaved")))
        return so_err(SO_EINVAL, "--virtual-stages %d: only with --schedule interleaved", v);
    if (P <= 1)
        return v > 1 ? so_err(SO_EINVAL, "--virtual-stages %d: needs --pipeline-stages", v) : 0;
    if (world < P)
        return so_err(SO_EINVAL, "--pipeline-stages %d: needs at least %d ranks, this job has %d (mpirun -np N)", P, P,
                      world);
    if (world % P)
        return so_err(SO_EINVAL, "--pipeline-stages %d: %d ranks do not split into %d stages x replicas", P, world, P);
    if (c->batch % M)
        return so_err(SO_EINVAL, "--microbatches %d does not divide --batch-size %d", M, c->batch);
    if (c->accumulate > 1)
        return so_err(SO_EINVAL, "--accumulate with --pipeline-stages: use --microbatches");
    if (so_pipe_schedule_parse(c->schedule ? c->schedule : "1f1b") < 0)
        return so_err(SO_EINVAL, "--schedule: unknown schedule '%s' (gpipe, 1f1b, interleaved)", c->schedule);
    const char *pl = c->placement ? c->placement : "stage-major";
    if (strcmp(pl, "stage-major") && strcmp(pl, "replica-major"))
        return so_err(SO_EINVAL, "--placement: unknown placement '%s' (stage-major, replica-major)", pl);
    return 0;
}

/* stage-major: a replica's stages on neighbouring ranks (one node); replica-major: a stage's replicas. */
static void layout(pipe_glue *g, const so_job_config *c, int rank, int world)
{
    int P = c->pipeline_stages, D = world / P, q;
    if (c->placement && !strcmp(c->placement, "replica-major")) {
        q = rank / D;
        g->replica = rank % D;
    } else {
        q = rank % P;
        g->replica = rank / P;
    }
    g->stage = P - 1 - q;
    g->stages = P;
    g->replicas = D;
}

/* Forward + backward seconds per node at one micro-batch, on a model of
 * its own built from the zoo again (rank 0 only; the ranks take its cuts). */
static int measure(const so_job_config *c, const so_dataset *ds, int microbatch, double *secs, int n)
{
    so_graph *g = NULL;
    so_model *m = NULL;
    so_optim *opt = NULL;
    so_optim_kind kind;
    so_optim_config oc;
    int rc = so_zoo_build(c->model, ds->c, ds->h, ds->w, ds->classes, &g);
    if (!rc)
        rc = so_model_create(g, c->backend, microbatch, (uint64_t)c->seed, &m);
    if (!rc && !(rc = so_optim_parse(c->optimizer, &kind))) {
        so_optim_defaults(&oc, kind);
        rc = so_optim_create(&oc, m->nparams, &opt);
    }
    double *t = calloc(2 * (size_t)n, sizeof *t), other;
    if (!rc && !t)
        rc = so_err(SO_ENOMEM, "out of memory measuring %s", c->model);
    if (!rc)
        rc = parts_measure(m, opt, 1, 3, t, t + n, &other);
    for (int i = 0; !rc && i < n; i++)
        secs[i] = t[i] + t[n + i];
    free(t);
    so_optim_destroy(opt);
    so_model_destroy(m); /* owns g, also when creation failed (so_model_create destroys it then) */
    return rc;
}

/* Would timing the whole model at one micro-batch (what `time` and `auto`
 * do on rank 0) break --max-memory? By the same accounting as a stage. */
static int timing_exceeds_cap(const pipe_glue *g, const so_job_config *c, const so_pipe_costs *costs)
{
    if (c->max_memory <= 0)
        return 0;
    so_pipe_plan whole;
    int start = 0;
    if (so_pipe_plan_init(&whole, g->whole, &start, 1))
        return 0; /* the balancer reports the problem */
    so_pipe_costs one = *costs;
    one.microbatches = 1;
    one.devices = 1;
    double bytes = so_pipe_stage_memory(&whole.stages[0], 0, 1, &one);
    so_pipe_plan_deinit(&whole);
    return bytes > c->max_memory;
}

/* Per-node forward FLOPs: the time proxy when the layers cannot be timed. */
static void flops_as_seconds(const so_graph *gr, double *secs, int n)
{
    for (int i = 0; i < n; i++)
        secs[i] = so_node_flops(gr, i);
}

/* Per-node costs for the time and auto balancers: measured, or FLOPs when
 * measuring would not fit the cap (auto only; `time` insists on timing). */
static int node_costs(pipe_glue *g, const so_job_config *c, const so_dataset *ds, const char *how,
                      const so_pipe_costs *costs, double *secs, int n)
{
    if (!strcmp(how, "auto") && timing_exceeds_cap(g, c, costs)) {
        flops_as_seconds(g->whole, secs, n);
        g->cuts_basis = "FLOPs within --max-memory (timing the whole model at one micro-batch would exceed it)";
        return 0;
    }
    g->cuts_basis = c->max_memory > 0 && !strcmp(how, "auto") ? "measured time within --max-memory" : "measured time";
    return measure(c, ds, g->microbatch, secs, n);
}

/* Stage starts by --partition: a list, or a balancer over measured time
 * (FLOPs under a cap too tight to time the model) or memory. */
static int choose_cuts(pipe_glue *g, const so_job_config *c, const so_dataset *ds, int *first)
{
    const char *how = c->partition ? c->partition : "auto";
    int P = g->stages * g->chunks, n = so_graph_size(g->whole);
    if (strcmp(how, "auto") && strcmp(how, "time") && strcmp(how, "memory")) {
        int got = 0;
        int rc = so_pipe_parse_list(g->whole, how, first, P, &got);
        if (rc)
            return so_err(SO_EINVAL, "--partition: %s", so_errmsg());
        if (got != P)
            return so_err(SO_EINVAL, "--partition: %d stage starts for --pipeline-stages %d%s (%d stages)", got,
                          g->stages, g->chunks > 1 ? " x --virtual-stages" : "", P);
        g->cuts_basis = "--partition's list";
        return 0;
    }
    so_pipe_costs costs = {.microbatch = g->microbatch, .microbatches = g->microbatches, .schedule = g->schedule,
                           .devices = g->stages, .optim_slots = 1};
    double *secs = NULL;
    int rc = 0;
    g->cuts_basis = "memory";
    if (strcmp(how, "memory")) {
        if (!(secs = calloc((size_t)n, sizeof *secs)))
            return so_err(SO_ENOMEM, "out of memory");
        rc = node_costs(g, c, ds, how, &costs, secs, n);
        costs.seconds = secs;
    }
    so_pipe_balance_kind kind = !strcmp(how, "memory") ? SO_PIPE_BY_MEMORY : SO_PIPE_BY_TIME;
    if (!strcmp(how, "auto") && c->max_memory > 0) {
        kind = SO_PIPE_BY_AUTO;
        costs.max_bytes = (size_t)c->max_memory;
    }
    if (!rc && (rc = so_pipe_balance(g->whole, P, kind, &costs, first)) && kind == SO_PIPE_BY_AUTO) {
        char why[400];
        snprintf(why, sizeof why, "%s", so_errmsg());
        rc = so_err(SO_EINVAL, "--max-memory: %s", why);
    }
    free(secs);
    return rc;
}

/* The cuts a pipeline's checkpoints were written with, in DIR/partition
 * (the first level of --ckpt-dir, --ckpt-local): measured time differs
 * from run to run, and a resume must cut where the checkpoints did. */
static const char *partition_dir(const so_job_config *c)
{
    return c->ckpt.dir ? c->ckpt.dir : c->ckpt.local;
}

/* Rank 0: the cuts recorded in dir for --resume (1 when found; 0 when none). */
static int read_partition(const char *dir, int P, int *first)
{
    int n, rc = so_pipe_partition_load(dir, first, P + 1, &n);
    if (!rc && n && n != P)
        rc = so_err(SO_EINVAL, "--resume: %s/partition holds the cuts of another pipeline than this one's %d stages",
                    dir, P);
    return rc ? rc : n > 0;
}

/* Rank 0 decides the cuts (the others take them, agree_cuts): those the
 * checkpoints recorded when resuming, else --partition's; it records them
 * when the run writes checkpoints. */
static int rank0_cuts(pipe_glue *g, const so_job_config *c, const so_dataset *ds, int *first)
{
    int S = g->stages * g->chunks, rc = 0;
    char root[4096];
    const char *recorded = partition_dir(c);
    if (c->ckpt.resume && strcmp(c->ckpt.resume, "auto")) /* --resume PATH: the cuts beside its stages */
        recorded = (rc = ckpt_glue_stage_resume(c->ckpt.resume, 0, root, sizeof root, NULL, 0)) ? NULL : root;
    if (!rc && c->ckpt.resume && recorded)
        rc = read_partition(recorded, S, first);
    if (rc < 0)
        return rc;
    if (rc)
        g->cuts_basis = "the checkpoints' partition";
    if (!rc && (rc = choose_cuts(g, c, ds, first)))
        return rc;
    if (!c->ckpt.every || !partition_dir(c) || !(rc = so_pipe_partition_save(partition_dir(c), first, S)))
        return 0;
    char why[4400];
    snprintf(why, sizeof why, "%s", so_errmsg());
    return so_err(SO_EIO, "--ckpt-dir: %s", why);
}

/* Rank 0's cuts on every rank. */
static int agree_cuts(dist_handle *dh, int rank, int *first, int P)
{
    const so_dist *d = dist_get(dh);
    double *v = calloc((size_t)P, sizeof *v);
    if (!v)
        return so_err(SO_ENOMEM, "out of memory");
    for (int s = 0; s < P; s++)
        v[s] = rank == 0 ? first[s] : 0;
    int rc = d->sum(d->ctx, v, P);
    for (int s = 0; s < P; s++)
        first[s] = (int)v[s];
    free(v);
    return rc;
}

#ifdef SCALEOUT_HAVE_MPI
static int link_isend(void *ctx, const void *buf, size_t bytes, int stage, int tag, void **req)
{
    pipe_glue *g = ctx;
    return so_comm_isend(g->pipeline, buf, bytes, g->stages - 1 - stage, tag, (so_comm_req **)req);
}

static int link_irecv(void *ctx, void *buf, size_t bytes, int stage, int tag, void **req)
{
    pipe_glue *g = ctx;
    return so_comm_irecv(g->pipeline, buf, bytes, g->stages - 1 - stage, tag, (so_comm_req **)req);
}

static int link_wait(void *ctx, void *req) { return so_comm_req_wait(((pipe_glue *)ctx)->pipeline, req); }

/* Stages on one node pass tensors through memory both map (pipeline.h),
 * unless SCALEOUT_PIPE_SHARED=0 or the pair talks over the TCP mesh. */
static int link_shares_with(void *ctx, int stage)
{
    pipe_glue *g = ctx;
    int peer = g->stages - 1 - stage, me = g->stages - 1 - g->stage;
    const char *env = getenv("SCALEOUT_PIPE_SHARED");
    if ((env && !strcmp(env, "0")) || !g->node_of || so_comm_p2p_on_tcp(g->pipeline, peer))
        return 0;
    return g->node_of[peer] == g->node_of[me];
}

static int link_share(void *ctx, size_t bytes, void **mine)
{
    pipe_glue *g = ctx;
    *mine = NULL;
    int rc = g->shared ? so_err(SO_EINVAL, "the pipeline's memory is shared already") :
                         so_comm_buf_alloc(g->pipeline, bytes, &g->shared);
    *mine = g->shared;
    return rc;
}

static void *link_peer_memory(void *ctx, int stage, size_t *bytes)
{
    pipe_glue *g = ctx;
    return so_comm_buf_peer(g->pipeline, g->shared, g->stages - 1 - stage, bytes);
}

/* Every pipeline group rank's node id. */
static int learn_nodes(pipe_glue *g)
{
    so_comm_node me;
    so_comm_node_info(g->pipeline, &me);
    int64_t *ids = calloc((size_t)g->stages, sizeof *ids);
    g->node_of = calloc((size_t)g->stages, sizeof *g->node_of);
    if (!ids || !g->node_of) {
        free(ids);
        return so_err(SO_ENOMEM, "out of memory");
    }
    ids[g->stages - 1 - g->stage] = me.node_id;
    int rc = so_comm_allreduce_i64(g->pipeline, ids, (size_t)g->stages, SO_REDUCE_SUM);
    for (int q = 0; q < g->stages; q++)
        g->node_of[q] = (int)ids[q];
    free(ids);
    return rc;
}

/* --sync-bn: batchnorm statistics summed over this stage's replicas. */
static int replica_bn_allsum(void *ctx, double *v, int n)
{
    const so_dist *d = ctx;
    return d->allsum(d->ctx, v, (size_t)n);
}

/* The two groups: this replica's pipeline, this stage's replicas. */
static int open_groups(pipe_glue *g, so_comm *world, const char *allreduce)
{
    int rc = so_comm_split(world, g->replica, g->stages - 1 - g->stage, &g->pipeline);
    if (!rc) /* activations and diffs cross at once both ways: scaleout's TCP between hosts */
        rc = so_comm_p2p_connect(g->pipeline);
    if (!rc)
        rc = learn_nodes(g);
    if (!rc)
        rc = so_comm_split(world, g->stage, g->replica, &g->replica_group);
    return rc || g->replicas < 2 ? rc : dist_open_group(g->replica_group, allreduce, &g->replica_dh);
}
#endif

/* The last error, said of the stages x chunks it is about. */
static int chunks_error(const pipe_glue *g)
{
    char why[400];
    snprintf(why, sizeof why, "%s", so_errmsg());
    return so_err(SO_EINVAL, "--pipeline-stages %d x --virtual-stages %d: %s", g->stages, g->chunks, why);
}

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
    layout(g, c, d->rank, d->world);
    g->chunks = v;
    g->microbatches = c->microbatches > 0 ? c->microbatches : 1;
    g->microbatch = c->batch / g->microbatches;
    g->schedule = (so_pipe_schedule)so_pipe_schedule_parse(c->schedule ? c->schedule : "1f1b");
    g->whole = p->g;
    p->g = NULL;
    int rc = d->rank == 0 ? rank0_cuts(g, c, p->train, first) : 0;
    if (rc == SO_EINVAL && v > 1)
        rc = chunks_error(g);
    if ((rc = dist_agree(dh, rc)) || (rc = agree_cuts(dh, d->rank, first, g->stages * v)))
        goto done;
    if ((rc = so_pipe_plan_init(&g->plan, g->whole, first, g->stages * v)) && v > 1)
        rc = chunks_error(g);
    if (!rc)
        rc = so_pipe_stage_graph(&g->plan, g->stages, g->stage, &p->g, &g->edges);
#ifdef SCALEOUT_HAVE_MPI
    if ((rc = dist_agree(dh, rc)) || (rc = open_groups(g, dist_comm(dh), c->allreduce)))
        goto done;
#endif
    g->shard = *d;
    g->shard.rank = g->replica;
    g->shard.world = g->replicas;
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
    double total = 0;
    for (int i = 0; i < g->edges.nrecv; i++)
        total += 2.0 * g->microbatches * (double)so_model_edge_bytes(m, g->edges.recv[i].node);
    for (int i = 0; i < g->edges.nsend; i++)
        total += 2.0 * g->microbatches * (double)so_model_edge_bytes(m, g->edges.send[i].node);
    return total;
}

void pipe_glue_ckpt_scope(const pipe_glue *g, void **group, int *stage)
{
#ifdef SCALEOUT_HAVE_MPI
    *group = g->replica_group;
#else
    *group = NULL;
#endif
    *stage = g->stage;
}

void pipe_glue_layout(const pipe_glue *g, int *stage, int *stages, int *replica, int *replicas)
{
    *stage = g->stage;
    *stages = g->stages;
    *replica = g->replica;
    *replicas = g->replicas;
}

int pipe_glue_cuts(const pipe_glue *g, int *first, int max, const char **basis)
{
    int n = g->plan.nstages < max ? g->plan.nstages : max;
    for (int s = 0; s < n; s++)
        first[s] = g->plan.first[s];
    *basis = g->cuts_basis ? g->cuts_basis : "";
    return g->plan.nstages;
}

/* The whole model's initial values, and the device's chunks' slices of
 * them: every partition starts from the parameters one process would. */
static int init_slice(pipe_glue *g, so_model *m, uint64_t seed)
{
    size_t np = so_graph_nparams(g->whole), nb = so_graph_nbufs(g->whole), ap = 0, ab = 0;
    float *params = malloc((np ? np : 1) * sizeof *params), *bufs = malloc((nb ? nb : 1) * sizeof *bufs);
    int rc = params && bufs ? 0 : so_err(SO_ENOMEM, "out of memory for the whole model's initial values");
    if (!rc)
        so_graph_init_params_with(g->whole, m->init, seed, params, bufs);
    for (int c = 0; !rc && c < g->edges.nchunks; c++) {
        const so_pipe_chunk *ch = &g->edges.chunks[c];
        size_t cp = ch->param_hi - ch->param_lo, cb = ch->buf_hi - ch->buf_lo;
        if (ap + cp > m->nparams || ab + cb > m->nbufs) {
            rc = so_err(SO_EINVAL, "stage %d: %zu parameters, fewer than its slices of the model", ch->stage,
                        m->nparams);
            break;
        }
        memcpy(m->params + ap, params + ch->param_lo, cp * sizeof *params);
        memcpy(m->bufs + ab, bufs + ch->buf_lo, cb * sizeof *bufs);
        ap += cp;
        ab += cb;
    }
    if (!rc && (ap != m->nparams || ab != m->nbufs))
        rc = so_err(SO_EINVAL, "device %d: %zu parameters, but its slices of the model have %zu", g->stage, m->nparams,
                    ap);
    if (!rc)
        so_model_params_changed(m);
    free(params);
    free(bufs);
    return rc;
}


static int layout_of(void *ctx, int node, const void **desc, size_t *len)
{
    pipe_glue *g = ctx;
    for (int i = 0; i < g->edges.nrecv; i++)
        if (g->edges.recv[i].node == node && g->layouts) {
            *desc = g->layouts[i].desc;
            *len = g->layouts[i].len;
            return 0;
        }
    *len = 0;
    return 0;
}

#ifdef SCALEOUT_HAVE_MPI
/* One round of settle_layouts: a model of this device's graph built with
 * the layouts known so far, its send nodes' layouts sent to their readers
 * (a failure mark when it could not be built) and theirs received into
 * got. *failed = a device that could not build (-1: none). */
static int layout_round(pipe_glue *g, const so_job_config *c, layout_msg *out, layout_msg *got, int *failed)
{
    const so_pipe_stage_edges *e = &g->edges;
    so_graph *dg = NULL;
    so_pipe_stage_edges scratch;
    so_model *m = NULL;
    so_model_opts mo = {.backend = c->backend, .batch = g->microbatch, .seed = (uint64_t)c->seed,
                        .recv_layout = layout_of, .recv_layout_ctx = g};
    int built = so_conv_algo_parse(c->conv_algo ? c->conv_algo : "auto", &mo.conv_algo);
    if (!built)
        built = so_init_parse(c->init ? c->init : "torch", &mo.init);
    if (!built && !(built = so_pipe_stage_graph(&g->plan, g->stages, g->stage, &dg, &scratch))) {
        so_pipe_stage_edges_free(&scratch);
        built = so_model_create_opts(dg, &mo, &m); /* owns dg from here */
    }
    so_comm_req **req = calloc((size_t)e->nsend + 1, sizeof *req);
    int rc = req ? 0 : so_err(SO_ENOMEM, "out of memory");
    for (int i = 0; !rc && i < e->nsend; i++) {
        out[i].ok = built == 0;
        out[i].len = m ? (uint32_t)so_model_edge_layout(m, e->send[i].node, out[i].desc, sizeof out[i].desc) : 0;
        rc = so_comm_isend(g->pipeline, &out[i], sizeof out[i], g->stages - 1 - e->send[i].peer, e->send[i].tag,
                           &req[i]);
    }
    for (int i = 0; !rc && i < e->nrecv; i++) { /* on the point-to-point requests' communicator, like the sends */
        so_comm_req *r = NULL;
        rc = so_comm_irecv(g->pipeline, &got[i], sizeof got[i], g->stages - 1 - e->recv[i].peer, e->recv[i].tag, &r);
        if (!rc)
            rc = so_comm_req_wait(g->pipeline, r);
        if (!rc && !got[i].ok)
            *failed = e->recv[i].peer;
    }
    for (int i = 0; req && i < e->nsend; i++)
        if (req[i]) {
            int w = so_comm_req_wait(g->pipeline, req[i]);
            rc = rc ? rc : w;
        }
    free(req);
    so_model_destroy(m);
    return built ? built : rc;
}

/* Interleaved: devices send to each other both ways, so the layouts cannot
 * pass down the pipeline once (take, build, give). Each device builds its
 * model with the layouts known so far (plain at first), sends what its
 * send nodes produce and receives the others', until no layout changes on
 * any device; a stage's layouts depend only on earlier stages', so this
 * ends within the plan's stages + 1 rounds. */
static int settle_layouts(pipe_glue *g, const so_job_config *c, dist_handle *dh)
{
    const so_dist *d = dist_get(dh);
    int ne = g->edges.nsend, rc = 0;
    layout_msg *out = calloc((size_t)ne + 1, sizeof *out), *got = calloc((size_t)g->edges.nrecv + 1, sizeof *got);
    if (!out || !got)
        rc = so_err(SO_ENOMEM, "out of memory");
    for (int round = 0; !rc; round++) {
        int failed = -1;
        rc = layout_round(g, c, out, got, &failed);
        if (!rc && failed >= 0)
            rc = so_err(SO_ECOMM, "pipeline device %d could not build its model (see its message)", failed);
        double changed = 0;
        for (int i = 0; !rc && i < g->edges.nrecv; i++)
            changed += got[i].len != g->layouts[i].len || memcmp(got[i].desc, g->layouts[i].desc, got[i].len);
        if (!rc)
            memcpy(g->layouts, got, (size_t)g->edges.nrecv * sizeof *got);
        if ((rc = dist_agree(dh, rc)) || (rc = d->sum(d->ctx, &changed, 1)) || changed == 0)
            break;
        if (round > g->stages * g->chunks)
            rc = so_err(SO_ECOMM, "the pipeline's tensor layouts did not settle in %d rounds", round);
    }
    free(out);
    free(got);
    return rc;
}
#endif

int pipe_glue_take_layouts(pipe_glue *g, const so_job_config *c, dist_handle *dh, job_parts *p)
{
    int rc = 0, failed = -1;
    g->layouts = calloc((size_t)g->edges.nrecv + 1, sizeof *g->layouts);
    if (!g->layouts)
        return so_err(SO_ENOMEM, "out of memory");
    p->recv_layout = layout_of;
    p->recv_layout_ctx = g;
#ifdef SCALEOUT_HAVE_MPI
    if (g->chunks > 1)
        return settle_layouts(g, c, dh);
    for (int i = 0; i < g->edges.nrecv; i++) {
        const so_pipe_edge *e = &g->edges.recv[i];
        int r = so_comm_recv_bytes(g->pipeline, &g->layouts[i], sizeof *g->layouts, g->stages - 1 - e->peer, e->tag);
        rc = rc ? rc : r;
        if (!r && !g->layouts[i].ok)
            failed = e->peer;
    }
#else
    (void)c, (void)dh;
#endif
    if (!rc && failed >= 0)
        rc = so_err(SO_ECOMM, "stage %d could not build its model (see its message)", failed);
    return rc;
}

int pipe_glue_give_layouts(pipe_glue *g, const job_parts *p)
{
    int rc = 0;
#ifdef SCALEOUT_HAVE_MPI
    if (g->chunks > 1) /* settled before the build (settle_layouts) */
        return 0;
    layout_msg *msg = calloc(1, sizeof *msg);
    if (!msg)
        return so_err(SO_ENOMEM, "out of memory");
    for (int i = 0; i < g->edges.nsend; i++) {
        const so_pipe_edge *e = &g->edges.send[i];
        msg->ok = p->m != NULL;
        msg->len = p->m ? (uint32_t)so_model_edge_layout(p->m, e->node, msg->desc, sizeof msg->desc) : 0;
        int r = so_comm_send_bytes(g->pipeline, msg, sizeof *msg, g->stages - 1 - e->peer, e->tag);
        rc = rc ? rc : r;
    }
    free(msg);
#else
    (void)g, (void)p;
#endif
    return rc;
}

int pipe_glue_start(pipe_glue *g, const so_job_config *c, dist_handle *dh, job_parts *p, so_train_config *tc)
{
    int rc = init_slice(g, p->m, (uint64_t)c->seed);
    if (!rc) /* now, not at the first step: the memory accounting counts every micro-batch in flight */
        rc = so_model_set_slots(p->m, so_pipe_slots(g->schedule, g->stage, g->stages, g->microbatches, g->chunks));
    if ((rc = dist_agree(dh, rc)))
        return rc;
#ifdef SCALEOUT_HAVE_MPI
    const so_dist *rd = g->replicas > 1 ? dist_get(g->replica_dh) : NULL;
    if (rd && (rc = so_strategy_data_parallel(rd, &g->dp)))
        return rc;
    so_pipe_config pc = {.schedule = g->schedule, .microbatches = g->microbatches,
                         .link = {g, link_isend, link_irecv, link_wait, link_shares_with, link_share, link_peer_memory}, .replicas = g->dp,
                         .nreplicas = g->replicas, .bn_allsum = rd ? replica_bn_allsum : NULL,
                         .bn_allsum_arg = (void *)rd};
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

int pipe_glue_gather_params(pipe_glue *g, const so_model *m, float **out, size_t *n)
{
    *out = NULL;
    *n = 0;
#ifdef SCALEOUT_HAVE_MPI
    if (g->replica != 0)
        return 0;
    size_t *sizes = calloc((size_t)g->stages, sizeof *sizes);
    void *all = NULL;
    int rc = sizes ? so_comm_gather_bytes(g->pipeline, m->params, m->nparams * sizeof(float), 0, &all, sizes)
                   : so_err(SO_ENOMEM, "out of memory");
    if (!rc && all) { /* group rank q holds device P - 1 - q: put the devices back in order */
        size_t total = 0;
        for (int q = 0; q < g->stages; q++)
            total += sizes[q];
        char *devices = malloc(total ? total : 1), *src = all;
        float *whole = malloc(total ? total : 1);
        size_t at = total;
        for (int q = 0; devices && q < g->stages; q++) {
            at -= sizes[q];
            memcpy(devices + at, src, sizes[q]);
            src += sizes[q];
        }
        rc = devices && whole ? 0 : so_err(SO_ENOMEM, "out of memory for the whole model's parameters");
        if (!rc)
            rc = so_pipe_model_order(&g->plan, g->stages, 0, (float *)devices, total / sizeof(float), whole);
        if (!rc) {
            *out = whole;
            *n = total / sizeof(float);
        } else
            free(whole);
        free(devices);
    }
    free(all);
    free(sizes);
    return rc;
#else
    (void)g, (void)m;
    return 0;
#endif
}

/* The step of a pipeline whose devices take busy[s] / M per micro-batch
 * (per chunk and micro-batch when interleaved: M = v x micro-batches): the
 * first passes every device, the other M - 1 follow at the slowest
 * device's pace (equal devices: (M + P - 1) u, the formula's step). */
static double pipeline_step(const double *busy, int P, int M)
{
    double sum = 0, slowest = 0;
    for (int s = 0; s < P; s++) {
        sum += busy[s] / M;
        slowest = busy[s] / M > slowest ? busy[s] / M : slowest;
    }
    return sum + (M - 1) * slowest;
}

int pipe_glue_bubble(pipe_glue *g, dist_handle *dh, int skip, so_train_result *r)
{
    const so_dist *d = dist_get(dh);
    long from = r->nstep_seconds > skip ? skip : 0;
    double v[2] = {r->pipe_busy, 0};
    for (long i = from; i < r->nstep_seconds; i++)
        v[1] += r->step_seconds[i];
    if (from == 0) /* a run shorter than the warm-up: the busy time was not counted either */
        v[0] = v[1] = 0;
    int rc = d->sum(d->ctx, v, 2);
    r->pipe_bubble = v[1] > 0 ? 1 - v[0] / v[1] : 0;
    r->pipe_bubble_formula = so_pipe_bubble(g->schedule, g->stages, g->microbatches, g->chunks);
    free(g->stage_mem);
    g->stage_mem = calloc(STAGE_FIELDS * (size_t)g->stages, sizeof *g->stage_mem);
    double *busy = calloc((size_t)g->stages, sizeof *busy);
    if (!g->stage_mem || !busy) {
        free(busy);
        return rc ? rc : so_err(SO_ENOMEM, "out of memory");
    }
    double *mine = g->stage_mem + STAGE_FIELDS * g->stage;
    mine[ST_ACT] = (double)r->pipe_act_bytes;
    mine[ST_EDGE] = (double)r->pipe_edge_bytes;
    mine[ST_BUSY] = from > 0 ? r->pipe_busy / (double)(r->nstep_seconds - from) : 0;
    if (!rc)
        rc = d->max(d->ctx, g->stage_mem, STAGE_FIELDS * g->stages);
    double busy_sum = 0;
    for (int s = 0; s < g->stages; s++)
        busy_sum += busy[s] = g->stage_mem[STAGE_FIELDS * s + ST_BUSY];
    double step = pipeline_step(busy, g->stages, g->microbatches * g->chunks);
    r->pipe_bubble_stages = step > 0 ? 1 - busy_sum / (g->stages * step) : 0;
    free(busy);
    return rc;
}

int pipe_glue_stage_memory(const pipe_glue *g, int stage, double *act_bytes, double *edge_bytes)
{
    if (!g->stage_mem || stage < 0 || stage >= g->stages)
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
    so_comm_finalize(g->replica_group);
    so_comm_finalize(g->pipeline); /* and g->shared with it */
    free(g->node_of);
#endif
    free(g->layouts);
    free(g->stage_mem);
    so_pipe_stage_edges_free(&g->edges);
    so_pipe_plan_deinit(&g->plan);
    so_graph_destroy(g->whole);
    free(g);
}
