/* scaleout's GEMM (src/backend/onednn/onednn_gemm.h) alone on GPT-2's
 * linear-layer products: forward, backward data and backward weights of
 * c_attn, attn.c_proj, c_fc, mlp.c_proj and the tied LM head, R = B x T
 * rows. Best of REPS runs per product, GFLOP/s and the share of the FMA
 * peak the caller passes (GFLOP/s per core; `scaleout version --cpu`).
 *
 *   gemm_bench THREADS REPS [ROWS [PEAK_PER_CORE]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/onednn/onednn_gemm.h"
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

/* Best time of reps runs of g, in seconds. */
static double best_of(const od_gemm_kernels *k, const od_gemm_args *g, float *work, int nthr, int reps)
{
    od_gemm(k, g, work, nthr); /* warm-up: pages touched, caches filled */
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = so_now();
        od_gemm(k, g, work, nthr);
        double t = so_now() - t0;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gemm_bench THREADS REPS [ROWS [PEAK_PER_CORE]]\n");
        return 2;
    }
    int nthr = atoi(argv[1]), reps = atoi(argv[2]), R = argc > 3 ? atoi(argv[3]) : 256;
    double peak = argc > 4 ? atof(argv[4]) : 0.0;
    const od_gemm_kernels *k = od_gemm_pick();
    if (!k || nthr < 1 || reps < 1 || R < 1) {
        fprintf(stderr, "gemm_bench: %s\n", k ? "THREADS, REPS and ROWS must be positive" : "needs AVX2 or above");
        return 2;
    }
    float *work = aligned_alloc(64, (size_t)nthr * od_gemm_work(k) * sizeof(float));
    double total = 0.0, flops = 0.0;
    printf("%s, %d thread(s), R = %d rows\n", k->name, nthr, R);
    for (size_t l = 0; l < sizeof layers / sizeof layers[0]; l++) {
        int K = layers[l].K, N = layers[l].N;
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
        static const char *what[3] = {"forward", "dX", "dW"};
        for (int j = 0; j < 3; j++) {
            double t = best_of(k, &g[j], work, nthr, reps), f = 2.0 * R * K * N;
            total += t;
            flops += f;
            printf("%-12s %-8s M %5d N %5d K %5d  %8.2f ms  %6.1f GFLOP/s", layers[l].name, what[j], g[j].M, g[j].N,
                   g[j].K, t * 1e3, f / t * 1e-9);
            if (peak > 0)
                printf("  %5.1f%% of peak", 100.0 * f / t * 1e-9 / (peak * nthr));
            printf("\n");
        }
        free(X), free(W), free(Y), free(dX), free(dW);
    }
    printf("all %.1f ms, %.1f GFLOP/s\n", total * 1e3, flops / total * 1e-9);
    free(work);
    return 0;
}
