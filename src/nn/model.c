/* The model: flat parameter/gradient/state buffers, initialisation, and the
 * executor that walks the graph forward and backward through a backend,
 * calling the gradients-ready hook after each node with parameters. */
#include "scaleout/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/backend.h"
#include "scaleout/cpu.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"
#include "scaleout/timer.h"

const so_backend_ops *so_backend_find(const char *name)
{
    if (!name || !strcmp(name, "onednn"))
        return &so_backend_onednn;
    if (!strcmp(name, "ref"))
        return &so_backend_ref;
    return NULL;
}

static int uses_relu(const so_graph *g)
{
    for (int i = 1; i < so_graph_size(g); i++) {
        const so_node *nd = so_graph_node(g, i);
        if (nd->op == SO_OP_RELU || nd->a.relu)
            return 1;
    }
    return 0;
}

int so_init_parse(const char *name, so_init_scheme *out)
{
    static const char *const names[] = {"torch", "he", "glorot"};
    for (int i = 0; i < 3; i++)
        if (name && !strcmp(name, names[i])) {
            *out = (so_init_scheme)i;
            return 0;
        }
    return so_err(SO_EINVAL, "--init: unknown scheme '%s' (use torch, he or glorot)", name ? name : "");
}

static void fill_uniform(float *w, size_t n, float bound, so_rng *r)
{
    for (size_t k = 0; k < n; k++)
        w[k] = bound * (2.0f * so_rng_uniform(r) - 1.0f);
}

static void fill_normal(float *w, size_t n, float std, so_rng *r)
{
    for (size_t k = 0; k < n; k++)
        w[k] = std * so_rng_normal(r);
}

/* The weight tensor t of node op under `scheme`: He normal (std
 * sqrt(2/fan_in)) for ReLU networks or Glorot uniform; or PyTorch's. */
static void init_weight(float *w, const so_tensor_desc *t, so_op op, so_init_scheme scheme, so_torch_init tv,
                        int relu, so_rng *r)
{
    if (scheme == SO_INIT_HE && relu) {
        fill_normal(w, t->count, sqrtf(2.0f / (float)t->fan_in), r);
    } else if (scheme != SO_INIT_TORCH) {
        fill_uniform(w, t->count, sqrtf(6.0f / (float)(t->fan_in + t->fan_out)), r);
    } else if (op == SO_OP_CONV && tv != SO_TORCH_INIT_MODULES) {
        /* torchvision: kaiming_normal_(mode="fan_out", nonlinearity="relu"),
         * fan_out = out_channels x kh x kw */
        float fan_out = (float)(t->dims[0] * t->dims[2] * t->dims[3]);
        fill_normal(w, t->count, sqrtf(2.0f / fan_out), r);
    } else if (op == SO_OP_DENSE && tv == SO_TORCH_INIT_VGG) {
        fill_normal(w, t->count, 0.01f, r); /* torchvision VGG: normal_(0, 0.01) */
    } else {
        /* kaiming_uniform_(a=sqrt(5)): gain sqrt(2/(1+5)), bound gain*sqrt(3/fan_in) = 1/sqrt(fan_in) */
        fill_uniform(w, t->count, 1.0f / sqrtf((float)t->fan_in), r);
    }
}

/* A conv or dense bias: PyTorch's uniform(+-1/sqrt(fan_in of the weight)),
 * zero where torchvision zeroes it (VGG) and in the other schemes. */
static void init_bias(float *b, size_t n, so_op op, so_init_scheme scheme, so_torch_init tv, int fan_in, so_rng *r)
{
    if (scheme != SO_INIT_TORCH || tv == SO_TORCH_INIT_VGG || fan_in <= 0 || (op != SO_OP_CONV && op != SO_OP_DENSE)) {
        memset(b, 0, n * sizeof *b);
        return;
    }
    fill_uniform(b, n, 1.0f / sqrtf((float)fan_in), r);
}

void so_graph_init_params_with(const so_graph *g, so_init_scheme scheme, uint64_t seed, float *params, float *bufs)
{
    int relu = uses_relu(g);
    so_torch_init tv = so_graph_torch_init(g);
    for (int i = 1; i < so_graph_size(g); i++) {
        so_tensor_desc t[4];
        int nt = so_node_tensors(g, i, t);
        so_op op = so_graph_node(g, i)->op;
        /* One stream per node: weight first, then its bias, so a tensor's
         * values depend only on the seed and its node. */
        so_rng r;
        so_rng_seed(&r, so_rng_derive(seed, (uint64_t)i));
        int norm = op == SO_OP_BATCHNORM || op == SO_OP_LAYERNORM;
        for (int k = 0; k < nt; k++) {
            float *dst = t[k].is_buffer ? bufs + t[k].off : params + t[k].off;
            float fill = 0.0f;
            if (t[k].init_std > 0.0f) { /* the model's own rule (GPT-2's N(0, 0.02^2)) under every scheme */
                fill_normal(dst, t[k].count, t[k].init_std, &r);
                continue;
            }
            if (!norm && !strcmp(t[k].suffix, "weight")) {
                init_weight(dst, &t[k], op, scheme, tv, relu, &r);
                continue;
            }
            if (!norm && !strcmp(t[k].suffix, "bias")) {
                init_bias(dst, t[k].count, op, scheme, tv, t[0].fan_in, &r);
                continue;
            }
            if ((norm && !strcmp(t[k].suffix, "weight")) || !strcmp(t[k].suffix, "running_var"))
                fill = 1.0f;
            for (size_t e = 0; e < t[k].count; e++)
                dst[e] = fill;
        }
    }
}

void so_graph_init_params(const so_graph *g, uint64_t seed, float *params, float *bufs)
{
    so_graph_init_params_with(g, SO_INIT_TORCH, seed, params, bufs);
}

/* The dropout masks' stream, from the model's seed. */
static void seed_dropout(so_model *m, uint64_t seed) { so_rng_seed(&m->rng, so_rng_derive(seed, 0xd50)); }

void so_model_init_params(so_model *m, uint64_t seed)
{
    so_graph_init_params_with(m->g, m->init, seed, m->params, m->bufs);
    seed_dropout(m, seed);
    so_model_params_changed(m);
}

int so_conv_algo_parse(const char *name, so_conv_algo *out)
{
    static const char *const names[] = {"auto", "direct", "winograd"};
    for (int i = 0; i < 3; i++)
        if (name && !strcmp(name, names[i])) {
            *out = (so_conv_algo)i;
            return 0;
        }
    return so_err(SO_EINVAL, "--conv-algo: unknown algorithm '%s' (use auto, direct or winograd)",
                  name ? name : "");
}

int so_model_create(so_graph *g, const char *backend, int batch, uint64_t seed, so_model **out)
{
    so_model_opts o = {.backend = backend, .batch = batch, .seed = seed, .conv_algo = SO_CONV_AUTO};
    return so_model_create_opts(g, &o, out);
}

/* The gradient buffer, first: a caller's allocator may be collective over
 * ranks (registered memory), so nothing that can fail on one rank only comes
 * before it. */
static int alloc_grads(so_model *m, const so_model_opts *o)
{
    size_t bytes = m->nparams * sizeof(float);
    if (!o->grads_alloc) {
        m->grads = so_alloc(bytes);
        return m->grads ? 0 : so_err(SO_ENOMEM, "out of memory for %zu gradients", m->nparams);
    }
    m->grads_free = o->grads_free;
    m->grads_ctx = o->grads_ctx;
    m->grads = o->grads_alloc(o->grads_ctx, bytes ? bytes : sizeof(float));
    if (m->grads)
        return 0;
    char why[256]; /* the allocator's message: so_err must not format from its own buffer */
    snprintf(why, sizeof why, "%s", so_errmsg());
    return so_err(SO_ENOMEM, "gradient buffer of %zu bytes: %s", bytes, why);
}

static int alloc_params(so_model *m, const so_model_opts *o)
{
    size_t bytes = m->nparams * sizeof(float);
    if (!o->params_alloc) {
        m->params = so_alloc(bytes);
        return m->params ? 0 : so_err(SO_ENOMEM, "out of memory for %zu parameters", m->nparams);
    }
    m->params_free = o->params_free;
    m->params_ctx = o->params_ctx;
    m->params = o->params_alloc(o->params_ctx, bytes ? bytes : sizeof(float));
    if (m->params)
        return 0;
    char why[256];
    snprintf(why, sizeof why, "%s", so_errmsg());
    return so_err(SO_ENOMEM, "parameter buffer of %zu bytes: %s", bytes, why);
}

/* Which dense layers run in row chunks (so_model_opts.chunk_bytes); m->chunks
 * stays NULL when none does. */
static int plan_chunks(so_model *m, size_t chunk_bytes)
{
    int n = so_graph_size(m->g), any = 0;
    m->chunks = malloc((size_t)n * sizeof *m->chunks);
    if (!m->chunks)
        return so_err(SO_ENOMEM, "out of memory for the model's chunks");
    for (int i = 0; i < n; i++)
        any |= (m->chunks[i] = so_graph_dense_chunks(m->g, i, chunk_bytes)) > 1;
    if (!any) {
        free(m->chunks);
        m->chunks = NULL;
    }
    return 0;
}

const char *so_precision_name(so_precision p)
{
    return p == SO_PRECISION_FP32 ? "fp32" : p == SO_PRECISION_BF16 ? "bf16" : NULL;
}

/* Why BF16 cannot run here: the hardware lacks it, or a cap hides it. */
static int bf16_unsupported(const char *what)
{
    const char *cap = so_cpu_isa_cap();
    return so_err(SO_EINVAL, "%s: bf16 needs AVX-512 BF16 (vdpbf16ps); this CPU runs %s%s%s%s", what,
                  so_isa_label(so_cpu_isa()), cap ? " (capped by " : " without BF16", cap ? cap : "",
                  cap ? ")" : "");
}

int so_precision_resolve(const char *name, so_precision *out)
{
    if (!name || !strcmp(name, "fp32")) {
        *out = SO_PRECISION_FP32;
        return 0;
    }
    if (!strcmp(name, "auto")) {
        *out = so_cpu_has_bf16() ? SO_PRECISION_BF16 : SO_PRECISION_FP32;
        return 0;
    }
    if (!strcmp(name, "bf16")) {
        *out = SO_PRECISION_BF16;
        return so_cpu_has_bf16() ? 0 : bf16_unsupported("--precision");
    }
    return so_err(SO_EINVAL, "--precision: unknown value '%s' (fp32, bf16 or auto)", name);
}

static int check_precision(so_precision p, const so_backend_ops *be)
{
    if (p == SO_PRECISION_FP32)
        return 0;
    if (p != SO_PRECISION_BF16)
        return so_err(SO_EINVAL, "so_model_opts: unknown precision %d", (int)p);
    if (strcmp(be->name, "onednn"))
        return so_err(SO_EINVAL, "--precision bf16 runs on the onednn backend, not '%s'", be->name);
    return so_cpu_has_bf16() ? 0 : bf16_unsupported("--precision");
}

int so_model_create_opts(so_graph *g, const so_model_opts *o, so_model **out)
{
    const char *backend = o->backend;
    int batch = o->batch;
    uint64_t seed = o->seed;
    *out = NULL;
    const so_backend_ops *be = so_backend_find(backend);
    if (!be) {
        so_graph_destroy(g);
        return so_err(SO_EINVAL, "--backend: unknown backend '%s' (use onednn or ref)", backend);
    }
    if (batch < 1) {
        so_graph_destroy(g);
        return so_err(SO_EINVAL, "batch size %d must be >= 1", batch);
    }
    if (!o->grads_alloc != !o->grads_free || !o->params_alloc != !o->params_free) {
        so_graph_destroy(g);
        return so_err(SO_EINVAL, "so_model_opts: an allocator and its free go together");
    }
    int prc = check_precision(o->precision, be);
    if (prc) {
        so_graph_destroy(g);
        return prc;
    }
    so_model *m = calloc(1, sizeof *m);
    if (!m) {
        so_graph_destroy(g);
        return so_err(SO_ENOMEM, "out of memory creating model");
    }
    m->g = g;
    m->batch = batch;
    m->decode_pos = -1;
    m->conv_algo = o->conv_algo;
    m->recv_layout = o->recv_layout;
    m->recv_layout_ctx = o->recv_layout_ctx;
    m->init = o->init;
    m->precision = o->precision;
    m->sync_bn = o->sync_bn;
    m->nparams = so_graph_nparams(g);
    m->nbufs = so_graph_nbufs(g);
    int rc = alloc_grads(m, o);
    if (rc) {
        so_model_destroy(m);
        return rc;
    }
    if ((rc = alloc_params(m, o))) {
        so_model_destroy(m);
        return rc;
    }
    m->bufs = so_alloc(m->nbufs * sizeof(float));
    m->t_fwd = calloc((size_t)so_graph_size(g), sizeof(double));
    m->t_bwd = calloc((size_t)so_graph_size(g), sizeof(double));
    if (!m->bufs || !m->t_fwd || !m->t_bwd)
        rc = so_err(SO_ENOMEM, "out of memory for %zu parameters", m->nparams);
    if (!rc && o->chunk_bytes && be->dense_chunk)
        rc = plan_chunks(m, o->chunk_bytes);
    if (!rc) {
        m->be = be;
        rc = be->create(m, &m->bs);
    }
    if (rc) {
        m->be = NULL; /* nothing to destroy on the backend side */
        so_model_destroy(m);
        return rc;
    }
    if (o->skip_init)
        seed_dropout(m, seed);
    else
        so_model_init_params(m, seed);
    *out = m;
    return 0;
}

void so_model_destroy(so_model *m)
{
    if (!m)
        return;
    if (m->be && m->slots) {
        for (int k = 0; k < m->nslots; k++)
            m->be->destroy(m->slots[k]);
    } else if (m->be && m->bs)
        m->be->destroy(m->bs);
    free(m->slots);
    if (m->params_free)
        m->params_free(m->params_ctx, m->params);
    else
        so_free(m->params);
    if (m->grads_free)
        m->grads_free(m->grads_ctx, m->grads); /* after the backend, which wrapped it */
    else
        so_free(m->grads);
    so_free(m->bufs);
    free(m->grad_places);
    free(m->param_places);
    free(m->t_fwd);
    free(m->t_bwd);
    free(m->chunks);
    so_graph_destroy(m->g);
    free(m);
}

static void node_timed(so_model *m, int node, int backward, double t0)
{
    double t1 = so_now();
    if (m->timing)
        (backward ? m->t_bwd : m->t_fwd)[node] += t1 - t0;
    if (m->on_node)
        m->on_node(m->on_node_arg, node, backward, t0, t1);
}

/* Labels in [0, classes); a token loss's targets (n x T) also -1, a
 * position not counted. */
static int check_labels(const so_graph *g, const int32_t *y, int n)
{
    int k = so_graph_classes(g), per = so_graph_targets(g), lo = per > 1 ? -1 : 0;
    for (size_t i = 0; y && i < (size_t)n * (size_t)per; i++)
        if (y[i] < lo || y[i] >= k) {
            if (per > 1)
                return so_err(SO_EINVAL, "target %d of sample %zu, position %zu is not a token in [0, %d)",
                              (int)y[i], i / (size_t)per, i % (size_t)per, k);
            return so_err(SO_EINVAL, "label %d of sample %zu is not in [0, %d)", (int)y[i], i, k);
        }
    return 0;
}

/* Token ids (a graph whose input feeds an embed node): whole numbers in
 * [0, vocab), the loss's vocabulary when there is one. */
static int check_tokens(const so_graph *g, const float *x, int n)
{
    if (!x || !so_graph_takes_tokens(g))
        return 0;
    int v = so_graph_classes(g);
    for (int i = 1; !v && i < so_graph_size(g); i++)
        if (so_graph_node(g, i)->op == SO_OP_EMBED)
            v = so_graph_node(g, i)->a.vocab;
    size_t t = (size_t)so_graph_input_shape(g).h;
    for (size_t i = 0; i < (size_t)n * t; i++)
        if (!(x[i] >= 0.0f && x[i] < (float)v && x[i] == (float)(int)x[i]))
            return so_err(SO_EINVAL, "token %g of sample %zu, position %zu is not a token id in [0, %d)",
                          (double)x[i], i / t, i % t, v);
    return 0;
}

int so_model_set_input(so_model *m, const float *x, const int32_t *y, int n)
{
    if (n < 1 || n > m->batch)
        return so_err(SO_EINVAL, "forward of %d samples on a model sized for %d", n, m->batch);
    int rc = check_labels(m->g, y, n);
    if (!rc)
        rc = check_tokens(m->g, x, n);
    if (!rc)
        rc = m->be->set_input(m->bs, x, y, n);
    if (!rc)
        m->nvalid = n;
    return rc;
}

/* A node run in chunks of output rows (so_model.chunks): forward k = 0..K-1,
 * backward K-1..0, each after its chunk hook; backward reports each chunk's
 * gradients as ready as soon as they are written, so a sharded strategy
 * reduces chunk k while chunk k-1 computes. */
static int run_chunks(so_model *m, int node, int backward)
{
    int K = m->chunks[node], rc = 0;
    for (int j = 0; !rc && j < K; j++) {
        int k = backward ? K - 1 - j : j, r0, r1;
        size_t lo, hi;
        so_graph_chunk_rows(m->g, node, K, k, &r0, &r1, &lo, &hi);
        if (m->hooks.chunk_begin)
            rc = m->hooks.chunk_begin(m->hooks.arg, node, k, backward);
        if (!rc)
            rc = m->be->dense_chunk(m->bs, node, k, r0, r1, backward);
        if (!rc && backward && m->on_grad)
            m->on_grad(m->on_grad_arg, node, lo, hi - lo);
    }
    return rc;
}

int so_model_forward_nodes(so_model *m, int lo, int hi, int training)
{
    int timed = m->timing || m->on_node;
    for (int i = lo > 1 ? lo : 1; i < hi && i < so_graph_size(m->g); i++) {
        int rc = m->hooks.forward_begin ? m->hooks.forward_begin(m->hooks.arg, i) : 0;
        if (rc)
            return rc;
        double t0 = timed ? so_now() : 0;
        rc = m->chunks && m->chunks[i] > 1 ? run_chunks(m, i, 0) : m->be->forward(m->bs, i, training);
        if (rc)
            return rc;
        if (timed)
            node_timed(m, i, 0, t0);
    }
    return 0;
}

int so_model_forward(so_model *m, const float *x, const int32_t *y, int n, int training)
{
    m->decode_pos = -1;
    int rc = so_model_set_input(m, x, y, n);
    int last = so_graph_size(m->g) - (!y && so_graph_logits(m->g) >= 0); /* no labels: stop at the logits */
    return rc ? rc : so_model_forward_nodes(m, 1, last, training);
}

int so_model_backward_nodes(so_model *m, int lo, int hi)
{
    int timed = m->timing || m->on_node;
    for (int i = (hi < so_graph_size(m->g) ? hi : so_graph_size(m->g)) - 1; i >= 1 && i >= lo; i--) {
        int rc = m->hooks.backward_begin ? m->hooks.backward_begin(m->hooks.arg, i) : 0;
        if (rc)
            return rc;
        double t0 = timed ? so_now() : 0;
        int chunked = m->chunks && m->chunks[i] > 1;
        rc = chunked ? run_chunks(m, i, 1) : m->be->backward(m->bs, i);
        if (rc)
            return rc;
        if (timed)
            node_timed(m, i, 1, t0);
        const so_node *nd = so_graph_node(m->g, i);
        if (nd->nparam && m->on_grad && !chunked)
            m->on_grad(m->on_grad_arg, i, nd->param_off, nd->nparam);
    }
    return 0;
}

int so_model_backward(so_model *m)
{
    if (m->decode_pos >= 0)
        return so_err(SO_EINVAL, "backward after so_model_decode: generation keeps no activations for it");
    return so_model_backward_nodes(m, 1, so_graph_size(m->g));
}

int so_model_decode(so_model *m, const float *tokens, int n, int pos)
{
    int ctx = so_graph_context(m->g);
    if (!ctx || !so_graph_takes_tokens(m->g) || so_graph_input_shape(m->g).h != 1)
        return so_err(SO_EINVAL, "decoding needs a token model built for one token per sample (input 1x1x1)");
    if (pos < 0 || pos >= ctx)
        return so_err(SO_EINVAL, "decoding position %d is outside the context [0, %d)", pos, ctx);
    m->decode_pos = pos;
    int rc = so_model_set_input(m, tokens, NULL, n);
    int last = so_graph_size(m->g) - (so_graph_logits(m->g) >= 0);
    return rc ? rc : so_model_forward_nodes(m, 1, last, 0);
}

int so_model_node_output(so_model *m, int node, float *out)
{
    if (node < 1 || node >= so_graph_size(m->g))
        return so_err(SO_EINVAL, "no node %d", node);
    return m->be->read_output(m->bs, node, out);
}

int so_model_logits(so_model *m, float *out) { return so_model_node_output(m, so_graph_logits(m->g), out); }

int so_model_correct(so_model *m, const int32_t *y, int n, int *correct)
{
    int k = so_graph_classes(m->g), per = so_graph_targets(m->g);
    size_t width = (size_t)so_graph_node(m->g, so_graph_logits(m->g))->out.w;
    if (per == 1)
        width = (size_t)k;
    float *logits = malloc((size_t)m->batch * (size_t)per * width * sizeof *logits);
    if (!logits)
        return so_err(SO_ENOMEM, "out of memory for logits");
    int rc = so_model_logits(m, logits);
    int hits = 0;
    for (size_t s = 0; !rc && s < (size_t)n * (size_t)per; s++) {
        const float *row = logits + s * width;
        int best = 0;
        for (int c = 1; c < k; c++) /* the first k columns: the rest is padding */
            if (row[c] > row[best])
                best = c;
        hits += best == y[s];
    }
    free(logits);
    *correct = hits;
    return rc;
}

int so_model_add_scores(so_model *m, const int32_t *y, int n, double sums[3])
{
    int correct = 0, rc = so_model_correct(m, y, n, &correct);
    if (rc)
        return rc;
    sums[0] += (double)correct / so_graph_targets(m->g);
    sums[1] += n;
    sums[2] += (double)m->loss * n;
    return 0;
}

void so_model_params_changed(so_model *m)
{
    if (!m->be || !m->be->params_changed)
        return;
    if (!m->slots)
        m->be->params_changed(m->bs);
    for (int k = 0; k < m->nslots; k++)
        m->be->params_changed(m->slots[k]);
}

int so_model_set_slots(so_model *m, int n)
{
    if (n < 1 || m->slots)
        return so_err(SO_EINVAL, "so_model_set_slots: %d slots (set once, >= 1)", n);
    m->slots = calloc((size_t)n, sizeof *m->slots);
    if (!m->slots)
        return so_err(SO_ENOMEM, "out of memory for %d micro-batch slots", n);
    m->slots[0] = m->bs;
    m->nslots = 1;
    for (; m->nslots < n; m->nslots++) {
        int rc = m->be->create(m, &m->slots[m->nslots]);
        if (rc)
            return rc;
    }
    return 0;
}

void so_model_use_slot(so_model *m, int k)
{
    if (m->slots && k >= 0 && k < m->nslots)
        m->bs = m->slots[k];
}

int so_model_bind_edge(so_model *m, int node, float *data, float *grad)
{
    const so_node *nd = node >= 1 && node < so_graph_size(m->g) ? so_graph_node(m->g, node) : NULL;
    if (!nd || (nd->op != SO_OP_RECV && nd->op != SO_OP_SEND))
        return so_err(SO_EINVAL, "node %d is not a pipeline edge", node);
    if (!m->be->bind_edge)
        return so_err(SO_EUNSUP, "backend %s has no pipeline edges", m->be->name);
    return m->be->bind_edge(m->bs, node, data, grad);
}

void so_model_set_grad_ready(so_model *m, so_grad_ready_fn fn, void *arg)
{
    m->on_grad = fn;
    m->on_grad_arg = arg;
}

void so_model_set_node_hooks(so_model *m, const so_node_hooks *h)
{
    m->hooks = h ? *h : (so_node_hooks){NULL, NULL, NULL, NULL};
}

/* Element off of a flat buffer whose ranges in t may be kept elsewhere. */
static float *placed_at(const so_buf_place *t, int n, float *whole, size_t off)
{
    for (int i = 0; i < n; i++) /* a few dozen units: a scan per node's pass */
        if (off >= t[i].lo && off < t[i].hi)
            return t[i].where + (off - t[i].lo);
    return whole + off;
}

/* Sets, moves or (where NULL) removes the range [lo, hi) of table t. */
static int place(so_buf_place **t, int *n, size_t nparams, size_t lo, size_t hi, float *where, const char *what)
{
    if (lo >= hi || hi > nparams)
        return so_err(SO_EINVAL, "%s range [%zu, %zu) is not inside the model's %zu", what, lo, hi, nparams);
    for (int i = 0; i < *n; i++) {
        so_buf_place *p = &(*t)[i];
        if (p->lo == lo && p->hi == hi) {
            if (where)
                p->where = where;
            else
                *p = (*t)[--*n];
            return 0;
        }
        if (lo < p->hi && p->lo < hi)
            return so_err(SO_EINVAL, "%s range [%zu, %zu) overlaps [%zu, %zu), already placed", what, lo, hi, p->lo,
                          p->hi);
    }
    if (!where)
        return 0;
    so_buf_place *grown = realloc(*t, (size_t)(*n + 1) * sizeof *grown);
    if (!grown)
        return so_err(SO_ENOMEM, "out of memory for a %s range", what);
    *t = grown;
    (*t)[(*n)++] = (so_buf_place){lo, hi, where};
    return 0;
}

float *so_model_grads_at(const so_model *m, size_t off)
{
    return placed_at(m->grad_places, m->ngrad_places, m->grads, off);
}

int so_model_place_grads(so_model *m, size_t lo, size_t hi, float *where)
{
    return place(&m->grad_places, &m->ngrad_places, m->nparams, lo, hi, where, "gradient");
}

float *so_model_params_at(const so_model *m, size_t off)
{
    return placed_at(m->param_places, m->nparam_places, m->params, off);
}

int so_model_place_params(so_model *m, size_t lo, size_t hi, float *where)
{
    return place(&m->param_places, &m->nparam_places, m->nparams, lo, hi, where, "parameter");
}

void so_model_param_range(const so_model *m, int lo, int hi, size_t *off, size_t *n)
{
    size_t a = m->nparams, b = 0;
    for (int i = lo > 1 ? lo : 1; i < hi && i < so_graph_size(m->g); i++) {
        const so_node *nd = so_graph_node(m->g, i);
        if (!nd->nparam)
            continue;
        a = nd->param_off < a ? nd->param_off : a;
        b = nd->param_off + nd->nparam;
    }
    *off = b > a ? a : 0;
    *n = b > a ? b - a : 0;
}

static void node_changed(so_model *m, void *bs, int lo, int hi)
{
    for (int i = lo > 1 ? lo : 1; i < hi && i < so_graph_size(m->g); i++)
        m->be->node_params_changed(bs, i);
}

void so_model_params_changed_nodes(so_model *m, int lo, int hi)
{
    if (!m->be || !m->be->node_params_changed) {
        so_model_params_changed(m);
        return;
    }
    if (!m->slots)
        node_changed(m, m->bs, lo, hi);
    for (int k = 0; k < m->nslots; k++)
        node_changed(m, m->slots[k], lo, hi);
}

int so_model_conv_kernels(so_model *m, int node, so_conv_kernels *out)
{
    if (node < 1 || node >= so_graph_size(m->g) || so_graph_node(m->g, node)->op != SO_OP_CONV)
        return so_err(SO_EINVAL, "node %d is not a convolution", node);
    if (m->be->conv_kernels)
        return m->be->conv_kernels(m->bs, node, out);
    for (int p = 0; p < SO_NPROPS; p++) {
        snprintf(out->algo[p], sizeof out->algo[p], "direct");
        snprintf(out->impl[p], sizeof out->impl[p], "%s", m->be->name);
    }
    if (!so_graph_needs_diff(m->g, node, 0)) {
        snprintf(out->algo[SO_PROP_BWD_DATA], sizeof out->algo[0], "none");
        snprintf(out->impl[SO_PROP_BWD_DATA], sizeof out->impl[0], "none");
    }
    return 0;
}

size_t so_model_edge_bytes(so_model *m, int node)
{
    if (m->be->edge_bytes)
        return m->be->edge_bytes(m->bs, node);
    so_shape sh = so_graph_node(m->g, node)->out;
    return (size_t)m->batch * sh.c * sh.h * sh.w * sizeof(float);
}

size_t so_model_edge_layout(so_model *m, int node, void *buf, size_t len)
{
    return m->be->edge_layout ? m->be->edge_layout(m->bs, node, buf, len) : 0;
}

so_precision so_model_node_precision(const so_model *m, int node)
{
    if (!m->be || !m->be->node_precision || node < 1 || node >= so_graph_size(m->g))
        return SO_PRECISION_FP32;
    return m->be->node_precision(m->slots ? m->slots[0] : m->bs, node);
}

size_t so_model_activation_bytes(const so_model *m)
{
    if (!m->be->state_bytes)
        return 0;
    if (!m->slots)
        return m->be->state_bytes(m->bs);
    size_t total = 0;
    for (int k = 0; k < m->nslots; k++)
        total += m->be->state_bytes(m->slots[k]);
    return total;
}
