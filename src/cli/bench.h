/* Shared pieces of the `scaleout bench` subcommands (see docs/BENCHMARKS.md):
 * a per-step recorder fed by the trainer's span hook, summary statistics,
 * and the entry points that cmd_bench.c dispatches to. */
#ifndef SCALEOUT_CLI_BENCH_H
#define SCALEOUT_CLI_BENCH_H
#include <stdio.h>

#include "scaleout/json.h"
#include "scaleout/train.h"

/* Phases of a step whose shares are reported (the order of the "raw" arrays). */
enum { BP_DATA, BP_FORWARD, BP_BACKWARD, BP_COMM, BP_OPTIMIZER, BP_N };
extern const char *const bench_phase_names[BP_N];

/* Per-step timings of one rank, indexed by global optimizer step. */
typedef struct {
    long n, cap;             /* steps recorded */
    double *t0, *t1;         /* start and end of every step (so_now seconds) */
    double *phase;           /* n x BP_N seconds */
    double overhead;         /* seconds spent inside the recorder and display code */
    int slow_steps;          /* test hook: the first slow_steps steps sleep slow_ms */
    double slow_ms;
    int err;
} bench_rec;

/* Fills hooks with the recorder's span callback; reads the test hook
 * SCALEOUT_BENCH_TEST_SLOW_STEPS=N[:MS] (default 100 ms). */
int bench_rec_init(bench_rec *r, so_train_hooks *hooks);
void bench_rec_free(bench_rec *r);
/* The span callback itself (arg: bench_rec*), for commands that chain their own. */
void bench_rec_span(void *arg, so_span_kind kind, long step, int id, double t0, double t1);

typedef struct {
    double mean, sd, median, min, max;
    long n;
} bench_stats;

/* Statistics of v[0..n) (n may be 0: all zero). */
void bench_stats_of(const double *v, long n, bench_stats *s);
void bench_stats_json(so_json *js, const char *key, const bench_stats *s);
/* Opens a --json record at path and writes its head {"schema", "kind"; CLI_OK,
 * or CLI_USAGE with a message naming the file (cmd: "bench train", ...). */
int bench_json_begin(const char *cmd, const char *path, const char *kind, so_json *js, FILE **f);
/* Closes the top-level object and the file; CLI_OK or CLI_FAIL with a message. */
int bench_json_end(const char *cmd, const char *path, so_json *js, FILE *f);

/* Writes "raw": step_seconds and the per-phase arrays of every step (warm-up included). */
void bench_raw_json(so_json *js, const bench_rec *r);
/* Splits argv into positional arguments (files) and options for cli_parse:
 * an option's value (the next argument) stays with it unless the option is a
 * flag. Both outputs must hold argc entries. */
void bench_split_args(int argc, char **argv, const void *opts, char **files, int *nfiles, char **rest, int *nrest);

/* ---- launching children (bench_launch.c) ---- */
#define BENCH_MAX_ARGS 160
#define BENCH_MAX_NUMS 16
/* A child's argv: pointers to the caller's strings, numbers formatted here. */
typedef struct {
    char *argv[BENCH_MAX_ARGS]; /* NULL-terminated */
    int n;
    char buf[BENCH_MAX_NUMS][64];
    int nbuf;
} bench_argv;
void bench_argv_add(bench_argv *v, const char *s);
/* Appends x formatted with fmt (one printf double conversion, e.g. "%.0f"). */
void bench_argv_addf(bench_argv *v, const char *fmt, double x);

/* How children start: `srun -n NP` or mpiexec ($MPIEXEC, else mpiexec) with
 * Open MPI's --allow-run-as-root (as root) and --oversubscribe (beyond the
 * cores), the user's extra launcher arguments, then this executable. */
typedef struct {
    char self[4096];    /* this scaleout executable (/proc/self/exe) */
    char mpiexec[512];
    char extra[1024];   /* --launcher-args, split at spaces */
    char split[1024];   /* extra's copy that strtok cuts up */
    int srun, open_mpi;
} bench_launcher;
/* name: "mpirun" or "srun"; -1 when the executable cannot be found. */
int bench_launcher_init(bench_launcher *l, const char *name, const char *extra);
/* Appends "launcher [flags] -np NP [extra] self" to v (then the subcommand). */
void bench_launch_argv(bench_launcher *l, int np, bench_argv *v);
/* Runs argv with stdout and stderr into log; the exit status, or -1. */
int bench_spawn(char **argv, const char *log);
/* The log's last 3 lines on stderr, each prefixed "  | ". */
void bench_tail_log(const char *log);

int cmd_bench_train(int argc, char **argv);
int cmd_bench_scaling(int argc, char **argv);
int cmd_bench_accuracy(int argc, char **argv);
int cmd_bench_compare(int argc, char **argv);
int cmd_bench_plot(int argc, char **argv);
int cmd_bench_tta(int argc, char **argv);

#endif
