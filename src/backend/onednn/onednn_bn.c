/* Batch normalisation as PyTorch computes it: training normalises with the
 * batch mean and biased variance and updates the running stats with the
 * UNBIASED variance; eval uses the running stats. Scale/shift (and their
 * gradients, when not accumulating) point straight into the flat buffers;
 * a fused ReLU uses dnnl_fuse_norm_relu and its workspace. A partial batch
 * (n < batch valid samples) takes statistics over the n samples only, with
 * primitives built for n over the first n rows of the same buffers.
 * Synchronised (m->bn_allsum set, torch.nn.SyncBatchNorm): we sum the batch
 * statistics over ranks and run the forward with them as global stats; the
 * backward runs oneDNN's (local) backward and then corrects dx by the
 * difference between local and global means of dy and dy*xhat. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/err.h"

/* Primitives for the first n rows, rebuilt when n changes (the last batch
 * of an epoch): batch is the outermost dimension of every layout we use. */
typedef struct {
    int n;
    od_prim train, bwd;
    dnnl_memory_t src, dst, ddst, dsrc, dacc, ws_mem;
    float *ws;
} bn_part;

typedef struct {
    od_prim train, eval, bwd;
    bn_part part;
    int used_part;                     /* the last training forward ran `part` */
    dnnl_memory_t scale, shift;        /* into m->params */
    dnnl_memory_t rmean, rvar;         /* into m->bufs */
    dnnl_memory_t gscale, gshift;      /* into m->grads: written directly unless accumulating */
    float *mean, *var, *ws, *dscale, *dshift;
    dnnl_memory_t mean_mem, var_mem, ws_mem, dscale_mem, dshift_mem;
    od_prim sync_train;                /* forward_training with use_global_stats */
    double *sync_v;                    /* allsum payload */
    float *sync_a, *sync_b;            /* dx correction terms */
    double sync_count;                 /* elements per channel in the global batch */
    int synced;                        /* the last training forward was synchronised */
} od_bn;

static int bn_mems(od_state *s, int node, od_bn *b)
{
    const so_node *nd = od_node(s, node);
    size_t c = (size_t)nd->out.c;
    dnnl_memory_desc_t v;
    od_md_1d(&v, (int64_t)c);
    float *p = so_model_params_at(s->m, nd->param_off), *r = s->m->bufs + nd->buf_off;
    int rc = od_mem_wrap(s, node, &v, p, &b->scale);
    if (!rc)
        rc = od_mem_wrap(s, node, &v, p + c, &b->shift);
    if (!rc)
        rc = od_mem_wrap(s, node, &v, r, &b->rmean);
    if (!rc)
        rc = od_mem_wrap(s, node, &v, r + c, &b->rvar);
    if (!rc)
        rc = od_mem_wrap(s, node, &v, so_model_grads_at(s->m, nd->param_off), &b->gscale);
    if (!rc)
        rc = od_mem_wrap(s, node, &v, so_model_grads_at(s->m, nd->param_off) + c, &b->gshift);
    if (!rc)
        rc = od_mem_alloc(s, node, &v, &b->mean, &b->mean_mem);
    if (!rc)
        rc = od_mem_alloc(s, node, &v, &b->var, &b->var_mem);
    if (!rc)
        rc = od_mem_alloc(s, node, &v, &b->dscale, &b->dscale_mem);
    if (!rc)
        rc = od_mem_alloc(s, node, &v, &b->dshift, &b->dshift_mem);
    if (!rc && nd->a.relu) {
        dnnl_memory_desc_t ws = od_query_md(&b->train, dnnl_query_workspace_md);
        rc = od_mem_alloc(s, node, &ws, &b->ws, &b->ws_mem);
    }
    return rc;
}

static int bn_create(od_state *s, int node)
{
    od_bn *b = calloc(1, sizeof *b);
    if (!b)
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    s->t[node].priv = b;
    const so_node *nd = od_node(s, node);
    od_tensor *in = od_in(s, node, 0);
    unsigned flags = dnnl_use_scale | dnnl_use_shift | (nd->a.relu ? dnnl_fuse_norm_relu : 0u);
    dnnl_batch_normalization_desc_t bd;
    OD_CHECK(s, node, "batchnorm forward desc",
             dnnl_batch_normalization_forward_desc_init(&bd, dnnl_forward_training, &in->md, nd->a.eps, flags));
    int rc = od_prim_init(s, node, "batchnorm forward", &bd, 0, NULL, &b->train);
    if (rc)
        return rc;
    OD_CHECK(s, node, "batchnorm eval desc",
             dnnl_batch_normalization_forward_desc_init(&bd, dnnl_forward_inference, &in->md, nd->a.eps,
                                                        flags | dnnl_use_global_stats));
    rc = od_prim_init(s, node, "batchnorm eval", &bd, 0, NULL, &b->eval);
    dnnl_memory_desc_t dst = od_query_md(&b->train, dnnl_query_dst_md);
    if (!rc)
        rc = od_tensor_alloc(s, node, &dst);
    if (rc)
        return rc;
    /* diff_src is always computed: with the graph input as src it lands in scratch. */
    OD_CHECK(s, node, "batchnorm backward desc",
             dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &s->t[node].md, &in->md,
                                                         nd->a.eps, flags));
    rc = od_prim_init(s, node, "batchnorm backward", &bd, 0, b->train.pd, &b->bwd);
    if (!rc)
        rc = bn_mems(s, node, b);
    return rc;
}

/* running = (1-m)*running + m*batch, with var unbiased by n/(n-1), n = N*H*W. */
static void bn_update_running(od_state *s, int node, od_bn *b, int rows)
{
    const so_node *nd = od_node(s, node);
    double n = (double)rows * nd->out.h * nd->out.w;
    float unbias = n > 1 ? (float)(n / (n - 1)) : 1.0f, mom = nd->a.momentum;
    float *rm = s->m->bufs + nd->buf_off, *rv = rm + nd->out.c;
    for (int c = 0; c < nd->out.c; c++) {
        rm[c] = (1.0f - mom) * rm[c] + mom * b->mean[c];
        rv[c] = (1.0f - mom) * rv[c] + mom * b->var[c] * unbias;
    }
}

static void part_fini(bn_part *p)
{
    od_prim_fini(&p->train);
    od_prim_fini(&p->bwd);
    od_mem_free(&p->src, NULL);
    od_mem_free(&p->dst, NULL);
    od_mem_free(&p->ddst, NULL);
    od_mem_free(&p->dsrc, NULL);
    od_mem_free(&p->dacc, NULL);
    od_mem_free(&p->ws_mem, &p->ws);
    p->n = 0;
}

/* md of the first n rows of md, or -1 if batch is not its outermost dim. */
static int prefix_md(const dnnl_memory_desc_t *md, int64_t rows, int64_t n, dnnl_memory_desc_t *out)
{
    if (md->format_kind != dnnl_blocked)
        return -1;
    const dnnl_blocking_desc_t *bl = &md->format_desc.blocking;
    for (int i = 0; i < bl->inner_nblks; i++)
        if (bl->inner_idxs[i] == 0)
            return -1;
    if ((size_t)bl->strides[0] * (size_t)rows * sizeof(float) != dnnl_memory_desc_get_size(md))
        return -1;
    *out = *md;
    out->dims[0] = out->padded_dims[0] = n;
    return 0;
}

static int part_mems(od_state *s, int node, bn_part *p, const dnnl_memory_desc_t *x, const dnnl_memory_desc_t *y)
{
    od_tensor *in = od_in(s, node, 0), *t = &s->t[node];
    int rc = od_mem_wrap(s, node, x, in->buf, &p->src);
    if (!rc)
        rc = od_mem_wrap(s, node, y, t->buf, &p->dst);
    if (!rc)
        rc = od_mem_wrap(s, node, y, t->dbuf, &p->ddst);
    if (!rc && in->dbuf)
        rc = od_mem_wrap(s, node, x, in->dbuf, &p->dsrc);
    if (!rc)
        rc = od_mem_wrap(s, node, x, s->scratch, &p->dacc);
    if (!rc && od_node(s, node)->a.relu) {
        dnnl_memory_desc_t ws = od_query_md(&p->train, dnnl_query_workspace_md);
        rc = od_mem_alloc(s, node, &ws, &p->ws, &p->ws_mem);
    }
    return rc;
}

/* Builds the n-row primitives; 1 if the layouts do not allow it (then the
 * statistics include the zero padding rows: a documented approximation). */
static int part_build(od_state *s, int node, bn_part *p, int n)
{
    const so_node *nd = od_node(s, node);
    od_tensor *in = od_in(s, node, 0), *t = &s->t[node];
    dnnl_memory_desc_t x, y;
    if (prefix_md(&in->md, s->m->batch, n, &x) || prefix_md(&t->md, s->m->batch, n, &y))
        return 1;
    unsigned flags = dnnl_use_scale | dnnl_use_shift | (nd->a.relu ? dnnl_fuse_norm_relu : 0u);
    dnnl_batch_normalization_desc_t bd;
    OD_CHECK(s, node, "batchnorm partial forward desc",
             dnnl_batch_normalization_forward_desc_init(&bd, dnnl_forward_training, &x, nd->a.eps, flags));
    /* Built after create: oneDNN's own scratchpad, not the shared one. */
    OD_CHECK(s, node, "batchnorm partial forward", dnnl_primitive_desc_create(&p->train.pd, &bd, NULL, s->eng, NULL));
    OD_CHECK(s, node, "batchnorm partial forward", dnnl_primitive_create(&p->train.p, p->train.pd));
    OD_CHECK(s, node, "batchnorm partial backward desc",
             dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &y, &x, nd->a.eps, flags));
    OD_CHECK(s, node, "batchnorm partial backward",
             dnnl_primitive_desc_create(&p->bwd.pd, &bd, NULL, s->eng, p->train.pd));
    OD_CHECK(s, node, "batchnorm partial backward", dnnl_primitive_create(&p->bwd.p, p->bwd.pd));
    int rc = part_mems(s, node, p, &x, &y);
    if (!rc)
        p->n = n;
    return rc;
}

static int part_exec(od_state *s, int node, const od_prim *p, int nargs, const dnnl_exec_arg_t *args)
{
    OD_CHECK(s, node, "batchnorm partial", dnnl_primitive_execute(p->p, s->strm, nargs, args));
    return 0;
}

/* Zeroes rows [n, batch) of a buffer laid out like node's md. */
static void zero_tail(od_state *s, od_tensor *t, void *buf, int n)
{
    size_t row = t->bytes / (size_t)s->m->batch;
    memset((char *)buf + row * (size_t)n, 0, row * (size_t)(s->m->batch - n));
}

/* Training forward over the first n rows only; 1 if not possible. */
static int bn_forward_part(od_state *s, int node, od_bn *b)
{
    int n = s->nvalid;
    if (b->part.n != n) {
        part_fini(&b->part);
        int rc = part_build(s, node, &b->part, n);
        if (rc) {
            part_fini(&b->part);
            return rc;
        }
    }
    bn_part *p = &b->part;
    dnnl_exec_arg_t a[7] = {{DNNL_ARG_SRC, p->src},        {DNNL_ARG_DST, p->dst},
                            {DNNL_ARG_SCALE, b->scale},    {DNNL_ARG_SHIFT, b->shift},
                            {DNNL_ARG_MEAN, b->mean_mem},  {DNNL_ARG_VARIANCE, b->var_mem},
                            {DNNL_ARG_WORKSPACE, p->ws_mem}};
    int rc = part_exec(s, node, &p->train, p->ws_mem ? 7 : 6, a);
    if (rc)
        return rc;
    zero_tail(s, &s->t[node], s->t[node].buf, n);
    bn_update_running(s, node, b, n);
    b->used_part = 1;
    return 0;
}

static int bn_backward_part(od_state *s, int node, od_bn *b, int acc)
{
    bn_part *p = &b->part;
    int staged = od_diff_staged(s, node, 0);
    dnnl_exec_arg_t a[10] = {{DNNL_ARG_SRC, p->src},
                             {DNNL_ARG_MEAN, b->mean_mem},
                             {DNNL_ARG_VARIANCE, b->var_mem},
                             {DNNL_ARG_DIFF_DST, p->ddst},
                             {DNNL_ARG_SCALE, b->scale},
                             {DNNL_ARG_SHIFT, b->shift},
                             {DNNL_ARG_DIFF_SRC, staged ? p->dacc : p->dsrc},
                             {DNNL_ARG_DIFF_SCALE, acc ? b->dscale_mem : b->gscale},
                             {DNNL_ARG_DIFF_SHIFT, acc ? b->dshift_mem : b->gshift},
                             {DNNL_ARG_WORKSPACE, p->ws_mem}};
    int rc = part_exec(s, node, &p->bwd, p->ws_mem ? 10 : 9, a);
    if (!rc) /* padding rows get no gradient */
        zero_tail(s, od_in(s, node, 0), staged ? s->scratch : od_in(s, node, 0)->dbuf, p->n);
    return rc;
}

/* running = (1-m)*running + m*batch over `count` elements per channel. */
static void bn_update_running_n(od_state *s, int node, od_bn *b, double n)
{
    const so_node *nd = od_node(s, node);
    float unbias = n > 1 ? (float)(n / (n - 1)) : 1.0f, mom = nd->a.momentum;
    float *rm = s->m->bufs + nd->buf_off, *rv = rm + nd->out.c;
    for (int c = 0; c < nd->out.c; c++) {
        rm[c] = (1.0f - mom) * rm[c] + mom * b->mean[c];
        rv[c] = (1.0f - mom) * rv[c] + mom * b->var[c] * unbias;
    }
}

static int sync_setup(od_state *s, int node, od_bn *b)
{
    const so_node *nd = od_node(s, node);
    size_t c = (size_t)nd->out.c;
    b->sync_v = malloc((2 * c + 1) * sizeof(double));
    b->sync_a = malloc(2 * c * sizeof(float));
    if (!b->sync_v || !b->sync_a)
        return so_err(SO_ENOMEM, "out of memory for synchronised batchnorm %s", nd->name);
    b->sync_b = b->sync_a + c;
    unsigned flags = dnnl_use_scale | dnnl_use_shift | dnnl_use_global_stats | (nd->a.relu ? dnnl_fuse_norm_relu : 0u);
    dnnl_batch_normalization_desc_t bd;
    OD_CHECK(s, node, "batchnorm sync forward desc",
             dnnl_batch_normalization_forward_desc_init(&bd, dnnl_forward_training, &od_in(s, node, 0)->md, nd->a.eps,
                                                        flags));
    OD_CHECK(s, node, "batchnorm sync forward", dnnl_primitive_desc_create(&b->sync_train.pd, &bd, NULL, s->eng, NULL));
    OD_CHECK(s, node, "batchnorm sync forward", dnnl_primitive_create(&b->sync_train.p, b->sync_train.pd));
    if (nd->a.relu) {
        dnnl_memory_desc_t ws = od_query_md(&b->sync_train, dnnl_query_workspace_md);
        dnnl_memory_desc_t ws_local = od_query_md(&b->train, dnnl_query_workspace_md);
        if (!dnnl_memory_desc_equal(&ws, &ws_local))
            return so_err(SO_EUNSUP, "synchronised batchnorm %s: workspace layouts differ", nd->name);
    }
    return 0;
}

/* Global mean and variance: one allsum of [sum x C][sum x^2 C][count], in
 * double so E[x^2] - E[x]^2 keeps its digits. */
static int bn_global_stats(od_state *s, int node, od_bn *b, double *count)
{
    const so_node *nd = od_node(s, node);
    int c = nd->out.c;
    od_tensor *in = od_in(s, node, 0);
    for (int k = 0; k < c; k++)
        b->mean[k] = 0;
    int rc = od_chan_sums(&in->md, in->buf, s->nvalid, b->mean, b->sync_v, b->sync_v + c);
    if (rc)
        return rc;
    b->sync_v[2 * c] = (double)s->nvalid * nd->out.h * nd->out.w;
    if ((rc = s->m->bn_allsum(s->m->bn_allsum_arg, b->sync_v, 2 * c + 1)))
        return rc;
    double cnt = b->sync_v[2 * c];
    for (int k = 0; k < c; k++) {
        double mu = b->sync_v[k] / cnt, var = b->sync_v[c + k] / cnt - mu * mu;
        b->mean[k] = (float)mu;
        b->var[k] = (float)(var > 0 ? var : 0);
    }
    *count = cnt;
    return 0;
}

static int bn_forward_sync(od_state *s, int node, od_bn *b)
{
    if (s->t[node].half) /* the sums below read FP32 */
        return so_err(SO_EUNSUP, "batch norm %s: synchronised statistics on BF16 activations (create the model "
                                 "with so_model_opts.sync_bn)", od_node(s, node)->name);
    double cnt = 0;
    int rc = b->sync_v ? 0 : sync_setup(s, node, b);
    if (!rc)
        rc = bn_global_stats(s, node, b, &cnt);
    if (rc)
        return rc;
    od_tensor *in = od_in(s, node, 0);
    dnnl_exec_arg_t a[7] = {{DNNL_ARG_SRC, in->mem},        {DNNL_ARG_DST, s->t[node].mem},
                            {DNNL_ARG_SCALE, b->scale},     {DNNL_ARG_SHIFT, b->shift},
                            {DNNL_ARG_MEAN, b->mean_mem},   {DNNL_ARG_VARIANCE, b->var_mem},
                            {DNNL_ARG_WORKSPACE, b->ws_mem}};
    rc = od_exec(s, node, "batchnorm sync forward", &b->sync_train, b->ws_mem ? 7 : 6, a);
    if (rc)
        return rc;
    if (s->nvalid < s->m->batch)
        zero_tail(s, &s->t[node], s->t[node].buf, s->nvalid);
    bn_update_running_n(s, node, b, cnt);
    b->sync_count = cnt;
    b->synced = 1;
    return 0;
}

/* oneDNN's backward used the local means of dy and dy*xhat over all `batch`
 * rows; swap them for the global ones: dx += a[c] + b[c] * x. */
static int bn_backward_sync_fix(od_state *s, int node, od_bn *b, const float *lshift, const float *lscale)
{
    const so_node *nd = od_node(s, node);
    int c = nd->out.c;
    for (int k = 0; k < c; k++) {
        b->sync_v[k] = lshift[k];
        b->sync_v[c + k] = lscale[k];
    }
    int rc = s->m->bn_allsum(s->m->bn_allsum_arg, b->sync_v, 2 * c);
    if (rc || !so_graph_needs_diff(s->g, node, 0))
        return rc;
    const float *gamma = so_model_params_at(s->m, nd->param_off);
    double nl = (double)s->m->batch * nd->out.h * nd->out.w, ng = b->sync_count;
    for (int k = 0; k < c; k++) {
        double invstd = 1.0 / sqrt((double)b->var[k] + nd->a.eps), k0 = gamma[k] * invstd;
        double db = lshift[k] / nl - b->sync_v[k] / ng, dg = lscale[k] / nl - b->sync_v[c + k] / ng;
        b->sync_a[k] = (float)(k0 * (db - b->mean[k] * invstd * dg));
        b->sync_b[k] = (float)(k0 * invstd * dg);
    }
    od_tensor *in = od_in(s, node, 0);
    float *dx = od_diff_staged(s, node, 0) ? s->scratch : in->dbuf;
    rc = od_chan_axpb(&in->md, in->buf, dx, s->nvalid, b->sync_a, b->sync_b);
    if (!rc && s->nvalid < s->m->batch)
        zero_tail(s, in, dx, s->nvalid);
    return rc;
}

/* Scale and shift where the parameters are now (a sharded strategy may
 * gather them elsewhere: so_model_params_at). */
static int bn_bind_params(od_state *s, int node, od_bn *b)
{
    const so_node *nd = od_node(s, node);
    float *p = so_model_params_at(s->m, nd->param_off);
    int rc = od_mem_rebind(s, node, b->scale, p);
    return rc ? rc : od_mem_rebind(s, node, b->shift, p + nd->out.c);
}

static int bn_forward(od_state *s, int node, int training)
{
    od_bn *b = s->t[node].priv;
    int brc = bn_bind_params(s, node, b);
    if (brc)
        return brc;
    b->used_part = 0;
    b->synced = 0;
    if (training && s->m->bn_allsum)
        return bn_forward_sync(s, node, b);
    if (training && s->nvalid < s->m->batch) {
        int rc = bn_forward_part(s, node, b);
        if (rc <= 0)
            return rc;
    }
    dnnl_exec_arg_t a[7] = {{DNNL_ARG_SRC, od_in(s, node, 0)->mem},
                            {DNNL_ARG_DST, s->t[node].mem},
                            {DNNL_ARG_SCALE, b->scale},
                            {DNNL_ARG_SHIFT, b->shift},
                            {DNNL_ARG_MEAN, training ? b->mean_mem : b->rmean},
                            {DNNL_ARG_VARIANCE, training ? b->var_mem : b->rvar},
                            {DNNL_ARG_WORKSPACE, b->ws_mem}};
    int nargs = (training && b->ws_mem) ? 7 : 6;
    int rc = od_exec(s, node, training ? "batchnorm forward" : "batchnorm eval",
                     training ? &b->train : &b->eval, nargs, a);
    if (!rc && training)
        bn_update_running(s, node, b, s->m->batch);
    return rc;
}

static int bn_backward(od_state *s, int node)
{
    od_bn *b = s->t[node].priv;
    const so_node *nd = od_node(s, node);
    int acc = s->m->accumulate_grads;
    float *base = so_model_grads_at(s->m, nd->param_off);
    int rc = bn_bind_params(s, node, b);
    if (!rc)
        rc = od_mem_rebind(s, node, b->gscale, base);
    if (!rc)
        rc = od_mem_rebind(s, node, b->gshift, base + nd->out.c);
    if (rc)
        return rc;
    dnnl_exec_arg_t a[10] = {{DNNL_ARG_SRC, od_in(s, node, 0)->mem},
                             {DNNL_ARG_MEAN, b->mean_mem},
                             {DNNL_ARG_VARIANCE, b->var_mem},
                             {DNNL_ARG_DIFF_DST, s->t[node].dmem},
                             {DNNL_ARG_SCALE, b->scale},
                             {DNNL_ARG_SHIFT, b->shift},
                             {DNNL_ARG_DIFF_SRC, od_diff_target(s, node, 0)},
                             {DNNL_ARG_DIFF_SCALE, acc ? b->dscale_mem : b->gscale},
                             {DNNL_ARG_DIFF_SHIFT, acc ? b->dshift_mem : b->gshift},
                             {DNNL_ARG_WORKSPACE, b->ws_mem}};
    rc = b->used_part ? bn_backward_part(s, node, b, acc)
                          : od_exec(s, node, "batchnorm backward", &b->bwd, b->ws_mem ? 10 : 9, a);
    if (!rc && b->synced)
        rc = bn_backward_sync_fix(s, node, b, acc ? b->dshift : base + nd->out.c, acc ? b->dscale : base);
    if (rc)
        return rc;
    od_diff_finish(s, node, 0);
    if (acc) {
        size_t c = (size_t)nd->out.c;
        od_vec_add(base, b->dscale, c);
        od_vec_add(base + c, b->dshift, c);
    }
    return 0;
}

static void bn_destroy(void *priv)
{
    od_bn *b = priv;
    part_fini(&b->part);
    od_prim_fini(&b->sync_train);
    free(b->sync_v);
    free(b->sync_a);
    od_prim_fini(&b->train);
    od_prim_fini(&b->eval);
    od_prim_fini(&b->bwd);
    od_mem_free(&b->scale, NULL);
    od_mem_free(&b->shift, NULL);
    od_mem_free(&b->rmean, NULL);
    od_mem_free(&b->rvar, NULL);
    od_mem_free(&b->gscale, NULL);
    od_mem_free(&b->gshift, NULL);
    od_mem_free(&b->mean_mem, &b->mean);
    od_mem_free(&b->var_mem, &b->var);
    od_mem_free(&b->ws_mem, &b->ws);
    od_mem_free(&b->dscale_mem, &b->dscale);
    od_mem_free(&b->dshift_mem, &b->dshift);
    free(b);
}

const od_op od_op_bn = {bn_create, bn_forward, bn_backward, bn_destroy, NULL};
