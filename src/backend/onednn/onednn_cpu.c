/* The backend's view of the CPU: SCALEOUT_MAX_ISA passed on to oneDNN (so
 * one variable caps both libraries' kernels), and whether oneDNN has a
 * Winograd convolution here, asked of oneDNN itself rather than guessed from
 * the ISA (2.6 implements it only for avx512_core). Both run once. */
#include <pthread.h>
#include <stdlib.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/cpu.h"

static int winograd_ok;
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;

/* Must run before oneDNN creates its first primitive: the cap is fixed then. */
static void pass_cap_on(void)
{
    if (!so_cpu_isa_requested_cap() || getenv("ONEDNN_MAX_CPU_ISA") || getenv("DNNL_MAX_CPU_ISA"))
        return;
    so_isa isa = so_cpu_isa();
    dnnl_set_max_cpu_isa(isa == SO_ISA_AVX512 ? dnnl_cpu_isa_all
                         : isa == SO_ISA_AVX2 ? dnnl_cpu_isa_avx2 : dnnl_cpu_isa_sse41);
}

/* A 16 -> 16 channel 3x3 forward on an 8x8 image, layouts left to oneDNN. */
static int winograd_probe(void)
{
    dnnl_engine_t eng;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success)
        return 0;
    dnnl_memory_desc_t src, w, dst;
    od_md_4d(&src, 1, 16, 8, 8, dnnl_format_tag_any);
    od_md_4d(&w, 16, 16, 3, 3, dnnl_format_tag_any);
    od_md_4d(&dst, 1, 16, 8, 8, dnnl_format_tag_any);
    dnnl_dims_t strides = {1, 1}, pad = {1, 1};
    dnnl_convolution_desc_t cd;
    dnnl_primitive_desc_t pd = NULL;
    int ok = dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_winograd, &src, &w,
                                                NULL, &dst, strides, pad, pad) == dnnl_success &&
             dnnl_primitive_desc_create(&pd, &cd, NULL, eng, NULL) == dnnl_success;
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    dnnl_engine_destroy(eng);
    return ok;
}

static void setup(void)
{
    pass_cap_on();
    winograd_ok = winograd_probe();
}

void od_cpu_setup(void)
{
    pthread_once(&setup_once, setup);
}

int od_winograd_available(void)
{
    od_cpu_setup();
    return winograd_ok;
}

int so_backend_has_winograd(void)
{
    return od_winograd_available() || od_wino_cpu();
}
