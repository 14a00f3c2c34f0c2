/* A job's parts from its configuration (parts.h): data set, zoo model, optimizer,
 * and the train / test loaders sharded for this rank, in two steps so the
 * ranks can agree between them (the gradient buffer is collective). */
#include "parts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scaleout/backend.h"
#include "scaleout/ckpt.h"
#include "scaleout/err.h"
#include "scaleout/file.h"
#include "scaleout/gpt2.h"
#include "scaleout/llmc.h"
#include "scaleout/predict.h"
#include "scaleout/sync.h"
#include "scaleout/zoo.h"

void parts_free(job_parts *j)
{
    so_loader_destroy(j->ltrain);
    so_loader_destroy(j->ltest);
    if (j->strategy)
        so_strategy_free(j->strategy); /* and its optimizer */
    else
        so_optim_destroy(j->opt);
    so_model_destroy(j->m);
    so_graph_destroy(j->g);
    so_dataset_destroy(j->train);
    so_dataset_destroy(j->test);
    *j = (job_parts){0};
}

/* "on", "off" or "llmc" (token data only) -> SO_SHUFFLE_*. */
static int shuffle_mode(const so_job_config *a, int *mode)
{
    const char *s = a->shuffle ? a->shuffle : "on";
    int tokens = !strcmp(a->dataset, "tokens");
    *mode = !strcmp(s, "off") ? SO_SHUFFLE_OFF : !strcmp(s, "llmc") ? SO_SHUFFLE_LLMC : SO_SHUFFLE_ON;
    if (strcmp(s, "on") && strcmp(s, "off") && strcmp(s, "llmc"))
        return so_err(SO_EINVAL, "--shuffle: unknown order '%s' (on, off, llmc)", s);
    if (*mode == SO_SHUFFLE_LLMC && !tokens)
        return so_err(SO_EINVAL, "--shuffle llmc: llm.c's shuffled order is for token data (--dataset tokens)");
    return 0;
}

/* The model's vocabulary bounds every token of both splits (the graph's
 * classes: a language model's unpadded vocabulary). */
static int check_vocab(job_parts *j)
{
    int v = so_graph_classes(j->g);
    int rc = so_tokens_check_vocab(j->train->tokens, v);
    if (!rc && j->test)
        rc = so_tokens_check_vocab(j->test->tokens, v);
    return rc;
}

static int is_image_set(const char *dataset)
{
    return !strcmp(dataset, "imagefolder") || !strcmp(dataset, "tfrecord");
}

/* Both splits of an imagefolder / tfrecord data set, streamed (scaleout/data.h). */
static int load_images(const so_job_config *a, job_parts *j)
{
    so_image_opts o;
    so_image_opts_defaults(&o);
    o.image_size = a->image.image_size;
    o.resize = a->image.resize;
    o.scale_min = a->image.scale_min;
    o.scale_max = a->image.scale_max;
    o.label_offset = a->image.label_offset;
    o.index = a->image.index;
    int rc = so_dataset_open_images(a->dataset, a->data_dir, 1, &o, &j->train);
    if (rc || !so_image_has_split(a->dataset, a->data_dir, 0, &o))
        return rc; /* no validation split: nothing to evaluate (tf_cnn_benchmarks' training runs) */
    rc = so_dataset_open_images(a->dataset, a->data_dir, 0, &o, &j->test);
    if (!rc && j->test->classes > j->train->classes)
        rc = so_err(SO_EFORMAT, "%s: the validation split has %d classes, the training split %d", a->data_dir,
                    j->test->classes, j->train->classes);
    if (!rc)
        j->test->classes = j->train->classes;
    return rc;
}

int parts_synthetic_shape(const so_job_config *a, so_zoo_entry *out)
{
    int rc = so_zoo_resolve(a->model, out);
    if (rc)
        return so_err(rc, "--model: %s (see `scaleout models`)", so_errmsg());
    if (so_gpt2_parse(a->model, &(so_gpt2_config){0}) == 1 && a->seq_len > 0 && a->seq_len < out->h)
        out->h = a->seq_len;
    return 0;
}

static int load_data(const so_job_config *a, job_parts *j)
{
    if (!strcmp(a->dataset, "tokens")) {
        int rc = so_dataset_tokens(a->data_dir, 1, a->seq_len, &j->train);
        return rc ? rc : so_dataset_tokens(a->data_dir, 0, a->seq_len, &j->test);
    }
    if (is_image_set(a->dataset))
        return load_images(a, j);
    if (strcmp(a->dataset, "synthetic") != 0) {
        int rc = so_dataset_load(a->dataset, a->data_dir, 1, &j->train);
        return rc ? rc : so_dataset_load(a->dataset, a->data_dir, 0, &j->test);
    }
    so_zoo_entry z;
    int rc = parts_synthetic_shape(a, &z);
    int n = a->synthetic_samples ? a->synthetic_samples : 32 * a->batch;
    if (!rc && so_gpt2_parse(a->model, &(so_gpt2_config){0}) == 1) /* token ids, T + 1 per sample for the targets */
        return so_dataset_synthetic_tokens((int64_t)n * z.h + 1, z.classes, z.h, (uint64_t)a->seed, &j->train);
    return rc ? rc : so_dataset_synthetic(n, z.c, z.h, z.w, z.classes, (uint64_t)a->seed, &j->train);
}

int parts_load(const so_job_config *a, job_parts *j)
{
    /* What so_model_create_opts checks before its (collective) gradient
     * allocation is checked here, so the ranks agree on it first. */
    so_conv_algo ca;
    so_precision prec;
    int rc = so_conv_algo_parse(a->conv_algo ? a->conv_algo : "auto", &ca);
    if (!rc && !so_backend_find(a->backend))
        rc = so_err(SO_EINVAL, "--backend: unknown backend '%s' (use onednn or ref)", a->backend);
    if (!rc)
        rc = so_precision_resolve(a->precision, &prec);
    if (!rc && prec == SO_PRECISION_BF16 && strcmp(a->backend, "onednn"))
        rc = so_err(SO_EINVAL, "--precision bf16 runs on the onednn backend, not '%s'", a->backend);
    if (!rc && a->batch < 1)
        rc = so_err(SO_EINVAL, "batch size %d must be >= 1", a->batch);
    int shuffle;
    if (!rc)
        rc = shuffle_mode(a, &shuffle);
    if (!rc)
        rc = load_data(a, j);
    if (rc)
        return rc;
    const so_dataset *ds = j->train;
    so_gpt2_config gc;
    if (ds->tokens && so_gpt2_parse(a->model, &gc) == 1 && ds->h * ds->w > gc.context) /* synthetic: at most T */
        return so_err(SO_EINVAL, "--seq-len %d is above the context of %s (%d tokens)", a->seq_len, a->model,
                      gc.context);
    rc = so_zoo_build(a->model, ds->c, ds->h, ds->w, ds->classes, &j->g);
    return !rc && ds->tokens ? check_vocab(j) : rc;
}

/* The image loader's settings: the train recipe unless --no-augment. */
static int image_loader_config(const so_job_config *a, so_loader_config *lc)
{
    static const char *const dct[] = {"train", "all", "off"};
    lc->augment = !a->image.no_augment;
    lc->decode_threads = a->image.decode_threads;
    lc->strict = a->image.strict;
    lc->stage_local = a->image.stage_local;
    const char *d = a->image.dct_scale ? a->image.dct_scale : "train";
    for (int k = 0; k < 3; k++)
        if (!strcmp(d, dct[k])) {
            lc->dct_scale = k;
            return 0;
        }
    return so_err(SO_EINVAL, "--dct-scale: '%s' is not train, all or off", d);
}

/* The gradient buffer comes from the dist hooks when they offer registered
 * memory: a collective allocation, so set-up failures are agreed on before
 * (parts_load) and after (the caller's dist_agree) this call. A rank that ran
 * out of memory inside so_model_create_opts after it would free the buffer
 * alone and block; its peers' dist_agree then times out (watched) and aborts. */
int parts_gather_wire(const so_job_config *c, so_dtype *out)
{
    *out = SO_DTYPE_F32;
    if (c->shard_gather && (so_dtype_parse(c->shard_gather, out) ||
                            (*out != SO_DTYPE_F32 && *out != SO_DTYPE_BF16 && *out != SO_DTYPE_F16)))
        return so_err(SO_EINVAL, "--shard-gather: '%s' is not fp32, bf16 or fp16", c->shard_gather);
    return 0;
}

/* --strategy's configuration (its name was checked with the input). */
static int strategy_config(const so_job_config *a, const so_dist *d, so_strategy_config *sc)
{
    so_optim_kind kind;
    int rc = so_optim_parse(a->optimizer, &kind);
    if (rc)
        return rc;
    *sc = (so_strategy_config){.dist = d, .group = d ? d->group : NULL, .bucket_bytes = (size_t)((a->bucket_mb < 0 ? 25 : a->bucket_mb) * 1048576.0),
                               .first_bucket_bytes = (size_t)(a->first_bucket_mb * 1048576.0),
                               .auto_buckets = a->bucket_mb < 0, .accumulate = a->accumulate, .shard_unit = a->shard_unit,
                               .shard_prefetch = a->shard_prefetch,
                               .shard_node = a->shard_group && !strcmp(a->shard_group, "node")};
    if ((rc = parts_gather_wire(a, &sc->shard_gather)))
        return rc;
    if ((rc = so_compress_parse(a->compress ? a->compress : "none", &sc->compress)))
        return rc;
    sc->error_feedback = a->error_feedback;
    sc->compress_seed = (uint64_t)a->seed;
    if (so_sync_parse(a->sync ? a->sync : "sync", &sc->sync))
        return so_err(SO_EINVAL, "%s", so_errmsg());
    sc->ps_ranks = a->ps_ranks;
    sc->local_after = a->local_after;
    sc->outer_lr = a->outer_lr;
    sc->outer_momentum = a->outer_momentum;
    so_optim_defaults(&sc->optim, kind);
    sc->optim.momentum = a->momentum;
    sc->optim.weight_decay = a->weight_decay;
    return 0;
}

/* ---- --init-from ------------------------------------------------------------------ */

/* 1 when path is a regular file that starts with llm.c's model-file magic
 * (train_gpt2.c's weights). Opened through so_file_open_read, so a FIFO in
 * its place never blocks here; the loader then names what is wrong. */
static int is_llmc_file(const char *path)
{
    unsigned char b[4] = {0};
    int fd;
    uint64_t size;
    if (so_file_open_read(path, &fd, &size))
        return 0;
    ssize_t got = size >= 4 ? read(fd, b, 4) : 0;
    close(fd);
    return got == 4 && (b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24) == SO_LLMC_MAGIC;
}

/* --init-from FILE into m (llm.c's model file or safetensors; a pipeline
 * stage takes its own layers' tensors by name), then the values checked:
 * weights holding a NaN or an infinity would train to "final loss nan", so
 * they are refused unless --allow-nonfinite. Runs between the model and its
 * strategy, so every strategy starts from these values (zero3 copies its
 * blocks at create and gives the whole buffer back) and the check still
 * sees the whole buffer. Every rank reads the file. SO_EINVAL naming
 * --init-from for a file that does not load, SO_EFORMAT naming the tensor. */
static int load_init_from(const so_job_config *a, so_model *m)
{
    const char *path = a->ckpt.init_from;
    int part = a->pipeline_stages > 1;
    if (is_llmc_file(path) ? so_gpt2_load_llmc(m, path, part) : so_ckpt_safetensors_load_part(path, m, part)) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", so_errmsg());
        return so_err(SO_EINVAL, "--init-from: %s", msg);
    }
    char what[256];
    unsigned loaded = SO_NONFINITE_WEIGHTS | SO_NONFINITE_RUNNING_STATS;
    if (a->allow_nonfinite || !so_train_first_nonfinite(m, loaded, what, sizeof what))
        return 0;
    return so_err(SO_EFORMAT, "--init-from %s: %s hold non-finite values; --allow-nonfinite trains from them anyway",
                  path, what);
}

/* The model, with the buffers the strategy asks for, --init-from's values,
 * and the strategy with its optimizer, made from those values; a pipeline
 * stage (whose strategy pipe_glue makes) gets the whole stage's optimizer. */
static int model_and_strategy(const so_job_config *a, const so_dist *d, so_model_opts *mo, job_parts *j)
{
    so_graph *g = j->g;
    j->g = NULL; /* the model owns it from here */
    const so_strategy_kind *k = NULL;
    so_strategy_config sc;
    int rc = strategy_config(a, d, &sc);
    if (!rc && sc.sync.method != SO_SYNC_SYNC && !so_sync_uses_ps(&sc.sync)) /* local, diloco, gossip (check_sync) */
        rc = so_strategy_sync_lookup(sc.sync.method, &k);
    else if (!rc)
        rc = so_strategy_lookup(a->strategy ? a->strategy : "dp", &k);
    if (!rc && k->model_opts)
        rc = k->model_opts(&sc, mo);
    if (rc) {
        so_graph_destroy(g);
        return rc;
    }
    if ((rc = so_model_create_opts(g, mo, &j->m)))
        return rc;
    if (a->ckpt.init_from && (rc = load_init_from(a, j->m))) {
        j->init_refused = 1;
        return rc;
    }
    /* language models decay their matrices and embeddings only (nanoGPT, llm.c);
     * a pipeline stage after the embedding is one by its data */
    size_t *decay = NULL;
    int lm = so_graph_takes_tokens(j->m->g) || (j->train && j->train->tokens);
    if (lm && (rc = so_graph_decay_ranges(j->m->g, &decay, &sc.optim.ndecay_ranges)))
        return rc;
    sc.optim.decay_ranges = decay; /* copied by so_optim_create */
    if (a->pipeline_stages > 1)
        rc = so_optim_create(&sc.optim, j->m->nparams, &j->opt);
    else if (!(rc = so_strategy_create(k, &sc, j->m, &j->strategy)))
        j->opt = j->strategy->opt;
    j->strategy_refused = a->pipeline_stages <= 1 && rc == SO_EINVAL;
    free(decay);
    return rc;
}

/* A parameter server (--sync ssp:S, async): the data is sharded over the
 * workers, ranks 0..W-1; the servers (the last ps_ranks ranks) read none:
 * they get worker 0's shard (the same steps per epoch) without prefetching. */
static void ps_shard(const so_job_config *a, int *rank, int *world, int *prefetch)
{
    so_sync_spec ss;
    if (so_sync_parse(a->sync ? a->sync : "sync", &ss) || !so_sync_uses_ps(&ss) || a->ps_ranks >= *world)
        return;
    *world -= a->ps_ranks;
    if (*rank >= *world) {
        *rank = 0;
        *prefetch = 0;
    }
}

int parts_build(const so_job_config *a, const so_dist *d, job_parts *j)
{
    const so_dataset *ds = j->train;
    /* --init-from fills every parameter and buffer (its loaders refuse a file
     * that misses one), so the random values would only be overwritten. */
    so_model_opts mo = {.backend = a->backend, .batch = a->batch, .seed = (uint64_t)a->seed,
                        .recv_layout = j->recv_layout, .recv_layout_ctx = j->recv_layout_ctx,
                        .skip_init = a->ckpt.init_from != NULL, .sync_bn = a->sync_bn};
    int rc = so_init_parse(a->init ? a->init : "torch", &mo.init);
    if (rc) {
        so_graph_destroy(j->g);
        j->g = NULL;
        return rc;
    }
    if (d && d->buf_alloc) {
        mo.grads_alloc = d->buf_alloc;
        mo.grads_free = d->buf_free;
        mo.grads_ctx = d->ctx;
    }
    rc = so_conv_algo_parse(a->conv_algo ? a->conv_algo : "auto", &mo.conv_algo);
    if (!rc)
        rc = so_precision_resolve(a->precision, &mo.precision);
    if (rc) {
        so_graph_destroy(j->g);
        j->g = NULL;
    } else {
        rc = model_and_strategy(a, d, &mo, j);
    }
    int rank = d ? d->rank : 0, world = d ? d->world : 1, shuffle = SO_SHUFFLE_ON, prefetch = a->prefetch;
    if (!rc)
        rc = shuffle_mode(a, &shuffle);
    ps_shard(a, &rank, &world, &prefetch);
    so_loader_config lc = {.batch = a->batch, .shuffle = shuffle, .drop_last = 1, .augment = a->augment,
                           .pad = 4, .prefetch = prefetch, .seed = (uint64_t)a->seed, .rank = rank, .world = world};
    if (!rc && ds->images)
        rc = image_loader_config(a, &lc);
    if (!rc)
        rc = so_loader_create(ds, &lc, &j->ltrain);
    lc.shuffle = lc.drop_last = lc.augment = 0;
    lc.max_steps = a->eval_batches;
    lc.stage_local = NULL; /* the validation split is read once per evaluation */
    if (!rc && j->test)
        rc = so_loader_create(j->test, &lc, &j->ltest);
    return rc;
}

int parts_measure(so_model *m, so_optim *opt, const so_predict_run *run, double *t_fwd, double *t_bwd, double *t_other,
                  int *timed)
{
    so_shape sh = so_graph_input_shape(m->g);
    size_t len = (size_t)sh.c * sh.h * sh.w * (size_t)m->batch;
    size_t ny = (size_t)m->batch * (size_t)so_graph_targets(m->g); /* a token loss: T targets a sample */
    int k = so_graph_classes(m->g), tokens = so_graph_takes_tokens(m->g);
    float *x = calloc(len, sizeof *x);
    int32_t *y = calloc(ny, sizeof *y);
    int rc = x && y ? 0 : so_err(SO_ENOMEM, "out of memory for a batch");
    for (size_t i = 0; !rc && i < len; i++) /* deterministic values in [-0.5, 0.5), or token ids */
        x[i] = tokens ? (float)((i * 2654435761u) % (unsigned)k) : (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; !rc && i < ny; i++)
        y[i] = (int32_t)(i % (size_t)k);
    if (!rc)
        rc = so_predict_measure(m, opt, x, y, run, t_fwd, t_bwd, t_other, timed);
    free(x);
    free(y);
    return rc;
}
