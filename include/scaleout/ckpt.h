/* Multi-level checkpoint/restart (in the manner of LLNL SCR), without MPI:
 * the caller hands in a small transport of function pointers (src/job/
 * ckpt_glue.c fills it from the comm module). The whole training state is
 * flattened into one byte vector and SHARDED: rank r writes 1/N of it to
 * node-local storage, a partner rank on another node keeps a copy, and every
 * M checkpoints the shards are flushed to a shared directory in the
 * background. A checkpoint exists only once its checksummed MANIFEST is
 * written, last. Formats: docs/FORMATS.md; design: docs/CHECKPOINT.md. */
#ifndef SCALEOUT_CKPT_H
#define SCALEOUT_CKPT_H
#include <stddef.h>
#include <stdint.h>

#include "scaleout/model.h"
#include "scaleout/optim.h"
#include "scaleout/crc32c.h"
#include "scaleout/train.h"

#define SO_CKPT_VERSION 1

/* CRC32C (so_crc32c, so_crc32c_sw) lives in core: scaleout/crc32c.h. */

/* ---- manifest ----------------------------------------------------------------
 * One shard file = a slice [rep_off, rep_off + rep_len) of the replicated
 * state (parameters, optimizer slots) followed by the per-rank sections of
 * ranks [rank_first, rank_first + rank_count) (model RNG, batchnorm running
 * statistics, then a strategy's own per-rank state such as compression
 * residuals), rank_bytes each. The scaleout mode writes N shards of one rank
 * each; the naive mode one shard holding everything. */
typedef struct {
    uint64_t rep_off, rep_len;
    int rank_first, rank_count;
    uint64_t bytes;        /* file size = rep_len + rank_count * rank_bytes */
    uint32_t crc;          /* CRC32C of the whole file */
} so_ckpt_shard;

typedef struct {
    int version;           /* SO_CKPT_VERSION */
    char model[64];
    uint64_t model_hash;   /* so_ckpt_model_hash: names, shapes and sizes of every tensor */
    uint64_t config_hash;  /* FNV-1a of the configuration text */
    long step;             /* optimizer steps done */
    int epoch;             /* epoch of the next step */
    long epoch_step;       /* steps of that epoch already done */
    int world;             /* ranks that wrote it */
    uint64_t nparams, nbufs;
    char optimizer[16];
    int nslots;            /* optimizer slots of nparams floats each */
    long optim_steps;
    uint64_t rep_bytes;    /* (1 + nslots) * nparams * 4 */
    uint64_t rank_bytes;   /* 32 (RNG) + nbufs * 4 + rank_state_bytes */
    uint64_t rank_state_bytes; /* a strategy's per-rank state at the end of each section (0: none) */
    char rank_state[96];   /* its tag (so_rank_state.tag; "" when none) */
    int nshards;
    so_ckpt_shard *shards; /* owned */
    /* The strategy's layout (so_state_layout) when the run kept a part of the
     * state per rank: shard i = replica x unit_shards + k holds block k of
     * every unit, cut again into piece `replica` of unit_replicas. nunits 0:
     * shard k is byte block k of the replicated state (data parallelism). */
    int nunits, unit_shards, unit_replicas;
    uint64_t *units;       /* nunits + 1 element boundaries (owned when parsed) */
    char *config;          /* configuration text (owned; may be NULL) */
} so_ckpt_manifest;

/* Parses manifest text (docs/FORMATS.md). SO_EFORMAT with a message naming
 * `what` and the problem for anything malformed: bad magic or version line,
 * unknown or missing keys, a shard table that does not tile the state, a wrong
 * trailing checksum. Never reads past len. Caller frees with _free. */
int so_ckpt_manifest_parse(const char *text, size_t len, const char *what, so_ckpt_manifest *m);
/* Formats m as manifest text (NUL-terminated, malloc'ed into *out). */
int so_ckpt_manifest_format(const so_ckpt_manifest *m, char **out, size_t *len);
void so_ckpt_manifest_free(so_ckpt_manifest *m); /* accepts zeroed */

/* FNV-1a 64 of the model's tensor names, shapes and buffer sizes. */
uint64_t so_ckpt_model_hash(const so_model *m);
uint64_t so_ckpt_hash_text(const char *s);

/* ---- transport ------------------------------------------------------------- */
typedef enum { SO_CKPT_SUM, SO_CKPT_MIN, SO_CKPT_MAX } so_ckpt_op;

/* How the library reaches the other ranks. All calls are made from the
 * training thread, inside step_end or restore, when the gradient engine is
 * idle. A NULL transport means one process. */
typedef struct so_ckpt_transport {
    void *ctx;
    int rank, world;
    int node_id, num_nodes, node_rank, node_size; /* (emulated) node topology */
    /* Broadcast n bytes from root, in place. */
    int (*bcast)(void *ctx, void *buf, size_t n, int root);
    /* In-place element-wise reduction of n int64 values over all ranks. */
    int (*allreduce_i64)(void *ctx, int64_t *v, int n, so_ckpt_op op);
    /* The partner exchange, in two halves: recv posts the receive of rn bytes
     * from src (with room for a send of up to sn bytes; *req identifies the
     * pair), send then posts the send of sn bytes to dst. Non-blocking:
     * progress happens while other MPI calls run (the gradient engine's). The
     * receive is posted a step before the partner may send: one posted after
     * the partner's send arrived can make the MPI library copy the whole shard
     * inside it, on the training thread. */
    int (*exchange_recv)(void *ctx, void *rbuf, size_t rn, int src, size_t sn, void **req);
    int (*exchange_send)(void *ctx, void *req, const void *sbuf, size_t sn, int dst);
    /* *done = 1 once both halves finished (req is then released); wait = 1
     * blocks until then. */
    int (*exchange_test)(void *ctx, void *req, int wait, int *done);
    /* Optional non-blocking SUM of n int64 values in place: start, then wait
     * (*req is released). The progress agreement of checkpoints in flight is
     * posted at one step_end and completed at the next, so no rank waits for
     * another in between. NULL: the blocking allreduce_i64 is used. */
    int (*isum_start)(void *ctx, int64_t *v, int n, void **req);
    int (*isum_wait)(void *ctx, void *req);
} so_ckpt_transport;

/* ---- a checkpointing session ----------------------------------------------- */
typedef struct {
    const char *local_dir;   /* node-local level (NULL: none); shards in <local_dir>/node<id>/ */
    const char *shared_dir;  /* shared level (NULL: none) */
    long every_steps;        /* checkpoint every N optimizer steps (0: off) */
    int every_epochs;        /* ... or every N epochs (0: off) */
    double mtbf_hours;       /* > 0: choose the interval by Daly's formula */
    int keep;                /* complete checkpoints kept per level (>= 1) */
    int flush_every;         /* with both levels: every M-th checkpoint goes to shared_dir */
    int naive;               /* rank 0 writes everything synchronously; others wait */
    int stop_on_error;       /* after a failed checkpoint the caller stops: none is started at that step */
    const char *model_name;
    const char *optimizer;   /* its name, recorded in the manifest and checked on restore */
    const char *config_text;
    /* The part of the state this rank keeps, when a strategy shards it
     * (scaleout/strategy.h; borrowed, must outlive the session): its blocks
     * are this rank's shard, written and restored through its get / set.
     * NULL: the model and the optimizer hold all of it. Not with naive. */
    const so_state_layout *state;
    /* The strategy's own per-rank state (scaleout/strategy.h; borrowed),
     * appended to this rank's section; restored only under the same tag and
     * world size, dropped with one logged line otherwise. NULL: none. */
    const so_rank_state *rank_state;
} so_ckpt_config;

typedef struct {
    long count;              /* checkpoints completed (at the first level) */
    long flushes;            /* flushes completed at the shared level */
    long failures;
    double stall_total, stall_max; /* seconds the training thread spent in step_end for checkpoints */
    double stall_last;
    double drain_seconds;    /* so_ckpt_finish waiting for the last checkpoint and flush (exit drain) */
    double write_seconds;    /* background seconds writing shards (this rank): own + partner copy */
    double write_bytes;
    double partner_seconds, partner_bytes; /* the partner copy's part of write_* (level 2) */
    double flush_seconds, flush_bytes;
    double bg_cpu_seconds;   /* CPU time of the writer and flush threads (this rank) */
    double last_complete_seconds; /* snapshot -> manifest of the last checkpoint */
    long interval;           /* current interval in steps (auto mode) */
} so_ckpt_stats;

typedef struct so_ckpt so_ckpt;

/* Starts a session (the writer and flush threads). m and opt are borrowed and
 * must outlive it. SO_EINVAL for a bad configuration, SO_EIO if a directory
 * cannot be created. */
int so_ckpt_create(const so_ckpt_config *c, const so_ckpt_transport *t, so_model *m, so_optim *opt,
                   so_ckpt **out);
/* Joins the threads after finishing (so_ckpt_finish) or abandoning pending work. Accepts NULL. */
void so_ckpt_destroy(so_ckpt *ck);

/* The body of so_train_hooks.step_end: advances pending checkpoints and
 * starts one when due. Returns 0, or a negative code when a checkpoint failed
 * (message in so_errmsg()); the caller decides whether training goes on
 * (so_ckpt_failed tells a checkpoint error from a communication error). */
int so_ckpt_step_end(so_ckpt *ck, const so_train_state *s);
/* The body of so_train_hooks.before_update: the snapshot of a checkpoint
 * started at the previous step_end is taken by the writer thread while
 * forward and backward run; this waits for it (the parameters are about to
 * change). It communicates nothing (gradient buckets may be in flight); the
 * next so_ckpt_step_end posts the partner exchange. Returns 0. */
int so_ckpt_before_update(so_ckpt *ck);
int so_ckpt_last_error_is_ckpt(const so_ckpt *ck);
/* The next so_ckpt_step_end starts a checkpoint whether one is due or not
 * (a stop on SIGTERM: the CLI asks on every rank at the same step, then
 * stops training and so_ckpt_finish makes it durable). */
void so_ckpt_request(so_ckpt *ck);
/* Observer of the time the training thread spends on checkpoints (each piece
 * of stall inside step_end, as [t0, t1] in so_now seconds), e.g. for the
 * profiler's timeline. Training thread only; fn NULL turns it off. */
typedef void (*so_ckpt_span_fn)(void *arg, double t0, double t1);
void so_ckpt_set_span(so_ckpt *ck, so_ckpt_span_fn fn, void *arg);
/* Observer of the background I/O (e.g. the profiler's checkpoint tracks):
 * one call per piece of work when it ends, from the thread that did it. The
 * writer thread does SNAPSHOT (copying this rank's shard into the staging
 * buffer), SHARD, PARTNER and MANIFEST writes one after another; the flush
 * thread FLUSH (copy of the shard to the shared level) and FLUSH_MANIFEST.
 * RESERVE is the writer making node-local shard files a few steps before a
 * checkpoint needs them (only reported when it made one; bytes = their size).
 * Times are so_now() seconds (CLOCK_MONOTONIC), step is the checkpoint's
 * step, rc 0 or the task's error. fn must be thread-safe and must not call
 * back into ck; NULL turns it off (no call is in progress once this returns).
 * The naive mode's synchronous write is not reported. */
typedef enum {
    SO_CKPT_IO_SNAPSHOT, SO_CKPT_IO_SHARD, SO_CKPT_IO_PARTNER, SO_CKPT_IO_MANIFEST,
    SO_CKPT_IO_FLUSH, SO_CKPT_IO_FLUSH_MANIFEST, SO_CKPT_IO_RESERVE, SO_CKPT_IO_KINDS
} so_ckpt_io_kind;
typedef struct {
    so_ckpt_io_kind kind;
    long step;
    uint64_t bytes;
    double t0, t1;
    int rc;
} so_ckpt_io_event;
typedef void (*so_ckpt_io_fn)(void *arg, const so_ckpt_io_event *e);
void so_ckpt_set_io(so_ckpt *ck, so_ckpt_io_fn fn, void *arg);
/* "snapshot", "shard write", "partner write", "manifest", "flush", "flush manifest", "file reserve". */
const char *so_ckpt_io_name(so_ckpt_io_kind k);
/* Collective: completes the checkpoint and flush in flight (blocking). */
int so_ckpt_finish(so_ckpt *ck);
void so_ckpt_get_stats(so_ckpt *ck, so_ckpt_stats *st);

/* Collective. `where` is "auto" (newest complete checkpoint: local, partner,
 * then shared level) or a path (a checkpoint directory holding a MANIFEST, or
 * a level directory to search). Verifies every checksum it uses, falls back to
 * a partner copy or an older checkpoint on damage (warning naming the file),
 * and restores parameters, running statistics, optimizer state and RNG.
 * *step = the step to continue from; *found = 0 if there was nothing to
 * restore (auto only). SO_EFORMAT/SO_EINVAL when a checkpoint belongs to
 * another model or version, or none of the existing ones is intact. */
int so_ckpt_restore(so_ckpt *ck, const char *where, long *step, int *found);

/* Listing/verification helpers for `scaleout ckpt` (one process): every
 * checkpoint directory under root (levels and nodes), its manifest, and
 * whether its shards (or partner copies) verify. cb gets one call each, with
 * what was found; m is set for LISTED, INTACT and DAMAGED only, problem says
 * what is wrong ("" when nothing is). */
typedef enum {
    SO_CKPT_LISTED,       /* manifest read; shards not checked (verify = 0) */
    SO_CKPT_INTACT,       /* every shard has an intact copy */
    SO_CKPT_DAMAGED,      /* a shard has no intact copy: cannot be restored */
    SO_CKPT_BAD_MANIFEST, /* a MANIFEST that cannot be read or fails its checksum: damaged */
    SO_CKPT_UNFINISHED,   /* no MANIFEST: a checkpoint interrupted before it completed */
    SO_CKPT_CHANGED       /* a running job pruned or rewrote it while it was read */
} so_ckpt_found;
typedef void (*so_ckpt_list_fn)(void *arg, const char *dir, const so_ckpt_manifest *m, so_ckpt_found found,
                                const char *problem);
int so_ckpt_scan(const char *root, int verify, so_ckpt_list_fn cb, void *arg);

/* Loads the checkpoint in `dir` (a directory with a MANIFEST) into memory on
 * one process: params (nparams floats) and bufs (nbufs floats of rank 0). */
int so_ckpt_load_dir(const char *dir, so_ckpt_manifest *m, float **params, float **bufs);

/* ---- interval ---------------------------------------------------------------
 * Daly's higher-order optimum (Daly 2006) for checkpoint cost delta and mean
 * time between failures M (seconds):
 *   tau = sqrt(2 delta M) [1 + sqrt(delta/(2M))/3 + (delta/(2M))/9] - delta   if delta < 2M
 *   tau = M                                                                otherwise
 * Young's first order is sqrt(2 delta M). Returns seconds of computation
 * between checkpoints. */
double so_ckpt_daly(double delta, double mtbf);
double so_ckpt_young(double delta, double mtbf);

/* ---- safetensors ------------------------------------------------------------
 * The format of huggingface/safetensors: an 8-byte little-endian header
 * length N, N bytes of JSON {"name": {"dtype": "F32", "shape": [..],
 * "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v"}}, then the
 * raw little-endian tensor bytes (offsets relative to the end of the header).
 * Names and layouts are PyTorch's state_dict: "conv1.weight" (OIHW),
 * "bn1.running_mean", "fc.weight" (out, in); batchnorm's num_batches_tracked is
 * written as an I64 scalar (PyTorch expects it) and ignored on load. */
typedef struct {
    char name[128];
    char dtype[8];        /* "F32", "I64", ... */
    int ndim;
    int64_t shape[8];
    uint64_t begin, end;  /* byte offsets in the data section */
} so_st_tensor;

/* Parses a whole file image. SO_EFORMAT naming `what` for anything malformed
 * (length past the end, bad JSON, unknown dtype, offsets outside the data or
 * not matching dtype x shape). *t is malloc'ed; *data points into buf. */
int so_ckpt_safetensors_parse(const uint8_t *buf, size_t len, const char *what, so_st_tensor **t, int *n,
                              const uint8_t **data, size_t *data_len);
/* One tensor for so_ckpt_safetensors_write. */
typedef struct {
    char name[160];
    const char *dtype;    /* "F32", "BF16" or "I64" */
    int ndim;
    int64_t dims[4];
    const void *data;     /* row-major; with transposed (2-D F32/BF16), data holds the
                             (dims[1], dims[0]) matrix and is written transposed;
                             for "BF16", FP32 values rounded to nearest even on write */
    size_t bytes;
    int transposed;
} so_st_out;
/* Writes n tensors in order, the data 8-byte aligned after the header. */
int so_ckpt_safetensors_write(const char *path, const so_st_out *t, int n);
/* Writes the model's tensors from params / bufs (flat buffers of m's layout). */
int so_ckpt_safetensors_save(const char *path, const so_model *m, const float *params, const float *bufs,
                             int64_t batches_tracked);
/* The same with the parameters and running statistics as dtype (an so_dtype:
 * SO_DTYPE_F32, or SO_DTYPE_BF16 rounded to nearest even from the FP32
 * values); SO_EINVAL for any other. num_batches_tracked stays I64. */
int so_ckpt_safetensors_save_as(const char *path, const so_model *m, const float *params, const float *bufs,
                                int64_t batches_tracked, int dtype);
/* Loads parameters and running statistics by name; every model tensor must be
 * present with dtype F32 and its exact shape; unknown names are errors. */
int so_ckpt_safetensors_load(const char *path, so_model *m);
/* The same, but tensors the model does not have are left alone when
 * others_allowed (a pipeline stage loads its part of a whole model's file). */
int so_ckpt_safetensors_load_part(const char *path, so_model *m, int others_allowed);

#endif
