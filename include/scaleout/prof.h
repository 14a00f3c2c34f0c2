/* The profiler: a low-overhead recorder of one rank's training timeline
 * (phases per step, per-layer or per-block forward/backward, communication
 * events) that writes Chrome trace events, communication statistics by
 * message size and the POP efficiency metrics (docs/PROFILING.md).
 * No MPI here: the job glue (src/job/prof_glue.c) feeds communication events,
 * measures clock offsets and merges the ranks' output. */
#ifndef SCALEOUT_PROF_H
#define SCALEOUT_PROF_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "scaleout/model.h"
#include "scaleout/train.h"

typedef struct so_prof so_prof;

/* What forward/backward look like in the timeline: one event per graph node,
 * per block (nodes grouped by the prefix of their PyTorch name up to the first
 * numeric component: "layer1.0.conv1" -> "layer1.0"), or phases only. */
typedef enum { SO_PROF_DETAIL_STEP, SO_PROF_DETAIL_BLOCK, SO_PROF_DETAIL_LAYER } so_prof_detail;

/* What a communication was for (the statistics' usage tag). */
typedef enum {
    SO_PROF_USE_GRADIENTS,  /* gradient bucket allreduce */
    SO_PROF_USE_PARAMS,     /* parameter broadcast */
    SO_PROF_USE_EVAL,       /* evaluation counts */
    SO_PROF_USE_METRICS,    /* other small reductions (loss averages, timings) */
    SO_PROF_USE_CHECKPOINT, /* checkpoint traffic */
    SO_PROF_USE_BATCHNORM,  /* synchronised batchnorm statistics */
    SO_PROF_USES
} so_prof_use;

typedef struct {
    so_prof_detail detail;
    long window_first, window_last; /* steps [first, last) get full detail; outside: one event per step */
    int rank;                       /* this process's rank (names the trace process) */
    size_t max_events;              /* trace events kept (0 = 1,000,000); later ones are counted as dropped */
    int skip_steps;                 /* first steps left out of totals, per-layer times and gradient
                                       statistics (one-time set-up: primitive creation, first touch);
                                       the timeline still shows them */
} so_prof_config;

/* One communication, times in so_now() seconds. Strings are copied. */
typedef struct {
    const char *coll;   /* "allreduce", "bcast", ... */
    const char *algo;   /* "ring", "mpi", ... */
    so_prof_use use;
    size_t bytes;
    int bucket;         /* gradient bucket, -1 otherwise */
    double t_queued;    /* submitted (== t_started for blocking calls) */
    double t_started, t_finished;
} so_prof_comm_event;

/* Parses "layer", "block" or "step"; SO_EINVAL otherwise. */
int so_prof_detail_parse(const char *s, so_prof_detail *out);
const char *so_prof_detail_name(so_prof_detail d);
const char *so_prof_use_name(so_prof_use u);
/* Parses a window "A:B" (steps A..B-1, B > A >= 0) or "all"; SO_EINVAL otherwise. */
int so_prof_window_parse(const char *s, long *first, long *last);

int so_prof_create(const so_prof_config *c, so_prof **out);
void so_prof_destroy(so_prof *p); /* accepts NULL; detach the model first */

/* Reads the model's node names and, unless detail is "step", installs the
 * per-node hook (m->on_node). detach removes it. */
int so_prof_attach_model(so_prof *p, so_model *m);
void so_prof_detach_model(so_prof *p, so_model *m);
/* When the attached model is a slice of a larger one (a pipeline stage):
 * each layer's "node" in profile.json becomes the index of the node of
 * `whole` with its name (a recv or send edge: its tensor's producer), so a
 * report orders and merges every rank's layers in the whole model's order.
 * Without this call "node" is the index in the attached model; -1 for a
 * name whole lacks. After so_prof_attach_model. */
void so_prof_set_layer_order(so_prof *p, const so_graph *whole);

/* The trainer's span hook (so_train_hooks.span); arg is the so_prof. */
void so_prof_span(void *arg, so_span_kind kind, long step, int id, double t0, double t1);
/* Records a communication (call from the training thread). Blocking
 * METRICS reductions that fall inside the next EVAL span are retagged EVAL. */
void so_prof_comm(so_prof *p, const so_prof_comm_event *e);
/* Records any other named interval (a checkpoint write, ...) on the compute
 * (track 0) or communication (track 1) track. */
void so_prof_mark(so_prof *p, const char *name, int track, double t0, double t1);

/* ---- background I/O: checkpoint writes and flushes ------------------------
 * Recorded from other threads (the checkpoint writer and flush threads), so
 * so_prof_io is thread-safe (a mutex of its own; the training thread's
 * recording is not slowed down). In the trace they form two more threads per
 * rank: tid 2 "checkpoint I/O" and tid 3 "checkpoint flush". The step window
 * applies by the checkpoint's step: outside it, a checkpoint's events on one
 * track become one summary event; the totals per kind count everything. */
enum { SO_PROF_TRACK_CKPT_IO = 2, SO_PROF_TRACK_CKPT_FLUSH = 3 };
#define SO_PROF_IO_KINDS 8 /* distinct kind names kept; more are counted as dropped */

typedef struct {
    const char *kind;  /* "shard write", "flush", ... (copied, up to 31 characters) */
    int track;         /* SO_PROF_TRACK_CKPT_IO or SO_PROF_TRACK_CKPT_FLUSH */
    long step;         /* the checkpoint's step (decides the window) */
    uint64_t bytes;
    double t0, t1;     /* so_now() seconds */
    int failed;
} so_prof_io_event;

typedef struct {
    char kind[32];
    long count;
    uint64_t bytes;
    double seconds;
} so_prof_io_total;

/* Records one piece of background I/O; any thread. */
void so_prof_io(so_prof *p, const so_prof_io_event *e);
/* A copy of the totals per kind, in order of first appearance (up to max); returns how many. */
int so_prof_io_totals(so_prof *p, so_prof_io_total *out, int max);

/* One rank's totals in seconds, the inputs of the POP metrics. */
typedef struct {
    double runtime;      /* sum of STEP spans: time inside training steps */
    double useful;       /* forward + backward + optimizer */
    double data_wait, forward, backward, comm_wait, optimizer, eval;
    double comm_pure;    /* gradient collectives' execution time (started..finished) */
    double comm_queue;   /* gradient collectives' time queued before starting */
    double comm_blocking;/* blocking collectives (bcast, reductions) */
    long steps;
} so_prof_totals;
#define SO_PROF_TOTALS_FIELDS 12 /* doubles in so_prof_totals before `steps`, for reductions */

void so_prof_get_totals(const so_prof *p, so_prof_totals *out);
/* Views of totals as a double array (SO_PROF_TOTALS_FIELDS + 1 entries, steps last). */
void so_prof_totals_pack(const so_prof_totals *t, double *v);
void so_prof_totals_unpack(const double *v, so_prof_totals *t);

/* The POP multiplicative metrics over n ranks (docs/PROFILING.md):
 * load balance = mean(useful) / max(useful); communication efficiency =
 * max(useful) / runtime with runtime = max over ranks; parallel efficiency =
 * their product; overlap = 100 (1 - sum comm_wait / sum comm_pure) clamped to
 * [0, 100] (-1 without gradient communication); data-wait share = sum
 * data_wait / sum runtime. */
typedef struct {
    double load_balance, comm_efficiency, parallel_efficiency;
    double overlap_pct, data_wait_share;
    double runtime, useful_mean, useful_max;
    double step_load_balance; /* so_prof_pop_steps; -1 until computed */
} so_prof_pop;
void so_prof_pop_compute(const so_prof_totals *ranks, int n, so_prof_pop *out);

/* Useful compute of every measured step of this rank (*n of them), in order. */
const double *so_prof_step_useful(const so_prof *p, long *n);
/* Per-step load balance from u[r * nsteps + s] (rank r, step s):
 * sum_s mean_r u / sum_s max_r u. Unlike the run's load balance it sees
 * imbalance that moves between ranks from step to step (every step waits for
 * its slowest rank). Sets out->step_load_balance. */
void so_prof_pop_steps(const double *u, int world, long nsteps, so_prof_pop *out);

/* A rank's clock mapped onto rank 0's, a linear model measured at the start
 * and the end of the run: rank 0's time of this rank's time t is
 * t + offset + drift * (t - t_ref). */
typedef struct {
    double offset; /* seconds, at t_ref */
    double drift;  /* seconds per second of this rank's clock */
    double t_ref;  /* this rank's time at which offset was measured */
} so_prof_clock;
double so_prof_clock_map(const so_prof_clock *c, double t); /* NULL: identity */

/* ---- one step read back (the pipeline schedule in profile.json) ----------- */
typedef struct {
    so_span_kind kind; /* FORWARD, BACKWARD, COMM_WAIT or OPTIMIZER */
    int id;            /* the micro-batch of a FORWARD / BACKWARD, 0 otherwise */
    double t0, t1;     /* as recorded (this rank's clock) */
} so_prof_phase;
/* The steps recorded in full detail (inside the window), in order: their
 * indices and STEP spans. Returns how many there are; writes up to max. */
long so_prof_detailed_steps(const so_prof *p, long *step, double *t0, double *t1, long max);
/* A detailed step's FORWARD, BACKWARD, COMM_WAIT and OPTIMIZER spans in the
 * order they ran. Returns how many there are; writes up to max. */
int so_prof_step_phases(const so_prof *p, long step, so_prof_phase *out, int max);

/* This rank's trace events as comma-separated JSON objects (no brackets),
 * one per line: metadata naming the process "rank R" and its "compute" and
 * "comm" threads, then X events with ts/dur in microseconds of
 * (so_prof_clock_map(clock, t) - origin), in whole 1/8 us.
 * Returns 0 or SO_EIO. */
int so_prof_write_trace(const so_prof *p, FILE *f, const so_prof_clock *clock, double origin);
/* This rank's statistics as one JSON object: totals, per-layer times,
 * communication statistics per (collective, algorithm, use) with a table by
 * power-of-two message size. */
int so_prof_write_rank_json(const so_prof *p, FILE *f);
/* Trace events recorded and dropped (over max_events). */
void so_prof_event_counts(const so_prof *p, size_t *kept, size_t *dropped);

/* ---- reading profiles back (`scaleout report`) ------------------------------
 * A strict JSON reader: the whole text becomes a tree of values, objects keep
 * their member order. Accessors accept NULL and return the default, so a
 * missing field reads as absent rather than crashing. */
typedef struct so_prof_jv so_prof_jv;
typedef enum {
    SO_PROF_JNULL, SO_PROF_JFALSE, SO_PROF_JTRUE, SO_PROF_JNUMBER, SO_PROF_JSTRING, SO_PROF_JARRAY, SO_PROF_JOBJECT
} so_prof_jtype;
#define SO_PROF_JSON_DEPTH 64

/* Parses text[0..n) (no NUL needed). SO_EFORMAT "line L: problem" or SO_ENOMEM. */
int so_prof_json_parse(const char *text, size_t n, so_prof_jv **out);
void so_prof_json_free(so_prof_jv *v); /* accepts NULL */
so_prof_jtype so_prof_jv_type(const so_prof_jv *v);
int so_prof_jv_len(const so_prof_jv *v);                        /* elements / members, 0 otherwise */
const so_prof_jv *so_prof_jv_at(const so_prof_jv *v, int i);    /* element or member i */
const char *so_prof_jv_key(const so_prof_jv *v);                /* member name of an object member */
const so_prof_jv *so_prof_jv_get(const so_prof_jv *v, const char *key);
double so_prof_jv_num(const so_prof_jv *v, double dflt);
const char *so_prof_jv_str(const so_prof_jv *v, const char *dflt);

#endif
