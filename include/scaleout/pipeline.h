/* Pipeline partitions: a model graph cut into P contiguous stages over its
 * topological order, what each stage owns (nodes, parameters, FLOPs,
 * activations), which tensors cross each cut (residual connections too),
 * balancers that choose the cuts, and the schedules' bubble and in-flight
 * formulas. No MPI and no training: the first piece of pipeline
 * parallelism (docs/PARALLELISM.md); `scaleout plan` prints it. */
#ifndef SCALEOUT_PIPELINE_H
#define SCALEOUT_PIPELINE_H
#include <stddef.h>

#include "scaleout/graph.h"

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

#endif
