/* Private: the checkpointing session shared by the write path (ckpt.c) and
 * the restore path (restore.c). */
#ifndef SCALEOUT_CKPT_SESSION_H
#define SCALEOUT_CKPT_SESSION_H
#include "ckpt_internal.h"
#include "slot.h"
#include "state.h"
#include "tclock.h"
#include "worker.h"

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
    int delay_ms;                /* SCALEOUT_CKPT_TEST_DELAY_MS */
    double trace_ms;             /* SCALEOUT_CKPT_TRACE_MS (-1: off) */
    int tclock_fd;               /* the training thread's schedstat (-2: not opened yet) */
    ck_tclock mark;              /* its clocks at the start of the piece being traced */
    long cur_step;               /* of the step_end in progress (trace) */
    ck_worker writer, flusher;

    /* the checkpoint in flight (level 1 + partner) */
    int pending, partner;
    so_ckpt_manifest pm;         /* its manifest, shards filled at completion */
    char pdir[4096];
    uint8_t *stage, *pbuf;       /* this rank's shard; the partner's shard we keep */
    size_t stage_cap, pbuf_cap;
    /* With a node-local level, stage and pbuf are mappings of recycled shard
     * files (slot.c), taken per checkpoint by the snapshot; scratch_* stand
     * in for them when none can be had (the exchange must still run). */
    int slots;
    ck_slots own_slots, partner_slots;
    uint8_t *scratch_own, *scratch_part;
    ck_task t_res;               /* makes shard files ahead of a checkpoint (reserve_ahead) */
    long reserved_for;           /* the due step it last ran for */
    int partner_src;
    void *xreq;                  /* partner exchange in flight */
    int x_early;                 /* its receive was posted at the due step (recv_early), the send comes later */
    ck_task t_own, t_partner;
    int x_fresh;                 /* the exchange was posted at this step (ckpt_flags) */
    double x_t0;                 /* when it was posted */
    int snapping;                /* t_own's snapshot may still be running (before_update waits) */
    uint8_t *rankbuf;            /* the per-rank state, recorded at the due step_end */
    ck_task t_prep;              /* prefaults stage and pbuf at start-up */
    int64_t *av;                 /* agreement vector (ckpt.c: local_row), in MPI's hands while areq */
    void *areq;
    long a_step;                 /* step at which areq was posted (settled SETTLE_LAG steps later) */
    long next_poll, poll_gap;    /* progress rounds: when the next is posted (schedule_poll) */
    int a_ckpt, a_flush, a_fbad; /* what av's pending round covers; this rank's flush failure */
    char *manifest_text;
    size_t manifest_len;
    double p_t0;
    ck_task t_man, t_fman;       /* manifest + prune on the writer / flush thread */
    char *man_copy, *fman_copy;  /* the text those tasks write */

    /* the flush in flight (level 3) */
    int flushing;
    long f_step;
    uint32_t f_crc;
    ck_task t_flush;
    char *flush_text;
    size_t flush_len;

    /* interval and accounting */
    long next_auto, steps_to_complete;
    int requested;               /* so_ckpt_request: the next step_end starts one, due or not */
    int p_requested;             /* the checkpoint in flight was requested: it is flushed, whatever M */
    double step_time, last_step_time, cur_stall;
    int err_is_ckpt;
    so_ckpt_stats st;
};

#endif
