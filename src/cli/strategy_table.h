/* The per-strategy table of `scaleout plan --strategy` and `scaleout
 * predict --strategy`: each strategy's memory per rank (its own accounting,
 * as `train --json` reports it) and step time (so_predict_strategy), and
 * the fastest one that fits --max-memory. Private to the CLI. */
#ifndef SCALEOUT_CLI_STRATEGY_TABLE_H
#define SCALEOUT_CLI_STRATEGY_TABLE_H
#include "scaleout/json.h"
#include "scaleout/predict.h"

#define STRAT_MAX 8

typedef struct {
    const char *name;
    so_predict_strategy_point p;
    double activations, total;   /* bytes per rank */
    int fits;                    /* total <= max_bytes (or no cap) */
} strat_row;

typedef struct {
    const so_predict_compute *c; /* the layers at the per-rank batch */
    int world;
    int nslots;                  /* the optimizer's state per parameter */
    double act_bytes;            /* activations per rank (measured) */
    double max_bytes;            /* --max-memory; 0: none */
    const so_strategy_config *sc; /* units, prefetch, accumulate */
    so_predict_cost_fn cost;     /* one allreduce over `world` ranks */
    void *ctx;
} strat_query;

/* "all" or a comma list of strategy names -> kinds (at most STRAT_MAX);
 * SO_EINVAL naming --strategy otherwise. */
int strat_parse(const char *list, const so_strategy_kind **kinds, int *n);
/* The rows and the index of the fastest that fits (-1: none). */
int strat_rows(const strat_query *q, const so_strategy_kind *const *kinds, int n, strat_row *rows, int *best);
/* The table on stdout: a line per strategy, then the choice. */
void strat_print(const strat_query *q, const strat_row *rows, int n, int best);
/* One scale's rows as lines of a table across scales (predict): the header
 * when header is set. */
void strat_print_scale(int nodes, int ranks, const strat_row *rows, int n, int best, int header);
/* The rows as a JSON array "strategies" and "fastest_that_fits". */
void strat_json(so_json *js, const strat_row *rows, int n, int best);

/* `scaleout plan --strategy LIST --world N`: the layers of `model` timed at
 * `batch` per rank (so_job_measure_model), each strategy's row on one node
 * of N ranks (or nodes of ranks_per_node), the choice; json may be NULL. */
typedef struct {
    const char *model, *optimizer, *strategies, *json, *tune;
    int batch, world, ranks_per_node, threads, steps, accumulate;
    int cores;                   /* per node; 0: this machine's online CPUs */
    int seq_len;                 /* a GPT-2's tokens per sequence (0: so_job_config's default) */
    double max_bytes;
    so_strategy_config sc;       /* shard_unit, shard_prefetch, bucket sizes */
} strat_plan_args;
int strat_plan(const strat_plan_args *a);

#endif
