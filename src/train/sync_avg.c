/* Averaging in place over a group and evaluation on the averaged model, for
 * the relaxed-consistency strategies (sync_avg.h). */
#include "sync_avg.h"

#include <string.h>

#include "scaleout/data.h"
#include "scaleout/err.h"
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

/* This rank's share of the test set on the model as it is: correct
 * answers, samples, loss x samples. */
static int eval_local(so_model *m, so_loader *test, double sums[3])
{
    const float *x;
    const int32_t *y;
    int n, got, rc = 0;
    while (!rc && (got = so_loader_next(test, &x, &y, &n)) > 0) {
        int correct = 0;
        rc = so_model_forward(m, x, y, n, 0);
        if (!rc)
            rc = so_model_correct(m, y, n, &correct);
        sums[0] += correct;
        sums[1] += n;
        sums[2] += (double)m->loss * n;
    }
    return rc ? rc : got < 0 ? got : 0;
}

int sync_eval_averaged(so_group *g, so_model *m, float *scratch, so_loader *test, double sums[3], int average)
{
    if (!average)
        return eval_local(m, test, sums);
    memcpy(scratch, m->params, m->nparams * sizeof *scratch);
    if (m->nbufs)
        memcpy(scratch + m->nparams, m->bufs, m->nbufs * sizeof *scratch);
    sync_avg_set s = {0};
    sync_avg_add(&s, m->params, m->nparams);
    sync_avg_add(&s, m->bufs, m->nbufs);
    int rc = sync_avg_run(g, &s, SO_STRATEGY_TAG, NULL); /* evaluation's bytes are not the step's */
    so_model_params_changed(m);
    if (!rc)
        rc = eval_local(m, test, sums);
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
}

/* Checks shared by the relaxed-consistency strategies: the ranks and their group. */
int sync_strategy_check(const so_strategy_config *c, const char *what)
{
    if (!c->dist || !c->group)
        return so_err(SO_EINVAL, "--sync %s needs the ranks' collective vocabulary (run it under MPI)", what);
    return 0;
}
