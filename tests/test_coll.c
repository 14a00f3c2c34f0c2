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
    static const int rpns[] = {0, 1, 2, 3};
    for (size_t k = 0; k < sizeof rpns / sizeof *rpns; k++) {
        if (so_comm_set_ranks_per_node(c, rpns[k]))
            so_comm_abort(c, 1, so_errmsg());
        for (int a = 0; a < SO_ALLREDUCE_COUNT; a++)
            if (rpns[k] == 0 || a == SO_ALLREDUCE_HIER || a == SO_ALLREDUCE_AUTO) {
                test_allreduce(c, a, rpns[k]);
                test_identical_bits(c, a);
            }
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
