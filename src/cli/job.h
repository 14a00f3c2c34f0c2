/* A training job's parts (data sets, model, optimizer, loaders), built the
 * same way for `scaleout train` and the `scaleout bench` commands so a
 * benchmark measures exactly the training path users run. */
#ifndef SCALEOUT_CLI_JOB_H
#define SCALEOUT_CLI_JOB_H
#include <stddef.h>

#include "scaleout/json.h"
#include "scaleout/train.h"

/* What a job is built from (the subset of the train flags that shape it). */
typedef struct {
    const char *model, *dataset, *data_dir, *backend, *optimizer;
    int batch, prefetch, augment, synthetic_n;
    long seed;
    float momentum, weight_decay;
    const char *conv_algo;   /* --conv-algo; NULL = auto */
} job_spec;

/* The --backend and --conv-algo choices, for the commands' option tables. */
extern const char *const job_backends[];
extern const char *const job_conv_algos[];

typedef struct {
    so_dataset *train, *test;
    so_graph *g;
    so_model *m;
    so_optim *opt;
    so_loader *ltrain, *ltest;
} job;

/* Two steps, with the ranks' agreement (dist_agree) between them:
 * job_load loads the data (the synthetic set: synthetic_n samples, default 32
 * batches) and builds the graph -- it may fail on one rank only (a missing
 * file); job_build then builds model, optimizer and loaders for this rank
 * (d may be NULL). job_build is collective when d has buf_alloc (the
 * gradient buffer is registered memory), so every rank must reach it: call
 * it only after all ranks agreed job_load succeeded. */
int job_load(const job_spec *s, job *j);
int job_build(const job_spec *s, const so_dist *d, job *j);
/* What the convolutions run, for the banner: "forward: winograd 12, direct 7
 * | backward data: ... | backward weights: ..." ("" for a model without
 * convolutions). */
void job_conv_summary(so_model *m, char *buf, size_t len);
/* The same as "conv_algo_used" in --json: counts per propagation, the ISA
 * the kernels run, and every layer's algorithm and implementation. */
void job_conv_json(so_json *js, so_model *m, const char *requested);
/* Frees everything; collective like job_build (the gradient buffer): call it
 * on every rank, after the ranks agreed on any failure, before dist_close. */
void job_free(job *j);

#endif
