/* Gradient checks of the reference backend: for every op kind and one block of
 * each model family, the analytic gradient of the loss with respect to every
 * parameter tensor and to the input is compared with central differences.
 * Plus hand-computed forward values, determinism and partial batches. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ref_probe.h"
#include "scaleout/backend.h"
#include "scaleout/err.h"
#include "scaleout/model.h"
#include "scaleout/rng.h"
#include "scaleout/threads.h"

#define BATCH 3
#define CLASSES 3
#define EPS 1e-3      /* central-difference step */
#define RTOL 1e-2     /* relative tolerance ... */
#define ATOL 1e-3     /* ... with an absolute floor for float round-off */
#define CHECKS 24     /* entries checked per tensor (spread over it) */
#define DROP_SEED 77  /* dropout stream reseeded before every forward */

/* A model under test with its fixed inputs. */
typedef struct {
    so_model *m;
    float *x;      /* (batch,C,H,W) */
    int32_t *y;    /* (batch) labels */
    float *logits; /* (batch,K) scratch */
    size_t xlen;   /* floats in x */
    int n;         /* samples fed (== batch) */
} gc;

static void gc_open(gc *c, so_graph *g, int batch, uint64_t seed)
{
    int rc = so_graph_finalize(g);
    if (rc)
        print_error("finalize: %s\n", so_errmsg());
    assert_int_equal(rc, 0);
    /* He's initialisation, which the step and kink test below were set for:
     * PyTorch's smaller weights put more ReLU / max-pool inputs within a step
     * of their kink (the VGG block then disagrees at a few entries). */
    so_model_opts o = {.backend = "ref", .batch = batch, .seed = seed, .init = SO_INIT_HE};
    assert_int_equal(so_model_create_opts(g, &o, &c->m), 0);
    so_shape in = so_graph_input_shape(c->m->g);
    int k = so_graph_classes(c->m->g);
    c->n = batch;
    c->xlen = (size_t)batch * in.c * in.h * in.w;
    c->x = malloc(c->xlen * sizeof *c->x);
    c->y = malloc((size_t)batch * sizeof *c->y);
    c->logits = malloc((size_t)batch * k * sizeof *c->logits);
    assert_non_null(c->x);
    assert_non_null(c->y);
    assert_non_null(c->logits);
    so_rng r;
    so_rng_seed(&r, seed ^ 0x5eedULL);
    for (size_t i = 0; i < c->xlen; i++)
        c->x[i] = so_rng_normal(&r);
    for (int i = 0; i < batch; i++)
        c->y[i] = (int32_t)so_rng_below(&r, (uint64_t)k);
}

static void gc_close(gc *c)
{
    so_model_destroy(c->m);
    free(c->x);
    free(c->y);
    free(c->logits);
}

/* Mean softmax cross-entropy of rows [0,n) of logits (n,K) in double. */
static double xent(const float *logits, const int32_t *y, int n, int k)
{
    double sum = 0.0;
    for (int s = 0; s < n; s++) {
        const float *row = logits + (size_t)s * k;
        double mx = row[0], e = 0.0;
        for (int j = 1; j < k; j++)
            mx = row[j] > mx ? row[j] : mx;
        for (int j = 0; j < k; j++)
            e += exp(row[j] - mx);
        sum += mx + log(e) - row[y[s]];
    }
    return sum / n;
}

/* Training-mode loss of the fixed inputs, recomputed in double from the
 * logits (and checked against m->loss); the dropout stream is reseeded so
 * every evaluation draws the same mask. */
static double gc_loss(gc *c)
{
    so_rng_seed(&c->m->rng, DROP_SEED);
    assert_int_equal(so_model_forward(c->m, c->x, c->y, c->n, 1), 0);
    assert_int_equal(so_model_logits(c->m, c->logits), 0);
    double l = xent(c->logits, c->y, c->n, so_graph_classes(c->m->g));
    assert_true(fabs(l - c->m->loss) <= 1e-5 * (1.0 + fabs(l)));
    return l;
}

static int close_enough(double a, double num) { return fabs(a - num) <= RTOL * fmax(fabs(a), fabs(num)) + ATOL; }

/* Central difference of the loss in v[k] with step h (the step actually
 * representable in float is used as the denominator). */
static double numeric(gc *c, float *v, size_t k, double h)
{
    float save = v[k], hi = save + (float)h, lo = save - (float)h;
    v[k] = hi;
    so_model_params_changed(c->m);
    double lp = gc_loss(c);
    v[k] = lo;
    so_model_params_changed(c->m);
    double lm = gc_loss(c);
    v[k] = save;
    so_model_params_changed(c->m);
    return (lp - lm) / ((double)hi - (double)lo);
}

/* Compares grad[k] with central differences of the loss in v[k] for up to
 * CHECKS entries spread over v[0..len); returns the number of mismatches and
 * raises *maxg to the largest |grad| seen (all-zero gradients prove nothing).
 * A mismatch is retried with a 4x smaller step: a ReLU or max-pool kink
 * inside the step window shrinks away, a wrong gradient does not. */
static int check_vector(gc *c, const char *what, float *v, const float *grad, size_t len, double *maxg)
{
    int bad = 0;
    size_t step = len <= CHECKS ? 1 : (len + CHECKS - 1) / CHECKS;
    for (size_t k = (len - 1) % step; k < len; k += step) {
        double num = numeric(c, v, k, EPS);
        *maxg = fmax(*maxg, fabs(grad[k]));
        if (close_enough(grad[k], num) || close_enough(grad[k], numeric(c, v, k, EPS / 4)))
            continue;
        if (bad < 5)
            print_message("  %s[%zu]: analytic %.6g numeric %.6g\n", what, k, grad[k], num);
        bad++;
    }
    return bad;
}

/* Checks every parameter tensor of every node, then (probe > 0) the input
 * against the diff of node `probe`, an identity of the input. */
static void gc_check(gc *c, int probe)
{
    gc_loss(c);
    assert_int_equal(so_model_backward(c->m), 0);
    float *grads = malloc(c->m->nparams * sizeof *grads + 1); /* +1: the loss-only graph has none */
    float *dx = malloc(c->xlen * sizeof *dx);
    assert_non_null(grads);
    assert_non_null(dx);
    memcpy(grads, c->m->grads, c->m->nparams * sizeof *grads);
    if (probe > 0)
        memcpy(dx, ref_probe_diff(c->m, probe), c->xlen * sizeof *dx);
    int bad = 0;
    double maxg = 0.0;
    for (int i = 1; i < so_graph_size(c->m->g); i++) {
        so_tensor_desc t[4];
        int nt = so_node_tensors(c->m->g, i, t);
        for (int k = 0; k < nt; k++) {
            if (t[k].is_buffer)
                continue;
            char what[96];
            snprintf(what, sizeof what, "%s.%s", so_graph_node(c->m->g, i)->name, t[k].suffix);
            bad += check_vector(c, what, c->m->params + t[k].off, grads + t[k].off, t[k].count, &maxg);
        }
    }
    if (probe > 0)
        bad += check_vector(c, "input", c->x, dx, c->xlen, &maxg);
    free(grads);
    free(dx);
    assert_int_equal(bad, 0);
    assert_true(maxg > 10 * ATOL);
}

/* Input (ch,h,w) followed by node 1 = dropout(p=0), an exact identity whose
 * diff is d loss / d input (the executor skips the input's own diff). */
static so_graph *gc_graph(int ch, int h, int w, int *x)
{
    so_graph *g = so_graph_create(ch, h, w);
    assert_non_null(g);
    *x = so_g_dropout(g, 0, 0.0f);
    assert_int_equal(*x, 1);
    return g;
}

/* Ends the graph: dense to CLASSES logits (it mixes every output), loss. */
static void gc_head(so_graph *g, int from) { so_g_loss(g, so_g_dense(g, from, "head", CLASSES)); }

static int count_op(const so_graph *g, so_op op)
{
    int k = 0;
    for (int i = 0; i < so_graph_size(g); i++)
        k += so_graph_node(g, i)->op == op;
    return k;
}

/* Finalizes, builds a batch-BATCH ref model and runs every check. With
 * fuse, so_graph_fuse must have folded every ReLU. */
static void gc_run(so_graph *g, int fuse)
{
    if (fuse) {
        assert_int_equal(so_graph_fuse(g), 0);
        assert_int_equal(count_op(g, SO_OP_RELU), 0);
    }
    gc c;
    gc_open(&c, g, BATCH, 1234);
    gc_check(&c, 1);
    gc_close(&c);
}

/* ---- single ops ---- */

static void t_dense(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(2, 2, 2, &x);
    gc_head(g, so_g_tanh(g, so_g_dense(g, x, "fc", 5)));
    gc_run(g, 0);
}

static void t_conv_stride_pad_groups(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(4, 5, 5, &x);
    gc_head(g, so_g_conv_grouped(g, x, "conv", 4, 3, 2, 1, 2, 1));
    gc_run(g, 0);
}

static void t_conv_nobias(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(3, 5, 4, &x);
    gc_head(g, so_g_conv(g, x, "conv", 2, 3, 1, 0, 0));
    gc_run(g, 0);
}

/* Rectangular kernel, unequal strides and paddings: catches swapped h/w. */
static void t_conv_rect(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(2, 5, 6, &x);
    so_attrs a = {.out = 3, .kh = 3, .kw = 2, .sh = 1, .sw = 2, .ph = 1, .pw = 0, .groups = 1, .bias = 1};
    gc_head(g, so_graph_add(g, SO_OP_CONV, "conv", &x, 1, &a));
    gc_run(g, 0);
}

static void t_maxpool(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(2, 5, 5, &x);
    gc_head(g, so_g_maxpool(g, x, 3, 2, 1));
    gc_run(g, 0);
    g = gc_graph(2, 4, 4, &x);
    gc_head(g, so_g_maxpool(g, x, 2, 2, 0));
    gc_run(g, 0);
}

static void t_avgpool(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(2, 5, 5, &x);
    gc_head(g, so_g_avgpool(g, x, 3, 2, 1));
    gc_run(g, 0);
}

static void t_gap(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(3, 3, 4, &x);
    gc_head(g, so_g_gap(g, x));
    gc_run(g, 0);
}

static void t_relu(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(2, 3, 3, &x);
    gc_head(g, so_g_relu(g, x));
    gc_run(g, 0);
}

static void t_tanh(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(2, 3, 3, &x);
    gc_head(g, so_g_tanh(g, x));
    gc_run(g, 0);
}

static void t_sigmoid(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(2, 3, 3, &x);
    gc_head(g, so_g_sigmoid(g, x));
    gc_run(g, 0);
}

/* Training mode: the batch statistics depend on every input. */
static void t_batchnorm(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(3, 3, 3, &x);
    gc_head(g, so_g_bn(g, x, "bn"));
    gc_run(g, 0);
}

static void t_dropout(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(2, 3, 3, &x);
    gc_head(g, so_g_dropout(g, x, 0.4f));
    gc_run(g, 0);
}

static void t_flatten(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(2, 3, 3, &x);
    gc_head(g, so_g_tanh(g, so_g_flatten(g, so_g_conv(g, x, "conv", 2, 3, 1, 1, 1))));
    gc_run(g, 0);
}

/* x + conv(x): the identity input gets diffs from two consumers. */
static void t_add(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(2, 4, 4, &x);
    gc_head(g, so_g_add(g, x, so_g_conv(g, x, "conv", 2, 3, 1, 1, 1)));
    gc_run(g, 0);
}

/* Three inputs with one tensor in two slots: exercises accumulation order. */
static void t_add3(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(2, 3, 3, &x);
    int c = so_g_conv(g, x, "conv", 2, 1, 1, 0, 1);
    int in[3] = {c, x, c};
    gc_head(g, so_graph_add(g, SO_OP_ADD, "add3", in, 3, NULL));
    gc_run(g, 0);
}

static void t_concat(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(2, 3, 3, &x);
    int a = so_g_conv(g, x, "a", 2, 1, 1, 0, 1), b = so_g_conv(g, x, "b", 3, 3, 1, 1, 1);
    int in[3] = {a, x, b};
    gc_head(g, so_g_concat(g, in, 3));
    gc_run(g, 0);
}

/* The loss alone: the input are the logits. */
static void t_loss(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(4, 1, 1, &x);
    so_g_loss(g, x);
    gc_run(g, 0);
}

/* ---- fused ReLU ---- */

static void t_fused_conv_dense(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(2, 4, 4, &x);
    int c = so_g_relu(g, so_g_conv(g, x, "conv", 3, 3, 1, 1, 1));
    gc_head(g, so_g_relu(g, so_g_dense(g, c, "fc", 6)));
    gc_run(g, 1);
}

static void t_fused_bn_add(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(2, 3, 3, &x);
    int b = so_g_relu(g, so_g_bn(g, so_g_conv(g, x, "conv", 2, 3, 1, 1, 0), "bn"));
    gc_head(g, so_g_relu(g, so_g_add(g, b, x)));
    gc_run(g, 1);
}

/* ---- one block per model family ---- */

/* conv-bn-relu-conv-bn + identity, relu; gap, dense. */
static so_graph *resnet_block(void)
{
    int x;
    so_graph *g = gc_graph(3, 4, 4, &x);
    int h = so_g_relu(g, so_g_bn(g, so_g_conv(g, x, "conv1", 3, 3, 1, 1, 0), "bn1"));
    h = so_g_bn(g, so_g_conv(g, h, "conv2", 3, 3, 1, 1, 0), "bn2");
    gc_head(g, so_g_gap(g, so_g_relu(g, so_g_add(g, h, x))));
    return g;
}

static void t_resnet_block(void **st)
{
    (void)st;
    gc_run(resnet_block(), 0);
    gc_run(resnet_block(), 1);
}

/* conv-relu-conv-relu-maxpool; dense. */
static so_graph *vgg_block(void)
{
    int x;
    so_graph *g = gc_graph(2, 4, 4, &x);
    int h = so_g_relu(g, so_g_conv(g, x, "conv1", 3, 3, 1, 1, 1));
    h = so_g_relu(g, so_g_conv(g, h, "conv2", 3, 3, 1, 1, 1));
    gc_head(g, so_g_maxpool(g, h, 2, 2, 0));
    return g;
}

static void t_vgg_block(void **st)
{
    (void)st;
    gc_run(vgg_block(), 0);
    gc_run(vgg_block(), 1);
}

/* LeNet in miniature: conv5-tanh-avgpool-conv3-relu-avgpool-dense-relu-dense. */
static void t_lenet(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(1, 12, 12, &x);
    int h = so_g_avgpool(g, so_g_tanh(g, so_g_conv(g, x, "conv1", 3, 5, 1, 0, 1)), 2, 2, 0);
    h = so_g_avgpool(g, so_g_relu(g, so_g_conv(g, h, "conv2", 4, 3, 1, 0, 1)), 2, 2, 0);
    h = so_g_relu(g, so_g_dense(g, so_g_flatten(g, h), "fc1", 6));
    gc_head(g, h);
    gc_run(g, 0);
}

/* ---- exact values, determinism, partial batches ---- */

/* Input 1x3x3 = 1..9, conv 2x2 weight [[1,2],[3,4]] bias 1, flatten, dense
 * with known weights: every number below is worked out by hand. */
static void t_hand_conv(void **st)
{
    (void)st;
    so_graph *g = so_graph_create(1, 3, 3);
    int c = so_g_conv(g, 0, "conv", 1, 2, 1, 0, 1);  /* (1,2,2) */
    int p = so_g_conv(g, 0, "convp", 1, 2, 2, 1, 0); /* pad 1 stride 2: (1,2,2) */
    int mx = so_g_maxpool(g, 0, 2, 1, 0);            /* (1,2,2), off the loss path */
    int av = so_g_avgpool(g, 0, 3, 1, 1);            /* (1,3,3), off the loss path */
    int both[2] = {c, p};
    int fc = so_g_dense(g, so_g_concat(g, both, 2), "fc", 2);
    so_g_loss(g, fc);
    gc c0;
    gc_open(&c0, g, 1, 1);
    so_model *m = c0.m;
    const float w[4] = {1, 2, 3, 4};
    float *pc = m->params + so_graph_node(m->g, c)->param_off, *pp = m->params + so_graph_node(m->g, p)->param_off;
    memcpy(pc, w, sizeof w);
    pc[4] = 1.0f; /* bias */
    memcpy(pp, w, sizeof w);
    float *pf = m->params + so_graph_node(m->g, fc)->param_off; /* (2,8) then bias (2) */
    memset(pf, 0, 18 * sizeof *pf);
    pf[0] = 0.01f;      /* logit 0 = 0.01 * conv[0,0] = 0.38 */
    pf[8 + 3] = 0.01f;  /* logit 1 = 0.01 * conv[1,1] = 0.78 */
    so_model_params_changed(m);
    for (int k = 0; k < 9; k++)
        c0.x[k] = (float)(k + 1);
    c0.y[0] = 1;
    assert_int_equal(so_model_forward(m, c0.x, c0.y, 1, 1), 0);
    float out[9];
    const float want_conv[4] = {38, 48, 68, 78}, want_pad[4] = {4, 18, 36, 77}, want_max[4] = {5, 6, 8, 9};
    /* count_include_pad: corners sum 4 cells over 9, edges 6 cells, centre all 9. */
    const float want_avg[9] = {12 / 9.f, 21 / 9.f, 16 / 9.f, 27 / 9.f, 45 / 9.f, 33 / 9.f, 24 / 9.f, 39 / 9.f, 28 / 9.f};
    assert_int_equal(so_model_node_output(m, c, out), 0);
    assert_memory_equal(out, want_conv, sizeof want_conv);
    assert_int_equal(so_model_node_output(m, p, out), 0);
    assert_memory_equal(out, want_pad, sizeof want_pad);
    /* mx and av are not on the loss path but the executor runs every node. */
    assert_int_equal(so_model_node_output(m, mx, out), 0);
    assert_memory_equal(out, want_max, sizeof want_max);
    assert_int_equal(so_model_node_output(m, av, out), 0);
    for (int k = 0; k < 9; k++)
        assert_true(fabsf(out[k] - want_avg[k]) < 1e-6f);
    /* loss = log(e^0.38 + e^0.78) - 0.78 = log(1 + e^-0.4) */
    assert_true(fabs(m->loss - log1p(exp(-0.4))) < 1e-6);
    /* d loss / d fc bias = softmax - onehot = (s0, -s0), s0 = 1/(1+e^0.4). */
    assert_int_equal(so_model_backward(m), 0);
    double s0 = 1.0 / (1.0 + exp(0.4));
    const float *gf = m->grads + so_graph_node(m->g, fc)->param_off;
    assert_true(fabs(gf[16] - s0) < 1e-6 && fabs(gf[17] + s0) < 1e-6);
    /* conv tap (0,0) sees x=1 under output (0,0) (d = 0.01 s0) and x=5 under
     * output (1,1) (d = -0.01 s0); the conv bias gets 0.01 (s0 - s0) = 0. */
    const float *gcv = m->grads + so_graph_node(m->g, c)->param_off;
    assert_true(fabs(gcv[0] - 0.01 * s0 * (1.0 - 5.0)) < 1e-6);
    assert_true(fabs(gcv[4]) < 1e-7);
    gc_close(&c0);
}

/* Batchnorm on the values {1,3,5,7} (batch 2, one channel, 1x2): batch mean
 * 4, biased variance 5 for normalising, unbiased 20/3 for running_var; eval
 * then uses running mean 0.4 and running var 0.9 + 0.1 * 20/3. */
static void t_hand_batchnorm(void **st)
{
    (void)st;
    so_graph *g = so_graph_create(1, 1, 2);
    int bn = so_g_bn(g, 0, "bn");
    so_g_loss(g, so_g_dense(g, bn, "fc", 2));
    gc c;
    gc_open(&c, g, 2, 3);
    const float x[4] = {1, 3, 5, 7};
    memcpy(c.x, x, sizeof x);
    float out[4];
    const float *rs = c.m->bufs + so_graph_node(c.m->g, bn)->buf_off; /* [mean][var] */
    assert_int_equal(so_model_forward(c.m, c.x, c.y, 2, 1), 0);
    assert_int_equal(so_model_node_output(c.m, bn, out), 0);
    for (int k = 0; k < 4; k++)
        assert_true(fabs(out[k] - (x[k] - 4.0) / sqrt(5.0 + 1e-5)) < 1e-6);
    assert_true(fabs(rs[0] - 0.4) < 1e-6);
    assert_true(fabs(rs[1] - (0.9 + 0.1 * 20.0 / 3.0)) < 1e-6);
    assert_int_equal(so_model_forward(c.m, c.x, c.y, 2, 0), 0);
    assert_int_equal(so_model_node_output(c.m, bn, out), 0);
    for (int k = 0; k < 4; k++)
        assert_true(fabs(out[k] - (x[k] - 0.4) / sqrt(rs[1] + 1e-5)) < 1e-6);
    assert_true(fabs(rs[0] - 0.4) < 1e-6); /* eval leaves the running stats alone */
    gc_close(&c);
}

/* Dropout keeps x where so_rng_uniform(m->rng) >= p, drawn in NCHW order over
 * the whole batch, scaled by 1/(1-p); eval is the identity. */
static void t_hand_dropout(void **st)
{
    (void)st;
    so_graph *g = so_graph_create(2, 2, 2);
    int d = so_g_dropout(g, 0, 0.5f);
    so_g_loss(g, so_g_dense(g, d, "fc", 2));
    gc c;
    gc_open(&c, g, 2, 4);
    float out[16];
    so_rng r;
    so_rng_seed(&r, 42);
    so_rng_seed(&c.m->rng, 42);
    assert_int_equal(so_model_forward(c.m, c.x, c.y, 2, 1), 0);
    assert_int_equal(so_model_node_output(c.m, d, out), 0);
    int kept = 0;
    for (int k = 0; k < 16; k++) {
        int keep = so_rng_uniform(&r) >= 0.5f;
        kept += keep;
        assert_true(out[k] == (keep ? c.x[k] * 2.0f : 0.0f));
    }
    assert_true(kept > 0 && kept < 16);
    assert_int_equal(so_model_forward(c.m, c.x, c.y, 2, 0), 0);
    assert_int_equal(so_model_node_output(c.m, d, out), 0);
    assert_memory_equal(out, c.x, sizeof out);
    gc_close(&c);
}

/* Max-pool ties: the first maximum in window order takes the whole gradient. */
static void t_maxpool_ties(void **st)
{
    (void)st;
    int x;
    so_graph *g = gc_graph(1, 2, 2, &x);
    so_g_loss(g, so_g_dense(g, so_g_maxpool(g, x, 3, 2, 1), "fc", 2)); /* one window over all 4 */
    gc c;
    gc_open(&c, g, 1, 6);
    for (int k = 0; k < 4; k++)
        c.x[k] = 1.0f;
    gc_loss(&c);
    assert_int_equal(so_model_backward(c.m), 0);
    const float *dx = ref_probe_diff(c.m, x);
    assert_true(dx[0] != 0.0f);
    assert_true(dx[1] == 0.0f && dx[2] == 0.0f && dx[3] == 0.0f);
    gc_close(&c);
}

/* Same seed, same graph: bitwise identical parameters, loss and gradients. */
static so_graph *small_net(int dropout)
{
    so_graph *g = so_graph_create(2, 6, 6);
    int h = so_g_relu(g, so_g_bn(g, so_g_conv(g, 0, "conv", 4, 3, 1, 1, 0), "bn"));
    h = so_g_maxpool(g, h, 2, 2, 0);
    if (dropout)
        h = so_g_dropout(g, h, 0.3f);
    so_g_loss(g, so_g_dense(g, h, "fc", CLASSES));
    return g;
}

static void t_determinism(void **st)
{
    (void)st;
    gc a, b;
    gc_open(&a, small_net(1), 4, 99);
    gc_open(&b, small_net(1), 4, 99);
    assert_memory_equal(a.m->params, b.m->params, a.m->nparams * sizeof(float));
    assert_memory_equal(a.x, b.x, a.xlen * sizeof(float));
    for (int step = 0; step < 2; step++) {
        assert_int_equal(so_model_forward(a.m, a.x, a.y, 4, 1), 0);
        assert_int_equal(so_model_forward(b.m, b.x, b.y, 4, 1), 0);
        assert_memory_equal(&a.m->loss, &b.m->loss, sizeof(float));
        assert_int_equal(so_model_backward(a.m), 0);
        assert_int_equal(so_model_backward(b.m), 0);
        assert_memory_equal(a.m->grads, b.m->grads, a.m->nparams * sizeof(float));
        assert_memory_equal(a.m->bufs, b.m->bufs, a.m->nbufs * sizeof(float));
    }
    gc_close(&a);
    gc_close(&b);
}

/* A net big enough that every kernel takes its OpenMP path: 1 and 2
 * threads must agree bitwise (iterations are independent, every sum runs in
 * one thread in a fixed order), and the serial path is what the gradient
 * checks above verified. */
static so_graph *medium_net(void)
{
    so_graph *g = so_graph_create(8, 16, 16);
    int h = so_g_relu(g, so_g_bn(g, so_g_conv_grouped(g, 0, "conv1", 16, 3, 1, 1, 2, 1), "bn1"));
    h = so_g_maxpool(g, so_g_conv(g, h, "conv2", 16, 3, 2, 1, 0), 2, 2, 0);
    h = so_g_avgpool(g, so_g_bn(g, h, "bn"), 3, 1, 1);
    h = so_g_relu(g, so_g_dense(g, h, "fc1", 256));
    so_g_loss(g, so_g_dense(g, h, "fc2", CLASSES));
    so_graph_fuse(g);
    return g;
}

static void run_with_threads(gc *c, int threads, float *grads, float *loss)
{
    assert_int_equal(so_threads_set(threads, 0), 0);
    assert_int_equal(so_model_forward(c->m, c->x, c->y, c->n, 1), 0);
    assert_int_equal(so_model_backward(c->m), 0);
    memcpy(grads, c->m->grads, c->m->nparams * sizeof *grads);
    *loss = c->m->loss;
}

static void t_threads_bitwise(void **st)
{
    (void)st;
    gc c;
    gc_open(&c, medium_net(), 8, 21);
    float *g1 = malloc(c.m->nparams * sizeof *g1), *g2 = malloc(c.m->nparams * sizeof *g2), l1, l2;
    assert_non_null(g1);
    assert_non_null(g2);
    int before = so_threads_get();
    run_with_threads(&c, 1, g1, &l1);
    run_with_threads(&c, 2, g2, &l2);
    so_threads_set(before, 0);
    assert_memory_equal(&l1, &l2, sizeof l1);
    assert_memory_equal(g1, g2, c.m->nparams * sizeof *g1);
    free(g1);
    free(g2);
    gc_close(&c);
}

/* A batch-4 model fed 2 samples must match a batch-2 model on the same 2:
 * loss over the valid rows only, batchnorm statistics over them too, and
 * the padded rows contribute no gradient. */
static void t_partial_batch(void **st)
{
    (void)st;
    gc big, small;
    gc_open(&big, small_net(0), 4, 5);
    gc_open(&small, small_net(0), 2, 5);
    memcpy(small.x, big.x, small.xlen * sizeof(float));
    memcpy(small.y, big.y, 2 * sizeof(int32_t));
    for (int training = 1; training >= 0; training--) {
        assert_int_equal(so_model_forward(big.m, big.x, big.y, 2, training), 0);
        assert_int_equal(so_model_forward(small.m, small.x, small.y, 2, training), 0);
        assert_int_equal(big.m->nvalid, 2);
        assert_true(fabsf(big.m->loss - small.m->loss) <= 1e-6f * fabsf(small.m->loss));
        assert_int_equal(so_model_logits(big.m, big.logits), 0);
        assert_true(fabs(xent(big.logits, big.y, 2, CLASSES) - big.m->loss) < 1e-5);
        if (!training)
            continue;
        assert_int_equal(so_model_backward(big.m), 0);
        assert_int_equal(so_model_backward(small.m), 0);
        for (size_t k = 0; k < big.m->nparams; k++)
            assert_true(fabsf(big.m->grads[k] - small.m->grads[k]) <= 1e-5f + 1e-4f * fabsf(small.m->grads[k]));
    }
    gc_close(&big);
    gc_close(&small);
}

/* accumulate_grads adds a second backward onto the first. */
static void t_accumulate(void **st)
{
    (void)st;
    gc c;
    gc_open(&c, small_net(0), 2, 8);
    size_t np = c.m->nparams;
    float *once = malloc(np * sizeof *once);
    assert_non_null(once);
    assert_int_equal(so_model_forward(c.m, c.x, c.y, 2, 1), 0);
    assert_int_equal(so_model_backward(c.m), 0);
    memcpy(once, c.m->grads, np * sizeof *once);
    c.m->accumulate_grads = 1;
    assert_int_equal(so_model_forward(c.m, c.x, c.y, 2, 1), 0);
    assert_int_equal(so_model_backward(c.m), 0);
    for (size_t k = 0; k < np; k++)
        assert_true(fabsf(c.m->grads[k] - 2 * once[k]) <= 1e-6f + 1e-5f * fabsf(once[k]));
    free(once);
    gc_close(&c);
}

/* Labels out of range are an error with a message, not a crash. */
static void t_bad_label(void **st)
{
    (void)st;
    gc c;
    gc_open(&c, small_net(0), 2, 8);
    c.y[1] = CLASSES;
    assert_int_equal(so_model_forward(c.m, c.x, c.y, 2, 1), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "label"));
    gc_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_dense),
        cmocka_unit_test(t_conv_stride_pad_groups),
        cmocka_unit_test(t_conv_nobias),
        cmocka_unit_test(t_conv_rect),
        cmocka_unit_test(t_maxpool),
        cmocka_unit_test(t_avgpool),
        cmocka_unit_test(t_gap),
        cmocka_unit_test(t_relu),
        cmocka_unit_test(t_tanh),
        cmocka_unit_test(t_sigmoid),
        cmocka_unit_test(t_batchnorm),
        cmocka_unit_test(t_dropout),
        cmocka_unit_test(t_flatten),
        cmocka_unit_test(t_add),
        cmocka_unit_test(t_add3),
        cmocka_unit_test(t_concat),
        cmocka_unit_test(t_loss),
        cmocka_unit_test(t_fused_conv_dense),
        cmocka_unit_test(t_fused_bn_add),
        cmocka_unit_test(t_resnet_block),
        cmocka_unit_test(t_vgg_block),
        cmocka_unit_test(t_lenet),
        cmocka_unit_test(t_hand_conv),
        cmocka_unit_test(t_hand_batchnorm),
        cmocka_unit_test(t_hand_dropout),
        cmocka_unit_test(t_maxpool_ties),
        cmocka_unit_test(t_determinism),
        cmocka_unit_test(t_threads_bitwise),
        cmocka_unit_test(t_partial_batch),
        cmocka_unit_test(t_accumulate),
        cmocka_unit_test(t_bad_label),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
