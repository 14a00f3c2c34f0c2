/* Shared helpers of the oneDNN backend: checked primitive/reorder creation
 * with one user scratchpad for all primitives (so oneDNN never allocates per
 * step), memory wrappers, cached weight reorders, gradient stores and the
 * write-or-accumulate rule for input diffs. */
#include <stdlib.h>
#include <string.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"

static const char *status_str(dnnl_status_t st)
{
    switch (st) {
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "unimplemented";
    case dnnl_runtime_error: return "runtime error";
    case dnnl_not_required: return "not required";
    default: return "unknown status";
    }
}

int od_fail(od_state *s, int node, const char *what, dnnl_status_t st)
{
    const char *name = (s && s->g && node >= 0) ? od_node(s, node)->name : "-";
    return so_err(SO_EBACKEND, "oneDNN %s failed for node %s: %s", what, name, status_str(st));
}

/* ---- memory descriptors ---- */

void od_md_4d(dnnl_memory_desc_t *md, int64_t n, int64_t c, int64_t h, int64_t w, dnnl_format_tag_t tag)
{
    dnnl_dims_t d = {n, c, h, w};
    /* Cannot fail for positive dims and a valid tag; checked by the creators. */
    if (dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, tag) != dnnl_success)
        memset(md, 0, sizeof *md);
}

void od_md_1d(dnnl_memory_desc_t *md, int64_t n)
{
    dnnl_dims_t d = {n};
    if (dnnl_memory_desc_init_by_tag(md, 1, d, dnnl_f32, dnnl_a) != dnnl_success)
        memset(md, 0, sizeof *md);
}

void od_md_plain(const od_state *s, int i, dnnl_memory_desc_t *md)
{
    so_shape o = od_node(s, i)->out;
    od_md_4d(md, s->m->batch, o.c, o.h, o.w, dnnl_nchw);
}

int od_md_equal(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b)
{
    return dnnl_memory_desc_equal(a, b) != 0;
}

int od_mem_wrap(od_state *s, int node, const dnnl_memory_desc_t *md, void *ptr, dnnl_memory_t *out)
{
    OD_CHECK(s, node, "memory create", dnnl_memory_create(out, md, s->eng, ptr));
    return 0;
}

int od_mem_rebind(od_state *s, int node, dnnl_memory_t mem, void *ptr)
{
    void *now = NULL;
    OD_CHECK(s, node, "memory handle", dnnl_memory_get_data_handle(mem, &now));
    if (now != ptr)
        OD_CHECK(s, node, "memory handle", dnnl_memory_set_data_handle(mem, ptr));
    return 0;
}

int od_bias_rebind(od_state *s, int node, dnnl_memory_t bias)
{
    const so_node *nd = od_node(s, node);
    return bias ? od_mem_rebind(s, node, bias, so_model_params_at(s->m, nd->param_off) + nd->nparam - (size_t)nd->a.out)
                : 0;
}

int od_mem_alloc(od_state *s, int node, const dnnl_memory_desc_t *md, float **buf, dnnl_memory_t *out)
{
    size_t bytes = dnnl_memory_desc_get_size(md);
    *buf = so_alloc(bytes);
    if (!*buf)
        return so_err(SO_ENOMEM, "out of memory (%zu bytes) for node %s", bytes, od_node(s, node)->name);
    return od_mem_wrap(s, node, md, *buf, out);
}

void od_mem_free(dnnl_memory_t *mem, float **buf)
{
    if (*mem)
        dnnl_memory_destroy(*mem);
    *mem = NULL;
    if (buf) {
        so_free(*buf);
        *buf = NULL;
    }
}

/* The last consumer of node i's output: backward visits nodes downwards, so
 * i's diff is first written by that consumer and last read by i itself. */
static int last_consumer(const so_graph *g, int i)
{
    int last = i;
    for (int j = i + 1; j < so_graph_size(g); j++) {
        const so_node *nd = so_graph_node(g, j);
        for (int k = 0; k < nd->ninputs; k++)
            if (nd->inputs[k] == i)
                last = j;
    }
    return last;
}

/* Diff memory planning: node i's diff lives only while backward runs nodes
 * last_consumer(i) down to i, so nodes are given pooled blocks whose previous
 * occupant's lifetime has ended (nodes are created in increasing order, i.e.
 * by the start of those intervals, where greedy reuse is safe). The smallest
 * free block that fits wins; otherwise a new block. A ResNet keeps a handful
 * of blocks instead of one diff per layer; PyTorch's autograd frees gradients
 * as it goes for the same reason. */
static int diff_alloc(od_state *s, int node, size_t bytes, float **out)
{
    int best = -1;
    for (int b = 0; b < s->ndblocks; b++) {
        od_dblock *k = &s->dblocks[b];
        if (k->busy_until < node && k->bytes >= bytes && (best < 0 || k->bytes < s->dblocks[best].bytes))
            best = b;
    }
    if (best < 0) {
        od_dblock *grown = realloc(s->dblocks, (size_t)(s->ndblocks + 1) * sizeof *grown);
        if (!grown)
            return so_err(SO_ENOMEM, "out of memory for the diff pool");
        s->dblocks = grown;
        float *buf = so_alloc(bytes);
        if (!buf)
            return so_err(SO_ENOMEM, "out of memory (%zu bytes) for the diff of node %s", bytes,
                          od_node(s, node)->name);
        best = s->ndblocks++;
        s->dblocks[best] = (od_dblock){buf, bytes, 0};
        s->diff_bytes += bytes;
    }
    s->dblocks[best].busy_until = last_consumer(s->g, node);
    *out = s->dblocks[best].buf;
    return 0;
}

int od_tensor_alloc(od_state *s, int node, const dnnl_memory_desc_t *md)
{
    od_tensor *t = &s->t[node];
    t->md = *md;
    t->bytes = dnnl_memory_desc_get_size(md);
    if (t->bytes > s->scratch_bytes)
        s->scratch_bytes = t->bytes;
    int rc = od_mem_alloc(s, node, md, &t->buf, &t->mem);
    if (!rc && node > 0)
        rc = diff_alloc(s, node, t->bytes, &t->dbuf);
    if (!rc && node > 0)
        rc = od_mem_wrap(s, node, md, t->dbuf, &t->dmem);
    return rc;
}

int od_tensor_alloc_inplace(od_state *s, int node, const dnnl_memory_desc_t *md)
{
    od_tensor *t = &s->t[node];
    t->md = *md;
    t->bytes = dnnl_memory_desc_get_size(md);
    if (t->bytes > s->scratch_bytes)
        s->scratch_bytes = t->bytes;
    int rc = od_mem_alloc(s, node, md, &t->buf, &t->mem);
    t->dbuf = t->buf;
    return rc ? rc : od_mem_wrap(s, node, md, t->dbuf, &t->dmem);
}

/* ---- primitives ---- */

int od_attr(od_state *s, int node, int relu, int sum, dnnl_primitive_attr_t *out)
{
    dnnl_primitive_attr_t a = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_status_t st = dnnl_primitive_attr_create(&a);
    if (st == dnnl_success)
        st = dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user);
    if (st == dnnl_success && (relu || sum)) {
        st = dnnl_post_ops_create(&po);
        if (st == dnnl_success && sum)
            st = dnnl_post_ops_append_sum(po, 1.0f);
        if (st == dnnl_success && relu)
            st = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
        if (st == dnnl_success)
            st = dnnl_primitive_attr_set_post_ops(a, po);
    }
    if (po)
        dnnl_post_ops_destroy(po);
    if (st != dnnl_success) {
        if (a)
            dnnl_primitive_attr_destroy(a);
        return od_fail(s, node, "attribute setup", st);
    }
    *out = a;
    return 0;
}

int od_pad_note(od_state *s, int node, const_dnnl_primitive_desc_t pd)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (!md)
        return od_fail(s, node, "scratchpad query", dnnl_runtime_error);
    size_t b = dnnl_memory_desc_get_size(md);
    if (b > s->pad_bytes)
        s->pad_bytes = b;
    return 0;
}

int od_prim_finish(od_state *s, int node, const char *what, od_prim *out)
{
    int rc = od_pad_note(s, node, out->pd);
    if (rc)
        return rc;
    OD_CHECK(s, node, what, dnnl_primitive_create(&out->p, out->pd));
    return 0;
}

int od_prim_init(od_state *s, int node, const char *what, const void *op_desc, int relu,
                 const_dnnl_primitive_desc_t hint, od_prim *out)
{
    dnnl_primitive_attr_t a = NULL;
    int rc = od_attr(s, node, relu, 0, &a);
    if (rc)
        return rc;
    dnnl_status_t st = dnnl_primitive_desc_create(&out->pd, op_desc, a, s->eng, hint);
    dnnl_primitive_attr_destroy(a);
    if (st != dnnl_success) {
        out->pd = NULL;
        return od_fail(s, node, what, st);
    }
    return od_prim_finish(s, node, what, out);
}

int od_reorder_init(od_state *s, int node, const char *what, const dnnl_memory_desc_t *src_md,
                    const dnnl_memory_desc_t *dst_md, int sum, od_prim *out)
{
    dnnl_primitive_attr_t a = NULL;
    int rc = od_attr(s, node, 0, sum, &a);
    if (rc)
        return rc;
    dnnl_status_t st = dnnl_reorder_primitive_desc_create(&out->pd, src_md, s->eng, dst_md, s->eng, a);
    dnnl_primitive_attr_destroy(a);
    if (st != dnnl_success) {
        out->pd = NULL;
        return od_fail(s, node, what, st);
    }
    return od_prim_finish(s, node, what, out);
}

void od_prim_fini(od_prim *p)
{
    if (p->p)
        dnnl_primitive_destroy(p->p);
    if (p->pd)
        dnnl_primitive_desc_destroy(p->pd);
    p->p = NULL;
    p->pd = NULL;
}

dnnl_memory_desc_t od_query_md(const od_prim *p, dnnl_query_t which)
{
    dnnl_memory_desc_t md;
    const dnnl_memory_desc_t *q = dnnl_primitive_desc_query_md(p->pd, which, 0);
    if (q)
        md = *q;
    else
        memset(&md, 0, sizeof md);
    return md;
}

int od_exec(od_state *s, int node, const char *what, const od_prim *p, int nargs,
            const dnnl_exec_arg_t *args)
{
    dnnl_exec_arg_t all[16];
    memcpy(all, args, (size_t)nargs * sizeof *args);
    all[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, s->pad_mem};
    OD_CHECK(s, node, what, dnnl_primitive_execute(p->p, s->strm, nargs, all));
    return 0;
}

int od_reorder_exec(od_state *s, int node, const char *what, const od_prim *p, dnnl_memory_t src,
                    dnnl_memory_t dst)
{
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
    return od_exec(s, node, what, p, 2, a);
}

/* ---- cached weights ---- */

int od_wcache_init(od_state *s, int node, const dnnl_memory_desc_t *user_md, size_t user_off,
                   const dnnl_memory_desc_t *prim_md, od_wcache *c)
{
    c->user_off = user_off;
    int rc = od_mem_wrap(s, node, user_md, so_model_params_at(s->m, user_off), &c->user);
    if (rc || od_md_equal(user_md, prim_md))
        return rc; /* the primitive reads the flat buffer itself */
    size_t bytes = dnnl_memory_desc_get_size(prim_md);
    if (prim_md->data_type == dnnl_bf16) {
        if (!(c->own = so_alloc(bytes)))
            return so_err(SO_ENOMEM, "out of memory (%zu bytes) for the bf16 weights of node %s", bytes,
                          od_node(s, node)->name);
        s->wbf16_bytes += bytes;
    } else if (bytes > s->wtmp_bytes) {
        s->wtmp_bytes = bytes; /* allocated once all nodes are built */
    }
    rc = od_mem_wrap(s, node, prim_md, c->own ? c->own : DNNL_MEMORY_NONE, &c->mem);
    if (!rc && !od_wlayout_plan(prim_md, &c->fast))
        rc = od_reorder_init(s, node, "weight reorder", user_md, prim_md, 0, &c->reorder);
    return rc;
}

/* The weights into buf (c->mem's buffer) in the primitive's layout: by
 * scaleout's loops where they take it, else oneDNN's reorder. */
static int wcache_fill(od_state *s, int node, od_wcache *c, void *buf)
{
    if (!c->fast.nin)
        return od_reorder_exec(s, node, "weight reorder", &c->reorder, c->user, c->mem);
    od_wlayout_pack(&c->fast, so_model_params_at(s->m, c->user_off), buf);
    return 0;
}

int od_wcache_get(od_state *s, int node, od_wcache *c, dnnl_memory_t *out)
{
    int rc = od_mem_rebind(s, node, c->user, so_model_params_at(s->m, c->user_off));
    if (rc)
        return rc;
    if (!c->mem) {
        *out = c->user;
        return 0;
    }
    *out = c->mem;
    if (c->own) { /* BF16: converted once per parameter change */
        int rc = c->valid ? 0 : wcache_fill(s, node, c, c->own);
        c->valid = !rc;
        return rc;
    }
    OD_CHECK(s, node, "weight buffer", dnnl_memory_set_data_handle(c->mem, s->wtmp));
    return wcache_fill(s, node, c, s->wtmp);
}

void od_wcache_invalidate(od_wcache *c) { c->valid = 0; }

void od_wcache_fini(od_wcache *c)
{
    od_prim_fini(&c->reorder);
    od_mem_free(&c->mem, NULL);
    od_mem_free(&c->user, NULL);
    so_free(c->own);
    c->own = NULL;
}

/* ---- weight gradients ---- */

int od_gradw_init(od_state *s, int node, const dnnl_memory_desc_t *prim_md,
                  const dnnl_memory_desc_t *user_md, size_t grad_off, od_gradw *g)
{
    g->prim_md = *prim_md;
    g->direct = od_md_equal(prim_md, user_md);
    g->grad_off = grad_off;
    int rc = od_mem_wrap(s, node, user_md, so_model_grads_at(s->m, grad_off), &g->user);
    if (!rc && !g->direct && prim_md->data_type == dnnl_f32 && od_wlayout_plan(prim_md, &g->fast))
        return 0;
    if (!rc && !g->direct)
        rc = od_reorder_init(s, node, "weight gradient reorder", prim_md, user_md, 0, &g->write);
    if (!rc)
        rc = od_reorder_init(s, node, "weight gradient reorder", prim_md, user_md, 1, &g->add);
    return rc;
}

int od_gradw_target(od_state *s, int node, od_gradw *g, dnnl_memory_t *out)
{
    int rc = od_mem_rebind(s, node, g->user, so_model_grads_at(s->m, g->grad_off));
    if (rc)
        return rc;
    if (g->direct && !s->m->accumulate_grads) {
        *out = g->user;
        return 0;
    }
    size_t need = dnnl_memory_desc_get_size(&g->prim_md);
    if (need > s->wstage_bytes) { /* grows during the first backward only */
        so_free(s->wstage);
        s->wstage_bytes = 0;
        if (!(s->wstage = so_alloc(need)))
            return so_err(SO_ENOMEM, "out of memory (%zu bytes) staging weight gradients", need);
        s->wstage_bytes = need;
    }
    if (!g->diff) {
        int rc = od_mem_wrap(s, node, &g->prim_md, s->wstage, &g->diff);
        if (rc)
            return rc;
    }
    OD_CHECK(s, node, "staging handle", dnnl_memory_set_data_handle(g->diff, s->wstage));
    *out = g->diff;
    return 0;
}

int od_gradw_store(od_state *s, int node, od_gradw *g)
{
    if (g->direct && !s->m->accumulate_grads)
        return 0;
    if (g->fast.nin) {
        od_wlayout_unpack(&g->fast, s->wstage, so_model_grads_at(s->m, g->grad_off), s->m->accumulate_grads);
        return 0;
    }
    const od_prim *r = s->m->accumulate_grads ? &g->add : &g->write;
    return od_reorder_exec(s, node, "weight gradient reorder", r, g->diff, g->user);
}

void od_gradw_fini(od_gradw *g)
{
    od_prim_fini(&g->write);
    od_prim_fini(&g->add);
    od_mem_free(&g->diff, NULL); /* its buffer is the shared s->wstage */
    od_mem_free(&g->user, NULL);
}

/* ---- input diffs ---- */

int od_diff_staged(od_state *s, int node, int slot)
{
    return !so_graph_needs_diff(s->g, node, slot) || so_graph_diff_accumulate(s->g, node, slot);
}

dnnl_memory_t od_diff_target(od_state *s, int node, int slot)
{
    od_tensor *in = od_in(s, node, slot);
    return od_diff_staged(s, node, slot) ? in->acc : in->dmem;
}

void od_diff_finish(od_state *s, int node, int slot)
{
    od_tensor *in = od_in(s, node, slot);
    if (!so_graph_needs_diff(s->g, node, slot) || !so_graph_diff_accumulate(s->g, node, slot))
        return;
    if (in->half)
        od_half_add((uint16_t *)(void *)in->dbuf, (const uint16_t *)(void *)s->scratch, in->bytes / sizeof(uint16_t));
    else
        od_vec_add(in->dbuf, s->scratch, in->bytes / sizeof(float));
}

/* ---- loops ---- */

void od_vec_add(float *dst, const float *src, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
}

void od_vec_store(float *dst, const float *src, size_t n, int add)
{
    if (add) {
        od_vec_add(dst, src, n);
        return;
    }
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

void od_vec_relu(float *x, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void od_vec_relu_bwd(float *d, const float *out, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (size_t i = 0; i < n; i++)
        d[i] = out[i] > 0.0f ? d[i] : 0.0f;
}
