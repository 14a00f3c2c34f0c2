/* Instruction-set level, caps and clock of the CPU (see scaleout/cpu.h).
 * Detection uses the compiler's cpuid helpers, which also check that the OS
 * saves the wide registers; the caps come from two environment variables
 * read once, so every kernel of a process dispatches on the same answer. */
#include "scaleout/cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "scaleout/err.h"
#include "scaleout/timer.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static struct {
    so_isa detected, effective;
    int bf16;                    /* the hardware has AVX-512 BF16 */
    const char *cap_var;         /* the variable that lowered the level, or NULL */
    const char *requested_cap;   /* SCALEOUT_MAX_ISA's value, or NULL */
    int init_rc;                 /* so_cpu_init's result */
    char init_msg[160];          /* its message, replayed on every call */
} cpu;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

static const char *const isa_names[] = {"sse4.2", "avx2", "avx512"};
static const char *const isa_labels[] = {"SSE4.2", "AVX2+FMA", "AVX-512"};

const char *so_isa_name(so_isa isa) { return isa_names[isa]; }
const char *so_isa_label(so_isa isa) { return isa_labels[isa]; }

int so_isa_parse(const char *name, so_isa *out)
{
    for (int i = 0; i < 3; i++)
        if (!strcasecmp(name, isa_names[i])) {
            *out = (so_isa)i;
            return 0;
        }
    if (!strcasecmp(name, "sse42") || !strcasecmp(name, "baseline")) {
        *out = SO_ISA_SSE42;
        return 0;
    }
    return SO_EINVAL;
}

int so_isa_flops_per_cycle(so_isa isa)
{
    return isa == SO_ISA_AVX512 ? 64 : isa == SO_ISA_AVX2 ? 32 : 16;
}

static so_isa detect(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma"))
        return SO_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return SO_ISA_AVX2;
#endif
    return SO_ISA_SSE42;
}

/* oneDNN's names (ONEDNN_MAX_CPU_ISA, or DNNL_MAX_CPU_ISA before 2.x):
 * AVX512_CORE[_VNNI|_BF16|...] -> AVX-512, AVX2[_VNNI] -> AVX2, AVX or
 * SSE41 -> below AVX2; ALL and anything unknown cap nothing. */
static so_isa onednn_cap(const char *v)
{
    if (!strncasecmp(v, "AVX512", 6))
        return SO_ISA_AVX512;
    if (!strncasecmp(v, "AVX2", 4))
        return SO_ISA_AVX2;
    if (!strcasecmp(v, "AVX") || !strncasecmp(v, "SSE", 3))
        return SO_ISA_SSE42;
    return SO_ISA_AVX512;
}

static void lower_to(so_isa cap, const char *var)
{
    if (cap < cpu.effective) {
        cpu.effective = cap;
        cpu.cap_var = var;
    }
}

static void init_once(void)
{
    cpu.detected = cpu.effective = detect();
#if defined(__x86_64__) || defined(__i386__)
    cpu.bf16 = cpu.detected == SO_ISA_AVX512 && __builtin_cpu_supports("avx512bf16");
#endif
    const char *v = getenv("SCALEOUT_MAX_ISA");
    so_isa cap;
    if (v && *v) {
        if (so_isa_parse(v, &cap)) {
            cpu.init_rc = SO_EINVAL;
            snprintf(cpu.init_msg, sizeof cpu.init_msg,
                     "SCALEOUT_MAX_ISA: unknown level '%.40s' (use avx512, avx2 or sse4.2)", v);
        } else {
            cpu.requested_cap = v;
            lower_to(cap, "SCALEOUT_MAX_ISA");
        }
    }
    const char *ovar = getenv("ONEDNN_MAX_CPU_ISA") ? "ONEDNN_MAX_CPU_ISA" : "DNNL_MAX_CPU_ISA";
    const char *o = getenv(ovar);
    if (o && *o)
        lower_to(onednn_cap(o), ovar);
}

int so_cpu_init(void)
{
    pthread_once(&cpu_once, init_once);
    return cpu.init_rc ? so_err(cpu.init_rc, "%s", cpu.init_msg) : 0;
}

so_isa so_cpu_isa(void)
{
    pthread_once(&cpu_once, init_once);
    return cpu.effective;
}

so_isa so_cpu_isa_detected(void)
{
    pthread_once(&cpu_once, init_once);
    return cpu.detected;
}

const char *so_cpu_isa_cap(void)
{
    pthread_once(&cpu_once, init_once);
    return cpu.cap_var;
}

const char *so_cpu_isa_requested_cap(void)
{
    pthread_once(&cpu_once, init_once);
    return cpu.requested_cap;
}

int so_cpu_has_bf16(void)
{
    pthread_once(&cpu_once, init_once);
    return cpu.bf16 && cpu.effective == SO_ISA_AVX512;
}

/* ---- clock probe ---- */

#define CHAIN_ADDS 16 /* dependent adds per loop iteration */

/* Seconds for iters x CHAIN_ADDS dependent adds: one per cycle on every
 * x86-64 core since the P6; the loop's own counter runs alongside. */
static double chain_seconds(long iters)
{
    unsigned long x = 0;
    double t0 = so_now();
    for (long i = 0; i < iters; i++)
        __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                         "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                         "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                         "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
                         : "+r"(x));
    return so_now() - t0;
}

static double clock_ghz;
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

/* Best of five: a run that lost the CPU for a while only reads slower. */
static void clock_probe(void)
{
#if defined(__x86_64__)
    const long iters = 1000000; /* 16 M cycles: ~5 ms at 3 GHz */
    double best = 0;
    chain_seconds(iters / 4); /* leave the idle clock state first */
    for (int r = 0; r < 5; r++) {
        double s = chain_seconds(iters);
        if (s > 0 && (best == 0 || s < best))
            best = s;
    }
    clock_ghz = best > 0 ? (double)iters * CHAIN_ADDS / best * 1e-9 : 0;
#endif
}

double so_cpu_clock_ghz(void)
{
    pthread_once(&clock_once, clock_probe);
    return clock_ghz;
}

double so_cpu_peak_gflops(void)
{
    return so_isa_flops_per_cycle(so_cpu_isa()) * so_cpu_clock_ghz();
}

/* ---- FMA throughput probe ----
 * The nominal peak assumes full-width FMA pipes; some CPUs split 512-bit
 * operations in two (Zen 4 runs AVX-512 on 256-bit units), so MFU figures
 * also get the rate this core really sustains: CHAINS independent FMA
 * chains, enough to cover 2 pipes x 4-5 cycles of latency. */
#define CHAINS 12

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static double fma512_flops(long iters)
{
    __m512 acc[CHAINS], mul = _mm512_set1_ps(0.9999999f), add = _mm512_set1_ps(1e-7f);
    for (int j = 0; j < CHAINS; j++)
        acc[j] = _mm512_set1_ps(1.0f + (float)j);
    double t0 = so_now();
    for (long i = 0; i < iters; i++)
        for (int j = 0; j < CHAINS; j++)
            acc[j] = _mm512_fmadd_ps(acc[j], mul, add);
    double t = so_now() - t0;
    volatile float sink = 0;
    for (int j = 0; j < CHAINS; j++)
        sink += _mm512_reduce_add_ps(acc[j]);
    (void)sink;
    return t > 0 ? (double)iters * CHAINS * 16 * 2 / t : 0;
}

__attribute__((target("avx2,fma"))) static double fma256_flops(long iters)
{
    __m256 acc[CHAINS], mul = _mm256_set1_ps(0.9999999f), add = _mm256_set1_ps(1e-7f);
    for (int j = 0; j < CHAINS; j++)
        acc[j] = _mm256_set1_ps(1.0f + (float)j);
    double t0 = so_now();
    for (long i = 0; i < iters; i++)
        for (int j = 0; j < CHAINS; j++)
            acc[j] = _mm256_fmadd_ps(acc[j], mul, add);
    double t = so_now() - t0;
    float lanes[8];
    volatile float sink = 0;
    for (int j = 0; j < CHAINS; j++) {
        _mm256_storeu_ps(lanes, acc[j]);
        sink += lanes[0];
    }
    (void)sink;
    return t > 0 ? (double)iters * CHAINS * 8 * 2 / t : 0;
}
#endif

static double fma_gflops;
static pthread_once_t fma_once = PTHREAD_ONCE_INIT;

/* GFLOP/s of a probe: the best of five ~5 ms runs after a warm-up one
 * (the wide units' power-up and the first page touches not counted). */
static double best_of_five(double (*run)(long), long iters)
{
    double best = 0;
    run(100000);
    for (int r = 0; r < 5; r++) {
        double f = run(iters);
        best = f > best ? f : best;
    }
    return best * 1e-9;
}

/* At the level kernels may use (SSE: not probed). */
static void fma_probe(void)
{
#if defined(__x86_64__)
    so_isa isa = so_cpu_isa();
    if (isa != SO_ISA_SSE42)
        fma_gflops = best_of_five(isa == SO_ISA_AVX512 ? fma512_flops : fma256_flops, 400000);
#endif
}

double so_cpu_fma_gflops(void)
{
    pthread_once(&fma_once, fma_probe);
    return fma_gflops;
}

/* ---- BF16 dot-product peak ----
 * vdpbf16ps: per 32-bit lane, two BF16 products added into an FP32
 * accumulator, so 16 lanes x 2 pairs x 2 FLOP = 64 FLOP per instruction and
 * 128 per cycle on two pipes. The probe runs BF16_CHAINS independent
 * accumulators: more than the FMA probe's, to cover a latency of up to 8
 * cycles on two pipes. */
#define BF16_FLOP_PER_CYCLE 128
#define BF16_CHAINS 16

int so_cpu_bf16_flops_per_cycle(void)
{
    return so_cpu_has_bf16() ? BF16_FLOP_PER_CYCLE : 0;
}

double so_cpu_bf16_peak_gflops(void)
{
    return so_cpu_bf16_flops_per_cycle() * so_cpu_clock_ghz();
}

#if defined(__x86_64__)
__attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl"))) static double dpbf16_flops(long iters)
{
    __m512 acc[BF16_CHAINS];
    /* Small products keep the accumulators finite over every iteration. */
    __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
    __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    for (int j = 0; j < BF16_CHAINS; j++)
        acc[j] = _mm512_set1_ps(1.0f + (float)j);
    double t0 = so_now();
    for (long i = 0; i < iters; i++)
        for (int j = 0; j < BF16_CHAINS; j++)
            acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
    double t = so_now() - t0;
    volatile float sink = 0;
    for (int j = 0; j < BF16_CHAINS; j++)
        sink += _mm512_reduce_add_ps(acc[j]);
    (void)sink;
    return t > 0 ? (double)iters * BF16_CHAINS * 16 * 2 * 2 / t : 0;
}
#endif

static double bf16_gflops;
static pthread_once_t bf16_once = PTHREAD_ONCE_INIT;

/* Not probed without BF16 within the cap. */
static void bf16_probe(void)
{
#if defined(__x86_64__)
    if (so_cpu_has_bf16())
        bf16_gflops = best_of_five(dpbf16_flops, 300000);
#endif
}

double so_cpu_bf16_gflops(void)
{
    pthread_once(&bf16_once, bf16_probe);
    return bf16_gflops;
}
