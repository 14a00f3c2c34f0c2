/* BF16 compute for --precision bf16 (autocast, as PyTorch's CPU autocast):
 * the FP32 -> BF16 conversions convolutions and dense layers run before
 * their primitives, into two staging buffers shared by all nodes (a source
 * and a diff_dst are never needed by two nodes at once), so BF16 costs no
 * per-layer activation memory. */
#include <string.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"

int od_bf16(const od_state *s) { return s->m->precision == SO_PRECISION_BF16; }

dnnl_memory_desc_t od_md_as(const dnnl_memory_desc_t *md, dnnl_data_type_t dt)
{
    dnnl_memory_desc_t out = *md;
    out.data_type = dt;
    return out;
}

int od_tobf16_init(od_state *s, int node, const dnnl_memory_desc_t *f32_md, int slot, od_tobf16 *c)
{
    dnnl_memory_desc_t h = od_md_as(f32_md, dnnl_bf16);
    size_t bytes = dnnl_memory_desc_get_size(&h);
    if (bytes > s->h16_bytes)
        s->h16_bytes = bytes; /* allocated once all nodes are built (od_bf16_alloc) */
    c->slot = slot;
    int rc = od_mem_wrap(s, node, &h, DNNL_MEMORY_NONE, &c->mem);
    if (!rc)
        rc = od_reorder_init(s, node, "bf16 conversion", f32_md, &h, 0, &c->reorder);
    return rc;
}

/* One pass (oneDNN's jit reorder, threaded) reading 4 bytes and writing 2
 * per element. Backward weights converts its source again instead of keeping
 * forward's copy, so no BF16 copy of every layer's input stays alive: on
 * ResNet-50 b16, one thread of a Zen 5 core (AVX512_BF16), that second
 * conversion is ~38 ms of a ~1.75 s step (ONEDNN_VERBOSE exec times; the
 * forward's is ~50 ms, the diff_dst's ~47 ms, the weights' ~92 ms). */
int od_tobf16_exec(od_state *s, int node, od_tobf16 *c, dnnl_memory_t src, dnnl_memory_t *out)
{
    OD_CHECK(s, node, "bf16 staging handle", dnnl_memory_set_data_handle(c->mem, s->h16[c->slot]));
    *out = c->mem;
    return od_reorder_exec(s, node, "bf16 conversion", &c->reorder, src, c->mem);
}

void od_tobf16_fini(od_tobf16 *c)
{
    od_prim_fini(&c->reorder);
    od_mem_free(&c->mem, NULL);
}

int od_bf16_alloc(od_state *s)
{
    if (!s->h16_bytes)
        return 0;
    for (int k = 0; k < 2; k++)
        if (!(s->h16[k] = so_alloc(s->h16_bytes)))
            return so_err(SO_ENOMEM, "out of memory (%zu bytes) for the bf16 staging buffers", s->h16_bytes);
    return 0;
}

void od_bf16_free(od_state *s)
{
    for (int k = 0; k < 2; k++) {
        so_free(s->h16[k]);
        s->h16[k] = NULL;
    }
}
