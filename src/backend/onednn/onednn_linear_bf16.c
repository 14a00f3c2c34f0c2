/* The linear layer in BF16 (onednn_linear_bf16.h), on oneDNN 2.6's bf16
 * matmul (brg:avx512_core_bf16 on AVX512_BF16 CPUs):
 *   forward          Y  (R,N) f32 = Xb (R,K) Wb^T + b
 *   backward data    dX (R,K) f32 = dYb (R,N) Wb        (+= with a sum post-op)
 *   backward weights dW (N,K) f32 = dYb^T Xb            (+= across micro-batches)
 * (b: BF16, rounded to nearest even.) The forward's Wb is in the layout the
 * matmul chooses (blocked, K pairs interleaved for vdpbf16ps; a reorder
 * converts it), the backward's plain (N,K): with plain (K,N)-transposed
 * weights oneDNN 2.6 repacks W at every call and runs GPT-2's forwards at
 * 210-270 GFLOP/s against 320-400 for the others (AMD EPYC Zen 5, one core).
 * Both copies are made once per parameter change (a tied head hears of its
 * embedding's changes: onednn_backend.c's node_params_changed). Xb is made
 * in the forward and kept for the weight gradient. dYb lives in the state's
 * shared transient buffer (s->wtmp): plain for dX, then transposed (N,R) for
 * dW, which a transposed source slows the same way (the transposing
 * conversion: onednn_linear_bf16_avx512.c). */
#include "backend/onednn/onednn_linear_bf16.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/dtype.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"

struct od_linear_bf16 {
    od_linear_bf16_io io;
    uint16_t *wb;                        /* BF16 weights (N,K), plain: backward data */
    uint16_t *wf;                        /* BF16 weights (K,N) in the forward matmul's layout */
    uint16_t *xb;                        /* BF16 input (R,K), from the forward to the weight gradient */
    int wb_valid, wf_valid;
    od_prim fwd, bwd_data, bwd_w, bwd_w_add;
    od_prim w_reorder;                   /* W (K,N) f32 -> wf */
    dnnl_memory_t x, w, wuser, b, y;     /* forward: Xb, wf, the FP32 weights seen as (K,N), bias, Y */
    dnnl_memory_t dy, wd, dx, dw;        /* backward: dYb, Wb (N,K), dX, dW */
    dnnl_memory_t dyt;                   /* dYb^T (N,R) plain */
};

/* Weight conversions by every BF16 linear layer of the process (tests). */
static atomic_ulong weight_builds;

unsigned long od_linear_bf16_weight_builds(void) { return atomic_load(&weight_builds); }

static void md2(dnnl_memory_desc_t *md, int64_t a, int64_t b, dnnl_data_type_t dt, dnnl_format_tag_t tag)
{
    dnnl_dims_t d = {a, b};
    if (dnnl_memory_desc_init_by_tag(md, 2, d, dt, tag) != dnnl_success)
        memset(md, 0, sizeof *md);
}

/* dst = BF16(src), on the caller's threads in blocks of 64K elements. */
static void to_bf16(uint16_t *dst, const float *src, size_t n)
{
    const size_t block = (size_t)1 << 16;
    long blocks = (long)((n + block - 1) / block);
#pragma omp parallel for schedule(static) if (blocks > 1)
    for (long i = 0; i < blocks; i++) {
        size_t lo = (size_t)i * block, len = n - lo < block ? n - lo : block;
        so_f32_to_bf16(dst + lo, src + lo, len);
    }
}

static int create_fwd(od_state *s, int node, od_linear_bf16 *l)
{
    const od_linear_bf16_io *io = &l->io;
    dnnl_memory_desc_t x, w, wuser, b, y;
    md2(&x, io->R, io->K, dnnl_bf16, dnnl_ab);
    md2(&w, io->K, io->N, dnnl_bf16, dnnl_format_tag_any);
    md2(&wuser, io->K, io->N, dnnl_f32, dnnl_ba);
    md2(&b, 1, io->N, dnnl_f32, dnnl_ab);
    md2(&y, io->R, io->N, dnnl_f32, dnnl_ab);
    int rc = od_linear_matmul(s, node, "bf16 matmul forward", &x, &w, io->has_bias ? &b : NULL, &y, 0, &l->fwd);
    if (rc)
        return rc;
    w = od_query_md(&l->fwd, dnnl_query_weights_md);
    size_t wf_bytes = dnnl_memory_desc_get_size(&w);
    if (!(l->wf = so_alloc(wf_bytes)))
        return so_err(SO_ENOMEM, "out of memory for the BF16 weights of node %s", od_node(s, node)->name);
    s->wbf16_bytes += wf_bytes;
    rc = od_reorder_init(s, node, "bf16 weights reorder", &wuser, &w, 0, &l->w_reorder);
    if (!rc)
        rc = od_mem_wrap(s, node, &x, l->xb, &l->x);
    if (!rc)
        rc = od_mem_wrap(s, node, &w, l->wf, &l->w);
    if (!rc)
        rc = od_mem_wrap(s, node, &wuser, so_model_params_at(s->m, io->w_off), &l->wuser);
    if (!rc && io->has_bias)
        rc = od_mem_wrap(s, node, &b, so_model_params_at(s->m, io->bias_off), &l->b);
    if (!rc)
        rc = od_mem_wrap(s, node, &y, io->y, &l->y);
    return rc;
}

/* dYb's handle is set at every backward (s->wtmp exists only once all nodes are built). */
static int create_bwd(od_state *s, int node, od_linear_bf16 *l)
{
    const od_linear_bf16_io *io = &l->io;
    dnnl_memory_desc_t dy, wd, dx, dyt, x, dw;
    md2(&dy, io->R, io->N, dnnl_bf16, dnnl_ab);
    md2(&wd, io->N, io->K, dnnl_bf16, dnnl_ab);
    md2(&dx, io->R, io->K, dnnl_f32, dnnl_ab);
    md2(&dyt, io->N, io->R, dnnl_bf16, dnnl_ab);
    md2(&x, io->R, io->K, dnnl_bf16, dnnl_ab);
    md2(&dw, io->N, io->K, dnnl_f32, dnnl_ab);
    size_t dy_bytes = (size_t)io->R * (size_t)io->N * sizeof(uint16_t);
    if (dy_bytes > s->wtmp_bytes)
        s->wtmp_bytes = dy_bytes; /* allocated once all nodes are built */
    int rc = od_mem_wrap(s, node, &dy, NULL, &l->dy);
    if (!rc)
        rc = od_mem_wrap(s, node, &dyt, NULL, &l->dyt);
    if (!rc)
        rc = od_mem_wrap(s, node, &dw, so_model_grads_at(s->m, io->dw_off), &l->dw);
    if (!rc)
        rc = od_linear_matmul(s, node, "bf16 matmul backward weights", &dyt, &x, NULL, &dw, 0, &l->bwd_w);
    if (!rc)
        rc = od_linear_matmul(s, node, "bf16 matmul backward weights", &dyt, &x, NULL, &dw, 1, &l->bwd_w_add);
    if (rc || !io->dx)
        return rc;
    rc = od_mem_wrap(s, node, &wd, l->wb, &l->wd);
    if (!rc)
        rc = od_mem_wrap(s, node, &dx, io->dx, &l->dx);
    if (!rc)
        rc = od_linear_matmul(s, node, "bf16 matmul backward data", &dy, &wd, NULL, &dx, io->dx_add, &l->bwd_data);
    return rc;
}

int od_linear_bf16_create(od_state *s, int node, const od_linear_bf16_io *io, od_linear_bf16 **out)
{
    od_linear_bf16 *l = calloc(1, sizeof *l);
    *out = l;
    if (!l)
        return so_err(SO_ENOMEM, "out of memory for node %s", od_node(s, node)->name);
    l->io = *io;
    size_t wb_bytes = (size_t)io->N * (size_t)io->K * sizeof *l->wb, xb_bytes = (size_t)io->R * (size_t)io->K * 2;
    l->wb = so_alloc(wb_bytes);
    l->xb = so_alloc(xb_bytes);
    if (!l->wb || !l->xb)
        return so_err(SO_ENOMEM, "out of memory for the BF16 copies of node %s", od_node(s, node)->name);
    s->wbf16_bytes += wb_bytes + xb_bytes; /* state_bytes reports them; the forward's copy: create_fwd */
    int rc = create_fwd(s, node, l);
    return rc ? rc : create_bwd(s, node, l);
}

int od_linear_bf16_forward(od_state *s, int node, od_linear_bf16 *l)
{
    const od_linear_bf16_io *io = &l->io;
    int brc = l->b ? od_mem_rebind(s, node, l->b, so_model_params_at(s->m, io->bias_off)) : 0;
    if (!brc && !l->wf_valid)
        brc = od_mem_rebind(s, node, l->wuser, so_model_params_at(s->m, io->w_off));
    if (brc)
        return brc;
    if (!l->wf_valid) {
        int rc = od_reorder_exec(s, node, "bf16 weights reorder", &l->w_reorder, l->wuser, l->w);
        if (rc)
            return rc;
        l->wf_valid = 1;
        atomic_fetch_add(&weight_builds, 1);
    }
    to_bf16(l->xb, io->x, (size_t)io->R * (size_t)io->K);
    dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, l->x}, {DNNL_ARG_WEIGHTS, l->w}, {DNNL_ARG_DST, l->y},
                            {DNNL_ARG_BIAS, l->b}};
    return od_exec(s, node, "bf16 matmul forward", &l->fwd, l->b ? 4 : 3, a);
}

int od_linear_bf16_backward(od_state *s, int node, od_linear_bf16 *l)
{
    const od_linear_bf16_io *io = &l->io;
    int rc = 0;
    if (l->bwd_data.p) {
        if (!l->wb_valid) {
            to_bf16(l->wb, so_model_params_at(s->m, io->w_off), (size_t)io->N * (size_t)io->K);
            atomic_fetch_add(&weight_builds, 1);
        }
        l->wb_valid = 1;
        to_bf16((uint16_t *)s->wtmp, io->dy, (size_t)io->R * (size_t)io->N);
        OD_CHECK(s, node, "dY handle", dnnl_memory_set_data_handle(l->dy, s->wtmp));
        dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC, l->dy}, {DNNL_ARG_WEIGHTS, l->wd}, {DNNL_ARG_DST, l->dx}};
        rc = od_exec(s, node, "bf16 matmul backward data", &l->bwd_data, 3, a);
    }
    OD_CHECK(s, node, "dY handle", dnnl_memory_set_data_handle(l->dyt, s->wtmp));
    od_bf16_transpose_avx512((uint16_t *)s->wtmp, io->dy, io->R, io->N);
    dnnl_exec_arg_t w[3] = {{DNNL_ARG_SRC, l->dyt}, {DNNL_ARG_WEIGHTS, l->x}, {DNNL_ARG_DST, l->dw}};
    if (!rc)
        rc = od_mem_rebind(s, node, l->dw, so_model_grads_at(s->m, io->dw_off));
    if (!rc)
        rc = od_exec(s, node, "bf16 matmul backward weights", s->m->accumulate_grads ? &l->bwd_w_add : &l->bwd_w,
                     3, w);
    return rc;
}

void od_linear_bf16_invalidate(od_linear_bf16 *l)
{
    if (l)
        l->wb_valid = l->wf_valid = 0;
}

void od_linear_bf16_destroy(od_linear_bf16 *l)
{
    if (!l)
        return;
    od_prim *prims[] = {&l->fwd, &l->bwd_data, &l->bwd_w, &l->bwd_w_add, &l->w_reorder};
    for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
        od_prim_fini(prims[i]);
    dnnl_memory_t *mems[] = {&l->x, &l->w, &l->wuser, &l->b, &l->y, &l->dy, &l->wd, &l->dx, &l->dw, &l->dyt};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        od_mem_free(mems[i], NULL);
    so_free(l->wb);
    so_free(l->wf);
    so_free(l->xb);
    free(l);
}
