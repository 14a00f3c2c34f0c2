/* train_lenet5: data-parallel training of LeNet-5 on Fashion-MNIST with the
 * scaleout library, through its public headers only.
 *
 *   mpirun -np 2 ./train_lenet5                    # one epoch of Fashion-MNIST
 *   mpirun -np 2 ./train_lenet5 --steps 200        # 200 optimizer steps
 *   ./train_lenet5 --dataset synthetic --steps 20  # one process, no data files needed
 *
 * A training run is one so_job: so_job_create starts MPI when the program was
 * launched by mpirun/mpiexec or srun (and runs as a single process
 * otherwise), loads the data set, gives each rank its shard, and builds the
 * model and optimizer. so_job_train runs the data-parallel loop (gradients
 * summed over ranks with an allreduce that overlaps backward), and
 * so_job_free shuts everything down, MPI included. The three are collective:
 * every rank calls them, in the same order.
 *
 * The library never prints and never exits: every call returns 0 or a
 * negative SO_E* code, with a one-line explanation in so_errmsg(). What is
 * printed here is this program's choice, and only rank 0 prints.
 *
 * Build against an installed scaleout: see examples/README.md. */
#define _POSIX_C_SOURCE 200809L /* access() under -std=c11 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scaleout/err.h"
#include "scaleout/job.h" /* so_job_*; includes scaleout/train.h (so_train_result, so_progress) */

/* Prints a progress line every this many steps (and at the end of each epoch). */
#define PRINT_EVERY 50

static void usage(FILE *f)
{
    fprintf(f,
            "usage: train_lenet5 [--steps N] [--epochs N] [--batch N] [--threads N]\n"
            "                    [--dataset fashion-mnist|synthetic] [--data-dir DIR]\n"
            "Trains LeNet-5 data-parallel (launch with mpirun -np P). --steps overrides --epochs.\n"
            "Falls back to the synthetic data set when DIR has no Fashion-MNIST files.\n");
}

/* "--flag VALUE" as a long in [lo, hi]; 0 or -1 (message printed). */
static int parse_long(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "train_lenet5: %s wants an integer in [%ld, %ld], not '%s'\n", flag, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* Fills c from argv on top of so_job_defaults' values. 0, 1 for --help, -1 on a bad flag. */
static int parse_args(int argc, char **argv, so_job_config *c)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return 1;
        if (i + 1 >= argc) {
            fprintf(stderr, "train_lenet5: unknown flag or missing value: %s\n", a);
            return -1;
        }
        const char *v = argv[++i];
        long n = 0;
        if (!strcmp(a, "--dataset"))
            c->dataset = v;
        else if (!strcmp(a, "--data-dir"))
            c->data_dir = v;
        else if (!strcmp(a, "--steps")) {
            if (parse_long(a, v, 1, LONG_MAX, &n))
                return -1;
            c->steps = n;
        } else if (!strcmp(a, "--epochs")) {
            if (parse_long(a, v, 1, 100000, &n))
                return -1;
            c->epochs = (int)n;
        } else if (!strcmp(a, "--batch")) {
            if (parse_long(a, v, 1, 1 << 20, &n))
                return -1;
            c->batch = (int)n;
        } else if (!strcmp(a, "--threads")) {
            if (parse_long(a, v, 1, 1024, &n))
                return -1;
            c->threads = (int)n;
        } else {
            fprintf(stderr, "train_lenet5: unknown flag %s\n", a);
            return -1;
        }
    }
    return 0;
}

/* Whether dir holds the Fashion-MNIST training images (plain or gzipped).
 * Every rank asks its own file system: on a cluster, dir must be a path
 * every node sees, or the ranks would pick different data sets. */
static int have_fashion_mnist(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    if (access(path, R_OK) == 0)
        return 1;
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
    return access(path, R_OK) == 0;
}

/* Progress callback: so_job_train calls it on every rank after each step,
 * and once more at the end of each epoch (p->done set, after evaluation). */
static void on_progress(void *arg, const so_progress *p)
{
    const so_job *job = arg;
    if (so_job_rank(job) != 0)
        return;
    if (p->done) {
        printf("epoch %d/%d: loss %.4f, %.0f images/s", p->epoch + 1, p->epochs, p->done->loss,
               p->done->images_per_sec);
        if (p->done->test_accuracy >= 0)
            printf(", test accuracy %.2f%%", 100.0 * p->done->test_accuracy);
        printf("\n");
    } else if (p->step % PRINT_EVERY == 0) {
        printf("epoch %d step %ld/%ld: loss %.4f, %.0f images/s\n", p->epoch + 1, p->step, p->steps, p->loss,
               p->images_per_sec);
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    /* Start from the library's defaults: LeNet-5, Fashion-MNIST from
     * /usr/share/datasets/fashion-mnist, batch 64 per rank, momentum SGD
     * with lr 0.01, one epoch. Then the flags. */
    so_job_config c;
    so_job_defaults(&c);
    c.model = "lenet5";
    int prc = parse_args(argc, argv, &c);
    if (prc) {
        usage(prc > 0 ? stdout : stderr);
        return prc > 0 ? 0 : 2;
    }
    int fell_back = 0;
    if (!strcmp(c.dataset, "fashion-mnist") && !have_fashion_mnist(c.data_dir)) {
        c.dataset = "synthetic"; /* random images and labels, no test set: the same work per step */
        fell_back = 1;
    }

    /* SIGTERM (Slurm's scancel and time limit, mpirun passing it on) stops
     * every rank after the same step; before the job exists (set-up) it ends
     * the process at once. First, before any thread exists: the library
     * blocks the signal in them all and takes it on a thread of its own
     * (never install a handler: see so_job_watch_signals in job.h). */
    const int stop_signals[] = {SIGTERM};
    if (so_job_watch_signals(stop_signals, 1)) {
        fprintf(stderr, "train_lenet5: %s\n", so_errmsg());
        return 1;
    }

    /* Collective: every rank creates its part of the job. A failure on one
     * rank is a failure on every rank; the one that had it says why. The
     * job is freed on every rank either way (MPI may be up). */
    so_job *job = NULL;
    int rc = so_job_create(&c, &job);
    if (rc) {
        if (!so_job_failed_elsewhere(job))
            fprintf(stderr, "train_lenet5: %s: %s\n", so_strerror(rc), so_errmsg());
        so_job_free(job);
        return 1;
    }
    int rank = so_job_rank(job);
    if (rank == 0) {
        if (fell_back)
            printf("no Fashion-MNIST in %s: training on the synthetic data set\n", c.data_dir);
        printf("training %s on %s: %d ranks, batch %d per rank, ", c.model, c.dataset, so_job_world(job), c.batch);
        if (c.steps > 0)
            printf("%ld steps\n", c.steps);
        else
            printf("%d epoch%s\n", c.epochs, c.epochs == 1 ? "" : "s");
        fflush(stdout);
    }

    /* Collective: trains, evaluating on the test set at the end when the
     * data set has one. images/s in the result counts the images of all
     * ranks; rank 0 prints it. */
    so_train_result r;
    memset(&r, 0, sizeof r);
    rc = so_job_train(job, on_progress, job, &r);
    if (rc) {
        /* Other ranks may wait in a collective that will not complete: with
         * more than one rank this ends the whole job (MPI_Abort). */
        so_job_abort(job, 1, so_errmsg());
        fprintf(stderr, "train_lenet5: %s: %s\n", so_strerror(rc), so_errmsg());
    } else if (rank == 0) {
        printf("steps: %ld\n", r.steps);
        printf("images/s: %.0f\n", r.images_per_sec);
        printf("final loss: %.4f\n", r.final_loss);
        if (r.test_accuracy >= 0)
            printf("test accuracy: %.2f%%\n", 100.0 * r.test_accuracy);
        else
            printf("test accuracy: n/a (no test set)\n");
        printf("wall time: %.2f s\n", r.wall_seconds);
        if (so_job_stopped_step(job) >= 0)
            printf("stopped by SIGTERM after step %ld\n", so_job_stopped_step(job));
    }
    so_train_result_free(&r);
    so_job_free(job); /* collective; finalises MPI if so_job_create started it */
    so_job_unwatch_signals();
    return rc ? 1 : 0;
}
