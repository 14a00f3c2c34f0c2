/* scaleout's GEMM (src/backend/onednn/onednn_gemm.h) alone on GPT-2's
 * linear-layer products: forward, backward data and backward weights of
 * c_attn, attn.c_proj, c_fc, mlp.c_proj and the tied LM head, R = B x T
 * rows. Best of REPS runs per product: GFLOP/s, FLOP per cycle per core
 * against the ISA's peak (32 with AVX2+FMA, 64 with AVX-512) at
 * so_cpu_clock_ghz(), and the share of what the micro-kernel alone (operands
 * in L1) runs at, probed just before each product: this VM's clock and FMA
 * throughput drift between products and runs, and it has no cycle counters.
 * PRODUCT... keeps only the products named "layer" or "layer/what" (what:
 * forward, dX, dW); GEMM_BLOCKS="MC KC NC" (below) times a second blocking
 * alternately with the default. GEMM_SPLIT=1 prints, per product, where
 * the threads' time goes beyond one thread's time / THREADS (split_loss).
 *
 *   gemm_bench THREADS REPS [ROWS [PRODUCT...]]
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/onednn/onednn_gemm.h"
#include "scaleout/cpu.h"
#include "scaleout/timer.h"

typedef struct {
    const char *name;
    int K, N; /* the layer's in and out features */
} layer;

static const layer layers[] = {
    {"c_attn", 768, 2304}, {"attn.c_proj", 768, 768}, {"c_fc", 768, 3072}, {"mlp.c_proj", 3072, 768}, {"lm_head", 768, 50304},
};

static float *filled(size_t n, int mod)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    for (size_t i = 0; p && i < n; i++)
        p[i] = (float)(i % (size_t)mod) * 0.1f;
    return p;
}

/* GFLOP/s of the micro-kernel alone on one core, its operands in L1 (KC
 * deep panels, one C tile): the ceiling the whole product approaches, probed
 * beside it because this VM's throughput drifts. Best of three ~1 ms runs. */
static double micro_gflops(const od_gemm_kernels *k)
{
    static float a[64 * 256] __attribute__((aligned(64))), b[32 * 256] __attribute__((aligned(64))), c[64 * 32];
    for (int i = 0; i < 64 * 256; i++)
        a[i] = 1e-3f * (float)(i % 13);
    for (int i = 0; i < 32 * 256; i++)
        b[i] = 1e-3f * (float)(i % 11);
    const int calls = 1000;
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = so_now();
        for (int i = 0; i < calls; i++)
            k->micro(k->kc, a, b, c, k->nr, i > 0, NULL);
        double t = so_now() - t0;
        best = t < best ? t : best;
    }
    return 2.0 * k->mr * k->nr * k->kc * calls / best * 1e-9;
}

/* GEMM_BLOCKS="MC KC NC": a second table, the same kernels with those
 * cache blocks, run alternately with the default one rep by rep, so both
 * see the same drift of the VM (an A/B of block sizes in one process). */
static od_gemm_kernels kb;
static int have_kb;
static double best_b;

/* Best time of reps runs of g, in seconds. */
static double best_of(const od_gemm_kernels *k, const od_gemm_args *g, float *work, int nthr, int reps)
{
    od_gemm(k, g, work, nthr); /* warm-up: pages touched, caches filled */
    double best = 1e30;
    best_b = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = so_now();
        od_gemm(k, g, work, nthr);
        double t = so_now() - t0;
        best = t < best ? t : best;
        if (have_kb) {
            t0 = so_now();
            od_gemm(&kb, g, work, nthr);
            t = so_now() - t0;
            best_b = t < best_b ? t : best_b;
        }
    }
    return best;
}

/* GEMM_SPLIT: where the time of the threads goes, best of reps, all runs
 * of one rep back to back: t1 the whole product on one thread, tn on nt;
 * alone[t] thread t's part (od_gemm_part) on one core with the other idle,
 * both[t] the same part while the other threads run theirs. tn - t1 / nt =
 * repacking the shared operand and the smaller blocks (sum of alone - t1,
 * per thread) + contention for L3 and memory (both - alone) + imbalance
 * (slowest part - mean part) + the rest (fork, join and noise). */
static void split_loss(const od_gemm_kernels *k, const od_gemm_args *g, float *work, int nthr, int reps, double *sum)
{
    enum { MAXT = 8 };
    int nt = od_gemm_threads(k, g, nthr < MAXT ? nthr : MAXT);
    od_gemm_args part[MAXT];
    double t1 = 1e30, tn = 1e30, alone[MAXT], both[MAXT];
    for (int t = 0; t < nt; t++) {
        alone[t] = both[t] = 1e30;
        if (!od_gemm_part(k, g, t, nt, &part[t]))
            part[t].M = 0; /* empty: od_gemm returns at once */
    }
    od_gemm(k, g, work, nt);
    for (int r = 0; r < reps; r++) {
        double t0 = so_now(), d;
        od_gemm(k, g, work, 1);
        t1 = (d = so_now() - t0) < t1 ? d : t1;
        t0 = so_now();
        od_gemm(k, g, work, nt);
        tn = (d = so_now() - t0) < tn ? d : tn;
        for (int t = 0; t < nt; t++) {
            t0 = so_now();
            od_gemm(k, &part[t], work, 1);
            alone[t] = (d = so_now() - t0) < alone[t] ? d : alone[t];
        }
#pragma omp parallel num_threads(nt)
        {
            int t = omp_get_thread_num();
            double s = so_now();
            od_gemm(k, &part[t], work + (size_t)t * od_gemm_work(k), 1);
            s = so_now() - s;
            both[t] = s < both[t] ? s : both[t];
        }
    }
    double sa = 0.0, sb = 0.0, slow = 0.0;
    for (int t = 0; t < nt; t++) {
        sa += alone[t];
        sb += both[t];
        slow = both[t] > slow ? both[t] : slow;
    }
    double loss[5] = {tn - t1 / nt, (sa - t1) / nt, (sb - sa) / nt, slow - sb / nt, 0.0};
    loss[4] = loss[0] - loss[1] - loss[2] - loss[3];
    printf("  1 thread %8.2f ms, %d: %8.2f ms (x%.2f); lost %+7.2f ms = repacking %+6.2f + contention %+6.2f + "
           "imbalance %5.2f + rest %+6.2f\n",
           t1 * 1e3, nt, tn * 1e3, t1 / tn, loss[0] * 1e3, loss[1] * 1e3, loss[2] * 1e3, loss[3] * 1e3, loss[4] * 1e3);
    sum[0] += t1;
    sum[1] += tn;
    for (int i = 0; i < 5; i++)
        sum[2 + i] += loss[i];
}

/* Whether "layer/what" is among the names asked for (all when none). */
static int wanted(const char *layer, const char *what, int n, char **names)
{
    char full[64];
    snprintf(full, sizeof full, "%s/%s", layer, what);
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], layer) || !strcmp(names[i], full))
            return 1;
    return n == 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gemm_bench THREADS REPS [ROWS [PRODUCT...]]\n");
        return 2;
    }
    int nthr = atoi(argv[1]), reps = atoi(argv[2]), R = argc > 3 ? atoi(argv[3]) : 256;
    const od_gemm_kernels *k = od_gemm_pick();
    if (!k || nthr < 1 || reps < 1 || R < 1) {
        fprintf(stderr, "gemm_bench: %s\n", k ? "THREADS, REPS and ROWS must be positive" : "needs AVX2 or above");
        return 2;
    }
    int peak = so_isa_flops_per_cycle(so_cpu_isa());
    double ghz = so_cpu_clock_ghz();
    const char *e = getenv("GEMM_BLOCKS");
    if (e) {
        kb = *k;
        if (sscanf(e, "%d %d %d", &kb.mc, &kb.kc, &kb.nc) != 3 || kb.mc < kb.mr || kb.kc < 1 || kb.nc < kb.nr) {
            fprintf(stderr, "gemm_bench: GEMM_BLOCKS must be \"MC KC NC\" with MC >= %d, NC >= %d\n", k->mr, k->nr);
            return 2;
        }
        have_kb = 1;
        printf("B: MC %d KC %d NC %d against A: MC %d KC %d NC %d, alternated\n", kb.mc, kb.kc, kb.nc, k->mc, k->kc,
               k->nc);
    }
    int split = getenv("GEMM_SPLIT") != NULL;
    double ssum[7] = {0};
    size_t wa = od_gemm_work(k), wb = have_kb ? od_gemm_work(&kb) : 0;
    float *work = aligned_alloc(64, (size_t)nthr * (wa > wb ? wa : wb) * sizeof(float));
    double total = 0.0, flops = 0.0, cycles = 0.0, ceiling = 0.0;
    printf("%s, %d thread(s), R = %d rows, peak %d FLOP/cycle/core at %.2f GHz\n", k->name, nthr, R, peak, ghz);
    for (size_t l = 0; l < sizeof layers / sizeof layers[0]; l++) {
        int K = layers[l].K, N = layers[l].N;
        static const char *what[3] = {"forward", "dX", "dW"};
        int any = 0;
        for (int j = 0; j < 3; j++)
            any |= wanted(layers[l].name, what[j], argc - 4, argv + 4);
        if (!any)
            continue;
        float *X = filled((size_t)R * K, 7), *W = filled((size_t)N * K, 5), *Y = filled((size_t)R * N, 3);
        float *dX = filled((size_t)R * K, 1), *dW = filled((size_t)N * K, 1);
        if (!work || !X || !W || !Y || !dX || !dW) {
            fprintf(stderr, "gemm_bench: out of memory\n");
            return 1;
        }
        /* Y = X W^T, dX = dY W, dW = dY^T X: onednn_linear.c's three products */
        od_gemm_args g[3] = {
            {.ta = 0, .tb = 1, .M = R, .N = N, .K = K, .A = X, .lda = K, .B = W, .ldb = K, .C = Y, .ldc = N},
            {.ta = 0, .tb = 0, .M = R, .N = K, .K = N, .A = Y, .lda = N, .B = W, .ldb = K, .C = dX, .ldc = K},
            {.ta = 1, .tb = 0, .M = N, .N = K, .K = R, .A = Y, .lda = N, .B = X, .ldb = K, .C = dW, .ldc = K}};
        for (int j = 0; j < 3; j++) {
            if (!wanted(layers[l].name, what[j], argc - 4, argv + 4))
                continue;
            double mg = micro_gflops(k), t = best_of(k, &g[j], work, nthr, reps), f = 2.0 * R * K * N;
            double fpc = f / (t * ghz * 1e9 * nthr);
            total += t;
            flops += f;
            cycles += t * ghz * 1e9 * nthr;
            ceiling += t * mg * 1e9 * nthr;
            printf("%-12s %-8s M %5d N %5d K %5d  %8.2f ms  %6.1f GFLOP/s  %5.2f FLOP/cycle  %5.1f%%", layers[l].name,
                   what[j], g[j].M, g[j].N, g[j].K, t * 1e3, f / t * 1e-9, fpc, 100.0 * fpc / peak);
            printf("  micro-kernel %5.1f%%, product at %5.1f%% of it", 100.0 * mg / (ghz * peak),
                   100.0 * f / t * 1e-9 / (mg * nthr));
            if (have_kb)
                printf("   B %8.2f ms  %5.1f%%, %5.1f%% of it  B/A time %.3f", best_b * 1e3,
                       100.0 * f / (best_b * ghz * 1e9 * nthr) / peak, 100.0 * f / best_b * 1e-9 / (mg * nthr), best_b / t);
            printf("\n");
            if (split)
                split_loss(k, &g[j], work, nthr, reps, ssum);
        }
        free(X), free(W), free(Y), free(dX), free(dW);
    }
    printf("all %.1f ms, %.1f GFLOP/s, %.2f FLOP/cycle/core, %.1f%% of peak, %.1f%% of the micro-kernel's rate\n",
           total * 1e3, flops / total * 1e-9, flops / cycles, 100.0 * flops / cycles / peak, 100.0 * flops / ceiling);
    if (split)
        printf("split: 1 thread %.1f ms, %d threads %.1f ms (x%.2f); lost %.1f ms = repacking %.1f + contention %.1f + "
               "imbalance %.1f + rest %.1f\n",
               ssum[0] * 1e3, nthr, ssum[1] * 1e3, ssum[0] / ssum[1], ssum[2] * 1e3, ssum[3] * 1e3, ssum[4] * 1e3,
               ssum[5] * 1e3, ssum[6] * 1e3);
    free(work);
    return 0;
}
