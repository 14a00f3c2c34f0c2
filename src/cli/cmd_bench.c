/* `scaleout bench`: one entry point for every benchmark. Training benchmarks
 * (train, scaling, accuracy, tta), result tools (compare, plot) and the
 * collective benchmark (allreduce, reduce-scatter, allgather, bcast). */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} subcommand;

static const subcommand subs[] = {
    {"train", cmd_bench_train, "training images/sec, tf_cnn_benchmarks style (alone or under mpirun)"},
    {"scaling", cmd_bench_scaling, "strong/weak scaling sweep over process counts (launches mpirun/srun)"},
    {"accuracy", cmd_bench_accuracy, "time to a target test accuracy, MLPerf-style log"},
    {"compare", cmd_bench_compare, "compare result files, flagging changes beyond the noise"},
    {"plot", cmd_bench_plot, "draw result files as PNG and SVG (gnuplot)"},
    {"tta", cmd_bench_tta, "time to accuracy of --compress / --sync methods side by side (launches mpirun/srun)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: scaleout bench <benchmark> [options]   (scaleout bench <benchmark> --help)\n\n");
    for (size_t i = 0; i < sizeof subs / sizeof *subs; i++)
        fprintf(f, "  %-15s %s\n", subs[i].name, subs[i].help);
    fprintf(f, "  %-15s %s\n", "allreduce", "time a collective over message sizes (mpirun; also reduce-scatter,");
    fprintf(f, "  %-15s %s\n", "", "allgather, bcast)");
}

int cmd_bench(int argc, char **argv)
{
    if (argc < 1)
        return cli_error("bench", CLI_USAGE, "missing benchmark (train, scaling, accuracy, tta, compare, plot, allreduce, "
                                             "reduce-scatter, allgather, bcast; see bench --help)");
    if (!strcmp(argv[0], "-h") || !strcmp(argv[0], "--help")) {
        usage(stdout);
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof subs / sizeof *subs; i++)
        if (!strcmp(argv[0], subs[i].name))
            return subs[i].run(argc - 1, argv + 1);
    return cmd_bench_coll(argc, argv);
}
