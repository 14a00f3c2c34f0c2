/* The finite-difference gradient check shared by test_gradcheck.c (the CNN
 * ops) and test_seq_ops.c (the sequence ops): a model on the ref backend with
 * fixed random inputs (token ids for a token model), its loss recomputed in
 * double from the logits, and every parameter tensor (and the input, through
 * an identity probe node) compared with central differences. Included by
 * one test file each, after cmocka.h. */
#ifndef SCALEOUT_TESTS_GRADCHECK_H
#define SCALEOUT_TESTS_GRADCHECK_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_probe.h"
#include "scaleout/err.h"
#include "scaleout/model.h"
#include "scaleout/rng.h"

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
    float *x;      /* (batch,C,H,W); token ids for a token model */
    int32_t *y;    /* (batch) labels, (batch,T) targets for a token loss */
    float *logits; /* (batch,K) or (batch,T,Vp) scratch */
    size_t xlen;   /* floats in x */
    int n;         /* samples fed (== batch) */
    int per;       /* targets per sample (so_graph_targets) */
    int width;     /* floats per row of logits (K, or Vp) */
} gc;

static inline void gc_open(gc *c, so_graph *g, int batch, uint64_t seed)
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
    c->per = so_graph_targets(c->m->g);
    c->width = c->per > 1 ? so_graph_node(c->m->g, so_graph_logits(c->m->g))->out.w : k;
    c->xlen = (size_t)batch * in.c * in.h * in.w;
    c->x = malloc(c->xlen * sizeof *c->x);
    c->y = malloc((size_t)batch * c->per * sizeof *c->y);
    c->logits = malloc((size_t)batch * c->per * c->width * sizeof *c->logits);
    assert_non_null(c->x);
    assert_non_null(c->y);
    assert_non_null(c->logits);
    so_rng r;
    so_rng_seed(&r, seed ^ 0x5eedULL);
    int tokens = so_graph_takes_tokens(c->m->g);
    for (size_t i = 0; i < c->xlen; i++)
        c->x[i] = tokens ? (float)so_rng_below(&r, (uint64_t)k) : so_rng_normal(&r);
    for (int i = 0; i < batch * c->per; i++)
        c->y[i] = (int32_t)so_rng_below(&r, (uint64_t)k);
}

static inline void gc_close(gc *c)
{
    so_model_destroy(c->m);
    free(c->x);
    free(c->y);
    free(c->logits);
}

/* Mean softmax cross-entropy over the first k columns of rows [0,n) of
 * logits (n,width) in double; rows whose target is -1 are not counted. */
static inline double xent(const float *logits, const int32_t *y, int n, int width, int k)
{
    double sum = 0.0;
    int counted = 0;
    for (int s = 0; s < n; s++) {
        const float *row = logits + (size_t)s * width;
        double mx = row[0], e = 0.0;
        if (y[s] < 0)
            continue;
        for (int j = 1; j < k; j++)
            mx = row[j] > mx ? row[j] : mx;
        for (int j = 0; j < k; j++)
            e += exp(row[j] - mx);
        sum += mx + log(e) - row[y[s]];
        counted++;
    }
    return counted ? sum / counted : 0.0;
}

/* Training-mode loss of the fixed inputs, recomputed in double from the
 * logits (and checked against m->loss); the dropout stream is reseeded so
 * every evaluation draws the same mask. */
static inline double gc_loss(gc *c)
{
    so_rng_seed(&c->m->rng, DROP_SEED);
    assert_int_equal(so_model_forward(c->m, c->x, c->y, c->n, 1), 0);
    assert_int_equal(so_model_logits(c->m, c->logits), 0);
    double l = xent(c->logits, c->y, c->n * c->per, c->width, so_graph_classes(c->m->g));
    assert_true(fabs(l - c->m->loss) <= 1e-5 * (1.0 + fabs(l)));
    return l;
}

static inline int close_enough(double a, double num) { return fabs(a - num) <= RTOL * fmax(fabs(a), fabs(num)) + ATOL; }

/* Central difference of the loss in v[k] with step h (the step actually
 * representable in float is used as the denominator). */
static inline double numeric(gc *c, float *v, size_t k, double h)
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
static inline int check_vector(gc *c, const char *what, float *v, const float *grad, size_t len, double *maxg)
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
static inline void gc_check(gc *c, int probe)
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
static inline so_graph *gc_graph(int ch, int h, int w, int *x)
{
    so_graph *g = so_graph_create(ch, h, w);
    assert_non_null(g);
    *x = so_g_dropout(g, 0, 0.0f);
    assert_int_equal(*x, 1);
    return g;
}

/* Ends the graph: dense to CLASSES logits (it mixes every output), loss. */
static inline void gc_head(so_graph *g, int from) { so_g_loss(g, so_g_dense(g, from, "head", CLASSES)); }

static inline int count_op(const so_graph *g, so_op op)
{
    int k = 0;
    for (int i = 0; i < so_graph_size(g); i++)
        k += so_graph_node(g, i)->op == op;
    return k;
}

/* Finalizes, builds a batch-BATCH ref model and runs every check. With
 * fuse, so_graph_fuse must have folded every ReLU. */
static inline void gc_run(so_graph *g, int fuse)
{
    if (fuse) {
        assert_int_equal(so_graph_fuse(g), 0);
        assert_int_equal(count_op(g, SO_OP_RELU), 0);
    }
    gc c;
    gc_open(&c, g, BATCH, 1234);
    gc_check(&c, so_graph_takes_tokens(c.m->g) ? 0 : 1); /* token ids have no gradient */
    gc_close(&c);
}

#endif
