/* Direct convolution for small channel counts (LeNet's 1->6 and 6->16),
 * where oneDNN 2.6 has no jit kernel for plain NCHW and falls back to
 * im2col + sgemm per image: the rule choosing it and the choice of ISA.
 * The kernels (register-tiled loops over a "wide" padded image) are
 * onednn_dconv_body.h, built for AVX-512 and for AVX2+FMA. */
#include "backend/onednn/onednn_internal.h"
#include "scaleout/cpu.h"

/* Called only where oneDNN would run im2col+gemm (onednn_conv.c's
 * small_channels: an output or needed input-diff channel count not a multiple
 * of 16); further requires a plain NCHW source, channel counts small enough
 * for the register tiling (<= 32 each way), stride 1 (the wide-grid trick),
 * no groups, padding below the kernel size (PyTorch's usual range; keeps the
 * zero margins of plan_bd_init sufficient), and an AVX2+FMA or AVX-512 CPU.
 * Elsewhere oneDNN's jit kernels win. */
int od_dconv_applies(od_state *s, int node)
{
    const so_node *nd = od_node(s, node);
    const so_attrs *a = &nd->a;
    so_shape is = od_node(s, nd->inputs[0])->out;
    dnnl_memory_desc_t plain;
    od_md_plain(s, nd->inputs[0], &plain);
    if (a->groups != 1 || a->sh != 1 || a->sw != 1 || a->ph >= a->kh || a->pw >= a->kw)
        return 0;
    if (a->out > 32 || is.c > 32)
        return 0;
    if (!od_md_equal(&od_in(s, node, 0)->md, &plain))
        return 0;
    return so_cpu_isa() >= SO_ISA_AVX2;
}

/* The widest instance so_cpu_isa() allows (od_dconv_applies said >= AVX2). */
const od_op *od_dconv_op(void)
{
    return so_cpu_isa() >= SO_ISA_AVX512 ? &od_op_dconv_avx512 : &od_op_dconv_avx2;
}

int od_dconv_isa(const od_op *op)
{
    return op == &od_op_dconv_avx512 || op == &od_op_dconv_bf16 ? SO_ISA_AVX512 : op == &od_op_dconv_avx2 ? SO_ISA_AVX2 : -1;
}
