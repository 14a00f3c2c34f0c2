/* hier's zero copy measured the way training uses it: before every call each
 * rank rewrites its buffer (as backward writes its gradients), then one
 * in-place allreduce, then the rank reads the whole result (as the optimizer
 * does). `scaleout bench allreduce` leaves send untouched between calls, so
 * the peers' inputs stay cached there; here they never are. Three modes,
 * interleaved per iteration so load from other processes hits all alike:
 *   copy  hier AVG on plain memory (its copy path through the window)
 *   zc    hier AVG on registered memory (so_comm_buf_alloc: zero copy)
 *   mpi   with --mpi: MPI_Allreduce (SUM: MPI has no average) on plain
 *         memory. Opt-in: with Open MPI 4.1 here its 64 MiB call takes
 *         0.16-0.27 s and the zero-copy calls interleaved with it slowed
 *         from ~4.5 to 15-25 ms (not with MPICH, nor without it).
 * Prints per size the median over iterations of the slowest rank's
 * allreduce time and of the read after it (µs).
 *
 *   flock /tmp/scaleout-bench.lock scripts/mpirun.sh -np 2 build/tests/zc_loop [--mpi] [sizes...]
 * (sizes in bytes; default 262144 1048576 4194304 16777216 67108864) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/comm.h"
#include "scaleout/err.h"
#include "scaleout/timer.h"

enum { COPY_MODE, ZC_MODE, MPI_MODE, MODES };
static const char *const mode_names[MODES] = {"copy", "zc", "mpi"};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One iteration of one mode: write, allreduce (timed), read (timed); t[0..2)
 * = the slowest rank's seconds. */
static int step(so_comm *c, int mode, float *buf, float *scratch, size_t n, int it, double t[2])
{
    int rank = so_comm_rank(c);
    for (size_t i = 0; i < n; i++)
        buf[i] = (float)((i + (size_t)rank + (size_t)it) % 7);
    /* Start together: a one-float hier allreduce is one spinning flag barrier
     * (so_comm_barrier's watched wait sleeps, so ranks would leave it up to
     * ~200 us apart and the skew would be timed). */
    float sync = 0;
    int rc = so_comm_coll(c, SO_COLL_ALLREDUCE, SO_ALLREDUCE_HIER, &sync, &sync, 1, SO_REDUCE_SUM, 0);
    double t0 = so_now();
    if (!rc && mode == MPI_MODE)
        rc = so_comm_coll(c, SO_COLL_ALLREDUCE, SO_COLL_REFERENCE, buf, buf, n, SO_REDUCE_SUM, 0);
    else if (!rc)
        rc = so_comm_coll(c, SO_COLL_ALLREDUCE, SO_ALLREDUCE_HIER, buf, buf, n, SO_REDUCE_AVG, 0);
    double t1 = so_now();
    memcpy(scratch, buf, n * sizeof *buf);
    t[0] = t1 - t0;
    t[1] = so_now() - t1;
    return rc ? rc : so_comm_allreduce_double(c, t, 2, SO_REDUCE_MAX);
}

/* All modes at one size; prints one row on rank 0. */
static int run_size(so_comm *c, float *plain, float *reg, float *scratch, size_t bytes, int modes)
{
    size_t n = bytes / sizeof(float);
    int iters = bytes <= (4u << 20) ? 200 : 30, rc = 0;
    double *t = malloc((size_t)MODES * 2 * (size_t)iters * sizeof *t);
    if (!t)
        return so_err(SO_ENOMEM, "out of memory");
    for (int it = 0; it < iters && !rc; it++)
        for (int m = 0; m < modes && !rc; m++)
            rc = step(c, m, m == ZC_MODE ? reg : plain, scratch, n, it,
                      &t[(size_t)(m * 2) * (size_t)iters + 2 * (size_t)it]);
    if (!rc && so_comm_rank(c) == 0) {
        printf("%10zu", bytes);
        for (int m = 0; m < modes; m++) {
            double a[400], r[400];
            for (int it = 0; it < iters; it++) {
                a[it] = t[(size_t)(m * 2) * (size_t)iters + 2 * (size_t)it];
                r[it] = t[(size_t)(m * 2) * (size_t)iters + 2 * (size_t)it + 1];
            }
            qsort(a, (size_t)iters, sizeof *a, cmp_double);
            qsort(r, (size_t)iters, sizeof *r, cmp_double);
            printf("  %9.1f + %8.1f", a[iters / 2] * 1e6, r[iters / 2] * 1e6);
        }
        printf("\n");
        fflush(stdout);
    }
    free(t);
    return rc;
}

int main(int argc, char **argv)
{
    so_comm *c;
    if (so_comm_init(&argc, &argv, &c))
        so_comm_abort(NULL, 1, so_errmsg());
    int first = 1, modes = MPI_MODE;
    if (argc > 1 && !strcmp(argv[1], "--mpi")) {
        modes = MODES;
        first = 2;
    }
    size_t sizes[32] = {256u << 10, 1u << 20, 4u << 20, 16u << 20, 64u << 20}, nsizes = 5, maxb = 0;
    if (argc > first)
        for (nsizes = 0; nsizes < 32 && first + (int)nsizes < argc; nsizes++)
            sizes[nsizes] = strtoull(argv[first + (int)nsizes], NULL, 10) / 64 * 64;
    for (size_t i = 0; i < nsizes; i++)
        maxb = sizes[i] > maxb ? sizes[i] : maxb;
    float *plain = calloc(maxb / sizeof(float) + 1, sizeof(float));
    float *scratch = calloc(maxb / sizeof(float) + 1, sizeof(float)), *reg = NULL;
    if (!plain || !scratch || so_comm_buf_alloc(c, maxb + sizeof(float), (void **)&reg))
        so_comm_abort(c, 1, "out of memory");
    if (so_comm_rank(c) == 0)
        printf("# %d ranks; us, median over iterations of the slowest rank: allreduce + read of the result\n"
               "# %8s  %20s  %20s  %20s\n", so_comm_size(c), "bytes", mode_names[0], mode_names[1],
               modes == MODES ? mode_names[2] : "");
    int rc = 0;
    for (size_t i = 0; i < nsizes && !rc; i++)
        rc = run_size(c, plain, reg, scratch, sizes[i], modes);
    if (rc)
        so_comm_abort(c, 1, so_errmsg());
    so_comm_buf_free(c, reg);
    free(plain);
    free(scratch);
    so_comm_finalize(c);
    return 0;
}
