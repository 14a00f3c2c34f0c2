/* Weights between the flat OIHW layout the model keeps and the blocked
 * layouts oneDNN's convolutions read (ABcd16b16a, ABcd8b16a2b, ...), and
 * weight gradients back. Hand-written because oneDNN 2.6's jit reorders take
 * 3-6x the memory traffic's time on these (ResNet-50 b16, one Zen 5 core:
 * 80 ms a step for the gradients, 90 ms for the BF16 copies). The loops
 * walk one (O-block, I-block) tile at a time, all kernel positions: its rows
 * of the flat layout stay in L1 while the blocked side is written in order. */
#include <string.h>

#include "backend/onednn/onednn_internal.h"
#include "core/bf16_bits.h"
#include "core/vec_clones.h"

/* The inner blocks of md over O (dim 0) and I (dim 1) only, at most 16 of
 * each: each inner position's (o, i) within the tile. 0 when not handled. */
static int inner_positions(const dnnl_blocking_desc_t *b, od_wlayout *L)
{
    L->blk[0] = L->blk[1] = 1;
    for (int k = 0; k < b->inner_nblks; k++) {
        if (b->inner_idxs[k] > 1)
            return 0;
        L->blk[b->inner_idxs[k]] *= b->inner_blks[k];
    }
    L->nin = (int)(L->blk[0] * L->blk[1]);
    if (L->blk[0] > 16 || L->blk[1] > 16 || L->nin < 16) /* a plain permutation: one call per element */
        return 0;
    for (int p = 0; p < L->nin; p++) {
        int64_t rest = p, idx[2] = {0, 0}, scale[2] = {1, 1};
        for (int k = b->inner_nblks - 1; k >= 0; k--) { /* innermost first */
            int d = (int)b->inner_idxs[k];
            idx[d] += (rest % b->inner_blks[k]) * scale[d];
            scale[d] *= b->inner_blks[k];
            rest /= b->inner_blks[k];
        }
        L->pos_o[p] = (uint8_t)idx[0];
        L->pos_i[p] = (uint8_t)idx[1];
    }
    return 1;
}

static int plan(const dnnl_memory_desc_t *md, od_wlayout *L)
{
    if (md->ndims != 4 || md->format_kind != dnnl_blocked || md->offset0 || md->extra.flags ||
        (md->data_type != dnnl_f32 && md->data_type != dnnl_bf16))
        return 0;
    for (int d = 0; d < 4; d++) {
        if (md->padded_offsets[d])
            return 0;
        L->dims[d] = md->dims[d];
        L->pdims[d] = md->padded_dims[d];
        L->stride[d] = md->format_desc.blocking.strides[d];
    }
    if (!inner_positions(&md->format_desc.blocking, L) || L->pdims[0] % L->blk[0] || L->pdims[1] % L->blk[1])
        return 0;
    int64_t hw = L->dims[2] * L->dims[3];
    for (int p = 0; p < L->nin; p++)
        L->src_off[p] = (int32_t)((L->pos_o[p] * L->dims[1] + L->pos_i[p]) * hw);
    L->bf16 = md->data_type == dnnl_bf16;
    return L->dims[0] * L->dims[1] * hw < INT32_MAX; /* src_off fits */
}

int od_wlayout_plan(const dnnl_memory_desc_t *md, od_wlayout *L)
{
    memset(L, 0, sizeof *L);
    if (plan(md, L))
        return 1;
    memset(L, 0, sizeof *L); /* nin 0: not handled */
    return 0;
}

/* What one pass does to each tile (A, B) at kernel position (h, w). */
typedef struct tile_job tile_job;
struct tile_job {
    void (*fn)(const od_wlayout *L, const tile_job *j, int64_t A, int64_t B, int64_t h, int64_t w);
    const float *src;
    void *dst;
    int add;                     /* unpack: add to the flat layout instead of writing */
};

/* Tiles in parallel; within one, every kernel position before the next tile. */
static void each_tile(const od_wlayout *L, const tile_job *j)
{
    int64_t nA = L->pdims[0] / L->blk[0], nB = L->pdims[1] / L->blk[1], H = L->dims[2], W = L->dims[3];
#pragma omp parallel for collapse(2) schedule(static) if (nA * nB > 16)
    for (int64_t A = 0; A < nA; A++)
        for (int64_t B = 0; B < nB; B++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++)
                    j->fn(L, j, A, B, h, w);
}

/* Whole tiles, one clone per ISA (SO_VEC_CLONES; wl_ names: clang 14's
 * clone resolvers are global): a gather of the flat rows per inner block. */
SO_VEC_CLONES static void wl_gather(float *restrict d, const float *restrict s, const int32_t *restrict off, int n)
{
    for (int p = 0; p < n; p++)
        d[p] = s[off[p]];
}

SO_VEC_CLONES static void wl_gather_bf16(uint16_t *restrict d, const float *restrict s, const int32_t *restrict off,
                                        int n)
{
    for (int p = 0; p < n; p++)
        d[p] = so_bf16_narrow(s[off[p]]);
}

SO_VEC_CLONES static void wl_scatter(float *restrict d, const float *restrict s, const int32_t *restrict off, int n,
                                    int add)
{
    if (add)
        for (int p = 0; p < n; p++)
            d[off[p]] += s[p];
    else
        for (int p = 0; p < n; p++)
            d[off[p]] = s[p];
}

/* Inner position p of the tile at (o0, i0) holds a weight (not padding). */
static int in_range(const od_wlayout *L, int64_t o0, int64_t i0, int p)
{
    return o0 + L->pos_o[p] < L->dims[0] && i0 + L->pos_i[p] < L->dims[1];
}

/* Flat -> blocked. */
static void pack_tile(const od_wlayout *L, const tile_job *j, int64_t A, int64_t B, int64_t h, int64_t w)
{
    int64_t I = L->dims[1], H = L->dims[2], W = L->dims[3];
    int64_t o0 = A * L->blk[0], i0 = B * L->blk[1];
    int64_t at = A * L->stride[0] + B * L->stride[1] + h * L->stride[2] + w * L->stride[3];
    const float *s = j->src + (o0 * I + i0) * H * W + h * W + w;
    int whole = o0 + L->blk[0] <= L->dims[0] && i0 + L->blk[1] <= I;
    if (L->bf16) {
        uint16_t *d = (uint16_t *)j->dst + at;
        if (whole)
            wl_gather_bf16(d, s, L->src_off, L->nin);
        else
            for (int p = 0; p < L->nin; p++)
                d[p] = in_range(L, o0, i0, p) ? so_bf16_narrow(s[L->src_off[p]]) : 0;
    } else {
        float *d = (float *)j->dst + at;
        if (whole)
            wl_gather(d, s, L->src_off, L->nin);
        else
            for (int p = 0; p < L->nin; p++)
                d[p] = in_range(L, o0, i0, p) ? s[L->src_off[p]] : 0.0f;
    }
}

void od_wlayout_pack(const od_wlayout *L, const float *oihw, void *blocked)
{
    each_tile(L, &(tile_job){pack_tile, oihw, blocked, 0});
}

/* Blocked FP32 -> flat, written or added; padding skipped. */
static void unpack_tile(const od_wlayout *L, const tile_job *j, int64_t A, int64_t B, int64_t h, int64_t w)
{
    int64_t I = L->dims[1], H = L->dims[2], W = L->dims[3];
    int64_t o0 = A * L->blk[0], i0 = B * L->blk[1];
    const float *s = j->src + A * L->stride[0] + B * L->stride[1] + h * L->stride[2] + w * L->stride[3];
    float *d = (float *)j->dst + (o0 * I + i0) * H * W + h * W + w;
    if (o0 + L->blk[0] <= L->dims[0] && i0 + L->blk[1] <= I) {
        wl_scatter(d, s, L->src_off, L->nin, j->add);
        return;
    }
    for (int p = 0; p < L->nin; p++)
        if (in_range(L, o0, i0, p)) {
            float *t = d + L->src_off[p];
            *t = j->add ? *t + s[p] : s[p];
        }
}

void od_wlayout_unpack(const od_wlayout *L, const float *blocked, float *oihw, int add)
{
    each_tile(L, &(tile_job){unpack_tile, blocked, oihw, add});
}
