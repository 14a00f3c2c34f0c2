/* Gradient compression (scaleout/compress.h): the kernels against plain
 * references (top-k by a full sort, the packed bit layouts bit by bit, rand-k's
 * indices, PowerSGD exact on a rank-r matrix), QSGD's and rand-k's
 * unbiasedness over many draws with fixed seeds, the --compress parser's
 * answers to good and bad specs, and the compressor over a simulated group
 * of R ranks in one thread (sim_group below): sparse top-k equal to a dense
 * reference, error feedback losing nothing, full-rank PowerSGD exact, the
 * byte counters equal to the formulas. Registered again under
 * SCALEOUT_MAX_ISA=sse4.2, where the scalar kernels run. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "isa_cap.h"
#include "scaleout/compress.h"
#include "scaleout/graph.h"
#include "scaleout/predict.h"
#include "scaleout/zoo.h"
#include "scaleout/dtype.h"
#include "scaleout/err.h"
#include "scaleout/rng.h"

static void fill_normal(float *x, size_t n, uint64_t seed)
{
    so_rng r;
    so_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = so_rng_normal(&r);
}

static void *xmalloc(size_t bytes)
{
    void *p = NULL;
    assert_int_equal(posix_memalign(&p, 64, bytes ? bytes : 64), 0);
    return p;
}

/* ---- the spec parser ------------------------------------------------------------------ */

static void test_parse_good(void **state)
{
    (void)state;
    static const char *const good[][2] = {
        {"none", "none"},           {"fp16", "fp16"},           {"bf16", "bf16"},
        {"topk:0.01", "topk:0.01"}, {"randk:1", "randk:1"},     {"qsgd:4", "qsgd:4:512"},
        {"qsgd:8:64", "qsgd:8:64"}, {"sign", "sign"},           {"powersgd:2", "powersgd:2:10"},
        {"powersgd:4:0", "powersgd:4:0"}, {"auto", "auto"}};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        so_compress_spec s;
        char buf[64];
        assert_int_equal(so_compress_parse(good[i][0], &s), 0);
        so_compress_format(&s, buf, sizeof buf);
        assert_string_equal(buf, good[i][1]);
        so_compress_spec again; /* the formatted spec reads back the same */
        assert_int_equal(so_compress_parse(buf, &again), 0);
        assert_true(again.method == s.method && again.ratio == s.ratio && again.bits == s.bits &&
                    again.block == s.block && again.rank == s.rank && again.start_step == s.start_step);
    }
    so_compress_spec s;
    assert_int_equal(so_compress_parse("topk:0.25", &s), 0);
    assert_true(s.method == SO_COMPRESS_TOPK && s.ratio == 0.25);
    assert_true(so_compress_biased(&s));
    assert_int_equal(so_compress_parse("qsgd:3", &s), 0);
    assert_false(so_compress_biased(&s));
}

/* Each bad spec: SO_EINVAL, one line naming --compress and the problem. */
static void test_parse_bad(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"", "empty"},
        {"zip", "unknown method 'zip'"},
        {"topk", "needs a ratio"},
        {"topk:0", "outside (0, 1]"},
        {"topk:1.5", "outside (0, 1]"},
        {"topk:-0.1", "outside (0, 1]"},
        {"randk:abc", "not a number"},
        {"topk:0.1x", "not a number"},
        {"topk:0.1:3", "not a number"},
        {"qsgd", "needs the bits"},
        {"qsgd:0", "outside 1..16"},
        {"qsgd:17", "outside 1..16"},
        {"qsgd:4:0", "block size 0"},
        {"qsgd:4:x", "not an integer"},
        {"powersgd", "needs the rank"},
        {"powersgd:0", "outside 1..4096"},
        {"powersgd:2:-1", "negative"},
        {"fp16:2", "takes no parameter"},
        {"sign:", "takes no parameter"},
        {"TOPK:0.1", "unknown method"},
        {"fp16\n", "not a printable character"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        so_compress_spec s;
        int rc = so_compress_parse(bad[i][0], &s);
        const char *msg = so_errmsg();
        if (rc != SO_EINVAL || !strstr(msg, "--compress") || !strstr(msg, bad[i][1]) || strchr(msg, '\n'))
            fail_msg("'%s': rc %d, message '%s' (want '%s')", bad[i][0], rc, msg, bad[i][1]);
    }
}

/* ---- top-k --------------------------------------------------------------------------- */

static const float *sort_base;
static int by_mag_then_index(const void *a, const void *b)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    float x = fabsf(sort_base[i]), y = fabsf(sort_base[j]);
    return x > y ? -1 : x < y ? 1 : (i > j) - (i < j);
}

static int ascending(const void *a, const void *b)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    return (i > j) - (i < j);
}

/* so_compress_topk against sort-by-magnitude (ties: lower index), indices ascending. */
static void check_topk(const float *g, size_t n, size_t k)
{
    uint32_t *idx = xmalloc(k * 4), *ref = xmalloc(n * 4);
    float *val = xmalloc(k * 4);
    void *scratch = xmalloc(so_compress_topk_scratch(n));
    assert_int_equal(so_compress_topk(g, n, k, idx, val, scratch), k);
    for (uint32_t i = 0; i < n; i++)
        ref[i] = i;
    sort_base = g;
    qsort(ref, n, 4, by_mag_then_index);
    qsort(ref, k, 4, ascending);
    for (size_t j = 0; j < k; j++) {
        if (idx[j] != ref[j] || val[j] != g[ref[j]])
            fail_msg("n %zu k %zu: pick %zu is %u (%g), want %u (%g)", n, k, j, idx[j], val[j], ref[j], g[ref[j]]);
    }
    free(idx);
    free(ref);
    free(val);
    free(scratch);
}

static void test_topk(void **state)
{
    (void)state;
    static const size_t sizes[][2] = {{1, 1}, {7, 3}, {100, 1}, {100, 100}, {1000, 250}, {100003, 1000},
                                      {100003, 10}, {65536, 32768}, {200000, 2000}};
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
        size_t n = sizes[t][0];
        float *g = xmalloc(n * 4);
        fill_normal(g, n, 11 + t);
        check_topk(g, n, sizes[t][1]);
        /* Many equal magnitudes (a quantised gradient, zeros): ties by index. */
        for (size_t i = 0; i < n; i++)
            g[i] = (float)((int)(i * 7919 % 13) - 6) * 0.5f;
        check_topk(g, n, sizes[t][1]);
        memset(g, 0, n * 4);
        check_topk(g, n, sizes[t][1]);
        free(g);
    }
    /* A skewed buffer where the sample misjudges the threshold: a few huge values. */
    size_t n = 100000;
    float *g = xmalloc(n * 4);
    fill_normal(g, n, 5);
    for (size_t i = 0; i < 50; i++)
        g[i * 1999] = 1e6f + (float)i;
    check_topk(g, n, 40);
    check_topk(g, n, 5000);
    free(g);
}

/* ---- rand-k -------------------------------------------------------------------------- */

static void test_randk(void **state)
{
    (void)state;
    enum { N = 1000, K = 100, DRAWS = 4000 };
    uint32_t idx[K], idx2[K];
    uint64_t bitmap[(N + 63) / 64] = {0};
    static unsigned hits[N];
    memset(hits, 0, sizeof hits);
    for (int d = 0; d < DRAWS; d++) {
        uint64_t key = so_compress_key(7, (uint64_t)d, 0, 0);
        so_compress_randk_indices(N, K, key, idx, bitmap);
        for (int j = 0; j < K; j++) {
            assert_true(idx[j] < N);
            assert_true(j == 0 || idx[j] > idx[j - 1]); /* distinct, ascending */
            hits[idx[j]]++;
        }
        for (size_t w = 0; w < sizeof bitmap / sizeof *bitmap; w++)
            assert_int_equal(bitmap[w], 0); /* left clean */
        if (d < 10) { /* the same key, the same indices (every rank draws alike) */
            so_compress_randk_indices(N, K, key, idx2, bitmap);
            assert_memory_equal(idx, idx2, sizeof idx);
        }
    }
    /* Each index is picked with probability K/N = 0.1: 400 expected, sd 19. */
    for (int i = 0; i < N; i++)
        if (hits[i] < 400 - 6 * 19 || hits[i] > 400 + 6 * 19)
            fail_msg("index %d picked %u times in %d draws (expected 400)", i, hits[i], DRAWS);
    static uint32_t all[N]; /* k = n: every index once */
    so_compress_randk_indices(N, N, 3, all, bitmap);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(all[i], i);
}

/* ---- QSGD ---------------------------------------------------------------------------- */

static uint32_t plane_bit(const uint32_t *planes, size_t W, int p, size_t i)
{
    return planes[(size_t)p * W + i / 32] >> (i % 32) & 1u;
}

/* Values exactly on a level need no draw, so the layout is known bit for
 * bit: blocks of 5 holding (3, -4, 0, 0, 0) x c have the norm 5c, and at 4
 * bits (s = 15) the levels 3 x 15 / 5 = 9 and 12, exactly. */
static void test_qsgd_layout(void **state)
{
    (void)state;
    enum { N = 70 };
    float g[N] = {0};
    for (int b = 0; b < N / 5; b++) { /* blocks of 5: (3, -4, 0, 0, 0) x (b + 1) */
        g[5 * b] = 3.0f * (float)(b + 1);
        g[5 * b + 1] = -4.0f * (float)(b + 1);
    }
    size_t words = so_compress_qsgd_words(N, 4, 5), W = (N + 31) / 32;
    assert_int_equal(words, 14 + 5 * W);
    uint32_t msg[14 + 5 * 3];
    so_compress_qsgd_encode(msg, g, N, 4, 5, 99);
    for (int b = 0; b < 14; b++) {
        float norm;
        memcpy(&norm, &msg[b], 4);
        assert_float_equal(norm, 5.0f * (float)(b + 1), 1e-5);
    }
    const uint32_t *planes = msg + 14;
    for (size_t i = 0; i < N; i++) {
        uint32_t want = i % 5 == 0 ? 9 : i % 5 == 1 ? 12 : 0, lev = 0;
        for (int p = 0; p < 4; p++)
            lev |= plane_bit(planes, W, p, i) << p;
        if (lev != want || plane_bit(planes, W, 4, i) != (i % 5 == 1))
            fail_msg("value %zu: level %u sign %u, want %u %d", i, lev, plane_bit(planes, W, 4, i), want, i % 5 == 1);
    }
    for (size_t w = 0; w < 5 * W; w++) /* bits past n stay zero */
        if (w % W == W - 1)
            assert_int_equal(planes[w] >> (N % 32), 0);
    float out[N];
    so_compress_qsgd_decode(out, msg, N, 4, 5, 0);
    for (size_t i = 0; i < N; i++)
        assert_float_equal(out[i], g[i], 1e-5 * fabsf(g[i]) + 1e-6);
}

/* E[decode(encode(g))] = g: the mean over many keys, against the standard
 * error of a level step (norm / s) per draw. */
static void test_qsgd_unbiased(void **state)
{
    (void)state;
    enum { N = 1000, DRAWS = 2000, BLOCK = 100 };
    const int bits[] = {1, 2, 4};
    static float g[N], out[N];
    static double mean[N];
    fill_normal(g, N, 3);
    uint32_t *msg = xmalloc(so_compress_qsgd_words(N, 16, BLOCK) * 4);
    for (size_t b = 0; b < sizeof bits / sizeof *bits; b++) {
        memset(mean, 0, sizeof mean);
        for (int d = 0; d < DRAWS; d++) {
            so_compress_qsgd_encode(msg, g, N, bits[b], BLOCK, so_compress_key(1, (uint64_t)d, 0, 1));
            so_compress_qsgd_decode(out, msg, N, bits[b], BLOCK, 0);
            for (int i = 0; i < N; i++)
                mean[i] += out[i] / (double)DRAWS;
        }
        double s = (double)((1u << bits[b]) - 1);
        for (int i = 0; i < N; i++) {
            double norm = sqrt(BLOCK); /* about: unit normals */
            double sd = norm / s / 2 / sqrt(DRAWS); /* a Bernoulli step of norm / s: sd at most half of it */
            if (fabs(mean[i] - g[i]) > 5.5 * sd)
                fail_msg("qsgd:%d value %d: mean %g over %d draws, g %g (5.5 sd = %g)", bits[b], i, mean[i], DRAWS,
                         g[i], 5.5 * sd);
        }
    }
    /* The draws are the same with the same key, different with another. */
    uint32_t *m2 = xmalloc(so_compress_qsgd_words(N, 16, BLOCK) * 4);
    size_t w = so_compress_qsgd_words(N, 2, BLOCK);
    so_compress_qsgd_encode(msg, g, N, 2, BLOCK, 42);
    so_compress_qsgd_encode(m2, g, N, 2, BLOCK, 42);
    assert_memory_equal(msg, m2, w * 4);
    so_compress_qsgd_encode(m2, g, N, 2, BLOCK, 43);
    assert_true(memcmp(msg, m2, w * 4) != 0);
    free(msg);
    free(m2);
}

/* ---- sign ------------------------------------------------------------------------------ */

static void test_sign_layout(void **state)
{
    (void)state;
    enum { N = 77 };
    float g[N], out[N];
    fill_normal(g, N, 9);
    g[3] = 0.0f;
    g[4] = -0.0f;
    uint32_t msg[1 + 3];
    assert_int_equal(so_compress_sign_words(N), 4);
    so_compress_sign_encode(msg, g, N);
    double mean = 0;
    for (int i = 0; i < N; i++)
        mean += fabs(g[i]) / N;
    float scale;
    memcpy(&scale, msg, 4);
    assert_float_equal(scale, mean, 1e-6);
    for (int i = 0; i < N; i++)
        assert_int_equal(msg[1 + i / 32] >> (i % 32) & 1u, signbit(g[i]) ? 1 : 0);
    assert_int_equal(msg[3] >> (N % 32), 0);
    so_compress_sign_decode(out, msg, N, 0);
    for (int i = 0; i < N; i++)
        assert_true(out[i] == (signbit(g[i]) ? -scale : scale));
    so_compress_sign_decode(out, msg, N, 1); /* add: twice */
    for (int i = 0; i < N; i++)
        assert_true(out[i] == 2 * (signbit(g[i]) ? -scale : scale));
}

/* ---- PowerSGD --------------------------------------------------------------------------- */

/* A rank-r matrix M = A B^T is reproduced by one step of subspace iteration
 * from any Q whose span is not orthogonal to M's row space. */
static void test_powersgd_exact(void **state)
{
    (void)state;
    const size_t dims[][3] = {{20, 30, 3}, {64, 9, 2}, {5, 300, 5}, {33, 33, 1}};
    for (size_t t = 0; t < sizeof dims / sizeof *dims; t++) {
        size_t rows = dims[t][0], cols = dims[t][1], r = dims[t][2];
        float *A = xmalloc(rows * r * 4), *B = xmalloc(cols * r * 4), *M = xmalloc(rows * cols * 4);
        float *P = xmalloc(rows * r * 4), *Qt = xmalloc(r * cols * 4), *out = xmalloc(rows * cols * 4);
        fill_normal(A, rows * r, 100 + t);
        fill_normal(B, cols * r, 200 + t);
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < cols; j++) {
                float acc = 0;
                for (size_t q = 0; q < r; q++)
                    acc += A[i * r + q] * B[j * r + q];
                M[i * cols + j] = acc;
            }
        so_compress_psgd_init(Qt, cols, (int)r, 77);
        so_compress_psgd_p(P, M, Qt, rows, cols, (int)r);
        so_compress_psgd_orthonormalize(P, rows, (int)r);
        for (size_t a = 0; a < r; a++) /* P's columns orthonormal */
            for (size_t b = 0; b < r; b++) {
                double d = 0;
                for (size_t i = 0; i < rows; i++)
                    d += (double)P[i * r + a] * P[i * r + b];
                assert_float_equal(d, a == b ? 1.0 : 0.0, 1e-5);
            }
        so_compress_psgd_q(Qt, M, P, rows, cols, (int)r);
        so_compress_psgd_approx(out, P, Qt, rows, cols, (int)r, 1.0f);
        double err = 0, norm = 0;
        for (size_t i = 0; i < rows * cols; i++) {
            err += (out[i] - M[i]) * (double)(out[i] - M[i]);
            norm += (double)M[i] * M[i];
        }
        if (sqrt(err / norm) > 1e-5)
            fail_msg("%zu x %zu rank %zu: relative error %g", rows, cols, r, sqrt(err / norm));
        free(A), free(B), free(M), free(P), free(Qt), free(out);
    }
    assert_true(so_compress_powersgd_fits(100, 100, 4));  /* 1600 < 10000 */
    assert_false(so_compress_powersgd_fits(10, 10, 3));   /* 120 >= 100 */
    assert_false(so_compress_powersgd_fits(1, 1000, 1));  /* a vector: 2002 >= 1000 */
}

/* Warm-started subspace iteration as the compressor runs it (Q
 * orthonormalised, P = M Q, P orthonormalised, Q = M^T P) on a 120 x 400
 * matrix whose singular values spread over six decades: Q's columns come
 * out orthonormal, and the rank-4 approximation reaches the best one's
 * error (the fifth and sixth singular values) within 1%. */
static void test_powersgd_warm_q(void **state)
{
    (void)state;
    const size_t rows = 120, cols = 400;
    const int r = 4;
    const double sigma[6] = {1, 1e-2, 1e-3, 3e-4, 1e-5, 1e-6};
    float *M = xmalloc(rows * cols * 4), *P = xmalloc(rows * r * 4), *Qt = xmalloc(r * cols * 4);
    float *out = xmalloc(rows * cols * 4), *u = xmalloc(rows * 6 * 4), *v = xmalloc(cols * 6 * 4);
    fill_normal(u, rows * 6, 11);
    fill_normal(v, cols * 6, 12);
    so_compress_psgd_orthonormalize(u, rows, 6); /* orthonormal singular vectors */
    so_compress_psgd_orthonormalize(v, cols, 6);
    double best = 0, norm = 0;
    for (int k = 0; k < 6; k++) {
        norm += sigma[k] * sigma[k];
        best += k >= r ? sigma[k] * sigma[k] : 0;
    }
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            double acc = 0;
            for (int k = 0; k < 6; k++)
                acc += sigma[k] * u[i * 6 + k] * v[j * 6 + k];
            M[i * cols + j] = (float)acc;
        }
    so_compress_psgd_init(Qt, cols, r, 5);
    double err = 0;
    for (int it = 0; it < 20; it++) {
        so_compress_psgd_orthonormalize_qt(Qt, cols, r);
        so_compress_psgd_p(P, M, Qt, rows, cols, r);
        so_compress_psgd_orthonormalize(P, rows, r);
        so_compress_psgd_q(Qt, M, P, rows, cols, r);
    }
    so_compress_psgd_approx(out, P, Qt, rows, cols, r, 1.0f);
    for (size_t i = 0; i < rows * cols; i++)
        err += (out[i] - M[i]) * (double)(out[i] - M[i]);
    if (fabs(sqrt(err / norm) / sqrt(best / norm) - 1) > 0.01)
        fail_msg("rank-4 error %g, best %g", sqrt(err / norm), sqrt(best / norm));
    so_compress_psgd_orthonormalize_qt(Qt, cols, r);
    for (int a = 0; a < r; a++) /* Q's columns (Qt's rows) orthonormal */
        for (int b = 0; b < r; b++) {
            double d = 0;
            for (size_t j = 0; j < cols; j++)
                d += (double)Qt[(size_t)a * cols + j] * Qt[(size_t)b * cols + j];
            assert_float_equal(d, a == b ? 1.0 : 0.0, 1e-5);
        }
    free(M), free(P), free(Qt), free(out), free(u), free(v);
}

/* ---- a simulated group: R ranks in one thread ------------------------------------------
 * Each rank has its own so_group over one shared world. Operations get a
 * sequence number per rank; when the last rank submits number j, the
 * operation runs for everyone (sums in rank order, in FP32 as the engine),
 * then the handles complete in rank order, running their continuations,
 * which may submit the next operation (PowerSGD's Q) the same way. */
enum { MAXR = 8, MAXOPS = 64 };

struct so_handle {
    int done, status;
    so_then_fn fn; /* a continuation waiting for this handle */
    void *arg;
    struct so_handle *next;    /* the handle the continuation's result completes */
    struct so_handle *forward; /* a follow: completing it completes this one */
};

typedef struct {
    int kind; /* 0 allreduce AVG, 1 allgather */
    const void *send;
    void *recv;
    size_t count;
    so_dtype wire;
    struct so_handle *h;
} sim_op;

typedef struct {
    int R;
    so_group groups[MAXR];
    int submitted[MAXR];
    sim_op ops[MAXOPS][MAXR];
    double bytes[MAXR]; /* payload bytes each rank contributed */
} sim_world;

static void complete(struct so_handle *h, int status);

static void run_cont(struct so_handle *h)
{
    struct so_handle *follow = NULL, *next = h->next;
    int st = h->fn(h->arg, h->status, &follow);
    free(h); /* given up by then */
    if (follow && !st) {
        if (follow->done) {
            int fs = follow->status;
            free(follow);
            complete(next, fs);
        } else {
            follow->forward = next;
        }
    } else {
        complete(next, st);
    }
}

static void complete(struct so_handle *h, int status)
{
    h->done = 1;
    h->status = status;
    if (h->fn)
        run_cont(h);
    else if (h->forward) {
        struct so_handle *f = h->forward;
        free(h);
        complete(f, status);
    }
}

static float wire_round(float x, so_dtype wire)
{
    if (wire == SO_DTYPE_F16)
        return so_f16_to_f32_1(so_f32_to_f16_1(x));
    if (wire == SO_DTYPE_BF16)
        return so_bf16_to_f32_1(so_f32_to_bf16_1(x));
    return x;
}

static void sim_run(sim_world *w, int j)
{
    sim_op *o = w->ops[j];
    size_t n = o[0].count;
    float *tmp = xmalloc(n * 4 + 4);
    if (o[0].kind == 0) {
        for (size_t i = 0; i < n; i++) {
            float acc = 0;
            for (int r = 0; r < w->R; r++)
                acc += wire_round(((const float *)o[r].send)[i], o[r].wire);
            tmp[i] = acc / (float)w->R;
        }
    } else { /* even blocks of count / R, block r from rank r */
        size_t blk = n / (size_t)w->R;
        for (int r = 0; r < w->R; r++)
            memcpy(tmp + (size_t)r * blk, o[r].send, blk * 4);
    }
    for (int r = 0; r < w->R; r++) {
        memcpy(o[r].recv, tmp, n * 4);
        w->bytes[r] += (o[0].kind == 0 ? (double)n : (double)n / w->R) * (o[r].wire == SO_DTYPE_F32 ? 4 : 2);
    }
    free(tmp);
    for (int r = 0; r < w->R; r++)
        complete(o[r].h, 0);
}

static int sim_submit(so_group *g, int kind, const void *send, void *recv, size_t count, const so_group_opts *opt,
                      so_handle **out)
{
    sim_world *w = g->impl;
    int seq = w->submitted[g->rank]++, j = seq % MAXOPS; /* a ring: fewer than MAXOPS in flight */
    struct so_handle *h = calloc(1, sizeof *h);
    w->ops[j][g->rank] = (sim_op){kind, send, recv, count, opt ? opt->wire : SO_DTYPE_F32, h};
    if (opt && opt->wire == 0)
        w->ops[j][g->rank].wire = SO_DTYPE_F32;
    *out = h;
    for (int r = 0; r < w->R; r++)
        if (w->submitted[r] <= seq)
            return 0;
    for (int r = 1; r < w->R; r++)
        assert_int_equal(w->ops[j][r].count, w->ops[j][0].count); /* the ranks agree on the operation */
    sim_run(w, j);
    return 0;
}

static int sim_iallreduce(so_group *g, const void *send, void *recv, size_t count, so_dtype dt, so_reduce_op op,
                          const so_group_opts *o, so_handle **out)
{
    assert_int_equal(dt, SO_DTYPE_F32);
    assert_int_equal(op, SO_REDUCE_AVG);
    return sim_submit(g, 0, send, recv, count, o, out);
}

static int sim_iallgather(so_group *g, const void *send, void *recv, size_t count, const size_t *counts,
                          so_dtype dt, const so_group_opts *o, so_handle **out)
{
    assert_null(counts);
    assert_int_equal(dt, SO_DTYPE_F32);
    assert_int_equal(count % (size_t)g->size, 0);
    return sim_submit(g, 1, send, recv, count, o, out);
}

static int sim_wait(so_group *g, so_handle *h)
{
    (void)g;
    if (!h->done)
        fail_msg("waited for an operation that can never complete in lockstep");
    int st = h->status;
    free(h);
    return st;
}

static int sim_then(so_group *g, so_handle *h, so_then_fn fn, void *arg, so_handle **next)
{
    (void)g;
    struct so_handle *nx = calloc(1, sizeof *nx);
    *next = nx;
    h->fn = fn;
    h->arg = arg;
    h->next = nx;
    if (h->done)
        run_cont(h);
    return 0;
}

static const so_group_ops sim_ops = {.iallreduce = sim_iallreduce, .iallgather = sim_iallgather, .wait = sim_wait,
                                     .then = sim_then};

static sim_world *sim_create(int R)
{
    sim_world *w = calloc(1, sizeof *w);
    w->R = R;
    for (int r = 0; r < R; r++)
        w->groups[r] = (so_group){&sim_ops, w, r, R};
    return w;
}

/* ---- the compressor over the simulated group -------------------------------------------- */

/* A model-like flat buffer: matrices and vectors between them. */
static const so_compress_matrix MATS[] = {{0, 24, 50}, {1210, 6, 150}, {2110, 40, 40}, {3710, 300, 2}};
enum { NFLAT = 4400, NMATS = 4 };
static const size_t BUCKETS[] = {0, 1210, 2110, 3710, NFLAT}; /* bucket b: [BUCKETS[b], BUCKETS[b + 1]) */
enum { NBUCKETS = 4 };

typedef struct {
    int R;
    so_compressor *c[MAXR];
    float *grads[MAXR], *input[MAXR];
    sim_world *w;
} rig;

static void rig_init(rig *t, int R, const char *spec, int ef)
{
    memset(t, 0, sizeof *t);
    t->R = R;
    t->w = sim_create(R);
    so_compressor_config cf = {.error_feedback = ef, .n = NFLAT, .mats = MATS, .nmats = NMATS, .seed = 5};
    assert_int_equal(so_compress_parse(spec, &cf.spec), 0);
    for (int r = 0; r < R; r++) {
        if (so_compressor_create(&cf, &t->c[r]))
            fail_msg("%s", so_errmsg());
        t->grads[r] = xmalloc(NFLAT * 4);
        t->input[r] = xmalloc(NFLAT * 4);
    }
}

static void rig_free(rig *t)
{
    for (int r = 0; r < t->R; r++) {
        so_compressor_destroy(t->c[r]);
        free(t->grads[r]);
        free(t->input[r]);
    }
    free(t->w);
}

/* One step: fresh gradients (seeded by step and rank), every bucket submitted
 * rank after rank in bucket order, then every rank waits. input[r] keeps
 * rank r's gradient plus its residual before the step (what error feedback
 * must account for). */
static void rig_step(rig *t, long step)
{
    for (int r = 0; r < t->R; r++) {
        fill_normal(t->grads[r], NFLAT, 1000 * (uint64_t)step + (uint64_t)r);
        memcpy(t->input[r], t->grads[r], NFLAT * 4);
        const float *res = so_compressor_residual(t->c[r]);
        for (size_t i = 0; res && i < NFLAT; i++)
            t->input[r][i] += res[i];
    }
    for (int b = 0; b < NBUCKETS; b++)
        for (int r = 0; r < t->R; r++)
            assert_int_equal(so_compressor_submit(t->c[r], &t->w->groups[r], t->grads[r], BUCKETS[b], BUCKETS[b + 1],
                                                  b, step),
                             0);
    for (int r = 0; r < t->R; r++)
        assert_int_equal(so_compressor_wait(t->c[r], &t->w->groups[r], NULL), 0);
    for (int r = 1; r < t->R; r++) /* every rank holds the same bits */
        assert_memory_equal(t->grads[r], t->grads[0], NFLAT * 4);
}

/* Error feedback loses nothing: the average over ranks of (corrected input)
 * equals what was delivered plus the average of the new residuals. For
 * top-k, rand-k, sign, QSGD and 16-bit, each rank's `sent` is its own
 * decoded message and the delivered average is their mean; for PowerSGD the
 * residual is taken against the delivered average itself. */
static void check_conservation(rig *t, const char *spec)
{
    for (size_t i = 0; i < NFLAT; i++) {
        double in = 0, res = 0, mag = 0;
        for (int r = 0; r < t->R; r++) {
            in += t->input[r][i] / t->R;
            res += so_compressor_residual(t->c[r])[i] / t->R;
            mag += fabs(t->input[r][i]) / t->R;
        }
        double got = t->grads[0][i] + res;
        if (fabs(got - in) > 1e-5 * (mag + 1))
            fail_msg("%s, value %zu: delivered %g + residual %g = %g, input %g", spec, i, t->grads[0][i], res, got,
                     in);
    }
}

static void test_ef_conservation(void **state)
{
    (void)state;
    static const char *const specs[] = {"topk:0.05", "topk:0.6", "randk:0.1", "sign",
                                        "qsgd:2:64", "fp16", "bf16", "powersgd:1:0", "powersgd:2:1"};
    const int ranks[] = {1, 2, 3};
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++)
        for (size_t q = 0; q < sizeof ranks / sizeof *ranks; q++) {
            rig t;
            rig_init(&t, ranks[q], specs[s], 1);
            assert_true(so_compressor_error_feedback(t.c[0]));
            for (long step = 0; step < 3; step++) {
                rig_step(&t, step);
                if (!strcmp(specs[s], "powersgd:2:1") && step == 0) /* before START_STEP: exact average */
                    for (int r = 0; r < t.R; r++)
                        for (size_t i = 0; i < NFLAT; i++)
                            assert_float_equal(so_compressor_residual(t.c[r])[i], 0, 0);
                check_conservation(&t, specs[s]);
            }
            rig_free(&t);
        }
}

/* Sparse top-k (an allgather of (index, value)) against the dense reference:
 * each rank's own top-k of its corrected gradient, summed densely. */
static void test_topk_sparse_equals_dense(void **state)
{
    (void)state;
    for (int R = 1; R <= 4; R++) {
        rig t;
        rig_init(&t, R, "topk:0.02", 1);
        for (long step = 0; step < 3; step++) {
            static float ref[NFLAT];
            memset(ref, 0, sizeof ref);
            float *in[MAXR];
            for (int r = 0; r < R; r++) { /* the corrected inputs this step will see */
                in[r] = xmalloc(NFLAT * 4);
                fill_normal(in[r], NFLAT, 1000 * (uint64_t)step + (uint64_t)r);
                const float *res = so_compressor_residual(t.c[r]);
                for (size_t i = 0; i < NFLAT; i++)
                    in[r][i] += res[i];
            }
            for (int b = 0; b < NBUCKETS; b++) {
                size_t lo = BUCKETS[b], n = BUCKETS[b + 1] - lo, k = so_compress_k(n, 0.02);
                uint32_t *idx = xmalloc(k * 4);
                float *val = xmalloc(k * 4);
                void *scratch = xmalloc(so_compress_topk_scratch(n));
                float *sum = xmalloc(n * 4);
                memset(sum, 0, n * 4);
                for (int r = 0; r < R; r++) {
                    so_compress_topk(in[r] + lo, n, k, idx, val, scratch);
                    for (size_t j = 0; j < k; j++)
                        sum[idx[j]] += val[j];
                }
                for (size_t i = 0; i < n; i++)
                    ref[lo + i] = sum[i] * (1.0f / (float)R);
                free(idx), free(val), free(scratch), free(sum);
            }
            rig_step(&t, step);
            for (size_t i = 0; i < NFLAT; i++)
                if (t.grads[0][i] != ref[i])
                    fail_msg("R %d step %ld value %zu: %g, dense reference %g", R, step, i, t.grads[0][i], ref[i]);
            for (int r = 0; r < R; r++)
                free(in[r]);
        }
        rig_free(&t);
    }
}

/* PowerSGD at full rank (r = min(rows, cols)) reproduces the exact average:
 * the matrices fit when (rows + cols) r 2 < rows cols, so use a flat buffer
 * of wide matrices: 4 x 400 at rank 1 is not full. Instead: rank r
 * subspaces of rank-r gradients. Every rank's gradient is A_r B^T with the
 * same B: the average has rank r, and one step from a warm Q spanning B
 * gives it exactly. */
static void test_powersgd_rank_r_average(void **state)
{
    (void)state;
    enum { ROWS = 40, COLS = 60, RK = 3, R = 3 };
    static const so_compress_matrix mat[] = {{5, ROWS, COLS}};
    size_t n = 5 + ROWS * COLS + 7;
    sim_world *w = sim_create(R);
    so_compressor *c[R];
    float *g[R], B[COLS * RK], avg[ROWS * COLS];
    so_compressor_config cf = {.error_feedback = 0, .n = n, .mats = mat, .nmats = 1, .seed = 1};
    assert_int_equal(so_compress_parse("powersgd:3:0", &cf.spec), 0);
    fill_normal(B, COLS * RK, 17);
    memset(avg, 0, sizeof avg);
    for (int r = 0; r < R; r++) {
        assert_int_equal(so_compressor_create(&cf, &c[r]), 0);
        assert_false(so_compressor_error_feedback(c[r]));
        g[r] = xmalloc(n * 4);
    }
    for (long step = 0; step < 2; step++) {
        for (int r = 0; r < R; r++) {
            float A[ROWS * RK];
            fill_normal(A, ROWS * RK, 50 + (uint64_t)r + 10 * (uint64_t)step);
            fill_normal(g[r], n, 90 + (uint64_t)r); /* the vectors around it */
            for (size_t i = 0; i < ROWS; i++)
                for (size_t j = 0; j < COLS; j++) {
                    float acc = 0;
                    for (int q = 0; q < RK; q++)
                        acc += A[i * RK + q] * B[j * RK + q];
                    g[r][5 + i * COLS + j] = acc;
                }
        }
        float vec_avg[12];
        for (int i = 0; i < 12; i++) {
            size_t at = i < 5 ? (size_t)i : 5 + ROWS * COLS + (size_t)(i - 5);
            float acc = 0;
            for (int r = 0; r < R; r++)
                acc += g[r][at];
            vec_avg[i] = acc / R;
        }
        for (size_t i = 0; i < ROWS * COLS; i++) {
            double acc = 0;
            for (int r = 0; r < R; r++)
                acc += g[r][5 + i];
            avg[i] = (float)(acc / R);
        }
        for (int r = 0; r < R; r++)
            assert_int_equal(so_compressor_submit(c[r], &w->groups[r], g[r], 0, n, 0, step), 0);
        for (int r = 0; r < R; r++)
            assert_int_equal(so_compressor_wait(c[r], &w->groups[r], NULL), 0);
        double err = 0, norm = 0;
        for (size_t i = 0; i < ROWS * COLS; i++) {
            err += (g[0][5 + i] - avg[i]) * (double)(g[0][5 + i] - avg[i]);
            norm += (double)avg[i] * avg[i];
        }
        if (sqrt(err / norm) > 1e-4)
            fail_msg("step %ld: relative error %g of the rank-%d average", step, sqrt(err / norm), RK);
        for (int i = 0; i < 12; i++) /* the vectors go uncompressed: exact */
            assert_true(g[0][i < 5 ? (size_t)i : 5 + ROWS * COLS + (size_t)(i - 5)] == vec_avg[i]);
    }
    for (int r = 0; r < R; r++) {
        so_compressor_destroy(c[r]);
        free(g[r]);
    }
    free(w);
}

/* The byte counters equal the formulas, and what the simulated group moved. */
static void test_bytes(void **state)
{
    (void)state;
    static const char *const specs[] = {"fp16", "bf16", "topk:0.01", "topk:0.6", "randk:0.1", "qsgd:4", "qsgd:2:128",
                                        "sign", "powersgd:2:1", "powersgd:8:0"};
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        rig t;
        rig_init(&t, 3, specs[s], -1);
        so_compress_spec sp;
        so_compress_parse(specs[s], &sp);
        double want = 0;
        for (long step = 0; step < 2; step++) {
            rig_step(&t, step);
            for (int b = 0; b < NBUCKETS; b++) {
                so_compress_matrix m[NMATS];
                int nm = 0;
                for (int i = 0; i < NMATS; i++)
                    if (MATS[i].off >= BUCKETS[b] && MATS[i].off < BUCKETS[b + 1])
                        m[nm++] = (so_compress_matrix){MATS[i].off - BUCKETS[b], MATS[i].rows, MATS[i].cols};
                want += so_compress_bucket_bytes(&sp, BUCKETS[b + 1] - BUCKETS[b], m, nm, 3, step);
            }
        }
        so_compressor_stats st;
        so_compressor_stats_get(t.c[0], &st);
        if (st.bytes_sent != want || t.w->bytes[0] != want)
            fail_msg("%s: counted %.0f bytes, the group moved %.0f, the formula says %.0f", specs[s], st.bytes_sent,
                     t.w->bytes[0], want);
        assert_true(st.bytes_dense == 2.0 * NFLAT * 4);
        assert_int_equal(st.buckets, 2 * NBUCKETS);
        if (strncmp(specs[s], "topk:0.6", 8)) /* every method but dense-switching top-k sends less */
            assert_true(want < st.bytes_dense);
        rig_free(&t);
    }
}

/* Unbiased without error feedback: rand-k (scaled by n/k) and QSGD average
 * over many steps (fresh draws per step) to the true mean gradient. */
static void test_unbiased_compressors(void **state)
{
    (void)state;
    static const char *const specs[] = {"randk:0.25", "qsgd:2:64"};
    enum { STEPS = 1500 };
    for (size_t s = 0; s < 2; s++) {
        rig t;
        rig_init(&t, 2, specs[s], -1);
        assert_false(so_compressor_error_feedback(t.c[0]));
        static double mean[NFLAT];
        memset(mean, 0, sizeof mean);
        float fixed[2][NFLAT];
        fill_normal(fixed[0], NFLAT, 1);
        fill_normal(fixed[1], NFLAT, 2);
        for (long step = 0; step < STEPS; step++) {
            for (int r = 0; r < 2; r++)
                memcpy(t.grads[r], fixed[r], sizeof fixed[r]);
            for (int b = 0; b < NBUCKETS; b++)
                for (int r = 0; r < 2; r++)
                    so_compressor_submit(t.c[r], &t.w->groups[r], t.grads[r], BUCKETS[b], BUCKETS[b + 1], b, step);
            for (int r = 0; r < 2; r++)
                so_compressor_wait(t.c[r], &t.w->groups[r], NULL);
            for (size_t i = 0; i < NFLAT; i++)
                mean[i] += t.grads[0][i] / (double)STEPS;
        }
        /* randk: each value is 4 x g w.p. 1/4 (sd sqrt(3) |g|); qsgd: at most half a level of a block norm ~8. */
        int bad = 0;
        for (size_t i = 0; i < NFLAT; i++) {
            double truth = (fixed[0][i] + fixed[1][i]) / 2.0;
            double sd = s == 0 ? sqrt(3.0) * (fabs(fixed[0][i]) + fabs(fixed[1][i])) / 2 / sqrt(STEPS)
                               : 8.0 / 3 / 2 / sqrt(STEPS);
            bad += fabs(mean[i] - truth) > 5 * sd + 1e-6;
        }
        if (bad)
            fail_msg("%s: %d of %d values' means are more than 5 sd from the true average", specs[s], bad, NFLAT);
        rig_free(&t);
    }
}

static void test_create_refuses(void **state)
{
    (void)state;
    so_compressor *c;
    so_compressor_config cf = {.n = 100};
    so_compress_parse("none", &cf.spec);
    assert_int_equal(so_compressor_create(&cf, &c), SO_EINVAL);
    so_compress_parse("powersgd:1", &cf.spec);
    so_compress_matrix bad[] = {{50, 10, 10}};
    cf.mats = bad;
    cf.nmats = 1;
    assert_int_equal(so_compressor_create(&cf, &c), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "outside the buffer"));
    so_compressor_destroy(NULL);
}

/* The state a checkpoint saves (residuals, PowerSGD's Q), put into fresh
 * compressors, continues bit for bit: rig A steps 0..2 and its state goes
 * into rig B's fresh compressors; both step 3 and deliver the same bits.
 * Without the state they differ. */
static void test_state_round_trip(void **state)
{
    (void)state;
    static const char *const specs[] = {"topk:0.05", "powersgd:2:1", "sign", "fp16"};
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++)
        for (int restore = 0; restore <= 1; restore++) {
            rig a, b;
            rig_init(&a, 2, specs[s], 1);
            rig_init(&b, 2, specs[s], 1);
            for (long step = 0; step < 3; step++)
                rig_step(&a, step);
            size_t bytes = so_compressor_state_bytes(a.c[0]);
            size_t want = NFLAT * 4 + (strstr(specs[s], "powersgd") ? 2 * 4 * (50 + 150 + 40) : 0);
            assert_int_equal(bytes, want); /* residual + Q of the 3 matrices that fit rank 2 */
            for (int r = 0; restore && r < 2; r++) {
                void *buf = xmalloc(bytes);
                so_compressor_state_get(a.c[r], buf);
                so_compressor_state_set(b.c[r], buf);
                free(buf);
            }
            rig_step(&a, 3);
            rig_step(&b, 3);
            int same = !memcmp(a.grads[0], b.grads[0], NFLAT * 4);
            if (same != restore)
                fail_msg("%s: restored %d, same %d", specs[s], restore, same);
            rig_free(&a);
            rig_free(&b);
        }
}

static int by_magnitude_desc(const void *a, const void *b)
{
    float x = fabsf(*(const float *)a), y = fabsf(*(const float *)b);
    return (x < y) - (x > y);
}

/* What top-k loses of g bucket by bucket: every value but each bucket's k largest. */
static double topk_rel_error(const float *g, double ratio)
{
    float *v = xmalloc(NFLAT * 4);
    memcpy(v, g, NFLAT * 4);
    double lost = 0, all = 0;
    for (int b = 0; b < NBUCKETS; b++) {
        size_t n = BUCKETS[b + 1] - BUCKETS[b], k = so_compress_k(n, ratio);
        qsort(v + BUCKETS[b], n, 4, by_magnitude_desc);
        for (size_t i = 0; i < n; i++) {
            double x = v[BUCKETS[b] + i];
            lost += i >= k ? x * x : 0;
            all += x * x;
        }
    }
    free(v);
    return sqrt(lost / all);
}

/* Calibration runs the real compressor on a loopback group: its bytes are
 * the method's formula for `ranks` ranks, it takes some time, and its
 * relative error is what the message loses of g (top-k: exactly the
 * values outside each bucket's k largest; fp16: 0, its rounding is the
 * collective's, which the loopback does not run; PowerSGD of
 * matrices of rank 2 at rank 2: nothing, once Q is warm). */
static void test_calibrate(void **state)
{
    (void)state;
    float *g = xmalloc(NFLAT * 4), *low_rank = xmalloc(NFLAT * 4);
    fill_normal(g, NFLAT, 9);
    memcpy(low_rank, g, NFLAT * 4);
    for (int i = 0; i < NMATS; i++) /* row j of each matrix: a_j u + b_j v */
        for (size_t j = 0; j < MATS[i].rows; j++)
            for (size_t c = 0; c < MATS[i].cols; c++)
                low_rank[MATS[i].off + j * MATS[i].cols + c] =
                    g[MATS[i].off + j] * g[c] + g[MATS[i].off + MATS[i].rows + j] * g[NFLAT - 1 - c];
    static const struct {
        const char *spec;
        const float *g;
        double err_lo, err_hi; /* < 0: top-k's exact figure */
    } cases[] = {{"fp16", NULL, 0, 1e-3}, {"topk:0.01", NULL, -1, -1}, {"topk:0.3", NULL, -1, -1},
                 {"qsgd:4", NULL, 0.01, 1.23} /* sqrt(omega), omega <= sqrt(512) / 15 */, {"powersgd:2:5", NULL, 0.1, 0.99}, {"sign", NULL, 0.3, 0.9},
                 {"powersgd:2:5", (const float *)1, 0, 1e-4}};
    for (size_t s = 0; s < sizeof cases / sizeof *cases; s++) {
        const char *spec = cases[s].spec;
        const float *grad = cases[s].g ? low_rank : g;
        so_compressor_config cf = {.error_feedback = -1, .n = NFLAT, .mats = MATS, .nmats = NMATS, .seed = 1};
        assert_int_equal(so_compress_parse(spec, &cf.spec), 0);
        so_compressor_stats st;
        double err = -1;
        if (so_compress_calibrate(&cf, grad, BUCKETS, NBUCKETS, 3, &st, &err))
            fail_msg("%s: %s", spec, so_errmsg());
        if (cases[s].err_lo < 0) {
            double want = topk_rel_error(g, cf.spec.ratio);
            if (fabs(err - want) > 1e-6)
                fail_msg("%s: relative error %.7f, want %.7f", spec, err, want);
        } else if (!(err >= cases[s].err_lo && err <= cases[s].err_hi)) {
            fail_msg("%s: relative error %.7f outside [%g, %g]", spec, err, cases[s].err_lo, cases[s].err_hi);
        }
        double want = 0;
        for (int b = 0; b < NBUCKETS; b++) {
            int nm = 0;
            so_compress_matrix in[NMATS];
            for (int i = 0; i < NMATS; i++)
                if (MATS[i].off >= BUCKETS[b] && MATS[i].off < BUCKETS[b + 1])
                    in[nm++] = (so_compress_matrix){MATS[i].off - BUCKETS[b], MATS[i].rows, MATS[i].cols};
            want += so_compress_bucket_bytes(&cf.spec, BUCKETS[b + 1] - BUCKETS[b], in, nm, 3, 5);
        }
        assert_float_equal(st.bytes_sent, want, 0);
        assert_float_equal(st.bytes_dense, NFLAT * 4, 0);
        assert_int_equal(st.buckets, NBUCKETS);
        assert_true(st.encode_seconds > 0 && st.decode_seconds >= 0);
    }
    so_compressor_config cf = {.n = NFLAT};
    so_compress_parse("fp16", &cf.spec);
    so_compressor_stats st;
    size_t bad[] = {0, 100};
    assert_int_equal(so_compress_calibrate(&cf, g, bad, 1, 2, &st, NULL), SO_EINVAL);
    free(g);
    free(low_rank);
}

/* The steps factor from a relative error e: 1 / (1 - e^2) for projections
 * (top-k, sign, PowerSGD, the 16-bit roundings), 1 + e^2 for the unbiased
 * methods, 1 for none or no loss, capped at 100. */
static void test_steps_factor(void **state)
{
    (void)state;
    static const struct {
        const char *spec;
        double err, want;
    } cases[] = {{"none", 0.9, 1},         {"fp16", 0, 1},          {"topk:0.01", 0.8, 1 / 0.36},
                 {"powersgd:4", 0.5, 1 / 0.75}, {"sign", 0.6, 1 / 0.64}, {"randk:0.1", 0.5, 1.25},
                 {"qsgd:4", 3, 10},        {"topk:0.01", 0.9999, 100}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        so_compress_spec s;
        assert_int_equal(so_compress_parse(cases[i].spec, &s), 0);
        double f = so_compress_steps_factor(&s, cases[i].err);
        if (fabs(f - cases[i].want) > 1e-12)
            fail_msg("%s at error %g: factor %.6f, want %.6f", cases[i].spec, cases[i].err, f, cases[i].want);
    }
}

/* --compress auto's rule with injected link costs: on a fast link none
 * wins (compressing costs more than it saves), on 1 Gbit/s the MLP's
 * 7.6 MB of gradient makes a compressing method the fastest. */
typedef struct {
    double alpha, beta; /* seconds per message, per byte */
} link_model;

static double ring_cost(void *ctx, size_t bytes)
{
    const link_model *l = ctx; /* 2 ranks: one reduce-scatter and one allgather half */
    return 2 * l->alpha + l->beta * (double)bytes;
}

static void test_auto_rule(void **state)
{
    (void)state;
    so_graph *g = NULL;
    assert_int_equal(so_zoo_build("mlp", 1, 28, 28, 10, &g), 0);
    int n = so_graph_size(g);
    double *tf = calloc((size_t)n, sizeof *tf), *tb = calloc((size_t)n, sizeof *tb);
    for (int i = 1; i < n; i++) { /* 1 ms forward, 2 ms backward in all */
        tf[i] = 1e-3 / (n - 1);
        tb[i] = 2e-3 / (n - 1);
    }
    so_predict_compute pc = {.g = g, .t_fwd = tf, .t_bwd = tb, .batch = 32};
    const so_predict_compress_cost m[] = {
        {.ratio = 1},                                                                  /* none */
        {.ratio = 0.5, .encode_per_byte = 0.3e-9, .decode_per_byte = 0.2e-9},           /* fp16 */
        {.ratio = 0.02, .gather = 1, .encode_per_byte = 2e-9, .decode_per_byte = 0.3e-9}, /* topk:0.01 */
        {.ratio = 0.006, .ratio2 = 0.003, .encode_per_byte = 0.4e-9, .decode_per_byte = 0.8e-9}, /* powersgd */
    };
    double step[4];
    int best = -1;
    link_model shm = {2e-6, 1.0 / 10e9}, gbit = {60e-6, 8.0 / 1e9};
    assert_int_equal(so_predict_compress(&pc, 2, ring_cost, &shm, m, 4, 0.02, step, &best), 0);
    assert_int_equal(best, 0);
    assert_true(step[1] > step[0] && step[2] > step[0]);
    assert_int_equal(so_predict_compress(&pc, 2, ring_cost, &gbit, m, 4, 0.02, step, &best), 0);
    assert_true(best > 0);
    assert_true(step[best] < 0.5 * step[0]); /* 61 ms of FP32 transfer against about 1 */
    assert_true(step[1] < step[0]);          /* fp16 halves it */
    /* the accuracy cost: top-k's step is the shortest, but at 2.33x FP32's
     * steps to the target (PowerSGD's 1.23x, from the share of the MLP's
     * gradient each one's message loses) PowerSGD reaches it first */
    so_predict_compress_cost lossy[] = {
        {.ratio = 1},
        {.ratio = 0.02, .gather = 1, .encode_per_byte = 0.2e-9, .decode_per_byte = 0.3e-9},
        {.ratio = 0.006, .ratio2 = 0.003, .encode_per_byte = 0.4e-9, .decode_per_byte = 0.4e-9},
    };
    assert_int_equal(so_predict_compress(&pc, 2, ring_cost, &gbit, lossy, 3, 0.02, step, &best), 0);
    printf("auto rule, 1 Gbit/s: none %.2f ms, topk %.2f ms, powersgd %.2f ms\n", step[0] * 1e3, step[1] * 1e3,
           step[2] * 1e3);
    assert_true(step[1] < step[2]);
    assert_int_equal(best, 1); /* by step time alone */
    so_compress_spec topk, psgd; /* the errors auto measured on the MLP's gradient at step 3 */
    so_compress_parse("topk:0.01", &topk);
    so_compress_parse("powersgd:4", &psgd);
    lossy[1].steps_factor = so_compress_steps_factor(&topk, 0.756); /* 2.33 */
    lossy[2].steps_factor = so_compress_steps_factor(&psgd, 0.431); /* 1.23 */
    double same_step[3];
    assert_int_equal(so_predict_compress(&pc, 2, ring_cost, &gbit, lossy, 3, 0.02, same_step, &best), 0);
    assert_true(same_step[1] == step[1] && same_step[2] == step[2]); /* the step itself is unchanged */
    assert_int_equal(best, 2);
    /* a method whose extra steps eat its shorter step is not picked over FP32 */
    so_predict_compress_cost slow_to_learn[] = {{.ratio = 1}, {.ratio = 0.5, .steps_factor = 2.5}};
    assert_int_equal(so_predict_compress(&pc, 2, ring_cost, &gbit, slow_to_learn, 2, 0.02, step, &best), 0);
    assert_true(step[1] < step[0] && step[1] * 2.5 > step[0]);
    assert_int_equal(best, 0);
    /* ties go to none: a method only as fast as none is not picked */
    const so_predict_compress_cost same[] = {{.ratio = 1}, {.ratio = 0.99}};
    assert_int_equal(so_predict_compress(&pc, 2, ring_cost, &gbit, same, 2, 0.02, step, &best), 0);
    assert_int_equal(best, 0);
    assert_int_equal(so_predict_compress(&pc, 1, ring_cost, &gbit, same, 2, 0.02, step, &best), SO_EINVAL);
    free(tf);
    free(tb);
    so_graph_destroy(g);
}

/* The same rule on LeNet-5 (247 KB of gradient) with the
 * costs and errors auto measured there: on shared memory none; at 1 Gbit/s
 * PowerSGD, whose rank 4 loses little of LeNet-5's small matrices (error
 * 0.158: x1.03), ahead of the 16-bit wire, which a fixed factor taken from
 * the MLP (1.35) would have picked. */
static void test_auto_rule_lenet(void **state)
{
    (void)state;
    so_graph *g = NULL;
    assert_int_equal(so_zoo_build("lenet5", 1, 28, 28, 10, &g), 0);
    int n = so_graph_size(g);
    double *tf = calloc((size_t)n, sizeof *tf), *tb = calloc((size_t)n, sizeof *tb);
    for (int i = 1; i < n; i++) {
        tf[i] = 0.5e-3 / (n - 1); /* 1.5 ms of compute: FP32's step is half link */
        tb[i] = 1e-3 / (n - 1);
    }
    so_predict_compute pc = {.g = g, .t_fwd = tf, .t_bwd = tb, .batch = 32};
    so_compress_spec topk, psgd;
    so_compress_parse("topk:0.01", &topk);
    so_compress_parse("powersgd:4", &psgd);
    so_predict_compress_cost m[] = {
        {.ratio = 1},
        {.ratio = 0.5, .encode_per_byte = 0.1e-9, .decode_per_byte = 0.1e-9},
        {.ratio = 0.02, .gather = 1, .encode_per_byte = 0.2e-9, .decode_per_byte = 0.2e-9,
         .steps_factor = so_compress_steps_factor(&topk, 0.561)},
        {.ratio = 0.05, .ratio2 = 0.025, .encode_per_byte = 0.2e-9, .decode_per_byte = 0.2e-9,
         .steps_factor = so_compress_steps_factor(&psgd, 0.158)},
    };
    double step[4];
    int best = -1;
    link_model shm = {5e-6, 1.0 / 3.5e9}, gbit = {40e-6, 8.0 / 0.95e9}; /* auto measured 0-92 us */
    assert_int_equal(so_predict_compress(&pc, 2, ring_cost, &shm, m, 4, 0.02, step, &best), 0);
    assert_int_equal(best, 0);
    assert_int_equal(so_predict_compress(&pc, 2, ring_cost, &gbit, m, 4, 0.02, step, &best), 0);
    printf("auto rule, LeNet-5 at 1 Gbit/s: none %.2f ms, fp16 %.2f ms, topk %.2f ms (x%.2f), powersgd %.2f ms (x%.2f)\n",
           step[0] * 1e3, step[1] * 1e3, step[2] * 1e3, m[2].steps_factor, step[3] * 1e3, m[3].steps_factor);
    assert_int_equal(best, 3);
    assert_true(step[3] * 1.35 > step[1]); /* the MLP's factor would have lost PowerSGD to fp16 */
    free(tf);
    free(tb);
    so_graph_destroy(g);
}

/* The predicted step's terms, by hand: with one bucket (it closes when
 * backward ends) nothing overlaps, so the step is forward + backward + the
 * optimizer's time (t_other, measured beside the layers) + compressing the
 * whole gradient on the training thread + the bucket on the communication
 * engine: decompressing it and, for PowerSGD, two allreduces one after the
 * other, each paying its latency. */
static void test_auto_rule_terms(void **state)
{
    (void)state;
    so_graph *g = NULL;
    assert_int_equal(so_zoo_build("mlp", 1, 28, 28, 10, &g), 0);
    int n = so_graph_size(g);
    double *tf = calloc((size_t)n, sizeof *tf), *tb = calloc((size_t)n, sizeof *tb);
    for (int i = 1; i < n; i++) {
        tf[i] = 10e-3 / (n - 1);
        tb[i] = 20e-3 / (n - 1);
    }
    so_predict_compute pc = {.g = g, .t_fwd = tf, .t_bwd = tb, .t_other = 3e-3, .batch = 128,
                             .first_bucket_bytes = (size_t)1 << 30, .bucket_bytes = (size_t)1 << 30};
    const so_predict_compress_cost m[] = {
        {.ratio = 1},
        {.ratio = 0.008, .ratio2 = 0.004, .encode_per_byte = 0.6e-9, .decode_per_byte = 0.7e-9}, /* powersgd */
    };
    link_model gbit = {50e-6, 8.0 / 1e9};
    double step[2], B = (double)so_graph_nparams(g) * sizeof(float);
    int best = -1;
    assert_int_equal(so_predict_compress(&pc, 2, ring_cost, &gbit, m, 2, 0.02, step, &best), 0);
    double compute = 10e-3 + 20e-3 + 3e-3;
    double none = compute + ring_cost(&gbit, (size_t)B);
    double psgd = compute + m[1].encode_per_byte * B + m[1].decode_per_byte * B +
                  ring_cost(&gbit, (size_t)(m[1].ratio * B)) + ring_cost(&gbit, (size_t)(m[1].ratio2 * B));
    if (fabs(step[0] - none) > 1e-9 || fabs(step[1] - psgd) > 1e-9)
        fail_msg("predicted none %.6f ms (want %.6f), powersgd %.6f ms (want %.6f)", step[0] * 1e3, none * 1e3,
                 step[1] * 1e3, psgd * 1e3);
    assert_int_equal(best, 1);
    pc.t_other = 0; /* the optimizer's time is in every method's step alike */
    double without[2];
    assert_int_equal(so_predict_compress(&pc, 2, ring_cost, &gbit, m, 2, 0.02, without, &best), 0);
    assert_true(fabs(step[0] - without[0] - 3e-3) < 1e-12 && fabs(step[1] - without[1] - 3e-3) < 1e-12);
    free(tf);
    free(tb);
    so_graph_destroy(g);
}

int main(void)
{
    if (isa_cap_redundant())
        return 77;
    printf("compression kernels: %s\n", so_compress_kernel());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_randk),
        cmocka_unit_test(test_qsgd_layout),
        cmocka_unit_test(test_qsgd_unbiased),
        cmocka_unit_test(test_sign_layout),
        cmocka_unit_test(test_powersgd_exact),
        cmocka_unit_test(test_ef_conservation),
        cmocka_unit_test(test_topk_sparse_equals_dense),
        cmocka_unit_test(test_powersgd_rank_r_average),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_unbiased_compressors),
        cmocka_unit_test(test_create_refuses),
        cmocka_unit_test(test_state_round_trip),
        cmocka_unit_test(test_calibrate),
        cmocka_unit_test(test_steps_factor),
        cmocka_unit_test(test_auto_rule),
        cmocka_unit_test(test_auto_rule_lenet),
        cmocka_unit_test(test_auto_rule_terms),
        cmocka_unit_test(test_powersgd_warm_q),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
