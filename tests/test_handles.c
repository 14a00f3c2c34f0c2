/* MPI tests of the collective vocabulary with handles (comm_async.h): every
 * collective x every algorithm x every transport x every element type, with
 * exact answers (small integers, exact in BF16 and FP16 too); FP32 buffers on
 * a BF16 / FP16 wire; identical bits on every rank for non-integer data and
 * the documented error bound; continuations chained as PowerSGD chains its
 * two allreduces, their errors, their order under random delays; handles on
 * several groups at once; messages while collectives run; the busy rule and
 * bad arguments; the operation log. Run as `mpiexec -n NP test_handles NP`. */
#include "scaleout/comm.h"
#include "scaleout/comm_async.h"
#include "scaleout/dtype.h"
#include "scaleout/err.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_check.h"

static const size_t counts[] = {0, 1, 5, 1023, 70001};
#define NCOUNTS (sizeof counts / sizeof *counts)
#define MAXN 70001
static const so_dtype types[] = {SO_DTYPE_F32, SO_DTYPE_BF16, SO_DTYPE_F16, SO_DTYPE_F64, SO_DTYPE_I64};
static const so_transport transports[] = {SO_TRANSPORT_MPI, SO_TRANSPORT_SHM, SO_TRANSPORT_TCP};

/* ---- values of every type ------------------------------------------------------- */

static void put(so_dtype dt, void *buf, size_t i, double v)
{
    switch (dt) {
    case SO_DTYPE_F32: ((float *)buf)[i] = (float)v; break;
    case SO_DTYPE_BF16: ((uint16_t *)buf)[i] = so_f32_to_bf16_1((float)v); break;
    case SO_DTYPE_F16: ((uint16_t *)buf)[i] = so_f32_to_f16_1((float)v); break;
    case SO_DTYPE_F64: ((double *)buf)[i] = v; break;
    default: ((int64_t *)buf)[i] = (int64_t)v;
    }
}

static double get(so_dtype dt, const void *buf, size_t i)
{
    switch (dt) {
    case SO_DTYPE_F32: return ((const float *)buf)[i];
    case SO_DTYPE_BF16: return so_bf16_to_f32_1(((const uint16_t *)buf)[i]);
    case SO_DTYPE_F16: return so_f16_to_f32_1(((const uint16_t *)buf)[i]);
    case SO_DTYPE_F64: return ((const double *)buf)[i];
    default: return (double)((const int64_t *)buf)[i];
    }
}

/* Rank r's element i: 1..4 (MAX / MIN: -3..3), so every partial sum over up
 * to 64 ranks is an integer below 256, exact in BF16 and FP16. */
static double val(int r, size_t i, so_reduce_op op)
{
    if (op == SO_REDUCE_MAX || op == SO_REDUCE_MIN)
        return (double)((int)((r * 5 + i * 3) % 7) - 3);
    return (double)((r + i) % 4 + 1);
}

/* The exact answer for element i as the type holds it (AVG: the sum times
 * 1/p rounded to the type, or divided by p for F64). */
static double want(so_dtype dt, size_t i, so_reduce_op op, int p)
{
    double acc = val(0, i, op);
    for (int r = 1; r < p; r++) {
        double v = val(r, i, op);
        acc = op == SO_REDUCE_MAX ? fmax(acc, v) : op == SO_REDUCE_MIN ? fmin(acc, v) : acc + v;
    }
    if (op != SO_REDUCE_AVG)
        return acc;
    if (dt == SO_DTYPE_F64)
        return acc / p;
    float s = (float)acc * (1.0f / (float)p);
    char tmp[8];
    put(dt, tmp, 0, s);
    return get(dt, tmp, 0);
}

static char *g_a, *g_b; /* MAXN elements of 8 bytes each */

/* ---- every collective x algorithm x transport x type --------------------------- */

static so_coll_opts opts_of(int algo, so_transport tp)
{
    so_coll_opts o = SO_COLL_OPTS_INIT;
    o.algo = algo;
    o.transport = tp;
    return o;
}

static void allreduce_case(so_comm *c, so_dtype dt, int algo, so_transport tp, size_t n, so_reduce_op op, int inplace)
{
    int p = so_comm_size(c), r = so_comm_rank(c);
    for (size_t i = 0; i < n; i++)
        put(dt, g_a, i, val(r, i, op)), put(dt, g_b, i, inplace ? val(r, i, op) : -99);
    so_coll_opts o = opts_of(algo, tp);
    so_handle *h;
    int rc = so_comm_iallreduce(c, inplace ? g_b : g_a, g_b, n, dt, op, &o, &h);
    CHECK(rc == 0, "submit: %s", so_errmsg());
    if (rc)
        return;
    rc = so_handle_wait(h);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (get(dt, g_b, i) != want(dt, i, op, p) && !bad++)
            first = i;
    CHECK(rc == 0 && bad == 0, "allreduce %s %s %s %s count %zu %s: rc %d, %zu wrong (first %zu: %g vs %g)",
          so_allreduce_algo_name((so_allreduce_algo)algo), so_transport_name(tp), so_dtype_name(dt),
          so_reduce_op_name(op), n, inplace ? "in place" : "out of place", rc, bad, first,
          n ? get(dt, g_b, first) : 0.0, n ? want(dt, first, op, p) : 0.0);
}

static void test_allreduce(so_comm *c, so_dtype dt, so_transport tp)
{
    for (int algo = 0; algo < SO_ALLREDUCE_COUNT; algo++)
        for (size_t k = 0; k < NCOUNTS; k++)
            for (int op = SO_REDUCE_SUM; op <= SO_REDUCE_MIN; op++) {
                if (dt == SO_DTYPE_I64 && op == SO_REDUCE_AVG)
                    continue;
                if (counts[k] == MAXN && op != SO_REDUCE_SUM && op != SO_REDUCE_AVG)
                    continue;
                allreduce_case(c, dt, algo, tp, counts[k], (so_reduce_op)op, counts[k] == 1023);
            }
}

/* Reduce-scatter then allgather of the result, even blocks or v-counts
 * (uneven, one block empty), both algorithms each. */
static void rs_ag_case(so_comm *c, so_dtype dt, int rs_algo, int ag_algo, so_transport tp, size_t n, int vcounts,
                       so_reduce_op op)
{
    int p = so_comm_size(c), r = so_comm_rank(c);
    size_t cnt[64], off = 0, len = 0, total = 0;
    for (int i = 0; i < p; i++) {
        size_t o2, l2;
        so_comm_block(n, p, i, &o2, &l2);
        cnt[i] = vcounts ? (i == p / 2 ? 0 : (size_t)(i * 37 + 3) % (n + 1)) : l2;
        if (i < r)
            off += cnt[i];
        total += cnt[i];
    }
    len = cnt[r];
    if (total > MAXN)
        return;
    for (size_t i = 0; i < total; i++)
        put(dt, g_a, i, val(r, i, op)), put(dt, g_b, i, -99);
    so_coll_opts o1 = opts_of(rs_algo, tp), o2 = opts_of(ag_algo, tp);
    so_handle *h1, *h2;
    int rc = vcounts ? so_comm_ireduce_scatterv(c, g_a, g_b + off * so_dtype_size(dt), cnt, dt, op, &o1, &h1)
                     : so_comm_ireduce_scatter(c, g_a, g_b + off * so_dtype_size(dt), total, dt, op, &o1, &h1);
    if (!rc) /* queued behind the reduce-scatter: the block it gathers is in place */
        rc = vcounts ? so_comm_iallgatherv(c, g_b + off * so_dtype_size(dt), g_b, cnt, dt, &o2, &h2)
                     : so_comm_iallgather(c, g_b + off * so_dtype_size(dt), g_b, total, dt, &o2, &h2);
    CHECK(rc == 0, "rs/ag submit: %s", so_errmsg());
    if (rc)
        return;
    rc = so_handle_wait(h1);
    rc = rc ? rc : so_handle_wait(h2);
    size_t bad = 0;
    for (size_t i = 0; i < total; i++)
        bad += get(dt, g_b, i) != want(dt, i, op, p);
    CHECK(rc == 0 && bad == 0, "reduce-scatter%s %s + allgather %s, %s %s %s count %zu (mine %zu at %zu): rc %d, %zu wrong",
          vcounts ? "v" : "", so_coll_algo_name(SO_COLL_REDUCE_SCATTER, rs_algo),
          so_coll_algo_name(SO_COLL_ALLGATHER, ag_algo), so_transport_name(tp), so_dtype_name(dt),
          so_reduce_op_name(op), total, len, off, rc, bad);
}

static void test_rs_ag(so_comm *c, so_dtype dt, so_transport tp)
{
    for (int a = 0; a < SO_RS_COUNT; a++)
        for (size_t k = 0; k < NCOUNTS; k++)
            for (int v = 0; v < 2; v++) {
                rs_ag_case(c, dt, a, SO_AG_COUNT - 1 - a, tp, counts[k], v, SO_REDUCE_SUM);
                if (counts[k] < 2000 && dt != SO_DTYPE_I64)
                    rs_ag_case(c, dt, a, a, tp, counts[k], v, SO_REDUCE_AVG);
                if (counts[k] < 2000)
                    rs_ag_case(c, dt, a, a, tp, counts[k], v, SO_REDUCE_MIN);
            }
}

/* hier's reduce-scatter and allgather on registered buffers: straight out of
 * the peers' memory on one node (the path counters say so), in place too. */
static void test_rs_ag_registered(so_comm *c)
{
    char *a = g_a, *b = g_b;
    CHECK_RC(so_comm_buf_alloc(c, (size_t)MAXN * 8, (void **)&g_a));
    CHECK_RC(so_comm_buf_alloc(c, (size_t)MAXN * 8, (void **)&g_b));
    uint64_t zc0, cp0, zc1, cp1;
    so_comm_hier_path_counts(&zc0, &cp0);
    for (int t = 0; t < 3; t++)
        for (size_t k = 1; k < NCOUNTS; k++)
            for (int v = 0; v < 2; v++)
                rs_ag_case(c, types[t], SO_RS_HIER, SO_AG_HIER, SO_TRANSPORT_AUTO, counts[k], v, SO_REDUCE_SUM);
    so_comm_hier_path_counts(&zc1, &cp1);
    CHECK(so_comm_size(c) == 1 || (zc1 - zc0 > 0 && cp1 == cp0), "hier reduce-scatter / allgather on registered "
          "buffers: %llu zero-copy calls, %llu not", (unsigned long long)(zc1 - zc0), (unsigned long long)(cp1 - cp0));
    so_comm_buf_free(c, g_b);
    so_comm_buf_free(c, g_a);
    g_a = a, g_b = b;
}

static void test_bcast(so_comm *c, so_dtype dt, so_transport tp)
{
    int p = so_comm_size(c), r = so_comm_rank(c);
    for (int algo = 0; algo < SO_BCAST_COUNT; algo++)
        for (size_t k = 0; k < NCOUNTS; k++)
            for (int root = 0; root < p; root += p > 2 ? p - 1 : 1) {
                size_t n = counts[k];
                for (size_t i = 0; i < n; i++)
                    put(dt, g_b, i, r == root ? (double)((i + (size_t)root) % 9) : -1.0);
                so_coll_opts o = opts_of(algo, tp);
                so_handle *h;
                int rc = so_comm_ibcast(c, g_b, n, dt, root, &o, &h);
                rc = rc ? rc : so_handle_wait(h);
                size_t bad = 0;
                for (size_t i = 0; i < n; i++)
                    bad += get(dt, g_b, i) != (double)((i + (size_t)root) % 9);
                CHECK(rc == 0 && bad == 0, "bcast %s %s %s root %d count %zu: rc %d, %zu wrong",
                      so_coll_algo_name(SO_COLL_BCAST, algo), so_transport_name(tp), so_dtype_name(dt), root, n, rc,
                      bad);
            }
}

/* ---- FP32 buffers on a 16-bit wire ----------------------------------------------- */

static uint64_t hash_bytes(const void *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}

/* Every rank holds the same bits: max(h) == min(h) over the group. */
static int same_everywhere(so_comm *c, const void *p, size_t bytes)
{
    uint64_t h = hash_bytes(p, bytes);
    int64_t v[2] = {(int64_t)(h >> 1), -(int64_t)(h >> 1)};
    return so_comm_allreduce_i64(c, v, 2, SO_REDUCE_MAX) == 0 && v[0] == -v[1];
}

/* Non-integer data: identical bits, and within the bound of docs/COLLECTIVES.md:
 * |result - exact| <= (p + 1) u sum|x| (u = 2^-8 for BF16, 2^-11 for FP16;
 * one rounding on the way in, at most p - 1 hops, plus the result's). */
static void wire_case(so_comm *c, int algo, so_dtype wire)
{
    int p = so_comm_size(c), r = so_comm_rank(c);
    size_t n = 4099;
    float *x = (float *)(void *)g_a, *y = (float *)(void *)g_b;
    for (size_t i = 0; i < n; i++)
        x[i] = sinf((float)(i * 7 + (size_t)r * 13)) / 3.0f;
    so_coll_opts o = opts_of(algo, SO_TRANSPORT_AUTO);
    o.wire = wire;
    so_handle *h;
    int rc = so_comm_iallreduce(c, x, y, n, SO_DTYPE_F32, SO_REDUCE_SUM, &o, &h);
    rc = rc ? rc : so_handle_wait(h);
    double u = wire == SO_DTYPE_BF16 ? ldexp(1, -8) : ldexp(1, -11), worst = 0;
    for (size_t i = 0; i < n; i++) {
        double exact = 0, mag = 0;
        for (int k = 0; k < p; k++) {
            double v = sinf((float)(i * 7 + (size_t)k * 13)) / 3.0f;
            exact += v, mag += fabs(v);
        }
        double err = fabs(y[i] - exact) / ((p + 1) * u * mag + 1e-30);
        worst = err > worst ? err : worst;
    }
    CHECK(rc == 0 && worst <= 1.0, "allreduce %s on a %s wire: error %.2f of the bound", so_allreduce_algo_name(algo),
          so_dtype_name(wire), worst);
    CHECK(same_everywhere(c, y, n * sizeof *y), "allreduce %s on a %s wire: ranks hold different bits",
          so_allreduce_algo_name(algo), so_dtype_name(wire));
    /* And the exact small integers of every kind, through the wire. */
    for (size_t i = 0; i < n; i++)
        x[i] = (float)val(r, i, SO_REDUCE_SUM);
    rc = so_comm_iallreduce(c, x, y, n, SO_DTYPE_F32, SO_REDUCE_SUM, &o, &h);
    rc = rc ? rc : so_handle_wait(h);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += y[i] != (float)want(SO_DTYPE_F32, i, SO_REDUCE_SUM, p);
    CHECK(rc == 0 && bad == 0, "allreduce %s on a %s wire, integers: %zu wrong", so_allreduce_algo_name(algo),
          so_dtype_name(wire), bad);
}

static void test_wire(so_comm *c)
{
    for (int algo = 0; algo < SO_ALLREDUCE_COUNT; algo++) {
        wire_case(c, algo, SO_DTYPE_BF16);
        wire_case(c, algo, SO_DTYPE_F16);
    }
    /* reduce-scatter, allgather and bcast through a bf16 wire: exact integers. */
    int p = so_comm_size(c), r = so_comm_rank(c);
    size_t n = 1031, off, len;
    so_comm_block(n, p, r, &off, &len);
    float *x = (float *)(void *)g_a, *y = (float *)(void *)g_b;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)val(r, i, SO_REDUCE_SUM), y[i] = -1;
    so_coll_opts o = SO_COLL_OPTS_INIT;
    o.wire = SO_DTYPE_BF16;
    so_handle *h[3];
    int rc = so_comm_ireduce_scatter(c, x, y + off, n, SO_DTYPE_F32, SO_REDUCE_SUM, &o, &h[0]);
    rc = rc ? rc : so_comm_iallgather(c, y + off, y, n, SO_DTYPE_F32, &o, &h[1]);
    rc = rc ? rc : so_comm_ibcast(c, y, n, SO_DTYPE_F32, p - 1, &o, &h[2]);
    rc = rc ? rc : so_handle_wait_all(h, 3);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += y[i] != (float)want(SO_DTYPE_F32, i, SO_REDUCE_SUM, p);
    CHECK(rc == 0 && bad == 0, "reduce-scatter / allgather / bcast on a bf16 wire: rc %d, %zu wrong", rc, bad);
    o.wire = SO_DTYPE_F64;
    CHECK(so_comm_iallreduce(c, x, y, n, SO_DTYPE_F32, SO_REDUCE_SUM, &o, &h[0]) == SO_EINVAL,
          "an f64 wire accepted for f32 buffers");
}

/* BF16 and FP16 buffers with non-integer data: every rank the same bits. */
static void test_bits(so_comm *c)
{
    int r = so_comm_rank(c);
    for (int t = 1; t <= 2; t++)
        for (int algo = 0; algo < SO_ALLREDUCE_COUNT; algo++) {
            size_t n = 33333;
            for (size_t i = 0; i < n; i++)
                put(types[t], g_a, i, sin((double)(i * 7 + (size_t)r * 13)) * 3.0);
            so_coll_opts o = opts_of(algo, SO_TRANSPORT_AUTO);
            so_handle *h;
            int rc = so_comm_iallreduce(c, g_a, g_a, n, types[t], SO_REDUCE_SUM, &o, &h);
            rc = rc ? rc : so_handle_wait(h);
            CHECK(rc == 0 && same_everywhere(c, g_a, n * 2), "allreduce %s %s: ranks hold different bits",
                  so_allreduce_algo_name(algo), so_dtype_name(types[t]));
        }
}

/* ---- continuations ------------------------------------------------------------------ */

/* PowerSGD's shape: allreduce P, then compute Q from the sum and allreduce
 * it, then use the result. */
typedef struct {
    so_comm *c;
    float p[64], q[64];
    int stage2_ran, fail;
    double final;
} chain_state;

static int compute_q(void *arg, int status, so_handle **follow)
{
    chain_state *s = arg;
    if (status)
        return status;
    for (int i = 0; i < 64; i++)
        s->q[i] = 2.0f * s->p[i] + (float)so_comm_rank(s->c); /* rank-dependent: needs the second allreduce */
    if (s->fail)
        return SO_EIO;
    return so_comm_iallreduce(s->c, s->q, s->q, 64, SO_DTYPE_F32, SO_REDUCE_SUM, NULL, follow);
}

static int decompress(void *arg, int status, so_handle **follow)
{
    chain_state *s = arg;
    (void)follow;
    s->stage2_ran = 1;
    s->final = status ? -1 : s->q[63];
    return status;
}

static void test_chain(so_comm *c)
{
    int p = so_comm_size(c);
    double psum = 0, ranksum = (double)p * (p - 1) / 2;
    for (int fail = 0; fail < 2; fail++) {
        chain_state s = {.c = c, .fail = fail};
        for (int i = 0; i < 64; i++)
            s.p[i] = (float)(i + so_comm_rank(c));
        psum = 63.0 * p + ranksum;
        so_handle *h1, *h2, *h3;
        int rc = so_comm_iallreduce(c, s.p, s.p, 64, SO_DTYPE_F32, SO_REDUCE_SUM, NULL, &h1);
        rc = rc ? rc : so_handle_then(h1, compute_q, &s, &h2);
        rc = rc ? rc : so_handle_then(h2, decompress, &s, &h3);
        int w = rc ? rc : so_handle_wait(h3);
        if (!fail)
            CHECK(rc == 0 && w == 0 && s.stage2_ran && s.final == p * 2.0 * psum + ranksum,
                  "chain: rc %d/%d, stage 2 %d, final %g (want %g)", rc, w, s.stage2_ran, s.final,
                  p * 2.0 * psum + ranksum);
        else
            CHECK(w == SO_EIO && s.stage2_ran && s.final == -1, "chain with a failing continuation: wait %d, final %g",
                  w, s.final);
    }
}

/* then() on a handle that completed already, and next not wanted. */
static int count_up(void *arg, int status, so_handle **follow)
{
    (void)follow;
    *(int *)arg += status == 0;
    return 0;
}

static void test_then_late(so_comm *c)
{
    float x = 1, y = 1;
    int ran = 0;
    so_handle *a, *b, *t;
    CHECK_RC(so_comm_iallreduce(c, &x, &x, 1, SO_DTYPE_F32, SO_REDUCE_SUM, NULL, &a));
    CHECK_RC(so_comm_iallreduce(c, &y, &y, 1, SO_DTYPE_F32, SO_REDUCE_SUM, NULL, &b));
    CHECK_RC(so_handle_wait(b)); /* one at a time, in order: a is over too */
    CHECK_RC(so_handle_then(a, count_up, &ran, &t));
    CHECK_RC(so_handle_wait(t));
    CHECK(ran == 1 && x == so_comm_size(c), "late continuation: ran %d, x %g", ran, x);
    CHECK_RC(so_comm_iallreduce(c, &x, &x, 1, SO_DTYPE_F32, SO_REDUCE_SUM, NULL, &a));
    CHECK_RC(so_handle_then(a, count_up, &ran, NULL));
    CHECK_RC(so_comm_iallreduce(c, &y, &y, 1, SO_DTYPE_F32, SO_REDUCE_SUM, NULL, &b));
    CHECK_RC(so_handle_wait(b)); /* the continuation ran before b started */
    CHECK(ran == 2, "continuation without a next handle: ran %d", ran);
}

/* Depth first whatever the timing: each rank sleeps a different while
 * before attaching continuations that submit more collectives, and the
 * collectives must still run in one order everywhere (their tags, read back
 * from the operation log, hash alike). */
typedef struct {
    so_comm *c;
    float v[4];
    int k;
} order_item;

static int submit_more(void *arg, int status, so_handle **follow)
{
    order_item *it = arg;
    so_coll_opts o = SO_COLL_OPTS_INIT;
    o.tag = 1000 + it->k;
    return status ? status : so_comm_iallreduce(it->c, it->v, it->v, 4, SO_DTYPE_F32, SO_REDUCE_MAX, &o, follow);
}

static void test_order(so_comm *c)
{
    enum { K = 12 };
    order_item it[K];
    so_handle *h[K];
    uint64_t cursor = 0;
    so_op_stat st[64];
    while (so_comm_op_log(&cursor, st, 64) == 64) /* skip what ran before */
        ;
    srand(1234u + (unsigned)so_comm_rank(c) * 77u);
    for (int k = 0; k < K; k++) {
        it[k] = (order_item){c, {(float)k, (float)so_comm_rank(c), 0, 0}, k};
        so_coll_opts o = SO_COLL_OPTS_INIT;
        o.tag = k;
        so_handle *a;
        CHECK_RC(so_comm_iallreduce(c, it[k].v, it[k].v, 4, SO_DTYPE_F32, SO_REDUCE_SUM, &o, &a));
        usleep((useconds_t)(rand() % 3000)); /* the collective may or may not be over */
        CHECK_RC(so_handle_then(a, submit_more, &it[k], &h[k]));
    }
    CHECK_RC(so_handle_wait_all(h, K));
    uint64_t hash = 1469598103934665603ull;
    size_t n, seen = 0;
    while ((n = so_comm_op_log(&cursor, st, 64)) > 0)
        for (size_t i = 0; i < n; i++)
            if (st[i].group == c && st[i].tag >= 0) {
                hash = (hash ^ (uint64_t)st[i].tag) * 1099511628211ull;
                seen++;
            }
    CHECK(seen == 2 * K, "order: %zu collectives in the log (want %d)", seen, 2 * K);
    CHECK(same_everywhere(c, &hash, sizeof hash), "order: ranks ran the collectives in different orders");
    CHECK(it[K - 1].v[0] == (float)((K - 1) * so_comm_size(c)), "order: wrong values");
}

/* ---- several groups at once, messages, the busy rule --------------------------------- */

static void test_groups(so_comm *c)
{
    int r = so_comm_rank(c), p = so_comm_size(c);
    so_comm *half = NULL, *cross = NULL;
    CHECK_RC(so_comm_split(c, r % 2, r, &half));
    CHECK_RC(so_comm_set_ranks_per_node(c, 2)); /* emulated nodes of 2: node and cross groups */
    CHECK_RC(so_comm_cross_group(c, &cross));
    so_comm *node = so_comm_node_group(c);
    static float a[3][3][1000];
    so_comm *gs[3] = {half, node, cross};
    so_handle *h[9];
    int nh = 0;
    for (int round = 0; round < 3; round++) /* three rounds on three groups in flight at once */
        for (int g = 0; g < 3; g++) {
            for (int i = 0; i < 1000; i++)
                a[round][g][i] = (float)(round + 1);
            CHECK_RC(so_comm_iallreduce(gs[g], a[round][g], a[round][g], 1000, SO_DTYPE_F32, SO_REDUCE_SUM, NULL,
                                        &h[nh++]));
        }
    for (int i = nh - 1; i >= 0; i--) /* waited in reverse */
        CHECK_RC(so_handle_wait(h[i]));
    for (int round = 0; round < 3; round++)
        for (int g = 0; g < 3; g++)
            CHECK(a[round][g][999] == (float)((round + 1) * so_comm_size(gs[g])), "group %d of size %d: sum %g", g,
                  so_comm_size(gs[g]), a[round][g][999]);
    so_comm_node nd;
    so_comm_node_info(c, &nd);
    CHECK(so_comm_size(cross) == (nd.node_rank == 0 ? nd.num_nodes : p / 2), "cross group of %d, %d nodes",
          so_comm_size(cross), nd.num_nodes);
    CHECK_RC(so_comm_finalize(half));
    CHECK_RC(so_comm_set_ranks_per_node(c, 0));
}

static void test_messages(so_comm *c)
{
    int r = so_comm_rank(c), p = so_comm_size(c), right = (r + 1) % p, left = (r + p - 1) % p;
    size_t n = 300000;
    float *big = (float *)(void *)g_a;
    uint16_t out[2][100], in[2][100];
    for (size_t i = 0; i < n; i++)
        big[i] = 1.0f;
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 100; i++)
            out[t][i] = so_f32_to_bf16_1((float)(r * 10 + t)), in[t][i] = 0;
    so_handle *h[5];
    CHECK_RC(so_comm_iallreduce(c, big, big, n, SO_DTYPE_F32, SO_REDUCE_SUM, NULL, &h[0]));
    /* Two tags sent in one order, received in the other. */
    CHECK_RC(so_comm_isend_to(c, out[0], 100, SO_DTYPE_BF16, right, 5, &h[1]));
    CHECK_RC(so_comm_isend_to(c, out[1], 100, SO_DTYPE_BF16, right, 6, &h[2]));
    CHECK_RC(so_comm_irecv_from(c, in[1], 100, SO_DTYPE_BF16, left, 6, &h[3]));
    CHECK_RC(so_comm_irecv_from(c, in[0], 100, SO_DTYPE_BF16, left, 5, &h[4]));
    for (int i = 4; i >= 0; i--)
        CHECK_RC(so_handle_wait(h[i]));
    CHECK(so_bf16_to_f32_1(in[0][99]) == (float)(left * 10) && so_bf16_to_f32_1(in[1][0]) == (float)(left * 10 + 1),
          "messages: got %g and %g from rank %d", so_bf16_to_f32_1(in[0][99]), so_bf16_to_f32_1(in[1][0]), left);
    CHECK(big[n - 1] == (float)p, "allreduce beside messages: %g", big[n - 1]);
    /* Polled with test, and one released unwaited. */
    int done = 0;
    CHECK_RC(so_comm_isend_to(c, out[0], 100, SO_DTYPE_BF16, right, 7, &h[0]));
    CHECK_RC(so_comm_irecv_from(c, in[0], 100, SO_DTYPE_BF16, left, 7, &h[1]));
    so_handle_release(h[0]);
    int trc = 0;
    for (long spins = 0; !done && !trc && spins < 100000000L; spins++)
        trc = so_handle_test(h[1], &done);
    CHECK(done && !trc, "receive never completed under test (rc %d)", trc);
    if (!done)
        so_comm_abort(c, 1, "a receive that never completes would hang the next collective");
}

static void test_busy_and_errors(so_comm *c)
{
    float x[4] = {1, 2, 3, 4}, y[4];
    int64_t v[4] = {1, 2, 3, 4};
    int r = so_comm_rank(c);
    so_handle *h = NULL, *s = NULL;
    /* A receive from this rank itself, not sent yet: outstanding for sure. */
    CHECK_RC(so_comm_irecv_from(c, y, 4, SO_DTYPE_F32, r, 9, &h));
    CHECK(so_comm_barrier(c) == SO_EINVAL, "a blocking barrier accepted while a handle is outstanding");
    CHECK_RC(so_comm_isend_to(c, x, 4, SO_DTYPE_F32, r, 9, &s));
    CHECK_RC(so_handle_wait(h));
    CHECK_RC(so_handle_wait(s));
    CHECK_RC(so_comm_barrier(c));
    CHECK(so_comm_iallreduce(c, v, v, 4, SO_DTYPE_I64, SO_REDUCE_AVG, NULL, &h) == SO_EINVAL && !h,
          "i64 average accepted");
    CHECK(so_comm_iallreduce(c, x, x, 4, (so_dtype)42, SO_REDUCE_SUM, NULL, &h) == SO_EINVAL, "bad type accepted");
    CHECK(so_comm_ibcast(c, x, 4, SO_DTYPE_F32, so_comm_size(c), NULL, &h) == SO_EINVAL, "bad root accepted");
    CHECK(so_comm_isend_to(c, x, 4, SO_DTYPE_F32, -1, 0, &h) == SO_EINVAL, "bad peer accepted");
    so_coll_opts o = SO_COLL_OPTS_INIT;
    o.algo = 99;
    CHECK(so_comm_iallreduce(c, x, x, 4, SO_DTYPE_F32, SO_REDUCE_SUM, &o, &h) == SO_EINVAL, "bad algorithm accepted");
    CHECK_RC(so_comm_iallreduce(c, v, v, 4, SO_DTYPE_I64, SO_REDUCE_SUM, NULL, &h));
    CHECK_RC(so_handle_wait(h));
    CHECK(v[3] == 4 * so_comm_size(c), "i64 sum %lld", (long long)v[3]);
    uint64_t cur = 0;
    so_op_stat st;
    size_t n = 0;
    while (so_comm_op_log(&cur, &st, 1))
        n++;
    CHECK(n > 0 && !strcmp(st.kind, "allreduce") && st.dtype == SO_DTYPE_I64 && st.algo && st.transport &&
              st.t_queued <= st.t_started && st.t_started <= st.t_finished,
          "operation log: %zu entries, last %s %s", n, st.kind, so_dtype_name(st.dtype));
}

int main(int argc, char **argv)
{
    so_comm *c;
    if (so_comm_init(&argc, &argv, &c))
        so_comm_abort(NULL, 1, so_errmsg());
    g_rank = so_comm_rank(c);
    g_size = so_comm_size(c);
    if (argc > 1 && atoi(argv[1]) != g_size) {
        fprintf(stderr, "test_handles: expected %s ranks, got %d (wrong mpiexec?)\n", argv[1], g_size);
        so_comm_finalize(c);
        return 1;
    }
    so_comm_set_timeouts(c, 30, 120);
    g_a = malloc((size_t)MAXN * 8 + 2 * 300000 * 4);
    g_b = malloc((size_t)MAXN * 8);
    if (!g_a || !g_b)
        so_comm_abort(c, 1, "out of memory");
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
        for (size_t k = 0; k < sizeof transports / sizeof *transports; k++) {
            test_allreduce(c, types[t], transports[k]);
            test_rs_ag(c, types[t], transports[k]);
            test_bcast(c, types[t], transports[k]);
        }
    test_rs_ag_registered(c);
    test_wire(c);
    test_bits(c);
    test_chain(c);
    test_then_late(c);
    test_order(c);
    test_groups(c);
    test_messages(c);
    test_busy_and_errors(c);
    int64_t tot[2] = {g_pass, g_fail};
    so_comm_allreduce_i64(c, tot, 2, SO_REDUCE_SUM);
    if (g_rank == 0)
        printf("test_handles np=%d: %lld passed, %lld failed (checks over all ranks)\n", g_size, (long long)tot[0],
               (long long)tot[1]);
    free(g_a);
    free(g_b);
    so_comm_finalize(c);
    return tot[1] ? 1 : 0;
}
