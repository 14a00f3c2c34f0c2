/* The GEMM driver (onednn_gemm.h): BLIS's five loops around the
 * per-ISA micro-kernel, and the split of C among threads. */
#include "backend/onednn/onednn_gemm.h"

#include <omp.h>
#include <string.h>

#include "scaleout/cpu.h"

const od_gemm_kernels *od_gemm_pick(void)
{
    so_isa isa = so_cpu_isa();
    return isa >= SO_ISA_AVX512 ? &od_gemm_avx512 : isa >= SO_ISA_AVX2 ? &od_gemm_avx2 : NULL;
}

size_t od_gemm_work(const od_gemm_kernels *k)
{
    size_t a = (size_t)(k->mc + k->mr) * k->kc, b = (size_t)k->kc * (k->nc + k->nr);
    return (a + b + 31) / 32 * 32;
}

/* One MR x NR tile of C at rows i, columns j (mr x nr of it inside C). */
static void tile(const od_gemm_kernels *k, const od_gemm_args *g, int i, int j, int mr, int nr, int kc,
                 const float *ap, const float *bp, int add, int first)
{
    float *c = g->C + (size_t)i * g->ldc + j;
    const float *init = first && g->bias && !g->add ? g->bias + j : NULL;
    if (mr == k->mr && nr == k->nr) {
        k->micro(kc, ap, bp, c, g->ldc, add, init);
        return;
    }
    /* An edge tile runs whole in a local tile, seeded from C (or the bias). */
    float t[32 * 32], b[32];
    memset(t, 0, sizeof t);
    for (int r = 0; add && r < mr; r++)
        memcpy(t + r * k->nr, c + (size_t)r * g->ldc, (size_t)nr * sizeof *t);
    if (init) {
        memset(b, 0, sizeof b);
        memcpy(b, init, (size_t)nr * sizeof *b);
    }
    k->micro(kc, ap, bp, t, k->nr, add, init ? b : NULL);
    for (int r = 0; r < mr; r++)
        memcpy(c + (size_t)r * g->ldc, t + r * k->nr, (size_t)nr * sizeof *t);
}

/* C[m0..m1) x [n0..n1) on one thread, its own packing buffers in work. */
static void gemm_block(const od_gemm_kernels *k, const od_gemm_args *g, int m0, int m1, int n0, int n1, float *work)
{
    float *ap = work, *bp = work + (size_t)(k->mc + k->mr) * k->kc;
    for (int jc = n0; jc < n1; jc += k->nc) {
        int nc = n1 - jc < k->nc ? n1 - jc : k->nc;
        for (int pc = 0; pc < g->K; pc += k->kc) {
            int kc = g->K - pc < k->kc ? g->K - pc : k->kc, first = pc == 0;
            const float *b = g->tb ? g->B + (size_t)jc * g->ldb + pc : g->B + (size_t)pc * g->ldb + jc;
            k->pack_b(b, g->ldb, g->tb, kc, nc, bp);
            for (int ic = m0; ic < m1; ic += k->mc) {
                int mc = m1 - ic < k->mc ? m1 - ic : k->mc;
                const float *a = g->ta ? g->A + (size_t)pc * g->lda + ic : g->A + (size_t)ic * g->lda + pc;
                k->pack_a(a, g->lda, g->ta, mc, kc, ap);
                for (int jr = 0; jr < nc; jr += k->nr)
                    for (int ir = 0; ir < mc; ir += k->mr)
                        tile(k, g, ic + ir, jc + jr, mc - ir < k->mr ? mc - ir : k->mr,
                             nc - jr < k->nr ? nc - jr : k->nr, kc, ap + (size_t)ir * kc, bp + (size_t)jr * kc,
                             g->add || !first, first);
            }
        }
    }
}

/* [lo, hi) of n for thread t of nt, in whole units of `unit`. */
static void split(int n, int unit, int t, int nt, int *lo, int *hi)
{
    int units = (n + unit - 1) / unit, per = (units + nt - 1) / nt;
    *lo = t * per * unit < n ? t * per * unit : n;
    *hi = (t + 1) * per * unit < n ? (t + 1) * per * unit : n;
}

/* The larger side of C is split: each thread packs the shared operand again
 * (the small one) rather than waiting for the others at barriers. */
static int split_cols(const od_gemm_kernels *k, const od_gemm_args *g)
{
    return g->N / k->nr >= g->M / k->mr;
}

int od_gemm_threads(const od_gemm_kernels *k, const od_gemm_args *g, int nthr)
{
    int units = split_cols(k, g) ? g->N / k->nr : g->M / k->mr;
    return nthr > 1 && units >= 2 * nthr ? nthr : 1;
}

int od_gemm_part(const od_gemm_kernels *k, const od_gemm_args *g, int t, int nt, od_gemm_args *part)
{
    int lo, hi, cols = split_cols(k, g);
    split(cols ? g->N : g->M, cols ? k->nr : k->mr, t, nt, &lo, &hi);
    *part = *g;
    if (cols) {
        part->N = hi - lo;
        part->B = g->tb ? g->B + (size_t)lo * g->ldb : g->B + lo;
        part->C = g->C + lo;
        part->bias = g->bias ? g->bias + lo : NULL;
    } else {
        part->M = hi - lo;
        part->A = g->ta ? g->A + lo : g->A + (size_t)lo * g->lda;
        part->C = g->C + (size_t)lo * g->ldc;
    }
    return lo < hi;
}

void od_gemm(const od_gemm_kernels *k, const od_gemm_args *g, float *work, int nthr)
{
    if (g->M < 1 || g->N < 1)
        return;
    nthr = od_gemm_threads(k, g, nthr);
#pragma omp parallel num_threads(nthr) if (nthr > 1)
    {
        int t = omp_get_thread_num();
        od_gemm_args p;
        if (od_gemm_part(k, g, t, omp_get_num_threads(), &p))
            gemm_block(k, &p, 0, p.M, 0, p.N, work + (size_t)t * od_gemm_work(k));
    }
}
