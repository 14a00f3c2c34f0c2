/* Private to src/prof: the recorder's state shared by the recording code
 * (prof.c), the statistics and metrics (prof_stats.c) and the trace writer
 * (prof_trace.c). */
#ifndef SCALEOUT_PROF_INTERNAL_H
#define SCALEOUT_PROF_INTERNAL_H
#include <pthread.h>

#include "scaleout/json.h"
#include "scaleout/prof.h"

enum { EV_PHASE, EV_NODE, EV_COMM, EV_STEP, EV_STEP_COMM, EV_MARK };
enum { TRACK_COMPUTE = 0, TRACK_COMM = 1 };
enum { AGG_DATA, AGG_FORWARD, AGG_BACKWARD, AGG_COMM_WAIT, AGG_OPTIMIZER, AGG_FIELDS };

/* One trace event. Times are so_now() seconds; names are interned indices. */
typedef struct {
    double t0, t1;
    long step;
    int name;
    short kind, track;
    short sub;      /* PHASE: micro-batch; NODE: 1 = backward; COMM: use */
    int bucket;     /* COMM: bucket (-1 none); STEP_COMM: collectives in the step */
    union {
        struct {
            uint64_t bytes;
            double t_queued;
            int algo;  /* interned */
        } c;
        float agg[AGG_FIELDS]; /* STEP: seconds per phase */
    } u;
} prof_ev;

/* Latencies of one power-of-two message size class. */
typedef struct {
    uint64_t n;
    double sum, min, max;
} prof_bin;

#define PROF_NBINS 48 /* bin k holds 2^(k-1) < bytes <= 2^k; bin 0 holds 0 and 1 byte */
#define PROF_MAX_STATS 32

typedef struct {
    int coll, algo; /* interned */
    so_prof_use use;
    uint64_t calls, bytes;
    double seconds, queue;
    prof_bin bins[PROF_NBINS];
} prof_cstat;

#define PROF_PENDING_COMM 16
#define PROF_TICKS_PER_US 8 /* a power of two: k / 8 prints exactly with 3 decimals */

/* One background I/O event (prof_ckpt_io.c); a summary merges one checkpoint's
 * events on one track outside the window. */
typedef struct {
    double t0, t1;
    long step;
    uint64_t bytes;
    int kind;        /* index into io_tot; -1 for a summary */
    int count;       /* events merged (1 unless a summary) */
    short track, failed;
} prof_io_ev;

struct so_prof {
    so_prof_config cfg;
    char (*names)[64];
    int nnames, capnames;
    /* model */
    int nnodes;
    int *node_name, *node_block; /* interned per node */
    int *node_order;             /* per node: its index in the whole model (so_prof_set_layer_order) */
    signed char *node_edge;      /* per node: 0 a layer, 1 a send, 2 a recv edge of a pipeline stage */
    double *lay_fwd, *lay_bwd;   /* seconds per node over training steps */
    long *lay_nfwd;              /* forwards per node over training steps */
    double *node_flops;          /* per node: FLOPs of one forward (so_node_flops x the batch) */
    signed char *node_bf16;      /* per node: its products run in BF16 (so_model_node_precision) */
    struct pend_node { int node, bwd; double t0, t1; } *pend;
    int npend, cappend;
    /* trace events */
    prof_ev *ev;
    size_t nev, capev, dropped;
    /* totals and the current step */
    so_prof_totals tot;
    long cur_step;
    long seen;       /* steps closed so far, skipped ones included */
    double *step_useful; /* per measured step: forward + backward + optimizer */
    long nstep_useful, capstep_useful;
    double step_agg[AGG_FIELDS];
    int step_ncomm;
    uint64_t step_bytes;
    double step_comm_t0, step_comm_t1;
    /* blocking collectives waiting for the next span (retagging as EVAL) */
    so_prof_comm_event pend_comm[PROF_PENDING_COMM];
    int npend_comm;
    /* communication statistics */
    prof_cstat stats[PROF_MAX_STATS];
    int nstats;
    /* background I/O, all under io_mu (prof_ckpt_io.c) */
    pthread_mutex_t io_mu;
    prof_io_ev *io;
    size_t nio, capio, io_dropped;
    long io_last[2];          /* per I/O track: index of its last event, -1 none */
    so_prof_io_total io_tot[SO_PROF_IO_KINDS];
    int nio_kinds;
};

/* Index of name s in the intern table (added if new), -1 on allocation failure. */
int prof_intern(so_prof *p, const char *s);
/* Appends an event (or counts it as dropped); returns it or NULL. */
prof_ev *prof_push(so_prof *p, int kind, int track, int name, long step, double t0, double t1);
/* Adds one communication to the statistics. */
void prof_stats_add(so_prof *p, const so_prof_comm_event *e);
int prof_size_bin(uint64_t bytes);
int prof_in_window(const so_prof *p, long step);
/* t on rank 0's clock in whole 1/8 us since origin. */
long long prof_ticks(const so_prof_clock *clock, double origin, double t);
/* The I/O tracks' metadata and events (prof_ckpt_io.c), each preceded by ",\n". */
void prof_io_write_trace(so_prof *p, FILE *f, const so_prof_clock *clock, double origin);
/* "checkpoint_io": [...] totals per kind, as a member of the open object. */
void prof_io_write_json(so_json *js, so_prof *p);
void prof_io_init(so_prof *p);
void prof_io_free(so_prof *p);

#endif
