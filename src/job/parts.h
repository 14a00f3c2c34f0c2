/* A job's parts (data sets, model, optimizer, loaders) from its
 * configuration. Private to src/job: so_job_create calls these in order,
 * with the ranks' agreement (dist_agree) between and after them. */
#ifndef SCALEOUT_JOB_PARTS_H
#define SCALEOUT_JOB_PARTS_H
#include "scaleout/job.h"
#include "scaleout/dtype.h"
#include "scaleout/zoo.h"

typedef struct {
    so_dataset *train, *test;
    so_graph *g;
    so_model *m;
    so_strategy *strategy;       /* --strategy's (NULL with pipeline stages: pipe_glue makes theirs) */
    int strategy_refused;        /* the strategy refused its input: the same error on every rank */
    int init_refused;            /* --init-from's file did not load or held non-finite values */
    so_optim *opt;               /* the strategy's optimizer (owned by it), or a pipeline stage's own */
    so_loader *ltrain, *ltest;
    /* A pipeline stage's recv layouts for the model (so_model_opts), set by pipe_glue. */
    int (*recv_layout)(void *ctx, int node, const void **desc, size_t *len);
    void *recv_layout_ctx;
} job_parts;

/* Loads the data (the synthetic set: synthetic_samples, default 32 batches)
 * and builds the graph: it may fail on one rank only (a missing file). */
int parts_load(const so_job_config *c, job_parts *p);
/* The input shape (c, h, w) and classes of c->model on synthetic data: the
 * zoo's, and for a GPT-2 name or spec sequences of c->seq_len tokens (at
 * most its context T) over its vocabulary V. SO_EINVAL naming --model. */
int parts_synthetic_shape(const so_job_config *c, so_zoo_entry *out);
/* Builds model, optimizer and loaders for this rank (d may be NULL),
 * loading c->ckpt.init_from into the model before its strategy is made. It
 * is collective when d has buf_alloc (the gradient buffer is registered
 * memory), so call it only after all ranks agreed parts_load succeeded. */
int parts_build(const so_job_config *c, const so_dist *d, job_parts *p);
/* --shard-gather's wire type: F32 for "fp32" (or unset), BF16, F16; SO_EINVAL
 * naming the flag otherwise. */
int parts_gather_wire(const so_job_config *c, so_dtype *out);
/* Per-node forward and backward seconds of training steps of m on a fixed
 * synthetic batch (so_predict_measure with run; timed may be NULL). */
int parts_measure(so_model *m, so_optim *opt, const so_predict_run *run, double *t_fwd, double *t_bwd, double *t_other,
                  int *timed);
/* Frees everything; collective like parts_build: on every rank, after the
 * ranks agreed on any failure, before dist_close. */
void parts_free(job_parts *p);

#endif
