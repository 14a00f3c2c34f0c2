/* scaleout: the command-line entry point. Dispatches to one function per
 * subcommand from a table; only this layer decides exit codes. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "scaleout/cpu.h"
#include "scaleout/err.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"train", cmd_train, "train a model (one process, or every rank under mpirun)"},
    {"models", cmd_models, "list the model zoo with parameter counts and GFLOPs"},
    {"bench", cmd_bench, "benchmarks: bench train|scaling|accuracy|compare|plot|allreduce|... (see bench --help)"},
    {"tune", cmd_tune, "measure allreduce algorithms and write the table auto uses (mpirun)"},
    {"report", cmd_report, "HTML or text report of profiles: report DIR-or-JSON... -o report.html | --text"},
    {"predict", cmd_predict, "predict data-parallel scaling to N nodes from per-layer times and the allreduce model"},
    {"plan", cmd_plan, "print a pipeline partition of a model: stages, tensors crossing each cut, bubble"},
    {"ckpt", cmd_ckpt, "inspect checkpoints: ckpt list|verify|export DIR"},
    {"data", cmd_data, "image data sets: data index|bench|ls DIR (docs/DATA.md)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: scaleout <command> [options]   (scaleout <command> --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "  %-10s %s\n", "version", "print version and git commit");
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
            printf("clock: %.2f GHz; FP32 peak per core: %d FLOP/cycle = %.0f GFLOP/s nominal, %.0f GFLOP/s "
                   "measured in FMA chains\n",
                   so_cpu_clock_ghz(), so_isa_flops_per_cycle(so_cpu_isa()), so_cpu_peak_gflops(),
                   so_cpu_fma_gflops());
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "scaleout: unknown command '%s' (see scaleout --help)\n", argv[1]);
    return CLI_USAGE;
}
