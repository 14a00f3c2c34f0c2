/* MPI tests of the async engine. `test_comm_async NP` checks that buckets
 * submitted from a loop give the same bits as blocking allreduces, waited for
 * all at once or one by one, plus the stats. `test_comm_async NP watchdog` and `... kill` are failure drills driven
 * by tests/comm_expect_fail.sh: rank 1 skips a bucket / dies, and the job must
 * end non-zero with a message naming the stuck collective or the lost rank. */
#include "scaleout/comm.h"
#include "scaleout/comm_async.h"
#include "scaleout/err.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NBUCKETS 50

#include "mpi_check.h"

/* Bucket i's size: varied, with an empty one and one over 64 Ki. */
static size_t bucket_count(int i)
{
    return i == 20 ? 0 : i == 10 ? 65537 : (size_t)((i * 7919) % 5000 + 1);
}

/* Fills bucket i with rank-dependent small integers (exact sums). */
static void fill(float *b, size_t n, int i, int round)
{
    for (size_t k = 0; k < n; k++)
        b[k] = (float)((g_rank + 1) * (int)((k + (size_t)i + (size_t)round) % 17) - 8);
}

/* One round: reference by blocking allreduce, then the same buckets through the engine. */
static void run_round(so_comm *c, so_async *a, float **buf, float **ref, int round)
{
    for (int i = 0; i < NBUCKETS; i++) {
        fill(buf[i], bucket_count(i), i, round);
        fill(ref[i], bucket_count(i), i, round);
        CHECK_RC(so_comm_allreduce(c, ref[i], ref[i], bucket_count(i), (so_reduce_op)(i % 4)));
    }
    for (int i = 0; i < NBUCKETS; i++)
        CHECK_RC(so_async_submit(a, buf[i], bucket_count(i), (so_reduce_op)(i % 4), i));
    if (round == 1) /* the first half one by one (the middle one first), the rest in flight */
        for (int i = NBUCKETS / 2; i >= 0; i--) {
            double w = -1;
            CHECK_RC(so_async_wait_one(a, (size_t)i, &w));
            CHECK(w >= 0 && !memcmp(buf[i], ref[i], bucket_count(i) * sizeof(float)),
                  "wait_one %d: waited %g, or its bucket differs from blocking allreduce", i, w);
        }
    CHECK(round != 1 || so_async_wait_one(a, NBUCKETS, NULL) == SO_EINVAL, "wait_one past the round accepted");
    double waited = -1;
    CHECK_RC(so_async_wait_all(a, 60, &waited));
    CHECK(so_async_wait_one(a, 0, NULL) == SO_EINVAL, "wait_one after the round ended accepted");
    CHECK(waited >= 0, "waited %g", waited);
    int bad = 0;
    for (int i = 0; i < NBUCKETS; i++)
        bad += memcmp(buf[i], ref[i], bucket_count(i) * sizeof(float)) != 0;
    CHECK(bad == 0, "round %d: %d of %d buckets differ from blocking allreduce", round, bad, NBUCKETS);
}

/* The round's stats: submission order, consecutive seq, sane times and sizes. */
static void check_stats(so_async *a, int round)
{
    const so_async_stat *s;
    size_t n;
    so_async_stats(a, &s, &n);
    CHECK(n == NBUCKETS, "stats has %zu entries", n);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad += s[i].tag != (int)i || s[i].seq != (uint64_t)(round * NBUCKETS) + i;
        bad += s[i].count != bucket_count((int)i) || s[i].bytes != s[i].count * sizeof(float);
        bad += !(s[i].t_queued <= s[i].t_started && s[i].t_started <= s[i].t_finished);
        bad += i > 0 && s[i].t_started < s[i - 1].t_finished; /* one at a time, in order */
    }
    CHECK(bad == 0, "round %d: %d bad stat fields", round, bad);
}

static void test_engine(so_comm *c)
{
    float *buf[NBUCKETS], *ref[NBUCKETS];
    for (int i = 0; i < NBUCKETS; i++) {
        buf[i] = malloc((bucket_count(i) + 1) * sizeof(float));
        ref[i] = malloc((bucket_count(i) + 1) * sizeof(float));
    }
    so_async *a;
    CHECK_RC(so_async_create(c, SO_ALLREDUCE_MPI, &a));
    for (int round = 0; round < 3; round++) {
        run_round(c, a, buf, ref, round);
        check_stats(a, round);
    }
    so_async_totals t;
    so_async_get_totals(a, &t);
    CHECK(t.requests == 3 * NBUCKETS, "totals: %llu requests", (unsigned long long)t.requests);
    double w = -1;
    CHECK_RC(so_async_wait_all(a, 1, &w)); /* nothing outstanding: returns at once */
    CHECK(so_async_submit(a, buf[0], 1, (so_reduce_op)9, 0) == SO_EINVAL, "bad op accepted");
    so_async_destroy(a);
    so_async_destroy(NULL);
    for (int i = 0; i < NBUCKETS; i++) {
        free(buf[i]);
        free(ref[i]);
    }
}

/* Rank 0's handshake directory for test_busy_guard: made in the working
 * directory (shared by the ranks of a multi-node job on a cluster file
 * system), else in $TMPDIR or /tmp; "" if neither works. */
static void make_handshake_dir(char *dir, size_t len)
{
    char cwd[200];
    const char *tmp = getenv("TMPDIR");
    const char *bases[] = {getcwd(cwd, sizeof cwd), tmp && *tmp ? tmp : "/tmp", "/tmp"};
    for (int i = 0; i < 3; i++) {
        if (!bases[i])
            continue;
        snprintf(dir, len, "%s/so_busy_guard_XXXXXX", bases[i]);
        if (mkdtemp(dir))
            return;
    }
    dir[0] = '\0';
}

/* While the engine owns MPI, a main-thread collective must be refused, not
 * race it. The other ranks submit, and their request stays outstanding until
 * rank 0 submits too; so rank 0 submits only once every other rank has made
 * its check (a local one, no MPI call). They cannot tell it through MPI (a
 * rank whose engine is busy may not call it: that is what is tested), so
 * each creates a file in a directory rank 0 made, which rank 0 polls for
 * (20 s at most). Before this a 0.3 s sleep of rank 0 ordered them, which a
 * rank descheduled on a loaded node could overrun. */
static void test_busy_guard(so_comm *c)
{
    if (g_size < 2)
        return;
    char dir[256] = "", path[300];
    if (g_rank == 0)
        make_handshake_dir(dir, sizeof dir);
    CHECK_RC(so_comm_bcast_bytes(c, dir, sizeof dir, 0));
    struct stat st;
    int64_t seen = dir[0] && stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
    CHECK_RC(so_comm_allreduce_i64(c, &seen, 1, SO_REDUCE_SUM));
    if (seen != g_size) {
        if (g_rank == 0) {
            printf("test_busy_guard skipped: the ranks share no directory for the handshake (%s)\n",
                   dir[0] ? dir : "mkdtemp failed in the working directory, $TMPDIR and /tmp");
            if (dir[0])
                rmdir(dir);
        }
        return;
    }
    so_async *a;
    if (so_async_create(c, SO_ALLREDUCE_MPI, &a))
        so_comm_abort(c, 1, so_errmsg());
    float x[4] = {1, 1, 1, 1};
    if (g_rank != 0) {
        CHECK_RC(so_async_submit(a, x, 4, SO_REDUCE_SUM, 0));
        CHECK(so_comm_barrier(c) == SO_EINVAL, "main-thread barrier accepted while the engine is busy");
        snprintf(path, sizeof path, "%s/checked.%d", dir, g_rank);
        FILE *f = fopen(path, "w");
        CHECK(f != NULL, "cannot create %s", path);
        if (f)
            fclose(f);
    } else {
        int n = 0;
        double waited = 0;
        for (; n < g_size - 1 && waited < 20; waited += 1e-3) {
            n = 0;
            for (int r = 1; r < g_size; r++) {
                snprintf(path, sizeof path, "%s/checked.%d", dir, r);
                n += access(path, F_OK) == 0;
            }
            if (n < g_size - 1)
                nanosleep(&(struct timespec){0, 1000000L}, NULL);
        }
        CHECK(n == g_size - 1, "only %d of %d ranks made their check within 20 s", n, g_size - 1);
        CHECK_RC(so_async_submit(a, x, 4, SO_REDUCE_SUM, 0));
    }
    CHECK_RC(so_async_wait_all(a, 30, NULL));
    CHECK(x[0] == (float)g_size && x[3] == (float)g_size, "busy-guard allreduce gave %g", x[0]);
    CHECK_RC(so_comm_barrier(c)); /* allowed again once wait_all returned */
    so_async_destroy(a);
    if (g_rank == 0) {
        for (int r = 1; r < g_size; r++) {
            snprintf(path, sizeof path, "%s/checked.%d", dir, r);
            unlink(path);
        }
        rmdir(dir);
    }
}

/* Submits `nb` buckets of 1000 floats (skipping `skip`), then waits. */
static void drill_round(so_async *a, float *bufs, int nb, int skip)
{
    for (int i = 0; i < nb; i++)
        if (i != skip && so_async_submit(a, bufs + (size_t)i * 1000, 1000, SO_REDUCE_SUM, i))
            fprintf(stderr, "[rank %d] submit failed: %s\n", g_rank, so_errmsg());
    if (so_async_wait_all(a, 0, NULL))
        fprintf(stderr, "[rank %d] wait_all failed: %s\n", g_rank, so_errmsg());
}

/* Failure drills. watchdog: rank 1 of c skips the last bucket of round 2 and
 * hangs, the others' engines must abort after the 3 s timeout. kill: rank 1 dies
 * by SIGKILL at round 2. Returns only if the job was NOT ended (a test failure). */
static int drill(so_comm *c, int kill_mode)
{
    int me = so_comm_rank(c);
    so_comm_set_timeouts(c, 1.0, kill_mode ? 5.0 : 3.0);
    float *bufs = calloc(8 * 1000, sizeof *bufs);
    so_async *a;
    if (so_async_create(c, SO_ALLREDUCE_MPI, &a))
        so_comm_abort(c, 1, so_errmsg());
    for (int round = 0; round < 4; round++) {
        int victim = me == 1 && round == 2;
        if (victim && kill_mode) {
            fprintf(stderr, "[rank %d] drill: raising SIGKILL\n", g_rank);
            raise(SIGKILL);
        }
        drill_round(a, bufs, 8, victim ? 7 : -1);
        if (victim) {
            fprintf(stderr, "[rank %d] drill: skipped bucket 7, now hanging\n", g_rank);
            sleep(120);
        }
    }
    fprintf(stderr, "[rank %d] drill: the job survived rank 1's failure\n", g_rank);
    so_async_destroy(a);
    free(bufs);
    return 1;
}

int main(int argc, char **argv)
{
    so_comm *c;
    if (so_comm_init(&argc, &argv, &c))
        so_comm_abort(NULL, 1, so_errmsg());
    g_rank = so_comm_rank(c);
    g_size = so_comm_size(c);
    int want = argc > 1 ? atoi(argv[1]) : g_size;
    const char *mode = argc > 2 ? argv[2] : "";
    CHECK(g_size == want, "MPI size %d, expected %d (mpiexec of another MPI?)", g_size, want);
    if (strcmp(mode, "watchdog") == 0 || strcmp(mode, "kill") == 0) {
        int rc = g_size >= 2 ? drill(c, mode[0] == 'k') : 1;
        so_comm_finalize(c);
        return rc;
    }
    if (strcmp(mode, "watchdog_group") == 0) {
        /* The drill in a group of world ranks 2 and 3 (group ranks 0 and 1):
         * the time-out must name world rank 3, what mpirun shows, not 1. */
        so_comm *g = NULL;
        if (g_size < 4 || so_comm_split(c, g_rank >= 2 ? 1 : SO_COMM_UNDEFINED, g_rank, &g))
            so_comm_abort(c, 1, "watchdog_group needs 4 ranks and a split");
        if (g)
            drill(g, 0);
        else
            sleep(120); /* ended by the group's abort */
        return 1;
    }
    so_comm_set_timeouts(c, 10, 60);
    test_engine(c);
    test_busy_guard(c);
    int64_t t[2] = {g_pass, g_fail};
    if (so_comm_allreduce_i64(c, t, 2, SO_REDUCE_SUM))
        so_comm_abort(c, 1, so_errmsg());
    if (g_rank == 0)
        printf("test_comm_async np=%d: %lld passed, %lld failed (checks over all ranks)\n", g_size,
               (long long)t[0], (long long)t[1]);
    so_comm_finalize(c);
    return t[1] ? 1 : 0;
}
