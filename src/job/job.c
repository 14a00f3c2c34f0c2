/* so_job (scaleout/job.h): the set-up of a training run in the one order that
 * is safe across ranks -- MPI, data and graph, agreement, the collective
 * gradient buffer, --init-from's values and the strategy, agreement,
 * configuration check, checkpoint restore, stop channel, profiler -- then the
 * trainer with the observers in a fixed order, then the collective ends of
 * the checkpoints and the profile. */
#include "scaleout/job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckpt_glue.h"
#include "core/test_hooks.h"
#include "dist.h"
#include "parts.h"
#include "pipe_glue.h"
#include "prof_glue.h"
#include "stop.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"
#include "scaleout/threads.h"
#include "scaleout/sync.h"
#include "scaleout/zoo.h"

struct so_job {
    so_job_config cfg;
    dist_handle *dh;
    job_parts parts;
    so_train_config tc;
    so_train_hooks hooks;        /* the observers below, in their order */
    pipe_glue *pipe;             /* pipeline stages (NULL: the whole model on every rank) */
    ckpt_glue *ckpt;
    stop_state *stop;
    prof_glue *prof;
    const so_dist *dist;         /* what the trainer uses (timed by the profiler) */
    so_job_ckpt_summary ckpt_summary;
    uint64_t op_cursor;          /* the communication thread's operation log, read up to here */
    double strategy_comm;        /* seconds of the sharded strategies' collectives in it */
    int ckpt_done;
    char config[2048];
    double slow_fraction;        /* SCALEOUT_TEST_SLOW_RANK: this rank sleeps this fraction of its compute */
    double slow_compute;         /* forward and backward seconds of the step so far */
};

void so_job_defaults(so_job_config *c)
{
    *c = (so_job_config){.model = "lenet5", .dataset = "fashion-mnist",
                         .data_dir = "/usr/share/datasets/fashion-mnist", .batch = 64, .prefetch = 4, .seed = 42,
                         .backend = "onednn", .conv_algo = "auto", .precision = "fp32", .threads = 1, .pin_threads = 1,
                         .optimizer = "momentum", .lr = 0.01f, .momentum = 0.9f, .lr_schedule = "constant",
                         .lr_step_epochs = 30, .lr_gamma = 0.1f, .epochs = 1, .eval_every = 1, .accumulate = 1,
                         .warmup_steps = 10, .strategy = "dp", .shard_prefetch = 2, .shard_gather = "fp32", .shard_group = "all", .allreduce = "auto", .bucket_mb = 25, .first_bucket_mb = 1,
                         .compress = "none", .error_feedback = -1,
                         .sync = "sync", .outer_lr = 0.7f, .outer_momentum = 0.9f, .ps_ranks = 1,
                         .overlap = 1, .stall_warning_s = 60, .comm_timeout_s = 300, .microbatches = 1,
                         .schedule = "1f1b", .partition = "auto", .placement = "stage-major",
                         .ckpt = {.mode = "scaleout", .on_error = "continue", .keep = 2, .flush_every = 10},
                         .prof = {.detail = "layer", .steps = "0:30"}, .seq_len = 64, .shuffle = "on",
                         .image = {.image_size = 224, .scale_min = 0.08f, .scale_max = 1.0f, .label_offset = 1,
                                   .decode_threads = 1, .dct_scale = "train"},
                         .init = "torch"};
}

/* Everything that must be equal on all ranks, as key=value lines; the
 * ranks compare it at start-up and the first differing key is reported. */
static void config_text(const so_job_config *a, const so_graph *g, char *buf, size_t len)
{
    so_shape in = so_graph_input_shape(g);
    char bucket[32];
    if (a->bucket_mb < 0)
        snprintf(bucket, sizeof bucket, "auto");
    else
        snprintf(bucket, sizeof bucket, "%g", a->bucket_mb);
    snprintf(buf, len,
             "version=%s\nmodel=%s\ninput=%dx%dx%d\nclasses=%d\nparams=%zu\nbackend=%s\nconv_algo=%s\ndataset=%s\n"
             "batch=%d\nepochs=%d\nsteps=%ld\noptimizer=%s\nlr=%g\nmomentum=%g\nweight_decay=%g\n"
             "schedule=%s\nwarmup_epochs=%g\nseed=%ld\naccumulate=%d\naugment=%d\nsync_bn=%d\n"
             "bucket_mb=%s\nfirst_bucket_mb=%g\nallreduce=%s\noverlap=%d\npipeline_stages=%d\nmicrobatches=%d\n"
             "pipeline_schedule=%s\nvirtual_stages=%d\npartition=%s\nplacement=%s\nmax_memory=%.0f\n"
             "clip_norm=%g\nstrategy=%s\nshard_unit=%s\nshard_prefetch=%d\nshard_gather=%s\nshard_group=%s\n"
             "compress=%s\nerror_feedback=%d\n",
             SCALEOUT_VERSION, a->model, in.c, in.h, in.w, so_graph_classes(g), so_graph_nparams(g), a->backend,
             a->conv_algo, a->dataset, a->batch, a->epochs, a->steps, a->optimizer, a->lr, a->momentum,
             a->weight_decay, a->lr_schedule, a->warmup_epochs, a->seed, a->accumulate, a->augment, a->sync_bn,
             bucket, a->first_bucket_mb, a->allreduce, a->overlap, a->pipeline_stages, a->microbatches,
             a->schedule ? a->schedule : "", a->virtual_stages > 1 ? a->virtual_stages : 1, a->partition ? a->partition : "", a->placement ? a->placement : "",
             a->max_memory, (double)a->clip_norm, a->strategy ? a->strategy : "dp",
             a->shard_unit ? a->shard_unit : "", a->shard_prefetch, a->shard_gather ? a->shard_gather : "fp32",
             a->shard_group ? a->shard_group : "all",
             a->compress ? a->compress : "none", a->error_feedback);
    size_t used = strlen(buf);
    if (used < len)
        snprintf(buf + used, len - used, "shuffle=%s\neval_batches=%d\n", a->shuffle ? a->shuffle : "on",
                 a->eval_batches);
    used = strlen(buf);
    if (used < len)
        snprintf(buf + used, len - used, "init=%s\nimage=%d/%d/%g-%g/%d/%d/%s/%d/%d\n", a->init ? a->init : "torch",
                 a->image.image_size, a->image.resize, a->image.scale_min, a->image.scale_max,
                 a->image.label_offset, a->image.no_augment, a->image.dct_scale ? a->image.dct_scale : "",
                 a->image.strict, a->image.stage_local != NULL);
}

static int train_config(const so_job_config *a, so_loader *train, int world, so_train_config *c)
{
    so_train_defaults(c);
    long spe = so_loader_steps(train) / a->accumulate;
    c->epochs = a->epochs;
    c->steps = a->steps;
    c->eval_every = a->eval_every;
    c->eval_steps = a->eval_steps;
    c->accumulate = a->accumulate;
    c->clip_norm = a->clip_norm;
    c->error_feedback = a->error_feedback;
    c->compress_seed = (uint64_t)a->seed;
    if (so_compress_parse(a->compress ? a->compress : "none", &c->compress))
        return so_err(SO_EINVAL, "%s", so_errmsg());
    c->throughput_skip = a->warmup_steps;
    c->overlap = a->overlap;
    c->sync_bn = a->sync_bn;
    c->allow_nonfinite = a->allow_nonfinite;
    c->auto_buckets = a->bucket_mb < 0;
    c->bucket_bytes = (size_t)((c->auto_buckets ? 25 : a->bucket_mb) * 1048576.0);
    c->first_bucket_bytes = (size_t)(a->first_bucket_mb * 1048576.0);
    if (so_lr_parse(a->lr_schedule, &c->lr.kind))
        return so_err(SO_EINVAL, "--lr-schedule: unknown schedule '%s' (constant, step, cosine)", a->lr_schedule);
    c->lr.base_lr = a->lr * (a->scale_lr ? (float)world : 1.0f);
    c->lr.warmup_steps = (long)(a->warmup_epochs * spe);
    c->lr.warmup_start = 1.0f / (float)(world > 1 ? world : 10);
    c->lr.step_size = (long)(a->lr_step_epochs * spe);
    if (c->lr.step_size < 1)
        c->lr.step_size = 1;
    c->lr.gamma = a->lr_gamma;
    c->lr.total_steps = a->steps ? a->steps : (long)a->epochs * spe;
    return 0;
}

/* ---- the observers, in order ---------------------------------------------------
 * span: profiler, then the caller. step_end: the stop agreement first (so the
 * checkpoint sees its request at this very step), the checkpoint, then the
 * caller. before_update: the checkpoint, then the caller. */

static void on_span(void *arg, so_span_kind kind, long step, int id, double t0, double t1)
{
    so_job *j = arg;
    prof_glue_span(j->prof, kind, step, id, t0, t1);
    if (kind == SO_SPAN_FORWARD || kind == SO_SPAN_BACKWARD)
        j->slow_compute += t1 - t0;
    const so_train_hooks *u = j->cfg.hooks;
    if (u && u->span)
        u->span(u->arg, kind, step, id, t0, t1);
}

/* The sharded strategies' collectives, from the communication thread's log
 * (their tags from SO_STRATEGY_TAG): read at every step end, since the log
 * keeps the last 4096 operations. */
static void read_op_log(so_job *j)
{
#ifdef SCALEOUT_HAVE_MPI
    so_op_stat st[256];
    size_t n;
    while (dist_comm(j->dh) && (n = so_comm_op_log(&j->op_cursor, st, 256)) > 0)
        for (size_t i = 0; i < n; i++)
            if (st[i].tag >= SO_STRATEGY_TAG)
                j->strategy_comm += st[i].t_finished - st[i].t_started;
#else
    (void)j;
#endif
}

static int on_step_end(void *arg, const so_train_state *s)
{
    so_job *j = arg;
    read_op_log(j);
    int stop = 0, rc = stop_step_end(j->stop, s, &stop);
    if (rc)
        return rc;
    if (stop)
        ckpt_glue_request(j->ckpt);
    if ((rc = ckpt_glue_step_end(j->ckpt, s)))
        return rc;
    const so_train_hooks *u = j->cfg.hooks;
    if (u && u->step_end && (rc = u->step_end(u->arg, s)))
        return rc;
    if (!stop)
        return 0;
    stop_mark(j->stop, s->step);
    return SO_STOP;
}

/* The test-only straggler: sleep the fraction of this step's compute. */
static void slow_down(so_job *j)
{
    double s = j->slow_fraction * j->slow_compute;
    j->slow_compute = 0;
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static int on_before_update(void *arg)
{
    so_job *j = arg;
    slow_down(j);
    int rc = ckpt_glue_before_update(j->ckpt);
    const so_train_hooks *u = j->cfg.hooks;
    return rc ? rc : u && u->before_update ? u->before_update(u->arg) : 0;
}

/* ---- set-up --------------------------------------------------------------------- */

/* After parts_build failed on some rank (collective: every rank calls it
 * with the agreed failure). A bad --init-from file is read by every rank:
 * when rank 0 refused it too, rank 0 says it and the others keep quiet; a
 * rank that alone found its file bad (another node's copy, a stage's
 * tensors) says its own. */
static void quiet_init_refusal(so_job *j)
{
    const so_dist *d = dist_get(j->dh);
    if (!d)
        return;
    double rank0_refused = d->rank == 0 && j->parts.init_refused;
    if (d->max(d->ctx, &rank0_refused, 1) == 0 && rank0_refused > 0 && d->rank != 0 && j->parts.init_refused)
        dist_mark_elsewhere(j->dh);
}

/* Model, optimizer and loaders for config c, sharded by d; then the
 * trainer's configuration for `world` data-parallel ranks. */
static int build_parts(so_job *j, const so_job_config *c, const so_dist *d, int world)
{
    int rc = parts_build(c, d, &j->parts);
    if (!rc)
        rc = train_config(c, j->parts.ltrain, world, &j->tc);
    j->tc.strategy = j->parts.strategy;
    if (!(rc = dist_agree(j->dh, rc)))
        return 0;
    quiet_init_refusal(j);
    if (j->parts.strategy_refused && d && d->rank != 0)
        dist_mark_elsewhere(j->dh); /* rank 0 says it */
    return rc;
}

/* A pipeline stage: the model is the stage's slice at the micro-batch size,
 * the loaders are the replica's shard, and the step is M micro-batches. */
static int build_stage(so_job *j)
{
    int stage, stages, replica, replicas;
    pipe_glue_layout(j->pipe, &stage, &stages, &replica, &replicas);
    so_job_config c = j->cfg;
    c.batch = pipe_glue_microbatch(j->pipe);
    c.accumulate = c.microbatches;
    int rc = pipe_glue_take_layouts(j->pipe, &c, j->dh, &j->parts);
    if (!rc)
        rc = parts_build(&c, pipe_glue_shard(j->pipe), &j->parts);
    int sent = pipe_glue_give_layouts(j->pipe, &j->parts);
    rc = rc ? rc : sent;
    if (!rc)
        rc = train_config(&c, j->parts.ltrain, replicas, &j->tc);
    if ((rc = dist_agree(j->dh, rc))) {
        quiet_init_refusal(j);
        return rc;
    }
    return dist_agree(j->dh, pipe_glue_start(j->pipe, &j->cfg, j->dh, &j->parts, &j->tc));
}

/* The strategy's name and options (the sharded strategies' checks that
 * need the model come when they are made, parts_build). */
/* Checkpoints asked for in the naive mode, where rank 0 writes one model:
 * the relaxed-consistency strategies' ranks each hold their own state. */
static int ckpt_naive(const so_job_config *c)
{
    return c->ckpt.mode && !strcmp(c->ckpt.mode, "naive") && (c->ckpt.every || c->ckpt.resume);
}

/* ssp and async (the parameter server, strategy_ps.c): what it cannot run
 * beside. --ps-ranks against the world size is checked when it is made. */
static int check_ps(const so_job_config *c)
{
    so_compress_spec cs;
    int rc = so_compress_parse(c->compress ? c->compress : "none", &cs);
    const char *with = rc ? NULL : cs.method != SO_COMPRESS_NONE ? "--compress" : c->clip_norm > 0 ? "--clip-norm"
                       : c->sync_bn ? "--sync-bn" : ckpt_naive(c) ? "--ckpt-mode naive (use scaleout)" : NULL;
    if (rc || !with)
        return rc;
    return so_err(SO_EINVAL, "--sync %s runs a parameter server, which does not take %s yet", c->sync, with);
}

/* local, diloco, gossip: what they cannot run with. The ranks' models (and
 * optimizer states) differ between averages: each rank checkpoints its own
 * (docs/CHECKPOINT.md), which the naive mode's single writer cannot. */
static int check_sync_local(const so_job_config *c)
{
    so_compress_spec cs;
    if (!so_compress_parse(c->compress ? c->compress : "none", &cs) && cs.method != SO_COMPRESS_NONE)
        return so_err(SO_EINVAL, "--sync %s averages models, not gradient buckets: no --compress %s with it",
                      c->sync, c->compress);
    if (c->sync_bn)
        return so_err(SO_EINVAL, "--sync %s steps each rank alone: --sync-bn would make every forward collective",
                      c->sync);
    if (ckpt_naive(c))
        return so_err(SO_EINVAL, "--sync %s: each rank checkpoints its own model, which --ckpt-mode naive (rank 0 "
                      "writes one model) does not hold: use --ckpt-mode scaleout", c->sync);
    return 0;
}

/* --sync: the grammar, and the strategies each method can run beside. */
static int check_sync(const so_job_config *c, const so_strategy_kind *k)
{
    so_sync_spec ss;
    int rc = so_sync_parse(c->sync ? c->sync : "sync", &ss);
    if (rc || ss.method == SO_SYNC_SYNC)
        return rc;
    if (k->zero_stage)
        return so_err(SO_EINVAL, "--sync %s runs under --strategy dp only: %s shards the state it would average",
                      c->sync, k->name);
    if (c->pipeline_stages > 1)
        return so_err(SO_EINVAL, "--sync %s runs under data parallelism only, not with --pipeline-stages %d", c->sync,
                      c->pipeline_stages);
    if (so_sync_uses_ps(&ss))
        return check_ps(c);
    if (ss.method == SO_SYNC_LOCAL || ss.method == SO_SYNC_DILOCO || ss.method == SO_SYNC_GOSSIP)
        return check_sync_local(c);
    return 0;
}

static int check_strategy(const so_job_config *c)
{
    const so_strategy_kind *k;
    int rc = so_strategy_lookup(c->strategy ? c->strategy : "dp", &k);
    if (rc)
        return rc;
    if (c->pipeline_stages > 1 && strcmp(k->name, "dp"))
        return so_err(SO_EINVAL, "--strategy %s: pipeline stages average their replicas with dp only "
                      "(no --pipeline-stages with a sharded strategy yet)", k->name);
    if (c->shard_group && strcmp(c->shard_group, "all") && strcmp(c->shard_group, "node"))
        return so_err(SO_EINVAL, "--shard-group: '%s' is not all or node", c->shard_group);
    if (c->shard_prefetch < 1)
        return so_err(SO_EINVAL, "--shard-prefetch %d must be >= 1", c->shard_prefetch);
    so_dtype gather;
    if ((rc = parts_gather_wire(c, &gather)))
        return rc;
    if (gather != SO_DTYPE_F32 && strcmp(k->name, "zero3"))
        return so_err(SO_EINVAL, "--shard-gather %s with --strategy %s: only zero3 gathers parameters into "
                      "buffers of their own (zero1/2 gather into the FP32 weights the optimizer steps)",
                      c->shard_gather, k->name);
    so_compress_spec cs;
    if ((rc = so_compress_parse(c->compress ? c->compress : "none", &cs)))
        return rc;
    so_dtype wire;
    if (k->zero_stage && (rc = so_strategy_zero_wire(&cs, c->error_feedback, k->name, &wire)))
        return rc;
    if (cs.method != SO_COMPRESS_NONE && c->pipeline_stages > 1)
        return so_err(SO_EINVAL, "--compress %s runs under data parallelism only: --pipeline-stages %d sends "
                      "activations between stages, not bucketed gradients", c->compress, c->pipeline_stages);
    if (!strcmp(k->name, "ps") && !(c->sync && (!strncmp(c->sync, "ssp", 3) || !strcmp(c->sync, "async"))))
        return so_err(SO_EINVAL, "--strategy ps is the parameter server of --sync ssp:S or async: give --sync instead");
    if ((rc = check_sync(c, k)))
        return rc;
    if (k->zero_stage && (c->ckpt.every || c->ckpt.resume) && c->ckpt.mode && !strcmp(c->ckpt.mode, "naive"))
        return so_err(SO_EINVAL, "--ckpt-mode naive writes the whole state from rank 0, which --strategy %s does not "
                      "hold there: use --ckpt-mode scaleout", k->name);
    return 0;
}

/* The strategy decides whether the gradient buffer is a collective
 * allocation, so every rank must run the same one before the model is made
 * (the configuration check comes after it). */
static int agree_strategy(so_job *j)
{
    const so_dist *d = dist_get(j->dh);
    const so_strategy_kind *k = NULL;
    if (!d || so_strategy_lookup(j->cfg.strategy ? j->cfg.strategy : "dp", &k))
        return 0;
    int mine = 0;
    while (so_strategy_kind_at(mine) != k)
        mine++;
    double v[2] = {mine, -mine};
    int rc = d->max(d->ctx, v, 2);
    if (rc || v[0] == -v[1])
        return rc;
    if (d->rank != 0)
        dist_mark_elsewhere(j->dh);
    return so_err(SO_EINVAL, "configuration mismatch: the ranks were started with different --strategy");
}

/* Data, graph and model, with the ranks' agreement before and after the
 * collective gradient allocation (parts.h). */
static int build(so_job *j)
{
    const so_job_config *c = &j->cfg;
    char why[512];
    int rc = so_zoo_check(c->model);
    if (rc) { /* re-issued from a copy: so_err formats into so_errmsg()'s buffer */
        snprintf(why, sizeof why, "%s", so_errmsg());
        rc = so_err(SO_EINVAL, "--model: %s (see `scaleout models`)", why);
    }
    if (!rc)
        rc = check_strategy(c);
    so_sync_spec ss;
    if (!rc && !so_sync_parse(c->sync ? c->sync : "sync", &ss) && so_sync_uses_ps(&ss))
        j->cfg.strategy = "ps"; /* ssp, async: the parameter server's strategy (strategy_ps.c) */
    if (!rc && c->accumulate < 1)
        rc = so_err(SO_EINVAL, "--accumulate %d must be >= 1", c->accumulate);
    if (!rc)
        rc = pipe_glue_check(c, so_job_world(j));
    int flags = rc; /* the flags alone: every rank finds the same */
    if (!rc)
        rc = so_threads_set(c->threads, c->pin_threads);
    if (!rc)
        rc = parts_load(c, &j->parts);
    if ((rc = dist_agree(j->dh, rc))) {
        if (flags && so_job_rank(j) != 0)
            dist_mark_elsewhere(j->dh); /* rank 0 says it */
        return rc;
    }
    if ((rc = agree_strategy(j)))
        return rc;
    j->dist = dist_get(j->dh);
    if ((rc = dist_agree(j->dh, pipe_glue_open(c, j->dh, &j->parts, &j->pipe))))
        return rc;
    return j->pipe ? build_stage(j) : build_parts(j, c, j->dist, so_job_world(j));
}

/* The profiler's view of this rank's stage and the schedule (its lanes in profile.json). */
static void profile_pipeline(so_job *j)
{
    prof_sched_layout l = {.microbatches = j->cfg.microbatches,
                           .chunks = j->cfg.virtual_stages > 1 ? j->cfg.virtual_stages : 1};
    snprintf(l.schedule, sizeof l.schedule, "%s", j->cfg.schedule ? j->cfg.schedule : "");
    pipe_glue_layout(j->pipe, &l.stage, &l.stages, &l.replica, &l.replicas);
    prof_glue_pipeline(j->prof, &l);
    prof_glue_layer_order(j->prof, pipe_glue_whole(j->pipe));
}

static int observers(so_job *j)
{
    const so_job_config *c = &j->cfg;
    const so_strategy *st = j->parts.strategy;
    ckpt_scope scope = {NULL, -1, st && st->ops->state ? st->ops->state(st->self) : NULL,
                        st && st->ops->rank_state ? st->ops->rank_state(st->self) : NULL};
    if (j->pipe)
        pipe_glue_ckpt_scope(j->pipe, &scope.group, &scope.stage);
    int rc = ckpt_glue_open(&c->ckpt, j->dh, &scope, j->parts.m, j->parts.opt, c->model, c->optimizer, j->config,
                            &j->tc, &j->ckpt);
    if (rc)
        return rc;
    if ((rc = dist_agree(j->dh, stop_open(j->dh, st ? st->lead : 0, &j->stop))))
        return rc;
    if ((rc = prof_glue_start(&c->prof, c->allreduce, c->build_id, j->dh, j->parts.m, &j->prof)))
        return rc;
    j->dist = prof_glue_dist(j->prof, j->dist);
    if (j->prof && j->pipe)
        profile_pipeline(j);
    if (j->prof) {
        ckpt_glue_set_span(j->ckpt, prof_glue_checkpoint_span, j->prof);
        ckpt_glue_set_io(j->ckpt, prof_glue_checkpoint_io, j->prof); /* the writer and flush threads' work */
    }
    j->slow_fraction = so_test_slow_rank(so_job_rank(j));
    j->hooks = (so_train_hooks){j, on_span, on_step_end, on_before_update};
    j->tc.hooks = &j->hooks;
    return 0;
}

void so_job_memory_use(const so_job *j, so_job_memory *out)
{
    const so_model *m = j->parts.m;
    double p = (double)m->nparams * sizeof(float);
    so_strategy_memory sm = {.params = p, .grads = p, .optimizer = p * so_optim_nslots(j->parts.opt)};
    if (j->parts.strategy)
        so_strategy_memory_use(j->parts.strategy, m, &sm);
    *out = (so_job_memory){.params = sm.params, .grads = sm.grads, .optimizer = sm.optimizer,
                           .activations = (double)so_model_activation_bytes(m),
                           .messages = sm.messages + (j->pipe ? pipe_glue_message_bytes(j->pipe, j->parts.m) : 0),
                           .slots = m->slots ? m->nslots : 1};
    out->total = out->params + out->grads + out->optimizer + out->activations + out->messages;
}

/* What could bring a rank under --max-memory: sharding first (the pipeline
 * averages its replicas with dp only), then stages and the batch. */
static const char *memory_advice(const so_job *j)
{
    const so_strategy_kind *k = NULL;
    so_strategy_lookup(j->cfg.strategy ? j->cfg.strategy : "dp", &k);
    int stage = k ? k->zero_stage : 0;
    if (j->pipe || stage >= 3)
        return "more --pipeline-stages or a smaller batch may fit";
    return stage ? "a higher zero stage (`scaleout plan --strategy all --max-memory` names the one that fits), more "
                   "ranks or a smaller batch may fit"
                 : "a sharded --strategy (`scaleout plan --strategy all --max-memory` names the one that fits), "
                   "--pipeline-stages or a smaller batch may fit";
}

/* --max-memory: this rank's accounting against the cap, with what it is made of. */
static int check_memory(const so_job *j)
{
    if (!(j->cfg.max_memory > 0))
        return 0;
    so_job_memory u;
    so_job_memory_use(j, &u);
    if (u.total <= j->cfg.max_memory)
        return 0;
    char where[64] = "", cap[32], b[6][32];
    int stage, stages, replica, replicas;
    if (!so_job_pipeline(j, &stage, &stages, &replica, &replicas))
        snprintf(where, sizeof where, " (stage %d of %d)", stage, stages);
    return so_err(SO_EINVAL, "--max-memory %s: rank %d%s needs %s: weights %s, gradients %s, optimizer %s, "
                  "activations %s (%d micro-batch(es) in flight), messages %s; %s", so_mem_label(j->cfg.max_memory, cap, sizeof cap), so_job_rank(j), where,
                  so_mem_label(u.total, b[0], 32), so_mem_label(u.params, b[1], 32), so_mem_label(u.grads, b[2], 32),
                  so_mem_label(u.optimizer, b[3], 32), so_mem_label(u.activations, b[4], 32), u.slots,
                  so_mem_label(u.messages, b[5], 32), memory_advice(j));
}

/* Test hook: SCALEOUT_JOB_TEST_SETUP_SLEEP_MS=N sleeps N ms just before the
 * checkpoint restore, so tests can signal a rank during set-up. */
static void setup_test_sleep(void)
{
    const char *v = so_test_hook("SCALEOUT_JOB_TEST_SETUP_SLEEP_MS");
    long ms = v ? atol(v) : 0;
    if (ms > 0)
        nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000L}, NULL);
}

int so_job_create(const so_job_config *c, so_job **out)
{
    *out = NULL;
    so_job *j = calloc(1, sizeof *j);
    if (!j)
        return so_err(SO_ENOMEM, "out of memory");
    j->cfg = *c;
    *out = j;
    dist_options dopt = {c->stall_warning_s, c->comm_timeout_s, c->allreduce, c->ranks_per_node};
    int rc = dist_open(&dopt, &j->dh);
    if (rc || (rc = build(j)))
        return rc;
    config_text(c, j->pipe ? pipe_glue_whole(j->pipe) : j->parts.m->g, j->config, sizeof j->config);
    if ((rc = dist_check_config(j->dh, j->config)) || (rc = dist_agree(j->dh, check_memory(j))))
        return rc;
    setup_test_sleep();
    if ((rc = observers(j)))
        return rc;
    signals_job_phase(1);
    return 0;
}

int so_job_train(so_job *j, so_progress_fn progress, void *progress_arg, so_train_result *out)
{
    memset(out, 0, sizeof *out);
    job_parts *p = &j->parts;
    int rc = so_train(p->m, p->opt, p->ltrain, p->ltest, &j->tc, j->dist, progress, progress_arg, out);
    if (!rc && !(rc = ckpt_glue_finish(j->ckpt, &j->ckpt_summary))) {
        j->ckpt_done = j->ckpt != NULL;
        read_op_log(j);
        out->comm_total = dist_comm_seconds(j->dh) + j->strategy_comm;
        if (j->pipe)
            rc = pipe_glue_bubble(j->pipe, j->dh, j->tc.throughput_skip, out);
        if (!rc)
            rc = prof_glue_finish(j->prof, out, j->config);
    }
    return rc;
}

void so_job_free(so_job *j)
{
    if (!j)
        return;
    signals_job_phase(0);
    ckpt_glue_set_io(j->ckpt, NULL, NULL); /* the background threads stop calling into the profiler */
    prof_glue_free(j->prof, j->parts.m);
    ckpt_glue_close(j->ckpt);
    stop_close(j->stop);
    pipe_glue_close(j->pipe);
    parts_free(&j->parts);
    dist_close(j->dh);
    free(j);
}

/* ---- accessors -------------------------------------------------------------------- */

int so_job_rank(const so_job *j)
{
    const so_dist *d = j ? dist_get(j->dh) : NULL;
    return d ? d->rank : 0;
}

int so_job_world(const so_job *j)
{
    const so_dist *d = j ? dist_get(j->dh) : NULL;
    return d ? d->world : 1;
}

int so_job_failed_elsewhere(const so_job *j) { return j && dist_failed_elsewhere(j->dh); }

void so_job_abort(so_job *j, int code, const char *msg)
{
    char line[1200];
    snprintf(line, sizeof line, "scaleout %s", msg);
    dist_abort(j ? j->dh : NULL, code, line);
}

so_model *so_job_model(const so_job *j) { return j->parts.m; }
const so_graph *so_job_graph(const so_job *j) { return j->pipe ? pipe_glue_whole(j->pipe) : j->parts.m->g; }
so_optim *so_job_optim(const so_job *j) { return j->parts.opt; }
const so_strategy *so_job_strategy(const so_job *j) { return j->parts.strategy; }
so_loader *so_job_train_loader(const so_job *j) { return j->parts.ltrain; }
so_loader *so_job_test_loader(const so_job *j) { return j->parts.ltest; }
const so_dataset *so_job_dataset(const so_job *j, int train) { return train ? j->parts.train : j->parts.test; }

void so_job_data_stats(const so_job *j, so_loader_stats *out) { so_loader_get_stats(j ? j->parts.ltrain : NULL, out); }
const so_dist *so_job_dist(const so_job *j) { return j->dist; }
const char *so_job_config_text(const so_job *j) { return j->config; }

int so_job_pipeline(const so_job *j, int *stage, int *stages, int *replica, int *replicas)
{
    if (!j || !j->pipe)
        return -1;
    pipe_glue_layout(j->pipe, stage, stages, replica, replicas);
    return 0;
}

int so_job_pipeline_cuts(const so_job *j, int *first, int max, const char **basis)
{
    return j && j->pipe ? pipe_glue_cuts(j->pipe, first, max, basis) : -1;
}

int so_job_stage_memory(const so_job *j, int stage, double *act_bytes, double *edge_bytes)
{
    return j && j->pipe ? pipe_glue_stage_memory(j->pipe, stage, act_bytes, edge_bytes) : -1;
}

int so_job_gather_params(so_job *j, float **out, size_t *n)
{
    if (j->pipe)
        return pipe_glue_gather_params(j->pipe, j->parts.m, out, n);
    *out = NULL;
    *n = 0;
    const so_strategy *st = j->parts.strategy;
    int rc = st && st->ops->params_whole ? st->ops->params_whole(st->self) : 0;
    if (rc || so_job_rank(j) != 0)
        return rc;
    so_model *m = j->parts.m;
    if (!(*out = malloc((m->nparams ? m->nparams : 1) * sizeof **out)))
        return so_err(SO_ENOMEM, "out of memory");
    memcpy(*out, m->params, m->nparams * sizeof **out);
    *n = m->nparams;
    return 0;
}

int so_job_sum(so_job *j, double *v, int n)
{
    const so_dist *d = dist_get(j->dh);
    return d ? d->sum(d->ctx, v, n) : 0;
}

double so_job_comm_seconds(const so_job *j) { return dist_comm_seconds(j->dh); }

#ifdef SCALEOUT_HAVE_MPI
/* A pair of the comm library's process-wide counters, 0 without MPI. */
static void comm_counts(const so_job *j, void (*get)(uint64_t *, uint64_t *), unsigned long long *a,
                        unsigned long long *b)
{
    uint64_t x = 0, y = 0;
    if (dist_get(j->dh))
        get(&x, &y);
    *a = x;
    *b = y;
}
#endif

void so_job_hier_paths(const so_job *j, unsigned long long *zero_copy, unsigned long long *copied)
{
#ifdef SCALEOUT_HAVE_MPI
    comm_counts(j, so_comm_hier_path_counts, zero_copy, copied);
#else
    (void)j;
    *zero_copy = *copied = 0;
#endif
}

void so_job_hier_across(const so_job *j, unsigned long long *tcp, unsigned long long *mpi)
{
#ifdef SCALEOUT_HAVE_MPI
    comm_counts(j, so_comm_hier_across_counts, tcp, mpi);
#else
    (void)j;
    *tcp = *mpi = 0;
#endif
}

int so_job_resumed(const so_job *j, long *step, int *found) { return ckpt_glue_resumed(j->ckpt, step, found); }

int so_job_writes_checkpoints(const so_job *j) { return ckpt_glue_writes(j->ckpt); }

int so_job_ckpt_stats(const so_job *j, so_job_ckpt_summary *out)
{
    if (!j->ckpt_done)
        return -1;
    *out = j->ckpt_summary;
    return 0;
}

void so_job_request_stop(void) { stop_request(); }

long so_job_stopped_step(const so_job *j) { return stop_step(j->stop); }

const char *so_job_profile_summary(const so_job *j) { return prof_glue_summary(j->prof); }
