/* Pipeline partitions: a model graph cut into P contiguous stages over its
 * topological order, what each stage owns (nodes, parameters, FLOPs,
 * activations), which tensors cross each cut (residual connections too),
 * balancers that choose the cuts, and the schedules' bubble and in-flight
 * formulas (`scaleout plan` prints them); then a stage's own graph and the
 * pipeline strategy that trains it (docs/PARALLELISM.md). No MPI: messages
 * go through the so_pipe_link a caller supplies (src/job over so_comm). */
#ifndef SCALEOUT_PIPELINE_H
#define SCALEOUT_PIPELINE_H
#include <stddef.h>

#include "scaleout/graph.h"
#include "scaleout/strategy.h"

typedef enum { SO_PIPE_GPIPE, SO_PIPE_1F1B, SO_PIPE_INTERLEAVED } so_pipe_schedule;

/* One stage: nodes [first, last] of the graph (stage 0 also owns node 0, the input). */
typedef struct {
    int first, last;
    size_t params;      /* sum of the nodes' nparam */
    double flops;       /* forward FLOPs per sample (so_node_flops) */
    size_t act_bytes;   /* per sample: every node's output tensor, fp32, counted in the stage
                           that produces it (node 0's input batch in stage 0); tensors
                           received from earlier stages are in recv_bytes, not here */
    size_t recv_bytes;  /* per sample: tensors this stage receives from earlier stages */
    double seconds;     /* sum of the per-node costs of so_pipe_plan_set_costs; 0 without */
} so_pipe_stage;

/* A tensor that leaves its stage: node `node`'s output, produced in `stage`,
 * read by nodes of stages to_first..to_last (> stage; not necessarily every
 * stage between). It crosses every cut from `stage` to to_last - 1. */
typedef struct {
    int node;
    int stage, to_first, to_last;
    size_t bytes;       /* per sample, fp32 */
} so_pipe_tensor;

/* A validated partition and its accounting. Owns first, stages and tensors. */
typedef struct {
    const so_graph *g;          /* borrowed */
    int nstages;
    int *first;                 /* nstages + 1 entries; first[0] = 0, first[nstages] = so_graph_size */
    so_pipe_stage *stages;
    so_pipe_tensor *tensors;    /* every tensor leaving its stage, by producer index */
    int ntensors;
} so_pipe_plan;

/* How stage costs and memory are counted by the balancers and the report. */
typedef struct {
    const double *seconds;      /* per node (so_graph_size entries, node 0 counts in stage 0):
                                   the time and auto balancers; NULL otherwise */
    int microbatch;             /* samples per micro-batch (>= 1) */
    int microbatches;           /* M (>= 1) */
    so_pipe_schedule schedule;
    int devices;                /* P: pipeline ranks; stages = devices x virtual stages */
    int optim_slots;            /* fp32 optimizer state per parameter: SGD 0, momentum 1, Adam 2 */
    size_t max_bytes;           /* memory cap per stage (auto; 0: none) */
} so_pipe_costs;

typedef enum { SO_PIPE_BY_TIME, SO_PIPE_BY_MEMORY, SO_PIPE_BY_AUTO } so_pipe_balance_kind;

/* Validates first[0..nstages) (stage starts; first[0] must be 0) against g
 * and fills p. Errors (SO_EINVAL, message naming the stage and nodes):
 * nstages < 1 or above the non-input node count, a start out of range, a
 * list not strictly increasing, stage 0 without a node besides the input.
 * SO_ENOMEM. On error p needs no deinit. */
int so_pipe_plan_init(so_pipe_plan *p, const so_graph *g, const int *first, int nstages);
/* Frees what p owns; accepts a zeroed or deinitialised plan. */
void so_pipe_plan_deinit(so_pipe_plan *p);

/* Stage seconds from per-node costs (so_graph_size entries). */
void so_pipe_plan_set_costs(so_pipe_plan *p, const double *seconds);

/* 1 if tensor t crosses cut `cut` (between stage cut and cut + 1). */
int so_pipe_tensor_crosses(const so_pipe_tensor *t, int cut);
/* Tensors crossing cut `cut` and their bytes per sample. */
int so_pipe_cut_tensors(const so_pipe_plan *p, int cut, size_t *bytes);

/* Chooses nstages cuts minimising the largest stage cost (dynamic programming
 * over contiguous splits, the idea of torchgpipe's balance_by_time and
 * balance_by_size): time = sum of c->seconds, memory = so_pipe_stage_memory
 * of the stage, auto = time with every stage's memory <= c->max_bytes.
 * Writes first[0..nstages). SO_EINVAL: too many stages, no costs for time,
 * no split within the cap (the message gives the smallest stage peak
 * reachable). SO_ENOMEM. */
int so_pipe_balance(const so_graph *g, int nstages, so_pipe_balance_kind kind, const so_pipe_costs *c,
                    int *first);

/* The same over a plain cost vector: items 1..n-1 (item 0 joins stage 0),
 * minimising the maximum stage sum. For tests and other callers. */
int so_pipe_balance_vector(const double *cost, int n, int nstages, int *first);

/* Bytes of stage s at its peak: parameters x (weights + gradients + optimizer
 * slots) x 4 + act_bytes x microbatch x so_pipe_in_flight(s). */
double so_pipe_stage_memory(const so_pipe_stage *st, int s, int nstages, const so_pipe_costs *c);

/* Micro-batches whose activations stage s holds at once: gpipe M; 1f1b
 * min(P - s, M); interleaved (stage s on device s mod P, v = nstages / P
 * chunks per device) Megatron-LM's warm-up count min(2 (P - d - 1) + (v - 1) P + 1,
 * M v) spread over the device's v chunks, rounded up. */
int so_pipe_in_flight(const so_pipe_costs *c, int s, int nstages);

/* Idle fraction of a step: (P - 1) / (M + P - 1); interleaved divides by v. */
double so_pipe_bubble(so_pipe_schedule s, int devices, int microbatches, int virtual_stages);

/* Parses a schedule name ("gpipe", "1f1b", "interleaved"); -1 if unknown. */
int so_pipe_schedule_parse(const char *name);
const char *so_pipe_schedule_name(so_pipe_schedule s);

/* Parses "0,conv3,layer2.0.conv1": stage starts by node index or name (a
 * first entry of node 1 means stage 0, which always starts at the input).
 * Writes up to max entries, *n the count. SO_EINVAL naming the entry. */
int so_pipe_parse_list(const so_graph *g, const char *list, int *first, int max, int *n);

/* ---- a stage's graph ------------------------------------------------------------
 * Stage s's nodes copied in order, preceded by a recv node for every tensor
 * of an earlier stage that they read and followed by a send node for every
 * (tensor, later reading stage) pair; node 0 stays the data input (used by
 * stage 0 only). Tensors go straight from the producing stage to each
 * stage that reads them. Parameter order is the whole model's, so the
 * stage's parameters are the slice [param_lo, param_hi) of the model's. */
typedef struct {
    int node;           /* recv or send node in the stage's graph */
    int peer;           /* the stage at the other end */
    int tag;            /* forward message tag (the tensor's index in the plan x 2; diffs + 1) */
    size_t bytes;       /* per sample, fp32 plain NCHW */
} so_pipe_edge;

typedef struct {
    int stage, nstages;
    so_pipe_edge *recv, *send;
    int nrecv, nsend;
    size_t param_lo, param_hi;  /* the slice of the whole model's parameters */
    size_t buf_lo, buf_hi;      /* and of its batchnorm running statistics */
} so_pipe_stage_edges;

/* Builds stage s's finalized graph (*out; the caller owns it) and its edges. */
int so_pipe_stage_graph(const so_pipe_plan *p, int s, so_graph **out, so_pipe_stage_edges *e);
void so_pipe_stage_edges_free(so_pipe_stage_edges *e);

/* ---- the pipeline strategy ---------------------------------------------------------
 * Messages between stages: non-blocking sends and receives of plain fp32
 * bytes to / from another stage of the same pipeline, matched in posting
 * order per (peer, tag). wait completes and frees a request. */
typedef struct {
    void *ctx;
    int (*isend)(void *ctx, const void *buf, size_t bytes, int stage, int tag, void **req);
    int (*irecv)(void *ctx, void *buf, size_t bytes, int stage, int tag, void **req);
    int (*wait)(void *ctx, void *req);
} so_pipe_link;

typedef struct {
    so_pipe_schedule schedule;  /* gpipe or 1f1b */
    int microbatches;           /* M: the trainer's accumulate */
    so_pipe_link link;
    /* Averages the stage's gradients over its replicas (data parallelism on
     * the stage's replica group) after the step's last backward; NULL with
     * one replica. Borrowed. */
    const so_strategy *replicas;
    int nreplicas;
    /* --sync-bn: batchnorm statistics summed over the stage's replicas
     * (so_model.bn_allsum); NULL: per micro-batch, GPipe's semantics. */
    so_allsum_fn bn_allsum;
    void *bn_allsum_arg;
} so_pipe_config;

/* The strategy of one stage: runs the schedule's forwards and backwards of
 * the step's micro-batches on the model's slots (so_model_set_slots: the
 * micro-batches the schedule keeps in flight there), posting every receive
 * of a step up front and sending as each micro-batch finishes; evaluation
 * passes every test batch through the stages. The model must be the stage's
 * (so_pipe_stage_graph); e is borrowed. */
int so_strategy_pipeline(const so_pipe_config *c, const so_pipe_stage_edges *e, so_strategy **out);

/* ---- predicting a pipeline's step ---------------------------------------------
 * From per-node forward + backward seconds at one micro-batch (p's costs,
 * so_pipe_plan_set_costs), the time one micro-batch's tensors take to
 * cross each cut, and the replicas' gradient average: the first
 * micro-batch passes every stage and cut forward and back, the other M - 1
 * follow at the pace of the slowest stage or cut (sends overlap compute).
 * The replicas' average runs after the step's last backward, as the
 * strategy does; the optimizer's step scales with the largest stage. */
typedef struct {
    int microbatches;            /* M */
    int replicas;                /* D */
    double optimizer_seconds;    /* the whole model's optimizer step (one process) */
    /* Seconds for `bytes` to cross cut c (one direction, one micro-batch). */
    double (*cut_seconds)(void *ctx, int cut, size_t bytes);
    /* Seconds of one average of `bytes` of gradients over the D replicas. */
    double (*replica_seconds)(void *ctx, size_t bytes);
    void *ctx;
} so_pipe_predict_config;

typedef struct {
    double step_seconds;
    double slowest_stage_seconds;   /* per micro-batch */
    double slowest_cut_seconds;     /* per micro-batch and direction */
    double replica_seconds;         /* the gradient average after backward */
    double bubble;                  /* 1 - busy / (P x step) */
} so_pipe_prediction;

/* p needs its stage seconds (so_pipe_plan_set_costs) and batch sizes
 * (bytes per sample x micro-batch in cut_seconds' bytes: the caller's
 * `microbatch`). SO_EINVAL without costs. */
int so_pipe_predict(const so_pipe_plan *p, int microbatch, const so_pipe_predict_config *c, so_pipe_prediction *out);

/* Micro-batches stage s keeps in flight: gpipe M, 1f1b min(P - s, M). */
int so_pipe_slots(so_pipe_schedule sc, int stage, int nstages, int microbatches);
/* The order stage s runs a step's 2M passes in: ops[i] = k for the forward
 * of micro-batch k, -(k + 1) for its backward. gpipe: every forward, then
 * every backward; 1f1b: min(P - s - 1, M) forwards, then one forward and
 * one backward alternately, then the remaining backwards. Backwards run in
 * micro-batch order in both. SO_EINVAL for interleaved (not run yet). */
int so_pipe_schedule_ops(so_pipe_schedule sc, int stage, int nstages, int microbatches, int *ops);

#endif
