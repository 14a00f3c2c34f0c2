/* The ranks' agreement on checkpoint progress (session.h: ck_agreement): one
 * row of flags, CRCs and sizes per rank, summed over ranks without blocking
 * (posted at one step end, completed SETTLE_LAG steps later), and acted on
 * identically by every rank. */
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/mem.h"
#include "scaleout/timer.h"
#include "session.h"

/* The agreement vector ck->agreement.row, summed over ranks:
 *   [0] ranks whose checkpoint is durable   [1] ranks whose checkpoint failed
 *   [2] ranks whose flush is done           [3] ranks whose flush failed
 *   [4 + 2k], [5 + 2k] CRC and byte count of rank k's shard (once durable). */
int ck_av_len(const so_ckpt *ck) { return ROW_SHARDS + 2 * ck->t.world; }

/* This rank's row: the flags of the checkpoint (ckpt) and/or flush (flush) in flight. */
static int local_row(so_ckpt *ck, int ckpt, int flush, int block)
{
    int d = 0, b = 0, rc = 0, r = ck->t.rank;
    memset(ck->agreement.row, 0, (size_t)ck_av_len(ck) * sizeof *ck->agreement.row);
    ck->agreement.covers_ckpt = ckpt;
    ck->agreement.covers_flush = flush;
    if (ckpt && !(rc = ck_flags(ck, block, &d, &b))) {
        ck->agreement.row[ROW_CKPT_DONE] = d;
        ck->agreement.row[ROW_CKPT_FAILED] = b;
        ck->agreement.row[ROW_SHARDS + 2 * r] = d ? ck->snapshot_task.crc : 0;
        ck->agreement.row[ROW_SHARDS + 2 * r + 1] = d ? (int64_t)ck->snapshot_task.bytes : 0;
    }
    if (flush) {
        ck_flush_flags(ck, block, &d, &b);
        ck->agreement.row[ROW_FLUSH_DONE] = d;
        ck->agreement.row[ROW_FLUSH_FAILED] = ck->agreement.flush_failed = b;
    }
    return rc;
}

/* Acts on the summed row: the same values at the same step on every rank. */
static int apply_row(so_ckpt *ck)
{
    const int64_t *v = ck->agreement.row, w = ck->t.world;
    int rc = 0;
    if (ck->agreement.covers_flush && (v[ROW_FLUSH_DONE] == w || v[ROW_FLUSH_FAILED] > 0)) /* first: a completing checkpoint may start a flush */
        rc = ck_flush_settle(ck, v[ROW_FLUSH_FAILED] > 0, ck->agreement.flush_failed);
    if (ck->agreement.covers_ckpt && (v[ROW_CKPT_DONE] == w || v[ROW_CKPT_FAILED] > 0)) {
        int rc2 = ck_settle(ck, v[ROW_CKPT_DONE] == w, v[ROW_CKPT_FAILED] > 0);
        rc = rc ? rc : rc2;
    }
    ck->agreement.covers_ckpt = ck->agreement.covers_flush = 0;
    return rc;
}

static int comm_failed(so_ckpt *ck, int rc)
{
    if (rc)
        ck->err_is_ckpt = 0;
    return rc;
}

/* Blocking round: local flags (waiting for local completion), SUM, act. */
int ck_agree_round(so_ckpt *ck, int ckpt, int flush)
{
    int rc = local_row(ck, ckpt, flush, 1);
    if (!rc)
        rc = comm_failed(ck, ck->t.allreduce_i64(ck->t.ctx, ck->agreement.row, ck_av_len(ck), SO_CKPT_SUM));
    return rc ? rc : apply_row(ck);
}

/* Completes the agreement posted at the previous step_end and acts on it. */
int ck_agree_settle(so_ckpt *ck)
{
    if (!ck->agreement.req)
        return 0;
    void *req = ck->agreement.req;
    ck->agreement.req = NULL;
    int rc = comm_failed(ck, ck->t.isum_wait(ck->t.ctx, req));
    return rc ? rc : apply_row(ck);
}

/* Posts this step's flags; step_end completes the SUM SETTLE_LAG steps
 * later, by when the gradient traffic in between has progressed it. */
int ck_agree_post(so_ckpt *ck)
{
    if (!ck->t.isum_start)
        return ck_agree_round(ck, ck->pending, ck->flush.active);
    int rc = local_row(ck, ck->pending, ck->flush.active, 0);
    ck->agreement.posted_step = ck->cur_step;
    return rc ? rc : comm_failed(ck, ck->t.isum_start(ck->t.ctx, ck->agreement.row, ck_av_len(ck), &ck->agreement.req));
}

/* Finishes the checkpoint in flight (blocking). */
int ck_agree_advance(so_ckpt *ck)
{
    int rc = ck_agree_settle(ck);
    if (!rc && ck->snapping)
        rc = ck_snapped(ck);
    while (!rc && ck->pending)
        if (!(rc = ck_agree_round(ck, 1, 0)) && ck->pending)
            ck_nap();
    return rc;
}

