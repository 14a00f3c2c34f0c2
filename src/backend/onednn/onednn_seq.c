/* The sequence ops of the oneDNN backend (GPT-2): token + position
 * embedding, LayerNorm, GELU, causal attention and the per-token softmax
 * cross-entropy, on plain (batch, T, C) activations. The kernels are
 * scaleout's own (onednn_seq.h, one instance per ISA); this file owns the
 * buffers they keep for backward and splits their work over the threads.
 * The linear layers between them are oneDNN matmuls (onednn_linear.c). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/onednn/onednn_internal.h"
#include "backend/onednn/onednn_seq.h"
#include "scaleout/cpu.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"

const od_seq_kernels *od_seq_pick(void)
{
    so_isa isa = so_cpu_isa();
    return isa >= SO_ISA_AVX512 ? &od_seq_avx512 : isa >= SO_ISA_AVX2 ? &od_seq_avx2 : &od_seq_scalar;
}

const od_seq_kernels *od_seq_attn_pick(int hs)
{
    const od_seq_kernels *k = od_seq_pick();
    return hs % k->vl ? &od_seq_scalar : k;
}

size_t od_attn_scratch(int T, int hs)
{
    size_t Tp = ((size_t)T + OD_ATT_BC_MAX - 1) / OD_ATT_BC_MAX * OD_ATT_BC_MAX;
    /* backward: Kt, Vt, D, P, dS, dQ (forward needs less) */
    return 2 * (size_t)hs * Tp + Tp + 2 * OD_ATT_BR * OD_ATT_BC_MAX + (size_t)OD_ATT_BR * hs + 64;
}

/* What every sequence op keeps: its kernels, buffers kept for backward
 * (LayerNorm's row statistics, attention's log-sum-exps, the loss's), and
 * per-thread scratch (partial parameter gradients, attention blocks). */
typedef struct {
    const od_seq_kernels *k;
    float *keep;                 /* kept from forward for backward */
    float *part;                 /* nthr x part_floats */
    size_t part_floats;
    int nthr;
    float *kv;                   /* attention while decoding: (batch, context, 2C) keys and values */
} od_seqop;

static size_t rows_of(od_state *s, int node)
{
    so_shape in = od_node(s, od_node(s, node)->inputs[0])->out;
    return (size_t)s->m->batch * (size_t)in.c * (size_t)in.h;
}

/* Sequence ops read their input as plain (batch, T, C). */
static int check_plain(od_state *s, int node)
{
    dnnl_memory_desc_t plain;
    od_md_plain(s, od_node(s, node)->inputs[0], &plain);
    if (od_md_equal(&od_in(s, node, 0)->md, &plain))
        return 0;
    return so_err(SO_EUNSUP, "onednn: %s (%s) needs a plain (batch, T, C) input", od_node(s, node)->name,
                  so_op_name(od_node(s, node)->op));
}

/* The op's private state with `keep` floats kept and `part` floats per thread. */
static int seqop_create(od_state *s, int node, const od_seq_kernels *k, size_t keep, size_t part)
{
    od_seqop *o = calloc(1, sizeof *o);
    if (!o)
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    s->t[node].priv = o;
    o->k = k;
    o->nthr = omp_get_max_threads();
    o->part_floats = (part + 15) / 16 * 16; /* each thread's part on its own cache lines */
    if (keep && !(o->keep = so_alloc(keep * sizeof(float))))
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    if (part && !(o->part = so_alloc((size_t)o->nthr * o->part_floats * sizeof(float))))
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    int rc = check_plain(s, node);
    if (!rc) {
        dnnl_memory_desc_t md;
        od_md_plain(s, node, &md);
        rc = od_tensor_alloc(s, node, &md);
    }
    return rc;
}

static void seqop_destroy(void *priv)
{
    od_seqop *o = priv;
    so_free(o->keep);
    so_free(o->part);
    so_free(o->kv);
    free(o);
}

/* The first [lo, hi) of n split into nthr static chunks, multiples of `align`. */
static void chunk(size_t n, int nthr, int t, size_t align, size_t *lo, size_t *hi)
{
    size_t per = (n + (size_t)nthr - 1) / (size_t)nthr;
    per = (per + align - 1) / align * align;
    *lo = per * (size_t)t < n ? per * (size_t)t : n;
    *hi = *lo + per < n ? *lo + per : n;
}

/* Where backward writes the diff of input 0: the input's diff (*add = 1
 * when the kernel must add to what another consumer wrote and can), else
 * the staging scratch, which diff_done adds; NULL when none is needed. */
static float *diff_out(od_state *s, int node, int can_add, int *add)
{
    *add = 0;
    if (!so_graph_needs_diff(s->g, node, 0))
        return NULL;
    if (!so_graph_diff_accumulate(s->g, node, 0))
        return od_in(s, node, 0)->dbuf;
    *add = can_add;
    return can_add ? od_in(s, node, 0)->dbuf : s->scratch;
}

static void diff_done(od_state *s, int node, const float *dx)
{
    if (dx == s->scratch)
        od_diff_finish(s, node, 0);
}

/* Sums the threads' partial parameter gradients into grads[0..n), written
 * or added as m->accumulate_grads says (the partials' order is fixed). */
static void reduce_parts(od_state *s, const od_seqop *o, size_t off, float *grads, size_t n)
{
    for (size_t c = 0; c < n; c++) {
        float v = 0.0f;
        for (int t = 0; t < o->nthr; t++)
            v += o->part[(size_t)t * o->part_floats + off + c];
        grads[c] = s->m->accumulate_grads ? grads[c] + v : v;
    }
}

/* ---- embedding ---- */

static int embed_create(od_state *s, int node) { return seqop_create(s, node, od_seq_pick(), 0, 0); }

static int embed_forward(od_state *s, int node, int training)
{
    (void)training;
    od_seqop *o = s->t[node].priv;
    const so_node *nd = od_node(s, node);
    int T = nd->out.h, C = nd->out.w;
    size_t pos0 = s->m->decode_pos > 0 ? (size_t)s->m->decode_pos : 0; /* so_model_decode's position */
    const float *wte = so_model_params_at(s->m, nd->param_off), *wpe = wte + (size_t)nd->a.vocab * C + pos0 * C;
    size_t rows = (size_t)s->m->batch * T;
#pragma omp parallel num_threads(o->nthr)
    {
        size_t lo, hi;
        chunk(rows, omp_get_num_threads(), omp_get_thread_num(), 1, &lo, &hi);
        o->k->embed_fwd(od_in(s, node, 0)->buf, wte, wpe, s->t[node].buf, lo, hi, T, C);
    }
    return 0;
}

/* The token table's gradient is only ever added to when a tied LM head
 * wrote it first in this backward (see ref_seq.c). */
static int embed_backward(od_state *s, int node)
{
    od_seqop *o = s->t[node].priv;
    const so_node *nd = od_node(s, node);
    int T = nd->out.h, C = nd->out.w;
    size_t ntab = (size_t)nd->a.vocab * C;
    float *dwte = so_model_grads_at(s->m, nd->param_off), *dwpe = dwte + ntab;
    if (!s->m->accumulate_grads) {
        memset(dwpe, 0, (size_t)nd->a.ctx * C * sizeof *dwpe);
        if (!so_graph_tied_by(s->g, node))
            memset(dwte, 0, ntab * sizeof *dwte);
    }
    size_t rows = (size_t)s->nvalid * T;
#pragma omp parallel num_threads(o->nthr)
    {
        size_t lo, hi;
        chunk((size_t)C, omp_get_num_threads(), omp_get_thread_num(), (size_t)o->k->vl, &lo, &hi);
        if (lo < hi)
            o->k->embed_bwd(od_in(s, node, 0)->buf, s->t[node].dbuf, dwte, dwpe, rows, T, C, (int)lo, (int)hi);
    }
    return 0;
}

/* ---- LayerNorm ---- */

static int ln_create(od_state *s, int node)
{
    int C = od_node(s, node)->out.w;
    return seqop_create(s, node, od_seq_pick(), 2 * rows_of(s, node), 2 * (size_t)C);
}

static int ln_forward(od_state *s, int node, int training)
{
    (void)training;
    od_seqop *o = s->t[node].priv;
    const so_node *nd = od_node(s, node);
    int C = nd->out.w;
    const float *w = so_model_params_at(s->m, nd->param_off);
    size_t rows = rows_of(s, node);
#pragma omp parallel num_threads(o->nthr)
    {
        size_t lo, hi;
        chunk(rows, omp_get_num_threads(), omp_get_thread_num(), 1, &lo, &hi);
        o->k->ln_fwd(od_in(s, node, 0)->buf, w, w + C, s->t[node].buf, o->keep, lo, hi, C, nd->a.eps);
    }
    return 0;
}

static int ln_backward(od_state *s, int node)
{
    od_seqop *o = s->t[node].priv;
    const so_node *nd = od_node(s, node);
    int C = nd->out.w;
    size_t rows = rows_of(s, node);
    int add;
    float *dx = diff_out(s, node, 1, &add);
#pragma omp parallel num_threads(o->nthr)
    {
        int t = omp_get_thread_num();
        size_t lo, hi;
        chunk(rows, omp_get_num_threads(), t, 1, &lo, &hi);
        float *dw = o->part + (size_t)t * o->part_floats;
        memset(dw, 0, 2 * (size_t)C * sizeof *dw);
        o->k->ln_bwd(od_in(s, node, 0)->buf, so_model_params_at(s->m, nd->param_off), o->keep, s->t[node].dbuf, dx, add, dw,
                     dw + C, lo, hi, C);
    }
    reduce_parts(s, o, 0, so_model_grads_at(s->m, nd->param_off), 2 * (size_t)C);
    return 0;
}

/* ---- GELU ---- */

static int gelu_create(od_state *s, int node) { return seqop_create(s, node, od_seq_pick(), 0, 0); }

static int gelu_forward(od_state *s, int node, int training)
{
    (void)training;
    od_seqop *o = s->t[node].priv;
    size_t n = s->t[node].bytes / sizeof(float);
#pragma omp parallel num_threads(o->nthr)
    {
        size_t lo, hi;
        chunk(n, omp_get_num_threads(), omp_get_thread_num(), 16, &lo, &hi);
        o->k->gelu_fwd(od_in(s, node, 0)->buf + lo, s->t[node].buf + lo, hi - lo);
    }
    return 0;
}

static int gelu_backward(od_state *s, int node)
{
    od_seqop *o = s->t[node].priv;
    int add;
    float *dx = diff_out(s, node, 1, &add);
    if (!dx)
        return 0;
    size_t n = s->t[node].bytes / sizeof(float);
#pragma omp parallel num_threads(o->nthr)
    {
        size_t lo, hi;
        chunk(n, omp_get_num_threads(), omp_get_thread_num(), 16, &lo, &hi);
        o->k->gelu_bwd(od_in(s, node, 0)->buf + lo, s->t[node].dbuf + lo, dx + lo, hi - lo, add);
    }
    return 0;
}

/* ---- causal attention ---- */

static od_attn_args attn_args(od_state *s, int node)
{
    const so_node *nd = od_node(s, node);
    od_seqop *o = s->t[node].priv;
    int T = nd->out.h, C = nd->out.w, hs = C / nd->a.heads;
    return (od_attn_args){.qkv = od_in(s, node, 0)->buf, .y = s->t[node].buf, .lse = o->keep,
                          .dy = s->t[node].dbuf, .T = T, .C = C, .H = nd->a.heads, .hs = hs,
                          .scale = 1.0f / sqrtf((float)hs)};
}

static int attn_create(od_state *s, int node)
{
    const so_node *nd = od_node(s, node);
    int T = nd->out.h, hs = nd->out.w / nd->a.heads;
    size_t lse = (size_t)s->m->batch * nd->a.heads * T;
    return seqop_create(s, node, od_seq_attn_pick(hs), lse, od_attn_scratch(T, hs) + (size_t)so_graph_context(s->g));
}

/* Decoding (so_model_decode, T = 1): the new position's keys and values
 * join the cache, then each head's query attends over positions 0..pos. */
static int attn_decode(od_state *s, int node, od_seqop *o)
{
    od_attn_args a = attn_args(s, node);
    int ctx = so_graph_context(s->g), pos = s->m->decode_pos, B = s->m->batch;
    size_t row = 2 * (size_t)a.C;
    if (!o->kv && !(o->kv = so_alloc((size_t)B * ctx * row * sizeof(float))))
        return so_err(SO_ENOMEM, "out of memory for the key/value cache of %s", od_node(s, node)->name);
    for (int b = 0; b < B; b++)
        memcpy(o->kv + ((size_t)b * ctx + pos) * row, a.qkv + (size_t)b * 3 * a.C + a.C, row * sizeof(float));
#pragma omp parallel for schedule(static) num_threads(o->nthr)
    for (int bh = 0; bh < B * a.H; bh++) {
        int b = bh / a.H, h = bh % a.H;
        const float *k = o->kv + (size_t)b * ctx * row + (size_t)h * a.hs;
        o->k->attn_decode(a.qkv + (size_t)b * 3 * a.C + (size_t)h * a.hs, k, k + a.C, row, pos + 1, a.hs, a.scale,
                          o->part + (size_t)omp_get_thread_num() * o->part_floats,
                          a.y + (size_t)b * a.C + (size_t)h * a.hs);
    }
    return 0;
}

static int attn_forward(od_state *s, int node, int training)
{
    (void)training;
    od_seqop *o = s->t[node].priv;
    if (s->m->decode_pos >= 0)
        return attn_decode(s, node, o);
    od_attn_args a = attn_args(s, node);
    int tasks = s->m->batch * a.H;
#pragma omp parallel for schedule(dynamic, 1) num_threads(o->nthr)
    for (int bh = 0; bh < tasks; bh++)
        o->k->attn_fwd(&a, bh / a.H, bh % a.H, o->part + (size_t)omp_get_thread_num() * o->part_floats);
    return 0;
}

static int attn_backward(od_state *s, int node)
{
    od_seqop *o = s->t[node].priv;
    od_attn_args a = attn_args(s, node);
    int add;
    if (!(a.dqkv = diff_out(s, node, 0, &add)))
        return 0;
    int tasks = s->m->batch * a.H;
#pragma omp parallel for schedule(dynamic, 1) num_threads(o->nthr)
    for (int bh = 0; bh < tasks; bh++)
        o->k->attn_bwd(&a, bh / a.H, bh % a.H, o->part + (size_t)omp_get_thread_num() * o->part_floats);
    diff_done(s, node, a.dqkv);
    return 0;
}

/* ---- per-token softmax cross-entropy ----
 * Forward keeps each counted row's log-sum-exp; backward writes
 * (softmax - onehot) / counted over the logits' diff, which for GPT-2's LM
 * head is the logits' own buffer (onednn_linear.c): no second (B, T, Vp)
 * tensor. */

static int xent_create(od_state *s, int node)
{
    so_shape lg = od_node(s, od_node(s, node)->inputs[0])->out;
    return seqop_create(s, node, od_seq_pick(), (size_t)s->m->batch * lg.h, 0);
}

/* Targets of the valid samples that count (not -1). */
static size_t counted(od_state *s, size_t rows)
{
    size_t k = 0;
    for (size_t r = 0; r < rows; r++)
        k += s->labels[r] >= 0;
    return k;
}

static int xent_forward(od_state *s, int node, int training)
{
    (void)training;
    od_seqop *o = s->t[node].priv;
    const so_node *nd = od_node(s, node);
    so_shape lg = od_node(s, nd->inputs[0])->out;
    const float *z = od_in(s, node, 0)->buf;
    float *per = s->t[node].buf;
    int T = lg.h, n = s->has_labels ? s->nvalid : 0;
    double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total) num_threads(o->nthr)
    for (int b = 0; b < s->m->batch; b++) {
        double sum = 0;
        int k = 0;
        for (int t = 0; b < n && t < T; t++) {
            size_t r = (size_t)b * T + t;
            int y = s->labels[r];
            if (y < 0)
                continue;
            const float *row = z + r * lg.w;
            o->keep[r] = o->k->xent_lse(row, nd->a.vocab);
            sum += (double)o->keep[r] - row[y];
            k++;
        }
        per[b] = k ? (float)(sum / k) : 0.0f;
        total += sum;
    }
    size_t k = counted(s, (size_t)n * T);
    s->m->loss = k ? (float)(total / (double)k) : 0.0f;
    return 0;
}

static int xent_backward(od_state *s, int node)
{
    od_seqop *o = s->t[node].priv;
    int add;
    float *dz = diff_out(s, node, 0, &add);
    if (!dz)
        return 0;
    const so_node *nd = od_node(s, node);
    so_shape lg = od_node(s, nd->inputs[0])->out;
    const float *z = od_in(s, node, 0)->buf;
    size_t rows = (size_t)s->m->batch * lg.h, valid = s->has_labels ? (size_t)s->nvalid * lg.h : 0;
    size_t k = counted(s, valid);
    float scale = k ? 1.0f / (float)k : 0.0f;
#pragma omp parallel for schedule(static) num_threads(o->nthr)
    for (size_t r = 0; r < rows; r++) {
        float *d = dz + r * lg.w;
        int y = r < valid ? s->labels[r] : -1;
        if (y < 0) {
            memset(d, 0, (size_t)lg.w * sizeof *d);
            continue;
        }
        if (d != z + r * lg.w)
            memcpy(d, z + r * lg.w, (size_t)lg.w * sizeof *d);
        o->k->xent_grad(d, nd->a.vocab, lg.w, o->keep[r], y, scale);
    }
    diff_done(s, node, dz);
    return 0;
}

const od_op od_op_embed = {embed_create, embed_forward, embed_backward, seqop_destroy, NULL};
const od_op od_op_layernorm = {ln_create, ln_forward, ln_backward, seqop_destroy, NULL};
const od_op od_op_gelu = {gelu_create, gelu_forward, gelu_backward, seqop_destroy, NULL};
const od_op od_op_attention = {attn_create, attn_forward, attn_backward, seqop_destroy, NULL};
const od_op od_op_token_xent = {xent_create, xent_forward, xent_backward, seqop_destroy, NULL};
