/* The piecewise alpha-beta model of src/comm/tune.c and the tuning table's
 * text (tune_text.c), without starting MPI: the fit recovers a known banded
 * model from its own times, predictions stay continuous and non-decreasing
 * across band edges, old (v1) and new (v2) tables load, and auto picks the
 * algorithm the model says is fastest. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "comm/tune_internal.h"
#include "scaleout/err.h"

#define NS 25 /* 4 B .. 64 MiB, doubling */
static const uint64_t k_edges[] = {16 << 10, 64 << 10, 256 << 10, 2 << 20, 32 << 20};

static void sweep(size_t *bytes)
{
    for (int i = 0; i < NS; i++)
        bytes[i] = (size_t)4 << i;
}

/* A ring model on p = 2 with bands at 64 KiB and 2 MiB: a latency band, a
 * cache-resident band and a memory band with 2x the per-byte cost. */
static so_comm_tuning truth(void)
{
    so_comm_tuning t;
    so_comm_tuning_default(&t);
    t.p = 2;
    t.gamma = 1e-10;
    so_comm_fit *f = &t.fit[SO_ALLREDUCE_RING];
    f->valid = 1;
    f->nbands = 3;
    f->band[0] = (so_comm_band){64 << 10, 1.5e-6, 1.0e-10};
    f->band[1] = (so_comm_band){2 << 20, 6.0e-6, 1.5e-10};
    f->band[2] = (so_comm_band){UINT64_MAX, 2.0e-6, 3.0e-10};
    return t;
}

static so_comm_fit fit_from(const so_comm_tuning *t, so_allreduce_algo algo, const double *noise)
{
    size_t bytes[NS];
    double secs[NS];
    sweep(bytes);
    for (int i = 0; i < NS; i++)
        secs[i] = so_comm_predict(algo, bytes[i], t->p, 0, t) * (noise ? 1 + noise[i] : 1);
    so_comm_fit f;
    assert_int_equal(so_comm_fit_bands(algo, t->p, 0, t->gamma, bytes, secs, NS, k_edges, 5, &f), 0);
    return f;
}

static void test_recovers_bands(void **state)
{
    (void)state;
    so_comm_tuning t = truth(), u = t;
    const so_comm_fit *want = &t.fit[SO_ALLREDUCE_RING];
    so_comm_fit got = fit_from(&t, SO_ALLREDUCE_RING, NULL);
    assert_int_equal(got.nbands, 3);
    for (int k = 0; k < 3; k++) {
        assert_true(got.band[k].max_bytes == want->band[k].max_bytes);
        assert_true(fabs(got.band[k].alpha / want->band[k].alpha - 1) < 0.01);
        assert_true(fabs(got.band[k].beta / want->band[k].beta - 1) < 0.01);
    }
    /* Predictions within 1 % everywhere, also between the measured sizes. */
    u.fit[SO_ALLREDUCE_RING] = got;
    for (double n = 4; n < 256e6; n *= 1.09) {
        double a = so_comm_predict(SO_ALLREDUCE_RING, (size_t)n, 2, 0, &t);
        double b = so_comm_predict(SO_ALLREDUCE_RING, (size_t)n, 2, 0, &u);
        assert_true(fabs(b / a - 1) < 0.01);
    }
}

/* +-6 % deterministic jitter: the same edges, every size within 25 %, and no
 * needless bands on data that is one straight line. */
static void test_noise_and_parsimony(void **state)
{
    (void)state;
    double noise[NS];
    for (int i = 0; i < NS; i++)
        noise[i] = 0.06 * sin(1.7 * i + 0.3);
    so_comm_tuning t = truth();
    so_comm_fit got = fit_from(&t, SO_ALLREDUCE_RING, noise);
    assert_int_equal(got.nbands, 3);
    assert_true(got.band[0].max_bytes == 64 << 10 && got.band[1].max_bytes == 2 << 20);
    so_comm_tuning u = t;
    u.fit[SO_ALLREDUCE_RING] = got;
    size_t bytes[NS];
    sweep(bytes);
    for (int i = 0; i < NS; i++) {
        double m = so_comm_predict(SO_ALLREDUCE_RING, bytes[i], 2, 0, &t) * (1 + noise[i]);
        assert_true(fabs(so_comm_predict(SO_ALLREDUCE_RING, bytes[i], 2, 0, &u) / m - 1) < 0.25);
    }
    so_comm_tuning line = t;
    line.fit[SO_ALLREDUCE_RD] = (so_comm_fit){.alpha = 1e-6, .beta = 2e-10, .valid = 1};
    so_comm_fit one = fit_from(&line, SO_ALLREDUCE_RD, noise);
    assert_int_equal(one.nbands, 0);
    assert_true(fabs(one.alpha / 1e-6 - 1) < 0.1 && fabs(one.beta / 2e-10 - 1) < 0.1);
}

/* Times that fall across an edge (a faster path above 64 KiB) and a band that
 * would want a negative slope: alpha >= 0, beta > 0 per band, and the
 * prediction is continuous and never decreases with size. */
static void test_physical_and_monotone(void **state)
{
    (void)state;
    size_t bytes[NS];
    double secs[NS];
    sweep(bytes);
    for (int i = 0; i < NS; i++) {
        double n = (double)bytes[i];
        secs[i] = n <= 64 << 10 ? 3e-6 + n * 6e-10 : n * 1.2e-10;
        if (n <= 1024)
            secs[i] = 4e-6 - n * 1e-10; /* noise shaped like a negative slope */
    }
    so_comm_tuning t;
    so_comm_tuning_default(&t);
    t.p = 4;
    t.gamma = 5e-11;
    so_comm_fit *f = &t.fit[SO_ALLREDUCE_RABENSEIFNER];
    assert_int_equal(so_comm_fit_bands(SO_ALLREDUCE_RABENSEIFNER, 4, 0, t.gamma, bytes, secs, NS, k_edges, 5, f), 0);
    assert_true(f->nbands >= 2);
    for (int k = 0; k < f->nbands; k++)
        assert_true(f->band[k].alpha >= 0 && f->band[k].beta > 0);
    double prev = 0;
    for (double n = 1; n < 512e6; n *= 1.01) {
        double y = so_comm_predict(SO_ALLREDUCE_RABENSEIFNER, (size_t)n, 4, 0, &t);
        assert_true(y >= prev * (1 - 1e-12));
        /* continuous: a 1 % bigger message never costs more than ~1 % + the slope */
        assert_true(prev == 0 || y <= prev * 1.02 + 1e-9);
        prev = y;
    }
}

static void test_round_trip_v2(void **state)
{
    (void)state;
    so_comm_tuning t = truth(), u;
    t.fit[SO_ALLREDUCE_HIER] = (so_comm_fit){.alpha = 4e-7, .beta = 9e-11, .valid = 1};
    t.nrules = 2;
    t.rule[0].max_bytes = 65536;
    t.rule[0].algo = SO_ALLREDUCE_HIER;
    t.rule[1].max_bytes = UINT64_MAX;
    t.rule[1].algo = SO_ALLREDUCE_RING;
    t.registered = 1;
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_tune_%d.tune", (int)getpid());
    assert_int_equal(so_comm_tuning_save(&t, path), 0);
    assert_int_equal(so_comm_tuning_load(path, &u), 0);
    remove(path);
    assert_int_equal(u.version, 2);
    assert_int_equal(u.registered, 1);
    assert_int_equal(u.nrules, 2);
    assert_int_equal(u.fit[SO_ALLREDUCE_RING].nbands, 3);
    assert_int_equal(u.fit[SO_ALLREDUCE_HIER].nbands, 0);
    for (int k = 0; k < 3; k++)
        assert_true(u.fit[SO_ALLREDUCE_RING].band[k].max_bytes == t.fit[SO_ALLREDUCE_RING].band[k].max_bytes &&
                    fabs(u.fit[SO_ALLREDUCE_RING].band[k].beta / t.fit[SO_ALLREDUCE_RING].band[k].beta - 1) < 1e-8);
    for (size_t n = 4; n < (size_t)1 << 28; n = n * 3 / 2)
        assert_true(fabs(so_comm_predict(SO_ALLREDUCE_RING, n, 2, 0, &u) /
                             so_comm_predict(SO_ALLREDUCE_RING, n, 2, 0, &t) - 1) < 1e-8);
}

/* tune --levels: the node and link levels' fits survive save and load, and
 * stay apart from the job's fits. */
static void test_round_trip_levels(void **state)
{
    (void)state;
    so_comm_tuning t = truth(), u;
    t.level[SO_LEVEL_NODE] = (so_comm_level){.valid = 1, .p = 4};
    t.level[SO_LEVEL_NODE].fit[SO_ALLREDUCE_HIER] = (so_comm_fit){.alpha = 3e-7, .beta = 8e-11, .valid = 1};
    t.level[SO_LEVEL_LINK] = (so_comm_level){.valid = 1, .p = 8};
    t.level[SO_LEVEL_LINK].fit[SO_ALLREDUCE_RING] = t.fit[SO_ALLREDUCE_RING]; /* with bands */
    t.level[SO_LEVEL_LINK].fit[SO_ALLREDUCE_RING].alpha = 5e-5;
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_tune_lv_%d.tune", (int)getpid());
    assert_int_equal(so_comm_tuning_save(&t, path), 0);
    assert_int_equal(so_comm_tuning_load(path, &u), 0);
    remove(path);
    assert_int_equal(u.version, 3);
    assert_true(u.level[SO_LEVEL_NODE].valid && u.level[SO_LEVEL_NODE].p == 4);
    assert_true(u.level[SO_LEVEL_LINK].valid && u.level[SO_LEVEL_LINK].p == 8);
    assert_true(u.level[SO_LEVEL_NODE].fit[SO_ALLREDUCE_HIER].valid);
    assert_false(u.level[SO_LEVEL_NODE].fit[SO_ALLREDUCE_RING].valid);
    assert_true(fabs(u.level[SO_LEVEL_NODE].fit[SO_ALLREDUCE_HIER].beta / 8e-11 - 1) < 1e-8);
    const so_comm_fit *a = &t.level[SO_LEVEL_LINK].fit[SO_ALLREDUCE_RING], *b = &u.level[SO_LEVEL_LINK].fit[SO_ALLREDUCE_RING];
    assert_int_equal(b->nbands, a->nbands);
    assert_true(fabs(b->alpha / 5e-5 - 1) < 1e-8);
    for (int k = 0; k < a->nbands; k++)
        assert_true(fabs(b->band[k].beta / a->band[k].beta - 1) < 1e-8);
    assert_true(fabs(u.fit[SO_ALLREDUCE_RING].alpha / t.fit[SO_ALLREDUCE_RING].alpha - 1) < 1e-8); /* the job's own */
}

/* A table exactly as scaleout wrote it before bands existed. */
static const char k_v1[] = "scaleout-tuning v1 p=2 ranks_per_node=0 gamma=1.354000e-10\n"
                           "# fit ALGO alpha=SECONDS beta=SECONDS_PER_BYTE   (model: docs/COLLECTIVES.md)\n"
                           "fit mpi alpha=9.390000e-07 beta=5.158600e-10\n"
                           "fit ring alpha=6.260000e-07 beta=1.276300e-10\n"
                           "fit hier alpha=1.090000e-07 beta=5.406000e-11\n"
                           "# MAX_BYTES ALGO: the first line with message bytes <= MAX_BYTES wins; * = no limit\n"
                           "8192 hier\n"
                           "16384 rd\n"
                           "* hier\n";

static void test_old_table(void **state)
{
    (void)state;
    so_comm_tuning t;
    assert_int_equal(so_comm_tuning_parse(k_v1, strlen(k_v1), "v1", &t), 0);
    assert_int_equal(t.version, 1);
    assert_int_equal(t.registered, 0); /* no memory= key: measured before registered buffers existed */
    assert_int_equal(t.nrules, 3);
    assert_int_equal(t.fit[SO_ALLREDUCE_RING].nbands, 0);
    /* one line: ring on 2 ranks, a = 2, b = 1, g = 1/2 */
    double want = 2 * 6.26e-7 + 1e6 * (1.2763e-10 + 0.5 * 1.354e-10);
    assert_true(fabs(so_comm_predict(SO_ALLREDUCE_RING, 1000000, 2, 0, &t) / want - 1) < 1e-9);
    assert_int_equal(so_comm_select(8192, 2, 0, &t), SO_ALLREDUCE_HIER);
    assert_int_equal(so_comm_select(8193, 2, 0, &t), SO_ALLREDUCE_RD);
    assert_int_equal(so_comm_select(1 << 20, 2, 0, &t), SO_ALLREDUCE_HIER);
}

/* memory= says which buffers the table was measured on; CRLF files too. */
static void test_memory_key(void **state)
{
    (void)state;
    static const char reg[] = "scaleout-tuning v1 p=2 ranks_per_node=0 gamma=1e-10 memory=registered\r\n* hier\r\n";
    static const char plain[] = "scaleout-tuning v1 p=2 ranks_per_node=0 gamma=1e-10 memory=plain\n* ring\n";
    so_comm_tuning t;
    assert_int_equal(so_comm_tuning_parse(reg, strlen(reg), "reg", &t), 0);
    assert_int_equal(t.registered, 1);
    assert_int_equal(so_comm_tuning_parse(plain, strlen(plain), "plain", &t), 0);
    assert_int_equal(t.registered, 0);
}

static void test_bad_tables(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "scaleout-tuning v1 p=2 ranks_per_node=0 gamma=1e-10\nband ring max_bytes=* alpha=1e-6 beta=1e-10\n",
        "scaleout-tuning v2 p=2 ranks_per_node=0 gamma=1e-10\nband ring max_bytes=100 alpha=1e-6 beta=1e-10\n",
        "scaleout-tuning v2 p=2 ranks_per_node=0 gamma=1e-10\nband ring max_bytes=100 alpha=1e-6 beta=0\n",
        "scaleout-tuning v2 p=2 ranks_per_node=0 gamma=1e-10\nband ring max_bytes=100 alpha=-1 beta=1e-10\n",
        "scaleout-tuning v2 p=2 ranks_per_node=0 gamma=1e-10\nband ring max_bytes=9 alpha=0 beta=1e-10\n"
        "band ring max_bytes=9 alpha=0 beta=1e-10\n",
        "scaleout-tuning v2 p=2 ranks_per_node=0 gamma=1e-10\nband auto max_bytes=* alpha=0 beta=1e-10\n",
        "scaleout-tuning v2 p=2 ranks_per_node=0 gamma=1e-10\nband ring max_bytes=x alpha=0 beta=1e-10\n",
        "scaleout-tuning v2 p=2 ranks_per_node=0 gamma=1e-10\nfit ring alpha=nan beta=1e-10\n",
        "scaleout-tuning v4 p=2 ranks_per_node=0 gamma=1e-10\n",
        "scaleout-tuning v2 p=2 ranks_per_node=0 gamma=1e-10\nlevel node p=2\n",
        "scaleout-tuning v3 p=2 ranks_per_node=0 gamma=1e-10\nnode fit ring alpha=1e-6 beta=1e-10\n",
        "scaleout-tuning v3 p=2 ranks_per_node=0 gamma=1e-10\nlevel disk p=2\n",
        "scaleout-tuning v3 p=2 ranks_per_node=0 gamma=1e-10\nlevel node p=0\n",
        "scaleout-tuning v3 p=2 ranks_per_node=0 gamma=1e-10\nlevel link p=2\nlink 100 ring\n",
        "scaleout-tuning v3 p=2 ranks_per_node=0 gamma=1e-10\nlevel link p=2\nlink band ring max_bytes=9 alpha=0 "
        "beta=1e-10\n",
        "scaleout-tuning v2 p=2 ranks_per_node=0 gamma=1e-10\n100 ring\n50 rd\n",
        "scaleout-tuning v2 p=2 ranks_per_node=0 gamma=1e-10 memory=pinned\n",
        "scaleout-tuning v2 p=2 ranks_per_node=0 gamma=1e-10 memory=\n",
    };
    so_comm_tuning t;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(so_comm_tuning_parse(bad[i], strlen(bad[i]), "bad", &t), SO_EFORMAT);
}

/* Without rules (or with a table for another p) auto is the argmin of the
 * banded predictions, and predict(auto) is the prediction of that pick. */
static void test_auto_picks_fastest(void **state)
{
    (void)state;
    so_comm_tuning t = truth();
    so_comm_fit *h = &t.fit[SO_ALLREDUCE_HIER];
    h->valid = 1;
    h->nbands = 2; /* cheapest while cache-resident, then worse than ring */
    h->band[0] = (so_comm_band){1 << 20, 2e-7, 0.8e-10};
    h->band[1] = (so_comm_band){UINT64_MAX, 2e-7, 5e-10};
    int seen[SO_ALLREDUCE_AUTO] = {0};
    for (size_t n = 4; n < (size_t)1 << 27; n = n * 5 / 4 + 1) {
        so_allreduce_algo best = SO_ALLREDUCE_MPI;
        for (int a = 0; a < SO_ALLREDUCE_AUTO; a++)
            if (so_comm_predict((so_allreduce_algo)a, n, 2, 0, &t) < so_comm_predict(best, n, 2, 0, &t))
                best = (so_allreduce_algo)a;
        assert_int_equal(so_comm_select(n, 2, 0, &t), best);
        assert_true(so_comm_predict(SO_ALLREDUCE_AUTO, n, 2, 0, &t) == so_comm_predict(best, n, 2, 0, &t));
        seen[best] = 1;
    }
    assert_true(seen[SO_ALLREDUCE_HIER] && seen[SO_ALLREDUCE_RING]);
    /* Rules win when the layout matches, and are ignored for another p. */
    t.nrules = 1;
    t.rule[0].max_bytes = UINT64_MAX;
    t.rule[0].algo = SO_ALLREDUCE_TREE;
    assert_int_equal(so_comm_select(1 << 26, 2, 0, &t), SO_ALLREDUCE_TREE);
    assert_int_not_equal(so_comm_select(1 << 26, 3, 0, &t), SO_ALLREDUCE_TREE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recovers_bands),     cmocka_unit_test(test_noise_and_parsimony),
        cmocka_unit_test(test_physical_and_monotone), cmocka_unit_test(test_round_trip_v2), cmocka_unit_test(test_round_trip_levels),
        cmocka_unit_test(test_old_table),          cmocka_unit_test(test_bad_tables), cmocka_unit_test(test_memory_key),
        cmocka_unit_test(test_auto_picks_fastest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
