/* Shared pieces of the scaleout command line: the table-driven option parser
 * (one table per subcommand drives parsing, validation and --help), and the
 * subcommand entry points. Exit codes: 0 ok, 1 runtime failure, 2 bad input. */
#ifndef SCALEOUT_CLI_H
#define SCALEOUT_CLI_H
#include <stdio.h>

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2, CLI_HELP = 3 };
/* `train` stopped by SIGTERM after its checkpoint was made durable: run it
 * again with --resume auto (EX_TEMPFAIL; examples/slurm/train.sbatch
 * requeues the job on it). Never used for help (CLI_HELP is mapped to 0). */
enum { CLI_REQUEUE = 75 };

/* The gradient allreduce of every training command unless --allreduce says
 * otherwise: per bucket, what the tuning table (or the built-in alpha-beta
 * model) predicts fastest -- on one node the shared-memory `hier`, which took
 * np=2 LeNet-5 from 1.70x to 1.98x over np=1 (docs/PERFORMANCE.md). */
#define CLI_DEFAULT_ALLREDUCE "auto"

typedef enum { OPT_INT, OPT_LONG, OPT_FLOAT, OPT_STR, OPT_FLAG, OPT_CHOICE } cli_opt_type;

typedef struct {
    const char *name;        /* without the leading "--" */
    cli_opt_type type;
    void *dst;               /* int*, long*, float*, const char**, int* (flag: set to 1) */
    const char *meta;        /* placeholder in --help, e.g. "N" */
    const char *help;
    double min, max;         /* numeric range (ignored when min > max) */
    const char *const *choices; /* OPT_CHOICE: NULL-terminated list; dst is const char** */
} cli_opt;

/* Parses argv[0..argc) against opts (values as "--name V" or "--name=V").
 * Prints one line to stderr naming the flag and the problem on error and
 * returns CLI_USAGE; prints help and returns CLI_HELP for -h/--help. */
/* Exit status for a library error: the user's input (SO_EINVAL, SO_EIO,
 * SO_EFORMAT) gives CLI_USAGE, anything else CLI_FAIL. */
int cli_exit_code(int so_rc);
/* The git commit this binary was built from ("-dirty" with local changes),
 * generated at build time by cmake/git_version.cmake. */
const char *cli_git_commit(void);
int cli_parse(const char *cmd, const char *summary, const cli_opt *opts, int argc, char **argv);
/* The same, setting seen[i] = 1 for every opts[i] the command line gave
 * (seen: one byte per option, zeroed by the caller). */
int cli_parse_seen(const char *cmd, const char *summary, const cli_opt *opts, int argc, char **argv,
                   unsigned char *seen);
/* A flag that does nothing unless something else holds: met(args) says
 * whether it does in the run given; what names it ("--pipeline-stages P"). */
typedef struct {
    const char *flag;
    int (*met)(const void *args);
    const char *what;
} cli_need;
/* Refuses the first flag given (seen, from cli_parse_seen) whose need is not
 * met: "--flag does nothing without WHAT", CLI_USAGE. needs ends with {NULL}. */
int cli_check_needs(const char *cmd, const cli_opt *opts, const unsigned char *seen, const cli_need *needs,
                    const void *args);
void cli_usage(FILE *f, const char *cmd, const char *summary, const cli_opt *opts);
/* One-line error "scaleout CMD: message" to stderr; returns code. */
int cli_error(const char *cmd, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A so_job's set-up error (printed by the rank that had it, and by rank 0),
 * and an error during training (with more than one rank it aborts the job:
 * the others may be inside a collective). Both return the exit status. */
struct so_job;
int cli_job_setup_error(const char *cmd, struct so_job *j, int rc);
int cli_job_train_error(const char *cmd, struct so_job *j, int rc);

/* A so_job_measure_model's progress line on stderr (cmd: the command's
 * name, "predict"), and its linearity check as one line on stdout
 * (nothing when the layers were timed at the batch itself). */
struct so_job_layer_times;
void cli_measure_progress(void *cmd, const char *line);
void cli_print_linearity(const struct so_job_layer_times *lt);

int cmd_train(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_bench_coll(int argc, char **argv); /* bench allreduce|reduce-scatter|allgather|bcast */
int cmd_bench(int argc, char **argv);      /* bench: dispatches to train|scaling|...|the collectives */
int cmd_tune(int argc, char **argv);
int cmd_report(int argc, char **argv); /* HTML / text report of profile.json files */
int cmd_ckpt(int argc, char **argv); /* ckpt list|verify|export DIR */
int cmd_predict(int argc, char **argv); /* data-parallel scaling from measured layers + cost model */
int cmd_plan(int argc, char **argv);    /* pipeline partition of a model: stages, crossing tensors, bubble */
int cmd_tokenize(int argc, char **argv); /* text files -> llm.c token shards (GPT-2 BPE, trained BPE or bytes) */
int cmd_data(int argc, char **argv);    /* image data sets: data index|bench|ls DIR */
int cmd_generate(int argc, char **argv); /* text from a GPT-2 checkpoint or llm.c model file, with the KV cache */

/* A scaleout checkpoint read into a model (ckpt export, generate). DIR is a
 * checkpoint directory (it has a MANIFEST), a pipeline's DIR (its stage<s>/
 * gathered at the newest step all hold), or a level (its newest intact
 * checkpoint). The model is the manifest's, built on backend for one sample,
 * with the manifest's input shape or, when decode, one token per sample (for
 * so_model_decode); it is checked against the checkpoint's tensors and holds
 * its parameters and running statistics. On error one line has been printed
 * as "scaleout CMD: ..." and the exit status is returned. */
struct so_model;
typedef struct {
    struct so_model *model;
    char name[64];   /* the manifest's model ("gpt2:L=4,...") */
    long step;
    int stages;      /* pipeline stages gathered (0: one checkpoint) */
} cli_ckpt;
int cli_ckpt_load(const char *cmd, const char *dir, const char *backend, int decode, cli_ckpt *ck);
void cli_ckpt_free(cli_ckpt *ck); /* accepts NULL */

/* "imagefolder" when DIR/train is a directory, "tfrecord" when DIR holds
 * train-*-of-* shards, else NULL. */
const char *cli_image_kind(const char *dir);

/* --bucket-mb of train and predict: "auto" (*mb = -1) or MiB in [0.001, 4096];
 * else one line naming the flag and CLI_USAGE. */
int cli_parse_bucket_mb(const char *cmd, const char *arg, double *mb);
/* --crop-scale "MIN[,MAX]" (MAX default 1) with 0 < MIN <= MAX <= 1; else one
 * line naming the flag and CLI_USAGE. */
int cli_parse_crop_scale(const char *cmd, const char *arg, float *lo, float *hi);
/* Bytes with an optional K/M/G (binary) suffix; 0 or -1. */
int cli_parse_bytes(const char *s, size_t *out);
/* Splits argv into options (with their values; -o takes one too) and the
 * other arguments (paths), each kept in order, so paths may come before or
 * after the options; "--" ends the options. Returns the number of options:
 * argv[0..n) holds them afterwards, paths[0..*npaths) the rest (room for argc). */
int cli_split_args(int argc, char **argv, const cli_opt *opts, char **paths, int *npaths);
/* --max-memory of train and plan, one rule for both: a size above 0 (with an
 * optional K/M/G suffix); else one line naming the flag and CLI_USAGE. */
int cli_parse_max_memory(const char *cmd, const char *arg, size_t *bytes);
/* Rewrites OSU-style short flags in argv (map: {"-m", "--message-size"}, ..., {NULL, NULL}). */
void cli_short_aliases(int argc, char **argv, const char *const map[][2]);

#endif
