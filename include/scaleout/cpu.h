/* What the CPU can run, decided once per process: the instruction-set level
 * scaleout's own kernels dispatch on (detected, then capped by
 * SCALEOUT_MAX_ISA and ONEDNN_MAX_CPU_ISA), a clock probe, and the FP32 peak
 * that MFU figures divide by. Builds are portable (x86-64-v2); every kernel
 * above that level is chosen here at run time, never by compile flags. */
#ifndef SCALEOUT_CPU_H
#define SCALEOUT_CPU_H

/* Ordered levels: a kernel for level L runs on every CPU whose level is >= L. */
typedef enum {
    SO_ISA_SSE42 = 0,  /* the x86-64-v2 baseline every build assumes */
    SO_ISA_AVX2 = 1,   /* AVX2 + FMA (Haswell, Zen 1-3) */
    SO_ISA_AVX512 = 2  /* AVX-512 F/BW/VL/DQ, oneDNN's avx512_core (Skylake-SP, Zen 4+) */
} so_isa;

/* Reads the caps once (thread-safe; later calls return the same result).
 * SO_EINVAL naming the variable when SCALEOUT_MAX_ISA is not one of
 * avx512, avx2, sse4.2; the detected level is used in that case. */
int so_cpu_init(void);

/* The level kernels may use: detected, lowered by SCALEOUT_MAX_ISA and by
 * ONEDNN_MAX_CPU_ISA (so one cap holds both scaleout's and oneDNN's code). */
so_isa so_cpu_isa(void);
/* The level of the hardware, before any cap. */
so_isa so_cpu_isa_detected(void);
/* The variable that lowered so_cpu_isa() ("SCALEOUT_MAX_ISA", ...), or NULL. */
const char *so_cpu_isa_cap(void);
/* SCALEOUT_MAX_ISA as given, or NULL when unset: the backend passes it on
 * to oneDNN when ONEDNN_MAX_CPU_ISA is unset. */
const char *so_cpu_isa_requested_cap(void);

/* "avx512", "avx2", "sse4.2": the names SCALEOUT_MAX_ISA takes. */
const char *so_isa_name(so_isa isa);
/* "AVX-512", "AVX2+FMA", "SSE4.2": for banners and docs. */
const char *so_isa_label(so_isa isa);
/* Accepts so_isa_name's names (any case; also "sse42", "baseline"). */
int so_isa_parse(const char *name, so_isa *out);

/* FP32 FLOP per cycle per core: two FMA pipes x lanes x 2 (64 for AVX-512,
 * 32 for AVX2+FMA), 16 for SSE (two add and two multiply pipes of 4 lanes). */
int so_isa_flops_per_cycle(so_isa isa);

/* AVX-512 BF16 instructions (vdpbf16ps), within the cap. */
int so_cpu_has_bf16(void);

/* Core clock in GHz from a chain of dependent adds (one per cycle), best of
 * a few ~10 ms runs; measured once and cached. 0 where it cannot run. */
double so_cpu_clock_ghz(void);

/* so_isa_flops_per_cycle(so_cpu_isa()) x so_cpu_clock_ghz(): the peak one
 * core reaches in GFLOP/s, the denominator of model-FLOP utilisation. */
double so_cpu_peak_gflops(void);

/* FP32 GFLOP/s one core sustains in independent FMA chains at so_cpu_isa()'s
 * vector width, measured once (~25 ms). Below so_cpu_peak_gflops() where
 * the CPU splits wide operations (Zen 4 runs AVX-512 on 256-bit units).
 * 0 for the SSE level (not probed). */
double so_cpu_fma_gflops(void);

/* BF16 FLOP per cycle per core of vdpbf16ps (16 lanes x 2 products x 2 FLOP
 * x 2 pipes = 128), 0 without so_cpu_has_bf16(). */
int so_cpu_bf16_flops_per_cycle(void);

/* so_cpu_bf16_flops_per_cycle() x so_cpu_clock_ghz(): the nominal BF16 peak
 * of one core in GFLOP/s, the denominator of MFU for BF16 layers; 0 without
 * BF16. */
double so_cpu_bf16_peak_gflops(void);

/* GFLOP/s one core sustains in independent vdpbf16ps chains (FP32
 * accumulators), measured once (~25 ms); 0 without so_cpu_has_bf16(). */
double so_cpu_bf16_gflops(void);

#endif
