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
 * chunks per device) the most any chunk of the device holds under
 * so_pipe_schedule_ops, which the device keeps for all its chunks. */
int so_pipe_in_flight(const so_pipe_costs *c, int s, int nstages);

/* Idle fraction of a step: (P - 1) / (M + P - 1); interleaved (P - 1) / (v M + P - 1),
 * Megatron-LM's bubble of (P - 1) / (v M) of the ideal step. */
double so_pipe_bubble(so_pipe_schedule s, int devices, int microbatches, int virtual_stages);

/* Parses a schedule name ("gpipe", "1f1b", "interleaved"); -1 if unknown. */
int so_pipe_schedule_parse(const char *name);
const char *so_pipe_schedule_name(so_pipe_schedule s);

/* The cuts a pipeline's checkpoints were taken with, as DIR/partition (one
 * line of stage starts, "0,7,19"): save writes first[0..n) (creating DIR);
 * load reads up to max into first, *n = how many (0 when there is no
 * file). SO_EIO / SO_EINVAL naming the file. */
int so_pipe_partition_save(const char *dir, const int *first, int n);
int so_pipe_partition_load(const char *dir, int *first, int max, int *n);

/* Parses "0,conv3,layer2.0.conv1": stage starts by node index or name (a
 * first entry of node 1 means stage 0, which always starts at the input).
 * Writes up to max entries, *n the count. SO_EINVAL naming the entry. */
int so_pipe_parse_list(const so_graph *g, const char *list, int *first, int max, int *n);

/* ---- a device's graph ------------------------------------------------------------
 * A pipeline rank (device d of P) runs the stages d, d + P, d + 2P, ... of
 * the plan (v = nstages / P chunks; v = 1 unless interleaved). Its graph is
 * the chunks' nodes copied in order; each chunk is preceded by a recv node
 * for every tensor of another device that it reads first on this device,
 * and followed by a send node for every (tensor, other device reading it).
 * Node 0 stays the data input (read by stage 0 only). A tensor goes
 * straight from the producing device to each device that reads it, once;
 * a later chunk of the same device reads an earlier chunk's (or its recv
 * node's) output directly. Parameter order is the whole model's within
 * each chunk, so a chunk's parameters are the slice [param_lo, param_hi)
 * of the model's, and the device's are its chunks' slices in order. */
typedef struct {
    int node;           /* recv or send node in the device's graph */
    int peer;           /* the device at the other end */
    int tag;            /* forward message tag (2 x (tensor index x devices + reading device)); diffs + 1 */
    size_t bytes;       /* per sample, fp32 plain NCHW */
} so_pipe_edge;

typedef struct {
    int stage;                  /* the plan's stage this chunk is */
    int node_lo, node_hi;       /* its nodes in the device's graph, [lo, hi) */
    int recv_lo, recv_hi;       /* its edges: recv[recv_lo .. recv_hi) */
    int send_lo, send_hi;       /* and send[send_lo .. send_hi) */
    size_t param_lo, param_hi;  /* the slice of the whole model's parameters */
    size_t buf_lo, buf_hi;      /* and of its batchnorm running statistics */
} so_pipe_chunk;

typedef struct {
    int stage, nstages;         /* this device and the number of devices P */
    int nchunks;                /* v: the plan's stages / P */
    int last_stage;             /* the plan's last stage (loss, labels) */
    so_pipe_chunk *chunks;      /* in the device graph's order */
    so_pipe_edge *recv, *send;
    int nrecv, nsend;
} so_pipe_stage_edges;

/* Builds device d's finalized graph (*out; the caller owns it) and its
 * edges, the plan's stages split round-robin over `devices` (which must
 * divide them). */
int so_pipe_stage_graph(const so_pipe_plan *p, int devices, int d, so_graph **out, so_pipe_stage_edges *e);
void so_pipe_stage_edges_free(so_pipe_stage_edges *e);
/* The devices' parameters (bufs 0) or batchnorm statistics (bufs 1), n
 * floats concatenated device after device (each its chunks' slices in
 * order), into the whole model's order. SO_EINVAL if n is not the model's. */
int so_pipe_model_order(const so_pipe_plan *p, int devices, int bufs, const float *by_device, size_t n, float *model);

/* ---- the pipeline strategy ---------------------------------------------------------
 * Messages between stages: non-blocking sends and receives of plain fp32
 * bytes to / from another stage of the same pipeline, matched in posting
 * order per (peer, tag). wait completes and frees a request. */
typedef struct {
    void *ctx;
    int (*isend)(void *ctx, const void *buf, size_t bytes, int stage, int tag, void **req);
    int (*irecv)(void *ctx, void *buf, size_t bytes, int stage, int tag, void **req);
    int (*wait)(void *ctx, void *req);
    /* Optional (NULL: every message carries its bytes). Devices on one host
     * can pass tensors through memory both map: the receiver of an edge keeps
     * its buffers there and the messages only say "micro-batch k is ready".
     * shares_with: whether memory can be shared with `stage` (the same answer
     * on both sides). share: collective over the pipeline's devices, `bytes`
     * (maybe 0) of this device's that the devices on its host map; *mine
     * NULL when none could be made. peer_memory: `stage`'s memory of share,
     * mapped here, and its *bytes; NULL when not shared. */
    int (*shares_with)(void *ctx, int stage);
    int (*share)(void *ctx, size_t bytes, void **mine);
    void *(*peer_memory)(void *ctx, int stage, size_t *bytes);
} so_pipe_link;

typedef struct {
    so_pipe_schedule schedule;  /* gpipe, 1f1b or interleaved (the edges' chunks) */
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
 * follow at the pace of the slowest device (its stages' times, or its
 * cuts' when slower: sends overlap compute); with v chunks per device the
 * fill is divided by v ((M v + P - 1) chunk times for equal devices).
 * The replicas' average runs after the step's last backward, as the
 * strategy does; the optimizer's step scales with the largest stage. */
typedef struct {
    int microbatches;            /* M */
    int replicas;                /* D */
    int devices;                 /* P ranks the plan's stages go round (interleaved: stages / v); 0: one per stage */
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

/* The order device d of P runs a step's passes in (2 M v of them, v chunks):
 * ops[i] = c M + k for the forward of micro-batch k on chunk c, -(c M + k + 1)
 * for its backward. gpipe: every forward, then every backward; 1f1b:
 * min(P - d - 1, M) forwards, then one forward and one backward alternately,
 * then the remaining backwards; interleaved (Megatron-LM's): micro-batches
 * in groups of P, forwards chunk by chunk within a group and backwards the
 * chunks in reverse, 2 (P - d - 1) + (v - 1) P warm-up forwards, then
 * alternating. When P does not divide M the last group also takes the
 * remainder (G = P + M mod P, or M when M < P) and the warm-up is
 * 2 (P - d - 1) + (v - 1) G: with groups of P and a short last one the
 * devices would wait on each other for ever (tests/test_pipe.c simulates
 * every P <= 6, M <= 16, v <= 4). A chunk's micro-batches go forward and
 * backward in order.
 * SO_EINVAL: v > 1 with gpipe or 1f1b. */
int so_pipe_schedule_ops(so_pipe_schedule sc, int d, int P, int microbatches, int v, int *ops);
/* Micro-batches one chunk of device d keeps in flight at most under
 * so_pipe_schedule_ops (gpipe M, 1f1b min(P - d, M)): the model slots. */
int so_pipe_slots(so_pipe_schedule sc, int d, int P, int microbatches, int v);

#endif
