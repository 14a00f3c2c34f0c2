/* Private: the checkpointing session shared by the write path (ckpt.c) and
 * the restore path (restore.c). ckpt.c drives the write path; the files it
 * calls are leaves that call nothing back: agree.c (the ranks' agreement on
 * progress), flush.c (the copy to the shared level), naive.c (rank 0 writes
 * everything), schedule.c (when checkpoints are due), with io.c, slot.c,
 * state.c and worker.c beneath them. */
#ifndef SCALEOUT_CKPT_SESSION_H
#define SCALEOUT_CKPT_SESSION_H
#include "ckpt_internal.h"
#include "slot.h"
#include "state.h"
#include "tclock.h"
#include "worker.h"

/* The partner exchange of the checkpoint in flight: this rank's shard goes
 * to a rank on another node, and it keeps that of another. */
typedef struct {
    int src;                     /* the rank whose shard this one keeps */
    void *req;                   /* the exchange in flight (transport's handle) */
    int recv_early;              /* its receive was posted at the due step, the send comes later */
    int posted_now;              /* posted at the latest step end (ckpt_progress) */
    double posted_at;            /* when */
} ck_exchange;

/* The ranks' agreement on progress (agree.c): one non-blocking SUM of a
 * row per round, posted at a step end and settled SETTLE_LAG steps on. */
typedef struct {
    int64_t *row;                /* in MPI's hands while req is set */
    void *req;
    long posted_step;
    int covers_ckpt, covers_flush; /* what the pending round covers */
    int flush_failed;            /* this rank's flush failed (in the round) */
} ck_agreement;

/* Level 3: the flush of a complete checkpoint to the shared directory. */
typedef struct {
    int active;
    long step;                   /* the checkpoint being flushed */
    uint32_t crc;
    ck_task task;
    char *manifest_text;
    size_t manifest_len;
} ck_flush;

/* When checkpoints are due, and the step times that set the interval. */
typedef struct {
    long next_auto;              /* --ckpt-every auto: the next due step */
    long steps_to_complete;      /* steps the last checkpoint took to complete */
    int requested;               /* so_ckpt_request: the next step_end starts one, due or not */
    int in_flight_requested;     /* the checkpoint in flight was requested: flushed, whatever M */
    double step_time, last_step_time, cur_stall;
    long next_poll, poll_gap;    /* when the next agreement round is posted (ck_schedule_poll) */
} ck_schedule;

struct so_ckpt {
    so_ckpt_span_fn span_fn; /* stall observer (so_ckpt_set_span) */
    void *span_arg;
    so_ckpt_config c;
    so_ckpt_transport t;
    so_model *m;
    so_optim *opt;
    char optim_name[16];
    char node_dir[4096];         /* <local_dir>/node<id> */
    uint64_t model_hash, config_hash, rep_bytes, rank_bytes;
    ck_units units;              /* the strategy's layout (c.state; units NULL: byte blocks) */
    uint64_t *unit_bounds;       /* its boundaries, owned */
    int delay_ms;                /* SCALEOUT_CKPT_TEST_DELAY_MS */
    int flush_delay_ms;          /* SCALEOUT_CKPT_TEST_FLUSH_DELAY_MS: the flush copy only */
    double trace_ms;             /* SCALEOUT_CKPT_TRACE_MS (-1: off) */
    int tclock_fd;               /* the training thread's schedstat (-2: not opened yet) */
    ck_tclock mark;              /* its clocks at the start of the piece being traced */
    long cur_step;               /* of the step_end in progress (trace) */
    ck_worker writer, flusher;

    /* the checkpoint in flight (level 1 + partner) */
    int pending, partner;
    so_ckpt_manifest pending_manifest; /* its manifest, shards filled at completion */
    char pending_dir[4096];
    uint8_t *stage, *partner_buf; /* this rank's shard; the partner's shard we keep */
    size_t stage_cap, partner_buf_cap;
    /* With a node-local level, stage and partner_buf are mappings of recycled shard
     * files (slot.c), taken per checkpoint by the snapshot; scratch_* stand
     * in for them when none can be had (the exchange must still run). */
    int slots;
    ck_slots own_slots, partner_slots;
    uint8_t *scratch_own, *scratch_part;
    ck_task reserve_task;        /* makes shard files ahead of a checkpoint (reserve_ahead) */
    long reserved_for;           /* the due step it last ran for */
    ck_task snapshot_task, partner_task; /* this rank's snapshot; writing the partner's shard */
    int snapping;                /* the snapshot may still be running (before_update waits) */
    int post_due;                /* the snapshot is taken, the partner exchange not yet posted
                                    (the next step_end posts it: nothing of the strategy's is
                                    in flight there, while buckets may be at before_update) */
    uint8_t *rankbuf;            /* the per-rank state, recorded at the due step_end */
    ck_task prefault_task;       /* prefaults stage and partner_buf at start-up */
    char *manifest_text;
    size_t manifest_len;
    double pending_since;        /* when the checkpoint in flight started */
    ck_task manifest_task, flush_manifest_task; /* manifest + prune on the writer / flush thread */
    char *manifest_copy, *flush_manifest_copy; /* the text those tasks write */

    ck_exchange exchange;        /* with the partner rank */
    ck_agreement agreement;      /* of the ranks on progress */
    ck_flush flush;              /* to the shared level */
    ck_schedule sched;
    int err_is_ckpt;
    so_ckpt_stats st;
};

/* Steps between posting a row and completing it. One step is not enough:
 * a rank's part of the SUM only moves while that rank calls MPI, and a rank
 * that was descheduled (4 ranks on 2 cores) reaches its next step_end late,
 * so the first to arrive waited for it inside the checkpoint (4.7 ms seen at
 * np 4). Two steps later every rank has run a whole step of gradient
 * traffic since posting, and the SUM is complete before anybody asks. */
#define SETTLE_LAG 2


/* ---- the write path's leaves: ckpt.c drives them, none calls back ----------- */

/* agree.c: the ranks' agreement on progress. This rank's side of a round: */
typedef struct {
    int covers_ckpt, covers_flush;  /* what the round is about */
    int ckpt_done, ckpt_failed;     /* the checkpoint in flight, here */
    uint32_t shard_crc;             /* and its shard, once durable */
    uint64_t shard_bytes;
    int flush_done, flush_failed;   /* the flush in flight, here */
} ck_progress;
/* ... and what every rank agreed on (identical on every rank). */
typedef struct {
    int ckpt_ended, ckpt_all_done, ckpt_failed;  /* ended: all done, or failed somewhere */
    int flush_ended, flush_failed;
    int flush_failed_here;          /* this rank's own flush failed (its message is here) */
} ck_outcome;
int ck_agreement_init(ck_agreement *a, int world);
void ck_agreement_deinit(ck_agreement *a);
/* This rank's row from mine (no communication). */
void ck_agreement_fill(ck_agreement *a, const so_ckpt_transport *t, const ck_progress *mine);
/* Sums the rows at once (blocking). */
int ck_agreement_sum(ck_agreement *a, const so_ckpt_transport *t);
/* Posts the sum without blocking (t->isum_start), at `step`; complete
 * finishes the one posted (nothing when none is). */
int ck_agreement_post(ck_agreement *a, const so_ckpt_transport *t, long step);
int ck_agreement_complete(ck_agreement *a, const so_ckpt_transport *t);
/* The summed row read as the outcome; the round is over. */
void ck_agreement_outcome(ck_agreement *a, int world, ck_outcome *out);
/* Rank k's shard in the summed row. */
void ck_agreement_shard(const ck_agreement *a, int rank, uint32_t *crc, uint64_t *bytes);

/* flush.c: the copy of a complete checkpoint to the shared level. */
typedef struct {
    const char *from_dir, *to_dir;  /* the checkpoint's directory at level 1 and at the shared level */
    int rank;
    long step;
    uint32_t crc;                   /* this rank's shard's, from the manifest */
    char *manifest_text;            /* taken: the shared MANIFEST rank 0 writes once every copy is there */
    size_t manifest_len;
    int delay_ms;                   /* test hook */
} ck_flush_job;
void ck_flush_start(ck_flush *f, ck_worker *flusher, const ck_flush_job *j);
/* This rank's copy: *done, and *bad (failed or a checksum mismatch, in the task's err). */
void ck_flush_progress(ck_flush *f, ck_worker *flusher, int block, int *done, int *bad);
/* The ranks agreed the flush ended: 0 with the statistics counted, or
 * SO_EIO with msg (this rank's error when bad_here). */
int ck_flush_end(ck_flush *f, int failed, int bad_here, so_ckpt_stats *st, char *msg, size_t cap);

/* naive.c: the whole checkpoint through rank 0. */
typedef struct {
    const so_ckpt_transport *t;
    so_model *m;
    const so_rank_state *rank_state; /* the strategy's per-rank state (NULL: none) */
    so_optim *opt;
    uint64_t rep_bytes, rank_bytes;
    uint8_t **buf;                  /* the staging buffer (grown as needed) and its size */
    size_t *cap;
    so_ckpt_manifest *manifest;     /* filled by the caller; rank 0 writes it with the one shard */
    const char *dir;                /* the checkpoint's directory */
    int delay_ms;                   /* test hook */
} ck_naive_job;
/* Collective: every rank's per-rank section reaches rank 0 (a broadcast
 * each), which writes shard-0.bin and the MANIFEST into dir (its write
 * time in st). *failed: rank 0 could not write (err says why). Returns the
 * transport's errors. */
int ck_naive_write(const ck_naive_job *j, so_ckpt_stats *st, int *failed, char *err, size_t cap);

/* schedule.c */
int ck_due(so_ckpt *ck, const so_train_state *s);            /* a checkpoint starts at this step end */
long ck_steps_to_due(const so_ckpt *ck, const so_train_state *s); /* LONG_MAX when unknown */
int ck_update_interval(so_ckpt *ck, long step, double stall);  /* --mtbf: Daly's interval (collective) */
void ck_track_step_time(so_ckpt *ck);
void ck_schedule_poll(so_ckpt *ck, const so_train_state *s, int moved);
long ck_reserve_lead(const so_ckpt *ck, const so_train_state *s);

#endif
