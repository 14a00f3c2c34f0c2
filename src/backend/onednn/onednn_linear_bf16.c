/* The linear layer in BF16 (onednn_linear_bf16.h), on oneDNN 2.6's bf16
 * matmul (brg:avx512_core_bf16 on AVX512_BF16 CPUs):
 *   forward          Y  (R,N) f32 = Xb (R,K) Wb^T + b
 *   backward data    dX (R,K) f32 = dYb (R,N) Wb        (+= with a sum post-op)
 *   backward weights dW (N,K) f32 = dYb^T Xb            (+= across micro-batches)
 * (b: BF16, rounded to nearest even.) Wb is made once per parameter change
 * (a tied head's at every forward: the embedding's node, not this one, hears
 * of its changes); Xb is made in the forward and kept for the weight
 * gradient; dYb lives in the state's shared transient buffer (s->wtmp). */
#include "backend/onednn/onednn_linear_bf16.h"

#include <stdlib.h>
#include <string.h>

#include "scaleout/dtype.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"

struct od_linear_bf16 {
    od_linear_bf16_io io;
    uint16_t *wb;                        /* BF16 weights (N,K) */
    uint16_t *xb;                        /* BF16 input (R,K), from the forward to the weight gradient */
    int wb_valid;
    od_prim fwd, bwd_data, bwd_w, bwd_w_add;
    dnnl_memory_t x, w, b, y;            /* forward: Xb, Wb seen as (K,N), bias, Y */
    dnnl_memory_t dy, wd, dx, dyt, dw;   /* backward: dYb, Wb (N,K), dX, dYb seen as (N,R), dW */
};

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
    dnnl_memory_desc_t x, w, b, y;
    md2(&x, io->R, io->K, dnnl_bf16, dnnl_ab);
    md2(&w, io->K, io->N, dnnl_bf16, dnnl_ba);
    md2(&b, 1, io->N, dnnl_f32, dnnl_ab);
    md2(&y, io->R, io->N, dnnl_f32, dnnl_ab);
    int rc = od_linear_matmul(s, node, "bf16 matmul forward", &x, &w, io->bias ? &b : NULL, &y, 0, &l->fwd);
    if (!rc)
        rc = od_mem_wrap(s, node, &x, l->xb, &l->x);
    if (!rc)
        rc = od_mem_wrap(s, node, &w, l->wb, &l->w);
    if (!rc && io->bias)
        rc = od_mem_wrap(s, node, &b, (void *)io->bias, &l->b);
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
    md2(&dyt, io->N, io->R, dnnl_bf16, dnnl_ba);
    md2(&x, io->R, io->K, dnnl_bf16, dnnl_ab);
    md2(&dw, io->N, io->K, dnnl_f32, dnnl_ab);
    size_t dy_bytes = (size_t)io->R * (size_t)io->N * sizeof(uint16_t);
    if (dy_bytes > s->wtmp_bytes)
        s->wtmp_bytes = dy_bytes; /* allocated once all nodes are built */
    int rc = od_mem_wrap(s, node, &dy, NULL, &l->dy);
    if (!rc)
        rc = od_mem_wrap(s, node, &dyt, NULL, &l->dyt);
    if (!rc)
        rc = od_mem_wrap(s, node, &dw, io->dw, &l->dw);
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
    l->wb = so_alloc((size_t)io->N * (size_t)io->K * sizeof *l->wb);
    l->xb = so_alloc((size_t)io->R * (size_t)io->K * sizeof *l->xb);
    if (!l->wb || !l->xb)
        return so_err(SO_ENOMEM, "out of memory for the BF16 copies of node %s", od_node(s, node)->name);
    int rc = create_fwd(s, node, l);
    return rc ? rc : create_bwd(s, node, l);
}

int od_linear_bf16_forward(od_state *s, int node, od_linear_bf16 *l)
{
    const od_linear_bf16_io *io = &l->io;
    if (!l->wb_valid || io->tied)
        to_bf16(l->wb, io->w, (size_t)io->N * (size_t)io->K);
    l->wb_valid = 1;
    to_bf16(l->xb, io->x, (size_t)io->R * (size_t)io->K);
    dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, l->x}, {DNNL_ARG_WEIGHTS, l->w}, {DNNL_ARG_DST, l->y},
                            {DNNL_ARG_BIAS, l->b}};
    return od_exec(s, node, "bf16 matmul forward", &l->fwd, l->b ? 4 : 3, a);
}

int od_linear_bf16_backward(od_state *s, int node, od_linear_bf16 *l)
{
    const od_linear_bf16_io *io = &l->io;
    to_bf16((uint16_t *)s->wtmp, io->dy, (size_t)io->R * (size_t)io->N);
    OD_CHECK(s, node, "dY handle", dnnl_memory_set_data_handle(l->dy, s->wtmp));
    OD_CHECK(s, node, "dY handle", dnnl_memory_set_data_handle(l->dyt, s->wtmp));
    int rc = 0;
    if (l->bwd_data.p) {
        dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC, l->dy}, {DNNL_ARG_WEIGHTS, l->wd}, {DNNL_ARG_DST, l->dx}};
        rc = od_exec(s, node, "bf16 matmul backward data", &l->bwd_data, 3, a);
    }
    dnnl_exec_arg_t w[3] = {{DNNL_ARG_SRC, l->dyt}, {DNNL_ARG_WEIGHTS, l->x}, {DNNL_ARG_DST, l->dw}};
    if (!rc)
        rc = od_exec(s, node, "bf16 matmul backward weights", s->m->accumulate_grads ? &l->bwd_w_add : &l->bwd_w,
                     3, w);
    return rc;
}

void od_linear_bf16_invalidate(od_linear_bf16 *l)
{
    if (l)
        l->wb_valid = 0;
}

void od_linear_bf16_destroy(od_linear_bf16 *l)
{
    if (!l)
        return;
    od_prim *prims[] = {&l->fwd, &l->bwd_data, &l->bwd_w, &l->bwd_w_add};
    for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
        od_prim_fini(prims[i]);
    dnnl_memory_t *mems[] = {&l->x, &l->w, &l->b, &l->y, &l->dy, &l->wd, &l->dx, &l->dyt, &l->dw};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        od_mem_free(mems[i], NULL);
    so_free(l->wb);
    so_free(l->xb);
    free(l);
}
