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
#include <stdint.h>

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

/* ---- ranks: P stages x D replicas (layout.c) -------------------------------------
 * A job of P x D ranks. stage-major puts a replica's P stages on
 * neighbouring ranks (rank r: stage P - 1 - r mod P, replica r / P), so a
 * replica's stages share a node; replica-major puts a stage's D replicas on
 * neighbouring ranks (stage P - 1 - r / D, replica r mod D), so a stage's
 * gradient average stays inside a node. Either way world rank 0 holds the
 * LAST stage of replica 0, where the loss and the accuracy are computed, so
 * what rank 0 prints is the model's. In a replica's pipeline group (its P
 * stages) stage s is group rank so_pipe_group_rank(s, P) = P - 1 - s. */
typedef enum { SO_PIPE_STAGE_MAJOR, SO_PIPE_REPLICA_MAJOR } so_pipe_placement;

/* What a job asks of its pipeline (the CLI's flags), before any rank knows its stage. */
typedef struct {
    int stages;                 /* P; <= 1: no pipeline */
    int microbatches;           /* M per step (<= 0: 1) */
    int virtual_stages;         /* v chunks per rank (<= 0: 1; interleaved only) */
    int batch;                  /* per replica and step; M must divide it */
    int accumulate;             /* the trainer's: a pipeline accumulates its micro-batches itself */
    const char *schedule;       /* gpipe, 1f1b, interleaved (NULL: 1f1b) */
    const char *placement;      /* stage-major, replica-major (NULL: stage-major) */
} so_pipe_options;

/* Where one rank sits. */
typedef struct {
    int stage, stages;
    int replica, replicas;
} so_pipe_ranks;

/* The options against each other and a world of `world` ranks (P must
 * divide it). 0 without a pipeline unless --virtual-stages asks for one.
 * SO_EINVAL with a message naming the flag. */
int so_pipe_options_check(const so_pipe_options *o, int world);
/* "stage-major", "replica-major" (NULL: stage-major); -1 if unknown. */
int so_pipe_placement_parse(const char *name);
/* The stage and replica of world rank `rank` of `world` (P divides it). */
void so_pipe_ranks_of(int rank, int world, int stages, so_pipe_placement pl, so_pipe_ranks *out);
/* The world rank of (stage, replica) in a job shaped like r: the inverse of so_pipe_ranks_of. */
int so_pipe_world_rank(const so_pipe_ranks *r, so_pipe_placement pl, int stage, int replica);
/* Stage s's rank in its replica's pipeline group: P - 1 - s (and back: the map is its own inverse). */
int so_pipe_group_rank(int stage, int stages);

/* ---- choosing the cuts (cuts.c) --------------------------------------------------
 * --partition: a list of stage starts, or a balancer over per-node costs:
 * memory (so_pipe_stage_memory), time (per-node seconds the caller
 * measures at one micro-batch) or auto (time, within max_bytes when set;
 * when timing the whole model at one micro-batch would itself break the
 * cap, FLOPs stand in for the seconds). */
typedef struct {
    const char *partition;      /* auto (NULL), time, memory, or a list (so_pipe_parse_list) */
    int devices, chunks;        /* P ranks x v chunks: P v stages */
    int microbatch, microbatches;
    so_pipe_schedule schedule;
    double max_bytes;           /* --max-memory per rank (0: none) */
    /* Forward + backward seconds of every node (n of them) at one
     * micro-batch, for time and auto. */
    int (*time_nodes)(void *ctx, double *secs, int n);
    void *ctx;
} so_pipe_cut_request;

/* Writes the P v stage starts into first; *basis says how they were chosen
 * (static text: "memory", "measured time", "--partition's list", ...).
 * SO_EINVAL naming --partition or --max-memory; the time_nodes callback's errors. */
int so_pipe_choose_cuts(const so_graph *whole, const so_pipe_cut_request *r, int *first, const char **basis);

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
    /* Weight tying across devices (GPT-2's LM head on the last stage reads
     * stage 0's token table, as in Megatron): the device of the tied layer
     * holds a copy of the table, its last tie_n parameters (tie_copy 1; not
     * the model's: gathers and exports leave it out); the table's device
     * holds it at tie_off (tie_copy 0). Every step the two sum their
     * gradients of it (a message of tag tie_tag each way), so both copies
     * step alike. tie_peer: the other device; tie_n 0 when no tie leaves this one. */
    int tie_peer, tie_copy, tie_tag;
    size_t tie_off, tie_n;
    size_t tie_whole;           /* the table's offset in the whole model */
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
/* The parameters device d of `devices` holds beyond its chunks' slices of
 * the model: the copy of a table tied to a layer on d from another device
 * (so_pipe_stage_edges' tie_n where tie_copy is 1), else 0. A checkpoint's
 * stage holds them last; an export drops them. */
size_t so_pipe_tied_copy(const so_pipe_plan *p, int devices, int d);

/* ---- composing a device from the whole model (compose.c) -------------------------- */
/* The whole model's initial values (so_graph_init_params with seed, as one
 * process would start) copied into m, the device's model: its chunks'
 * slices in order. SO_EINVAL when m's sizes are not the slices'. */
int so_pipe_init_params(const so_graph *whole, const so_pipe_stage_edges *e, uint64_t seed, so_model *m);
/* Bytes of the device's message buffers: every edge, both directions (the
 * activation and its gradient), every one of M micro-batches; on a BF16
 * wire also the half-size staging of each activation sent (counted for
 * every send edge, though edges in shared memory need none). */
double so_pipe_message_bytes(const so_pipe_stage_edges *e, int microbatches, so_model *m, int wire_bf16);
/* The whole model's parameters from the devices' (bytes), as a gather over
 * a replica's pipeline group delivers them: group rank after group rank,
 * sizes[q] bytes each (group rank q holds device P - 1 - q). *out:
 * malloc'ed, *n floats. SO_EINVAL when they do not make the model, SO_ENOMEM. */
int so_pipe_model_from_group(const so_pipe_plan *p, int devices, const void *gathered, const size_t *sizes,
                             float **out, size_t *n);

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
    /* --clip-norm: the world's sum of a double (so_dist.sum); NULL: one process. */
    int (*sum)(void *ctx, double *v, int n);
    void *sum_ctx;
    /* 1: tensors between devices that do not share memory travel as BF16
     * (activations forward, diffs back), as every device of the job
     * agreed (every one computes in BF16); 0: FP32. */
    int wire_bf16;
} so_pipe_config;

/* The strategy of one stage: runs the schedule's forwards and backwards of
 * the step's micro-batches on the model's slots (so_model_set_slots: the
 * micro-batches the schedule keeps in flight there), posting every receive
 * of a step up front and sending as each micro-batch finishes; evaluation
 * passes every test batch through the stages. The model must be the stage's
 * (so_pipe_stage_graph); e is borrowed. */
int so_strategy_pipeline(const so_pipe_config *c, const so_pipe_stage_edges *e, so_strategy **out);

/* ---- tensor layouts between devices (tensor_layouts.c) ----------------------------
 * A device's model keeps activations in its backend's layouts, and a
 * tensor crosses to another device in its producer's layout, so the reader
 * builds its recv node in that layout: before the models are built the
 * devices exchange, per edge, one fixed-size message with the layout (or a
 * mark that the producer could not build its model, so nobody waits for
 * ever). Without chunks the layouts pass down the pipeline once: receive,
 * build, send. Interleaved, devices send to each other both ways, so each
 * builds trial models with the layouts known so far (plain at first) in
 * rounds until no layout changes on any device; a stage's layouts depend
 * only on earlier stages', so this ends within stages + 1 rounds. */
typedef struct so_pipe_layouts so_pipe_layouts;

/* Every rank of the job, for the rounds: agree turns this rank's rc into
 * the job's (0 on every rank, or an error on every rank); sum adds v over
 * all ranks in place. */
typedef struct {
    void *ctx;
    int (*agree)(void *ctx, int rc);
    int (*sum)(void *ctx, double *v, int n);
} so_pipe_world;

/* The layouts of e's recv edges (plain until received). e is borrowed. */
int so_pipe_layouts_create(const so_pipe_stage_edges *e, so_pipe_layouts **out);
void so_pipe_layouts_destroy(so_pipe_layouts *l);
/* so_model_opts.recv_layout for the device's model (ctx: the layouts). */
int so_pipe_layouts_of(void *ctx, int node, const void **desc, size_t *len);
/* Without chunks: waits for every recv edge's layout (SO_ECOMM naming the
 * stage that could not build), and sends m's send edges' layouts (m NULL:
 * the failure mark). */
int so_pipe_layouts_receive(so_pipe_layouts *l, const so_pipe_link *link);
int so_pipe_layouts_send(const so_pipe_stage_edges *e, const so_pipe_link *link, so_model *m);
/* Interleaved: rounds until the layouts settle on every device. build
 * makes a trial model of this device with so_pipe_layouts_of(l) (its error
 * is sent as the failure mark); the model is destroyed after its round.
 * Collective over w. SO_ECOMM when a device could not build or the rounds
 * do not settle. */
int so_pipe_layouts_settle(so_pipe_layouts *l, const so_pipe_link *link, const so_pipe_world *w,
                           int (*build)(void *ctx, so_model **m), void *build_ctx);

/* ---- measured pipeline metrics (metrics.c) -------------------------------------- */
/* The step of a pipeline whose P devices are busy busy[d] seconds per step
 * over M micro-batches (per chunk and micro-batch when interleaved: M = v x
 * micro-batches): the first micro-batch passes every device, the other
 * M - 1 follow at the slowest device's pace ((M + P - 1) u for equal devices). */
double so_pipe_step_of_devices(const double *busy, int P, int M);
/* The bubble that step implies: 1 - sum(busy) / (P x step); 0 without time. */
double so_pipe_bubble_of_devices(const double *busy, int P, int M);

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
