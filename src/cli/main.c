/* scaleout: the command-line entry point. Dispatches to one function per
 * subcommand from a table; only this layer decides exit codes. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

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
    {"ckpt", cmd_ckpt, "inspect checkpoints: ckpt list|verify|export DIR"},
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
    if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
        printf("scaleout %s (git %s)\n", SCALEOUT_VERSION, cli_git_commit());
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "scaleout: unknown command '%s' (see scaleout --help)\n", argv[1]);
    return CLI_USAGE;
}
