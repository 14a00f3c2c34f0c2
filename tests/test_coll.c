/* MPI tests of the collective-algorithm library: every allreduce, reduce-
 * scatter, allgather and broadcast algorithm against exact references
 * (integer-valued floats make every sum exact), for awkward counts, in place
 * and out of place, with and without emulated node boundaries; plus identical
 * bits on every rank, and the tuning table / model round trip.
 * Run as `mpiexec -n NP test_coll NP [quick]`; quick keeps the multi-MiB
 * count for a subset (oversubscribed np 7/8 on 2 cores). Every rank runs
 * every check (a failed assert on one rank would hang the others). */
#include "scaleout/comm.h"
#include "scaleout/err.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_check.h"
static int g_quick; /* argv[2] == "quick": fewer large cases (np 7/8 on 2 cores) */

/* 840 = lcm(1..8): 840 * 1000 + 1 floats (3.2 MiB) is divisible by no p in 2..8. */
#define BIG 840001
static const size_t counts[] = {0, 1, 2, 3, 7, 1023, 65537, BIG};
#define NCOUNTS (sizeof counts / sizeof *counts)
static const char *op_names[] = {"sum", "avg", "max", "min"};


static float *g_send, *g_recv;

/* Is the big count tested for this algorithm in quick mode? */
static int big_ok(so_coll_kind kind, int algo, int rpn)
{
    if (!g_quick)
        return 1;
    if (kind == SO_COLL_ALLREDUCE)
        return rpn == 0 && (algo == SO_ALLREDUCE_RING || algo == SO_ALLREDUCE_HIER || algo == SO_ALLREDUCE_RABENSEIFNER);
    return algo == 1; /* the ring / binomial variant */
}

static void test_allreduce(so_comm *c, int algo, int rpn)
{
    for (size_t k = 0; k < NCOUNTS; k++) {
        size_t n = counts[k];
        if (n == BIG && !big_ok(SO_COLL_ALLREDUCE, algo, rpn))
            continue;
        for (int op = SO_REDUCE_SUM; op <= SO_REDUCE_MIN; op++)
            for (int inplace = 0; inplace < 2; inplace++) {
                if (n == BIG && op != SO_REDUCE_SUM && op != SO_REDUCE_MAX)
                    continue;
                for (size_t i = 0; i < n; i++)
                    g_send[i] = g_recv[i] = input(g_rank, i, (so_reduce_op)op);
                int rc = so_comm_coll(c, SO_COLL_ALLREDUCE, algo, inplace ? g_recv : g_send, g_recv, n,
                                      (so_reduce_op)op, 0);
                size_t bad = 0, first = 0;
                for (size_t i = 0; i < n; i++)
                    if (g_recv[i] != expected(i, (so_reduce_op)op) && !bad++)
                        first = i;
                CHECK(rc == 0 && bad == 0, "allreduce %s rpn %d %s count %zu %s: rc %d (%s), %zu wrong (first %zu: %g vs %g)",
                      so_allreduce_algo_name(algo), rpn, op_names[op], n, inplace ? "in-place" : "out-of-place",
                      rc, rc ? so_errmsg() : "", bad, first, n ? g_recv[first] : 0.0, n ? expected(first, op) : 0.0);
            }
    }
}

static void test_reduce_scatter(so_comm *c, int algo)
{
    for (size_t k = 0; k < NCOUNTS; k++) {
        size_t n = counts[k], off, len;
        if (n == BIG && !big_ok(SO_COLL_REDUCE_SCATTER, algo, 0))
            continue;
        so_comm_block(n, g_size, g_rank, &off, &len);
        for (int op = SO_REDUCE_SUM; op <= SO_REDUCE_MIN; op++)
            for (int inplace = 0; inplace < 2; inplace++) {
                for (size_t i = 0; i < n; i++)
                    g_send[i] = input(g_rank, i, (so_reduce_op)op);
                float *out = inplace ? g_send + off : g_recv;
                int rc = so_comm_reduce_scatter(c, (so_rs_algo)algo, g_send, out, n, (so_reduce_op)op);
                size_t bad = 0;
                for (size_t i = 0; i < len; i++)
                    bad += out[i] != expected(off + i, (so_reduce_op)op);
                CHECK(rc == 0 && bad == 0, "reduce-scatter %s %s count %zu %s: rc %d, %zu wrong",
                      so_coll_algo_name(SO_COLL_REDUCE_SCATTER, algo), op_names[op], n,
                      inplace ? "in-place" : "out-of-place", rc, bad);
            }
    }
}

static void test_allgather(so_comm *c, int algo)
{
    for (size_t k = 0; k < NCOUNTS; k++) {
        size_t n = counts[k], off, len;
        if (n == BIG && !big_ok(SO_COLL_ALLGATHER, algo, 0))
            continue;
        so_comm_block(n, g_size, g_rank, &off, &len);
        for (int inplace = 0; inplace < 2; inplace++) {
            for (size_t i = 0; i < n; i++)
                g_recv[i] = -1.0f;
            for (size_t i = 0; i < len; i++)
                (inplace ? g_recv + off : g_send)[i] = (float)((off + i) % 1000 + 1);
            int rc = so_comm_allgather(c, (so_ag_algo)algo, inplace ? g_recv + off : g_send, g_recv, n);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++)
                bad += g_recv[i] != (float)(i % 1000 + 1);
            CHECK(rc == 0 && bad == 0, "allgather %s count %zu %s: rc %d, %zu wrong",
                  so_coll_algo_name(SO_COLL_ALLGATHER, algo), n, inplace ? "in-place" : "out-of-place", rc, bad);
        }
    }
}

static void test_bcast(so_comm *c, int algo)
{
    for (size_t k = 0; k < NCOUNTS; k++) {
        size_t n = counts[k];
        if (n == BIG && !big_ok(SO_COLL_BCAST, algo, 0))
            continue;
        for (int root = 0; root < g_size; root += g_size > 1 ? g_size - 1 : 1) {
            for (size_t i = 0; i < n; i++)
                g_recv[i] = g_rank == root ? (float)(i % 977 + root) : -1.0f;
            int rc = so_comm_bcast_algo(c, (so_bcast_algo)algo, g_recv, n, root);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++)
                bad += g_recv[i] != (float)(i % 977 + root);
            CHECK(rc == 0 && bad == 0, "bcast %s root %d count %zu: rc %d, %zu wrong",
                  so_coll_algo_name(SO_COLL_BCAST, algo), root, n, rc, bad);
        }
    }
}

/* Non-integer data: every rank must still end with the same bits. */
static void test_identical_bits(so_comm *c, int algo)
{
    size_t n = 4099;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        g_recv[i] = sinf((float)(i * 7 + g_rank * 13)) / 3.0f;
    int rc = so_comm_coll(c, SO_COLL_ALLREDUCE, algo, g_recv, g_recv, n, SO_REDUCE_SUM, 0);
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &g_recv[i], sizeof b);
        h = (h ^ b) * 1099511628211ull;
    }
    int64_t v[2] = {(int64_t)(h >> 1), -(int64_t)(h >> 1)};
    int rc2 = so_comm_allreduce_i64(c, v, 2, SO_REDUCE_MAX);
    CHECK(rc == 0 && rc2 == 0 && v[0] == -v[1], "allreduce %s: ranks hold different bits",
          so_allreduce_algo_name(algo));
}

/* Non-integer data: AVG gives the bits of SUM times 1/p, whether the
 * dispatcher scales afterwards or the algorithm inside its reduction (hier on
 * one node: the small, chunked copy and zero-copy paths). */
static void test_avg_bits(so_comm *c, int algo, int rpn)
{
    static const size_t ns[] = {4099, 65537, BIG};
    float inv = 1.0f / (float)g_size;
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        size_t n = ns[k], bad = 0;
        if (n == BIG && !big_ok(SO_COLL_ALLREDUCE, algo, rpn))
            continue;
        for (size_t i = 0; i < n; i++)
            g_send[i] = sinf((float)(i * 5 + g_rank * 11)) / 7.0f;
        int rc = so_comm_coll(c, SO_COLL_ALLREDUCE, algo, g_send, g_recv, n, SO_REDUCE_SUM, 0);
        for (size_t i = 0; i < n; i++)
            g_send[i] = g_recv[i] * inv; /* the want, then the input again below */
        float *want = malloc(n * sizeof *want);
        if (!want)
            so_comm_abort(c, 1, "out of memory");
        memcpy(want, g_send, n * sizeof *want);
        for (size_t i = 0; i < n; i++)
            g_send[i] = sinf((float)(i * 5 + g_rank * 11)) / 7.0f;
        if (!rc)
            rc = so_comm_coll(c, SO_COLL_ALLREDUCE, algo, g_send, g_recv, n, SO_REDUCE_AVG, 0);
        for (size_t i = 0; i < n; i++)
            bad += memcmp(&g_recv[i], &want[i], sizeof *want) != 0;
        free(want);
        CHECK(rc == 0 && bad == 0, "allreduce %s rpn %d avg count %zu: %zu elements differ from sum x 1/p (rc %d)",
              so_allreduce_algo_name(algo), rpn, n, bad, rc);
    }
}

/* ---- registered buffers: hier's zero-copy path ----------------------------------
 * Every case checks the exact result AND which path ran (so_comm_hier_path_counts),
 * so a zero-copy path that silently never engages fails too. */

#define BIG2 1680001 /* 6.4 MiB, also not a multiple of any p in 2..8 */
#define REG_N (BIG2 + 15) /* floats per buffer: room for BIG2 and a 16-float shift */
static const size_t reg_counts[] = {0, 1, 2, 3, 7, 1023, 65537, BIG, BIG2};
#define NREG (sizeof reg_counts / sizeof *reg_counts)

/* The node layout the current ranks-per-node gives (as hier's context sees it). */
typedef struct {
    int rpn, q, nodes, equal_q;
    size_t small_n; /* floats: hier's one-barrier limit */
} layout;

static layout get_layout(so_comm *c, int rpn)
{
    so_comm_node nd;
    so_comm_node_info(c, &nd);
    int64_t qq[2] = {nd.node_size, -nd.node_size};
    if (so_comm_allreduce_i64(c, qq, 2, SO_REDUCE_MAX))
        so_comm_abort(c, 1, so_errmsg());
    const char *e = getenv("SCALEOUT_SHM_SMALL");
    size_t small = e && *e ? (size_t)strtoull(e, NULL, 10) / 64 * 64 : 65536;
    return (layout){rpn, nd.node_size, nd.num_nodes, qq[0] == -qq[1], small / sizeof(float)};
}

/* Would hier run zero-copy on n floats if every rank registered them alike? */
static int zc_expected(const layout *l, size_t n, int same_grouping)
{
    return same_grouping && l->q > 1 && n > l->small_n && (l->nodes == 1 || l->equal_q);
}

/* One hier allreduce of n floats on integer data, checked exactly, plus the path. */
static void reg_case(so_comm *c, const layout *l, const float *send, float *recv, size_t n, so_reduce_op op,
                     int want_zc, const char *what)
{
    float *in = (float *)send;
    for (size_t i = 0; i < n; i++) {
        recv[i] = -77.0f; /* out of place: every element must be written */
        in[i] = input(g_rank, i, op);
    }
    uint64_t z0, c0, z1, c1;
    so_comm_hier_path_counts(&z0, &c0);
    int rc = so_comm_coll(c, SO_COLL_ALLREDUCE, SO_ALLREDUCE_HIER, send, recv, n, op, 0);
    so_comm_hier_path_counts(&z1, &c1);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (recv[i] != expected(i, op) && !bad++)
            first = i;
    CHECK(rc == 0 && bad == 0 && (int)(z1 - z0) == want_zc,
          "registered hier %s rpn %d %s count %zu: rc %d (%s), %zu wrong (first %zu: %g vs %g), zero copy %d "
          "(want %d)", what, l->rpn, op_names[op], n, rc, rc ? so_errmsg() : "", bad, first,
          n ? recv[first] : 0.0, n ? expected(first, op) : 0.0, (int)(z1 - z0), want_zc);
}

/* Every count and op, in place and out of place, in one region and across two. */
static void test_registered(so_comm *c, const layout *l, float *a, float *b)
{
    for (size_t k = 0; k < NREG; k++) {
        size_t n = reg_counts[k];
        if (n > BIG && g_quick)
            continue;
        for (int op = SO_REDUCE_SUM; op <= SO_REDUCE_MIN; op++) {
            if (n >= BIG && op != SO_REDUCE_SUM && op != SO_REDUCE_MAX)
                continue;
            int zc = zc_expected(l, n, 1);
            reg_case(c, l, a, a, n, (so_reduce_op)op, zc, "in place");
            reg_case(c, l, a + REG_N, a, n, (so_reduce_op)op, zc, "out of place, one region");
            if (n >= 65537)
                reg_case(c, l, a, b, n, (so_reduce_op)op, zc, "out of place, two regions");
        }
    }
}

/* Registered on some ranks only, or at different offsets: the copy path, right answers. */
static void test_mixed(so_comm *c, const layout *l, float *a)
{
    size_t n = 65537;
    int mine = g_rank == 0;
    reg_case(c, l, mine ? a : g_send, mine ? a : g_send, n, SO_REDUCE_SUM, 0, "rank 0 registered, in place");
    reg_case(c, l, mine ? a + REG_N : g_send, mine ? a : g_recv, n, SO_REDUCE_SUM, 0,
             "rank 0 registered, out of place");
    reg_case(c, l, mine ? g_send : a + REG_N, mine ? g_recv : a, n, SO_REDUCE_SUM, 0, "rank 0 plain");
    reg_case(c, l, a + (mine ? 16 : 0), a + (mine ? 16 : 0), n, SO_REDUCE_SUM, 0, "rank 0 at another offset");
    if (!g_quick)
        reg_case(c, l, mine ? a : g_send, mine ? a : g_send, BIG, SO_REDUCE_MAX, 0, "rank 0 registered, big");
}

/* Rank r's element i of the bit tests: not integers, so the order of the sum shows. */
static float bits_input(int r, size_t i) { return sinf((float)(i * 7 + (size_t)r * 13)) / 3.0f; }

/* Non-integer data, registered, in place: the whole vector and the same vector
 * in buckets (some under the small-message size, split off-slice) give the
 * same bits; on one node they are the left-to-right sum over ranks 0..p-1. */
static void test_zc_bits(so_comm *c, const layout *l, float *a)
{
    static const size_t cuts[] = {1000, 70000, 371001, 372024, BIG}; /* bucket ends */
    size_t n = BIG, bad = 0, badseq = 0;
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        a[i] = bits_input(g_rank, i);
    rc = so_comm_coll(c, SO_COLL_ALLREDUCE, SO_ALLREDUCE_HIER, a, a, n, SO_REDUCE_SUM, 0);
    memcpy(g_recv, a, n * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = bits_input(g_rank, i);
    for (size_t k = 0, lo = 0; k < sizeof cuts / sizeof *cuts && !rc; lo = cuts[k++])
        rc = so_comm_coll(c, SO_COLL_ALLREDUCE, SO_ALLREDUCE_HIER, a + lo, a + lo, cuts[k] - lo, SO_REDUCE_SUM, 0);
    for (size_t i = 0; i < n; i++) {
        float seq = bits_input(0, i);
        for (int r = 1; r < g_size; r++)
            seq += bits_input(r, i);
        bad += memcmp(&a[i], &g_recv[i], sizeof *a) != 0;
        badseq += memcmp(&a[i], &seq, sizeof seq) != 0;
    }
    CHECK(rc == 0 && bad == 0, "registered hier rpn %d: buckets change the bits (%zu differ; rc %d)", l->rpn, bad, rc);
    CHECK(l->nodes > 1 || badseq == 0, "registered hier rpn %d: %zu elements differ from the rank-order sum",
          l->rpn, badseq);
    /* AVG: zero copy scales before its stores; the bits must be the sum's times 1/p. */
    for (size_t i = 0; i < n; i++)
        a[i] = bits_input(g_rank, i);
    rc = so_comm_coll(c, SO_COLL_ALLREDUCE, SO_ALLREDUCE_HIER, a, a, n, SO_REDUCE_AVG, 0);
    float inv = 1.0f / (float)g_size;
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = g_recv[i] * inv;
        bad += memcmp(&a[i], &want, sizeof want) != 0;
    }
    CHECK(rc == 0 && bad == 0, "registered hier rpn %d avg: %zu elements differ from sum x 1/p (rc %d)", l->rpn,
          bad, rc);
}

/* All registered cases under ranks-per-node rpn; `old` was registered under
 * rpn 0 (the whole machine): usable zero-copy only where the grouping is the same. */
static void test_registered_all(so_comm *c, int rpn, float *old)
{
    layout l = get_layout(c, rpn);
    float *a = NULL, *b = NULL;
    int rc = so_comm_buf_alloc(c, 2 * REG_N * sizeof *a, (void **)&a);
    if (!rc)
        rc = so_comm_buf_alloc(c, REG_N * sizeof *b, (void **)&b);
    CHECK(rc == 0 && ((uintptr_t)a & 63) == 0 && ((uintptr_t)b & 63) == 0, "so_comm_buf_alloc: rc %d (%s)", rc,
          so_errmsg());
    if (rc)
        so_comm_abort(c, 1, "cannot go on without registered buffers");
    test_registered(c, &l, a, b);
    test_mixed(c, &l, a);
    if (l.nodes <= 3 && (l.nodes == 1 || l.equal_q)) /* more nodes: rd and Rabenseifner may sum differently */
        test_zc_bits(c, &l, a);
    reg_case(c, &l, old, old, 65537, SO_REDUCE_SUM, zc_expected(&l, 65537, rpn == 0 || rpn >= g_size),
             "registered under rpn 0");
    so_comm_buf_free(c, b);
    so_comm_buf_free(c, a);
}

/* so_comm_buf_peer under ranks-per-node rpn: sizes differ per rank (rank r
 * asks for r pages, rank 0 for none); a rank on my node sees what it wrote in
 * its own buffer through my mapping, one on another node is not mapped. */
static void test_buf_peer(so_comm *c, int rpn)
{
    layout l = get_layout(c, rpn);
    size_t bytes = (size_t)g_rank * 4096;
    int *mine = NULL;
    int rc = so_comm_buf_alloc(c, bytes, (void **)&mine);
    CHECK(rc == 0, "so_comm_buf_alloc of %zu bytes: %s", bytes, so_errmsg());
    if (rc)
        so_comm_abort(c, 1, "cannot go on without registered buffers");
    if (bytes)
        mine[bytes / sizeof *mine - 1] = 1000 + g_rank;
    so_comm_barrier(c);
    for (int j = 0; j < g_size; j++) {
        size_t len = 0;
        int *peer = so_comm_buf_peer(c, mine, j, &len);
        int mapped = (l.rpn ? j / l.rpn == g_rank / l.rpn : 1) && l.q > 1; /* alone: plain memory */
        if (!mapped)
            CHECK(peer == NULL, "rpn %d: rank %d's buffer mapped from another node", rpn, j);
        else
            CHECK(peer && len >= (size_t)j * 4096 && (!j || peer[(size_t)j * 4096 / sizeof *peer - 1] == 1000 + j),
                  "rpn %d: rank %d's buffer not mapped here, or not what it wrote", rpn, j);
    }
    so_comm_barrier(c);
    so_comm_buf_free(c, mine);
}

/* Tuning file round trip, selection by rules and the fit (rank-local). */
static void test_tuning(void)
{
    so_comm_tuning t, u;
    so_comm_tuning_default(&t);
    t.p = 3;
    t.ranks_per_node = 0;
    t.nrules = 2;
    t.rule[0].max_bytes = 4096;
    t.rule[0].algo = SO_ALLREDUCE_RD;
    t.rule[1].max_bytes = UINT64_MAX;
    t.rule[1].algo = SO_ALLREDUCE_RING;
    t.fit[SO_ALLREDUCE_RING] = (so_comm_fit){.alpha = 3e-6, .beta = 2e-10, .valid = 1};
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_coll_%d_%d.tune", (int)getpid(), g_rank);
    CHECK(so_comm_tuning_save(&t, path) == 0, "tuning save: %s", so_errmsg());
    CHECK(so_comm_tuning_load(path, &u) == 0, "tuning load: %s", so_errmsg());
    remove(path);
    CHECK(u.p == 3 && u.nrules == 2 && u.rule[1].max_bytes == UINT64_MAX &&
              fabs(u.fit[SO_ALLREDUCE_RING].alpha - 3e-6) < 1e-12,
          "tuning round trip differs");
    CHECK(so_comm_select(4096, 3, 0, &u) == SO_ALLREDUCE_RD && so_comm_select(4097, 3, 0, &u) == SO_ALLREDUCE_RING,
          "rules not applied");
    /* The fit recovers alpha and beta from exact model times. */
    size_t bytes[6];
    double secs[6];
    for (int i = 0; i < 6; i++) {
        bytes[i] = (size_t)1 << (4 * i);
        secs[i] = so_comm_predict(SO_ALLREDUCE_RING, bytes[i], 3, 0, &u);
    }
    so_comm_fit f;
    CHECK(so_comm_fit_model(SO_ALLREDUCE_RING, 3, 0, u.gamma, bytes, secs, 6, &f) == 0 &&
              fabs(f.alpha / 3e-6 - 1) < 1e-6 && fabs(f.beta / 2e-10 - 1) < 1e-6,
          "fit gave alpha %g beta %g", f.alpha, f.beta);
    FILE *bad = fopen(path, "w");
    if (bad) {
        fputs("not a table\n", bad);
        fclose(bad);
    }
    CHECK(so_comm_tuning_load(path, &u) == SO_EFORMAT, "a malformed file must be SO_EFORMAT");
    remove(path);
}

int main(int argc, char **argv)
{
    so_comm *c;
    if (so_comm_init(&argc, &argv, &c)) {
        fprintf(stderr, "so_comm_init: %s\n", so_errmsg());
        return 1;
    }
    g_rank = so_comm_rank(c);
    g_size = so_comm_size(c);
    g_quick = argc > 2 && strcmp(argv[2], "quick") == 0;
    if (argc > 1 && atoi(argv[1]) != g_size) {
        fprintf(stderr, "expected %s ranks, got %d (wrong mpiexec for this MPI?)\n", argv[1], g_size);
        so_comm_abort(c, 1, "size mismatch");
    }
    so_comm_set_timeouts(c, 20, 60);
    g_send = malloc(BIG * sizeof *g_send);
    g_recv = malloc(BIG * sizeof *g_recv);
    if (!g_send || !g_recv)
        so_comm_abort(c, 1, "out of memory");
    /* Left to so_comm_finalize on purpose: it must free what the caller did not. */
    float *old = NULL;
    if (so_comm_buf_alloc(c, 65537 * sizeof *old, (void **)&old))
        so_comm_abort(c, 1, so_errmsg());
    static const int rpns[] = {0, 1, 2, 3};
    for (size_t k = 0; k < sizeof rpns / sizeof *rpns; k++) {
        if (so_comm_set_ranks_per_node(c, rpns[k]))
            so_comm_abort(c, 1, so_errmsg());
        for (int a = 0; a < SO_ALLREDUCE_COUNT; a++)
            if (rpns[k] == 0 || a == SO_ALLREDUCE_HIER || a == SO_ALLREDUCE_AUTO) {
                test_allreduce(c, a, rpns[k]);
                test_identical_bits(c, a);
                test_avg_bits(c, a, rpns[k]);
            }
        test_registered_all(c, rpns[k], old);
        test_buf_peer(c, rpns[k]);
    }
    so_comm_set_ranks_per_node(c, 0);
    for (int a = 0; a < SO_RS_COUNT; a++)
        test_reduce_scatter(c, a);
    for (int a = 0; a < SO_AG_COUNT; a++)
        test_allgather(c, a);
    for (int a = 0; a < SO_BCAST_COUNT; a++)
        test_bcast(c, a);
    test_tuning();

    int64_t tot[2] = {g_pass, g_fail};
    if (so_comm_allreduce_i64(c, tot, 2, SO_REDUCE_SUM))
        so_comm_abort(c, 1, so_errmsg());
    if (g_rank == 0)
        printf("test_coll np=%d%s: %lld checks passed, %lld failed\n", g_size, g_quick ? " (quick)" : "",
               (long long)tot[0], (long long)tot[1]);
    free(g_send);
    free(g_recv);
    so_comm_finalize(c);
    return tot[1] ? 1 : 0;
}
