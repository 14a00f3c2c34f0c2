/* scaleout: the command-line entry point. Dispatches to one function per
 * subcommand from a table; only this layer decides exit codes. SIGTERM and
 * SIGINT are taken by a thread of their own for the commands that set up
 * jobs (src/job/signals.c): `train` stops after a step on the first one;
 * during set-up and restore, on a second one, and in the other commands
 * they end the process at once with one line. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "scaleout/cpu.h"
#include "scaleout/err.h"
#include "scaleout/job.h"

/* What SIGTERM and SIGINT do in a command: the default action (commands
 * that start other programs, which would inherit a blocked signal), end at
 * once with a line, or stop the job after a step first. */
enum { SIG_DEFAULT, SIG_END, SIG_STOP_JOB };

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
    int signals;
} command;

static const command commands[] = {
    {"train", cmd_train, "train a model (one process, or every rank under mpirun)", SIG_STOP_JOB},
    {"models", cmd_models, "list the model zoo with parameter counts and GFLOPs", SIG_DEFAULT},
    {"bench", cmd_bench, "benchmarks: bench train|scaling|accuracy|compare|plot|allreduce|... (see bench --help)",
     SIG_DEFAULT},
    {"tune", cmd_tune, "measure allreduce algorithms and write the table auto uses (mpirun)", SIG_DEFAULT},
    {"report", cmd_report, "HTML or text report of profiles: report DIR-or-JSON... -o report.html | --text",
     SIG_DEFAULT},
    {"predict", cmd_predict, "predict data-parallel scaling to N nodes from per-layer times and the allreduce model",
     SIG_END},
    {"plan", cmd_plan, "print a pipeline partition of a model: stages, tensors crossing each cut, bubble", SIG_END},
    {"ckpt", cmd_ckpt, "inspect checkpoints: ckpt list|verify|export DIR", SIG_END},
    {"data", cmd_data, "image data sets: data index|bench|ls DIR (docs/DATA.md)", SIG_DEFAULT},
    {"tokenize", cmd_tokenize, "text files to llm.c token shards: tokenize TEXT... -o DIR [--encoder/--bpe | --vocab N]",
     SIG_END},
    {"generate", cmd_generate, "text from a GPT-2 checkpoint or llm.c model file: generate --ckpt DIR --tokenizer DIR "
     "--prompt TEXT", SIG_END},
};

/* The line before a watched signal ends the process (on the signal thread:
 * one write, nothing that allocates or locks stdio). */
static void signal_line(void *arg, int sig, const char *when)
{
    char line[256];
    const char *name = sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a signal";
    int n = snprintf(line, sizeof line, "scaleout %s: %s%s: ending now (exit %d)\n", (const char *)arg, name, when,
                     128 + sig);
    if (n > 0 && write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0)
        return;
}

/* Runs a command with its signal policy. Before the command starts any
 * thread (MPI, OpenMP, the checkpoint's): they all inherit the block. */
static int run(const command *c, int argc, char **argv)
{
    const int sigs[] = {SIGTERM, SIGINT};
    so_job_signal_opts o = {c->signals == SIG_STOP_JOB, signal_line, (void *)c->name};
    if (c->signals != SIG_DEFAULT && so_job_watch_signals_opts(sigs, 2, &o)) {
        fprintf(stderr, "scaleout %s: %s\n", c->name, so_errmsg());
        return CLI_FAIL;
    }
    int rc = c->run(argc, argv);
    so_job_unwatch_signals();
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: scaleout <command> [options]   (scaleout <command> --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "  %-10s %s\n", "version", "print version and git commit");
}

/* `version --cpu`: the clock, then the FP32 and BF16 peaks per core, each
 * nominal and measured in independent chains (BF16 "none" without the
 * instruction within the cap). */
static void print_cpu_peaks(void)
{
    printf("clock: %.2f GHz; FP32 peak per core: %d FLOP/cycle = %.0f GFLOP/s nominal, %.0f GFLOP/s "
           "measured in FMA chains\n",
           so_cpu_clock_ghz(), so_isa_flops_per_cycle(so_cpu_isa()), so_cpu_peak_gflops(), so_cpu_fma_gflops());
    if (so_cpu_has_bf16())
        printf("BF16 peak per core: %d FLOP/cycle = %.0f GFLOP/s nominal, %.0f GFLOP/s measured in vdpbf16ps "
               "chains\n",
               so_cpu_bf16_flops_per_cycle(), so_cpu_bf16_peak_gflops(), so_cpu_bf16_gflops());
    else
        printf("BF16 peak per core: none (no AVX512_BF16%s)\n", so_cpu_isa_cap() ? " within the cap" : "");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : CLI_OK;
    }
    /* A malformed SCALEOUT_MAX_ISA stops every command, not only those that
     * build a model: a cap that silently does nothing misleads a benchmark. */
    if (so_cpu_init()) {
        fprintf(stderr, "scaleout: %s\n", so_errmsg());
        return CLI_USAGE;
    }
    if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
        const char *cap = so_cpu_isa_cap();
        printf("scaleout %s (git %s)\nkernels: %s (CPU: %s%s%s)\n", SCALEOUT_VERSION, cli_git_commit(),
               so_isa_label(so_cpu_isa()), so_isa_label(so_cpu_isa_detected()), cap ? ", capped by " : "",
               cap ? cap : "");
        if (argc > 2 && !strcmp(argv[2], "--cpu"))
            print_cpu_peaks();
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name))
            return run(&commands[i], argc - 2, argv + 2);
    fprintf(stderr, "scaleout: unknown command '%s' (see scaleout --help)\n", argv[1]);
    return CLI_USAGE;
}
