/* MPI tests of libscaleout_comm's blocking side: allreduce ops and sizes, bcast,
 * counter reductions, node emulation and the configuration check.
 * Run as `mpiexec -n NP test_comm NP`. Not cmocka: a failed cmocka assert
 * leaves the test on one rank only and the others hang in the next collective,
 * so every rank runs every check, records failures and goes on; rank 0 prints
 * the totals over all ranks and every rank exits non-zero if anything failed. */
#include "scaleout/comm.h"
#include "scaleout/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi_check.h"


static void test_allreduce(so_comm *c)
{
    static const size_t counts[] = {0, 1, 7, 65537};
    static const char *names[] = {"sum", "avg", "max", "min"};
    float *send = malloc(65537 * sizeof *send), *recv = malloc(65537 * sizeof *recv);
    for (int k = 0; k < 4; k++)
        for (int op = SO_REDUCE_SUM; op <= SO_REDUCE_MIN; op++)
            for (int inplace = 0; inplace < 2; inplace++) {
                size_t n = counts[k], bad = 0;
                for (size_t i = 0; i < n; i++)
                    send[i] = recv[i] = input(g_rank, i, (so_reduce_op)op);
                int rc = so_comm_allreduce(c, inplace ? recv : send, recv, n, (so_reduce_op)op);
                CHECK_RC(rc);
                for (size_t i = 0; i < n; i++)
                    bad += recv[i] != expected(i, (so_reduce_op)op);
                CHECK(bad == 0, "allreduce %s count %zu %s: %zu wrong elements", names[op], n,
                      inplace ? "in-place" : "out-of-place", bad);
            }
    free(send);
    free(recv);
}

static void test_bcast(so_comm *c)
{
    int root = g_size - 1;
    float buf[1000];
    for (int i = 0; i < 1000; i++)
        buf[i] = (float)(g_rank * 1000 + i);
    CHECK_RC(so_comm_bcast(c, buf, 1000, root));
    int bad = 0;
    for (int i = 0; i < 1000; i++)
        bad += buf[i] != (float)(root * 1000 + i);
    CHECK(bad == 0, "bcast float from %d: %d wrong", root, bad);
    char text[32];
    snprintf(text, sizeof text, "hello from %d", g_rank);
    CHECK_RC(so_comm_bcast_bytes(c, text, sizeof text, 0));
    CHECK(strcmp(text, "hello from 0") == 0, "bcast bytes got '%s'", text);
    CHECK(so_comm_bcast(c, buf, 1, g_size) == SO_EINVAL, "bcast with root out of range accepted");
}

static void test_counters(so_comm *c)
{
    int64_t v[3] = {g_rank + 1, ((int64_t)1 << 40) + g_rank, g_rank};
    CHECK_RC(so_comm_allreduce_i64(c, v, 3, SO_REDUCE_SUM));
    int64_t s = g_size;
    CHECK(v[0] == s * (s + 1) / 2 && v[1] == s * ((int64_t)1 << 40) + s * (s - 1) / 2,
          "i64 sum %lld %lld", (long long)v[0], (long long)v[1]);
    int64_t m[2] = {g_rank, g_rank};
    CHECK_RC(so_comm_allreduce_i64(c, m, 1, SO_REDUCE_MAX));
    CHECK_RC(so_comm_allreduce_i64(c, m + 1, 1, SO_REDUCE_MIN));
    CHECK(m[0] == g_size - 1 && m[1] == 0, "i64 max/min %lld %lld", (long long)m[0], (long long)m[1]);
    CHECK(so_comm_allreduce_i64(c, m, 1, SO_REDUCE_AVG) == SO_EINVAL, "i64 avg accepted");
    double d[2] = {g_rank, 0.5 * g_rank};
    CHECK_RC(so_comm_allreduce_double(c, d, 2, SO_REDUCE_AVG));
    CHECK(d[0] == (g_size - 1) / 2.0 && d[1] == (g_size - 1) / 4.0, "double avg %g %g", d[0], d[1]);
    CHECK_RC(so_comm_barrier(c));
}

/* Checks the topology after so_comm_set_ranks_per_node(k). */
static void check_nodes(so_comm *c, int k)
{
    CHECK_RC(so_comm_set_ranks_per_node(c, k));
    so_comm_node t;
    so_comm_node_info(c, &t);
    int per = k ? k : g_size; /* one real machine in these tests */
    int node = g_rank / per, nodes = (g_size + per - 1) / per;
    int node_size = g_size - node * per < per ? g_size - node * per : per;
    CHECK(t.node_id == node && t.num_nodes == nodes && t.node_rank == g_rank % per &&
              t.node_size == node_size && t.ranks_per_node == k,
          "K=%d: node %d/%d rank %d size %d, want %d/%d %d %d", k, t.node_id, t.num_nodes,
          t.node_rank, t.node_size, node, nodes, g_rank % per, node_size);
}

static void test_nodes(so_comm *c)
{
    check_nodes(c, 2);
    check_nodes(c, 1);
    check_nodes(c, 3);
    check_nodes(c, 0);
    CHECK(so_comm_set_ranks_per_node(c, -1) == SO_EINVAL, "negative ranks per node accepted");
}

/* Runs the config check with `text` and expects rc, and every phrase in the message. */
static void expect_config(so_comm *c, const char *text, int want_rc, const char *const *phrases)
{
    char err[512];
    int rc = so_comm_check_config(c, text, err, sizeof err);
    CHECK(rc == want_rc, "config check returned %d (want %d): %s", rc, want_rc, err);
    for (; phrases && *phrases; phrases++)
        CHECK(strstr(err, *phrases) != NULL, "config message '%s' lacks '%s'", err, *phrases);
}

static void test_config(so_comm *c)
{
    const char *base = "model=lenet5\nbatch=64\noptimizer=sgd\nseed=1\n";
    char err[8] = "junk";
    CHECK_RC(so_comm_check_config(c, base, err, sizeof err));
    CHECK(err[0] == '\0', "errbuf not cleared on success");
    if (g_size < 2)
        return;
    char last[32];
    snprintf(last, sizeof last, "rank %d", g_size - 1);
    const char *batch_msg[] = {"batch=64 on rank 0", "batch=32", last, NULL};
    expect_config(c, g_rank == g_size - 1 ? "model=lenet5\nbatch=32\noptimizer=sgd\nseed=1\n" : base,
                  SO_EINVAL, batch_msg);
    /* Several ranks differ: the lowest one is named; a missing key is named too. */
    const char *seed_msg[] = {"seed=1 on rank 0", "no 'seed'", "rank 1", NULL};
    expect_config(c, g_rank >= 1 ? "model=lenet5\nbatch=64\noptimizer=sgd\n" : base, SO_EINVAL,
                  seed_msg);
    const char *extra_msg[] = {"no 'lr' on rank 0", "lr=0.1", NULL};
    expect_config(c, g_rank == 1 ? "model=lenet5\nbatch=64\noptimizer=sgd\nseed=1\nlr=0.1\n" : base,
                  SO_EINVAL, extra_msg);
    CHECK_RC(so_comm_check_config(c, base, err, sizeof err)); /* still in step afterwards */
}

static void test_algo_names(void)
{
    so_allreduce_algo a = SO_ALLREDUCE_COUNT;
    CHECK(so_allreduce_algo_parse("mpi", &a) == 0 && a == SO_ALLREDUCE_MPI, "parse mpi");
    CHECK(so_allreduce_algo_parse("ring-nope", &a) == SO_EINVAL, "unknown algorithm accepted");
    CHECK(strcmp(so_allreduce_algo_name(SO_ALLREDUCE_MPI), "mpi") == 0, "name of mpi");
    CHECK(so_allreduce_algo_name(SO_ALLREDUCE_COUNT) == NULL, "name of an invalid algorithm");
}

/* The partner exchange in two halves (receive posted a collective before the
 * send, as checkpoints do) delivers the same bytes as in one; a send larger
 * than the receive reserved room for is refused with a message. */
static void test_exchange_halves(so_comm *c)
{
    so_comm_p2p *p = NULL;
    CHECK(so_comm_p2p_create(c, &p) == 0, "p2p create: %s", so_errmsg());
    if (!p)
        return;
    enum { N = 300001 };
    unsigned char *out = malloc(N), *in = calloc(1, N);
    for (int i = 0; i < N; i++)
        out[i] = (unsigned char)(i * 7 + g_rank * 31);
    int dst = (g_rank + 1) % g_size, src = (g_rank + g_size - 1) % g_size;
    so_comm_xfer *x = NULL;
    CHECK(so_comm_exchange_recv(p, in, N, src, N, &x) == 0, "exchange_recv: %s", so_errmsg());
    int64_t v = 1; /* a collective in between: every receive is posted before any send */
    CHECK(so_comm_allreduce_i64(c, &v, 1, SO_REDUCE_SUM) == 0 && v == g_size, "allreduce between halves");
    CHECK(x && so_comm_exchange_send(p, x, out, (size_t)1 << 31, dst) == SO_EINVAL &&
              strstr(so_errmsg(), "room for"), "oversized send refused: %s", so_errmsg());
    CHECK(x && so_comm_exchange_send(p, x, out, N, dst) == 0, "exchange_send: %s", so_errmsg());
    int done = 0;
    CHECK(x && so_comm_exchange_test(p, x, 1, &done) == 0 && done, "exchange wait: %s", so_errmsg());
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += in[i] != (unsigned char)(i * 7 + src * 31);
    CHECK(bad == 0, "%d bytes differ from rank %d's", bad, src);
    free(out);
    free(in);
    so_comm_p2p_destroy(p);
}

/* A non-blocking agreement that times out names itself (it was always "checkpoint
 * progress agreement", also for the stop agreement of a run without
 * checkpoints): rank 1 joins 1.5 s late, rank 0 gives up after 0.5 s. */
static void test_isum_named(so_comm *c)
{
    if (g_size < 2)
        return;
    so_comm_p2p *p = NULL;
    CHECK(so_comm_p2p_create(c, &p) == 0, "p2p create: %s", so_errmsg());
    if (!p)
        return;
    so_comm_set_timeouts(c, 0, 0.5);
    int64_t v = 1;
    so_comm_isum *r = NULL;
    if (g_rank == 1)
        nanosleep(&(struct timespec){1, 500000000L}, NULL);
    CHECK(so_comm_isum_start(p, &v, 1, "test agreement", &r) == 0, "isum start: %s", so_errmsg());
    int rc = r ? so_comm_isum_wait(p, r) : -1;
    if (g_rank == 0)
        CHECK(rc == SO_ECOMM && strstr(so_errmsg(), "test agreement timed out"), "isum time-out names it: %d %s",
              rc, so_errmsg());
    so_comm_set_timeouts(c, 10, 60);
    int64_t sync = 1; /* progresses rank 0's abandoned request for rank 1 */
    CHECK(so_comm_allreduce_i64(c, &sync, 1, SO_REDUCE_SUM) == 0, "allreduce after the time-out");
    so_comm_p2p_destroy(p);
}

int main(int argc, char **argv)
{
    so_comm *c;
    int rc = so_comm_init(&argc, &argv, &c);
    if (rc)
        so_comm_abort(NULL, 1, so_errmsg());
    g_rank = so_comm_rank(c);
    g_size = so_comm_size(c);
    /* A launcher of the other MPI starts NP singletons of size 1: catch it. */
    int want = argc > 1 ? atoi(argv[1]) : g_size;
    CHECK(g_size == want, "MPI size %d, expected %d (mpiexec of another MPI?)", g_size, want);
    so_comm_set_timeouts(c, 10, 60);
    test_algo_names();
    test_allreduce(c);
    test_bcast(c);
    test_counters(c);
    test_nodes(c);
    test_config(c);
    test_exchange_halves(c);
    test_isum_named(c);
    int64_t t[2] = {g_pass, g_fail};
    if (so_comm_allreduce_i64(c, t, 2, SO_REDUCE_SUM))
        so_comm_abort(c, 1, so_errmsg());
    if (g_rank == 0)
        printf("test_comm np=%d: %lld passed, %lld failed (checks over all ranks)\n", g_size,
               (long long)t[0], (long long)t[1]);
    so_comm_finalize(c);
    return t[1] ? 1 : 0;
}
