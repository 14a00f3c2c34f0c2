/* Averaging in place over a group, evaluation on the averaged model and
 * checkpoints of each rank's own model, for the relaxed-consistency
 * strategies (sync_avg.h). */
#include "sync_avg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/data.h"
#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/train.h"

void sync_avg_add(sync_avg_set *s, float *buf, size_t n)
{
    if (!buf || !n || s->count >= SYNC_AVG_MAX)
        return;
    s->buf[s->count] = buf;
    s->n[s->count++] = n;
}

int sync_avg_run(so_group *g, const sync_avg_set *s, int tag, double *bytes)
{
    so_handle *h[SYNC_AVG_MAX];
    so_group_opts o = {.wire = SO_DTYPE_F32, .tag = tag};
    int rc = 0, posted = 0;
    for (; !rc && posted < s->count; posted++)
        if ((rc = so_group_iallreduce(g, s->buf[posted], s->buf[posted], s->n[posted], SO_DTYPE_F32, SO_REDUCE_AVG,
                                      &o, &h[posted])))
            break;
    for (int i = 0; i < posted; i++) { /* every posted handle is given back, even after a failure */
        int w = so_group_wait(g, h[i]);
        rc = rc ? rc : w;
        if (bytes)
            *bytes += (double)s->n[i] * sizeof(float);
    }
    return rc;
}

int sync_eval_averaged(so_group *g, so_model *m, float *scratch, so_loader *test, double sums[3], int average)
{
    if (!average)
        return so_evaluate_sums(m, test, sums);
    memcpy(scratch, m->params, m->nparams * sizeof *scratch);
    if (m->nbufs)
        memcpy(scratch + m->nparams, m->bufs, m->nbufs * sizeof *scratch);
    sync_avg_set s = {0};
    sync_avg_add(&s, m->params, m->nparams);
    sync_avg_add(&s, m->bufs, m->nbufs);
    int rc = sync_avg_run(g, &s, SO_STRATEGY_TAG, NULL); /* evaluation's bytes are not the step's */
    so_model_params_changed(m);
    if (!rc)
        rc = so_evaluate_sums(m, test, sums);
    memcpy(m->params, scratch, m->nparams * sizeof *scratch);
    if (m->nbufs)
        memcpy(m->bufs, scratch + m->nparams, m->nbufs * sizeof *scratch);
    so_model_params_changed(m);
    return rc;
}

void sync_report(so_train_result *r, double bytes, long rounds, int period)
{
    r->sync_bytes_sent = bytes;
    r->sync_rounds = rounds;
    r->sync_period = period;
    /* local SGD's inner data parallelism counted its steps as plain FP32
     * averages (grad_compress_report_dense): what kept the models together
     * is counted above instead. A compressor's counts (encode time) stay. */
    if (r->compress_encode_s == 0 && r->compress_bytes_sent == r->compress_bytes_dense)
        r->compress_bytes_sent = r->compress_bytes_dense = 0;
}

/* Checks shared by the relaxed-consistency strategies: the ranks and their group. */
int sync_strategy_check(const so_strategy_config *c, const char *what)
{
    if (!c->dist || !c->group)
        return so_err(SO_EINVAL, "--sync %s needs the ranks' collective vocabulary (run it under MPI)", what);
    return 0;
}

/* ---- checkpoints ------------------------------------------------------------ */

enum { CKPT_HEADER = 4 }; /* doubles: same, then reserved */

static size_t ckpt_floats(const sync_ckpt *k) { return k->m->nparams * (size_t)(1 + so_optim_nslots(k->opt) + k->nextra); }

/* The buffers of the rank's own state in rank_state order. */
static float *ckpt_buffer(const sync_ckpt *k, int i)
{
    int nslots = so_optim_nslots(k->opt);
    return i == 0 ? k->m->params : i <= nslots ? so_optim_slot(k->opt, i - 1) : k->extra[i - 1 - nslots];
}

/* The replicated part's parameters: the ranks' average (collective: every
 * rank saves at the same step end), or this rank's when they are one model. */
static void ckpt_average(sync_ckpt *k)
{
    memcpy(k->avg, k->m->params, k->m->nparams * sizeof *k->avg);
    if (*k->same)
        return;
    sync_avg_set s = {0};
    sync_avg_add(&s, k->avg, k->m->nparams);
    if (sync_avg_run(k->g, &s, SO_STRATEGY_TAG, NULL)) /* a failed collective ends the job in the comm layer */
        so_log(SO_LOG_WARN, "checkpoint: the ranks' average model was not taken: %s", so_errmsg());
}

static void ckpt_rank_get(void *ctx, void *dst)
{
    sync_ckpt *k = ctx;
    double h[CKPT_HEADER] = {*k->same};
    memcpy(dst, h, sizeof h);
    float *p = (float *)((char *)dst + sizeof h);
    int nbuf = 1 + so_optim_nslots(k->opt) + k->nextra;
    for (int i = 0; i < nbuf; i++)
        memcpy(p + (size_t)i * k->m->nparams, ckpt_buffer(k, i), k->m->nparams * sizeof *p);
    ckpt_average(k);
}

static void ckpt_rank_set(void *ctx, const void *src)
{
    sync_ckpt *k = ctx;
    double h[CKPT_HEADER];
    memcpy(h, src, sizeof h);
    *k->same = h[0] != 0;
    const float *p = (const float *)((const char *)src + sizeof h);
    int nbuf = 1 + so_optim_nslots(k->opt) + k->nextra;
    for (int i = 0; i < nbuf; i++)
        memcpy(ckpt_buffer(k, i), p + (size_t)i * k->m->nparams, k->m->nparams * sizeof *p);
    so_model_params_changed(k->m);
    k->restored = 1;
}

/* Segment 0: the average of the last save; slots: this rank's own (they
 * change only at the next update, after the snapshot). */
static void ckpt_layout_get(void *ctx, int seg, size_t lo, size_t n, float *dst)
{
    sync_ckpt *k = ctx;
    memcpy(dst, (seg == 0 ? k->avg : so_optim_slot(k->opt, seg - 1)) + lo, n * sizeof *dst);
}

/* A resume puts the whole replicated part back (a data-parallel run's
 * checkpoint is then the state of every rank); the rank's own state, when
 * the checkpoint has it, follows it. */
static void ckpt_layout_set(void *ctx, int seg, size_t lo, size_t n, const float *src)
{
    sync_ckpt *k = ctx;
    memcpy((seg == 0 ? k->m->params : so_optim_slot(k->opt, seg - 1)) + lo, src, n * sizeof *src);
}

int sync_ckpt_init(sync_ckpt *k, so_group *g, so_model *m, so_optim *opt, int *same, const char *spec)
{
    k->g = g, k->m = m, k->opt = opt, k->same = same;
    if (!(k->avg = malloc((m->nparams + 1) * sizeof *k->avg)))
        return so_err(SO_ENOMEM, "out of memory for the checkpoint's average model");
    k->units[0] = 0;
    k->units[1] = m->nparams;
    k->layout = (so_state_layout){.nunits = 1, .units = k->units, .shards = g->size, .replicas = 1,
                                  .shard = g->rank, .get = ckpt_layout_get, .set = ckpt_layout_set, .ctx = k};
    k->rs = (so_rank_state){.bytes = CKPT_HEADER * sizeof(double) + ckpt_floats(k) * sizeof(float), .required = 1,
                            .get = ckpt_rank_get, .set = ckpt_rank_set, .ctx = k};
    snprintf(k->rs.tag, sizeof k->rs.tag, "sync=%s", spec);
    return 0;
}

void sync_ckpt_deinit(sync_ckpt *k)
{
    free(k->avg);
    k->avg = NULL;
}

int sync_ckpt_check_resume(const sync_ckpt *k, long start_step, const char *what)
{
    if (start_step <= 0 || k->restored)
        return 0;
    return so_err(SO_EINVAL, "--sync %s: resuming at step %ld needs each rank's own model and optimizer state from "
                  "a checkpoint of --sync %s on %d ranks; this one was written by another method or number of ranks",
                  what, start_step, what, k->g->size);
}
