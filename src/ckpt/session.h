/* Private: the checkpointing session shared by the write path (ckpt.c) and
 * the restore path (restore.c). */
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
    int posted_now;              /* posted at this very step end (ckpt_flags) */
    double posted_at;            /* when */
} ck_exchange;

/* The ranks' agreement on progress (ckpt.c: local_row): one non-blocking SUM
 * of a row per round, posted at a step end and settled SETTLE_LAG steps on. */
typedef struct {
    int64_t *row;                /* in MPI's hands while req is set */
    void *req;
    long posted_step;
    long next_poll, poll_gap;    /* when the next round is posted (schedule_poll) */
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
    uint8_t *rankbuf;            /* the per-rank state, recorded at the due step_end */
    ck_task prefault_task;       /* prefaults stage and partner_buf at start-up */
    char *manifest_text;
    size_t manifest_len;
    double pending_since;        /* when the checkpoint in flight started */
    ck_task manifest_task, flush_manifest_task; /* manifest + prune on the writer / flush thread */
    char *manifest_copy, *flush_manifest_copy; /* the text those tasks write */

    ck_exchange x;
    ck_agreement a;
    ck_flush f;
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

/* Layout of the agreement row (agree.c: local_row): [AV_SHARDS + 2k] and
 * [AV_SHARDS + 2k + 1] are the CRC and size of rank k's shard. */
enum { AV_DONE, AV_BAD, AV_FDONE, AV_FBAD, AV_SHARDS };

/* ---- shared by the parts of the write path ----------------------------------
 * ckpt.c: the session, starting and completing a checkpoint, the hook. */
const char *ck_level1(const so_ckpt *ck);       /* the directory of the first level */
void ck_dir(char *out, size_t cap, const char *base, long step); /* <base>/ckpt-<step> */
int ck_fail(so_ckpt *ck, int code, const char *msg);            /* a checkpoint's own failure */
/* Blocking agreement on one checkpoint's outcome (naive mode). */
int ck_agree_blocking(so_ckpt *ck, int done, int failed, int *all_done, int *any_failed);
int ck_write_manifest(const so_ckpt *ck, const char *dir, const char *text, size_t len, char *err, size_t cap);
void ck_fill_manifest(so_ckpt *ck, so_ckpt_manifest *m, const so_train_state *s, int nshards);
/* Writes the manifest text (copied) on worker w's thread, then prunes base
 * beyond the kept checkpoints, sparing step `protect`. */
int ck_queue_manifest(so_ckpt *ck, ck_worker *w, ck_task *t, char **copy, const char *dir, const char *text,
                      size_t len, const char *base, long protect);
int ck_snapped(so_ckpt *ck);                    /* waits for the snapshot, posts the exchange */
int ck_flags(so_ckpt *ck, int block, int *done, int *bad); /* this rank's state of the checkpoint in flight */
int ck_settle(so_ckpt *ck, int all_done, int failed);       /* acts on the agreed outcome */
void ck_nap(void);                              /* a short sleep between blocking rounds */
/* agree.c */
int ck_av_len(const so_ckpt *ck);
int ck_agree_round(so_ckpt *ck, int ckpt, int flush);      /* blocking round: flags, SUM, act */
int ck_agree_settle(so_ckpt *ck);               /* completes the posted round and acts on it */
int ck_agree_post(so_ckpt *ck);                 /* posts this step's row */
int ck_agree_advance(so_ckpt *ck);              /* finishes the checkpoint in flight (blocking) */
/* flush.c */
int ck_flush_start(so_ckpt *ck);
void ck_flush_flags(so_ckpt *ck, int block, int *done, int *bad);
int ck_flush_settle(so_ckpt *ck, int failed, int bad);
int ck_flush_advance(so_ckpt *ck);               /* finishes the flush in flight (blocking) */
/* schedule.c */
int ck_due(so_ckpt *ck, const so_train_state *s);            /* a checkpoint starts at this step end */
long ck_steps_to_due(const so_ckpt *ck, const so_train_state *s); /* LONG_MAX when unknown */
int ck_update_interval(so_ckpt *ck, long step, double stall);  /* --mtbf: Daly's interval (collective) */
void ck_track_step_time(so_ckpt *ck);
void ck_schedule_poll(so_ckpt *ck, const so_train_state *s, int moved);
long ck_reserve_lead(const so_ckpt *ck, const so_train_state *s);
/* naive.c */
int ck_naive(so_ckpt *ck, const so_train_state *s);

#endif
