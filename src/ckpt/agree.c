/* The ranks' agreement on checkpoint progress (session.h, ck_agreement):
 * one row of flags, CRCs and sizes per rank, summed over the ranks either
 * without blocking (posted at one step end, completed SETTLE_LAG steps
 * later) or at once, then read back as the outcome every rank acts on
 * alike. A leaf: it moves rows through the transport and knows nothing of
 * what the checkpoint or the flush do with the outcome (ckpt.c decides). */
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "session.h"

/* The row, summed over ranks:
 *   [ROW_CKPT_DONE]   ranks whose checkpoint is durable
 *   [ROW_CKPT_FAILED] ranks whose checkpoint failed
 *   [ROW_FLUSH_DONE]  ranks whose flush is done
 *   [ROW_FLUSH_FAILED] ranks whose flush failed
 *   [ROW_SHARDS + 2k], [ROW_SHARDS + 2k + 1] CRC and byte count of rank k's shard (once durable) */
enum { ROW_CKPT_DONE, ROW_CKPT_FAILED, ROW_FLUSH_DONE, ROW_FLUSH_FAILED, ROW_SHARDS };
static int row_len(int world) { return ROW_SHARDS + 2 * world; }

int ck_agreement_init(ck_agreement *a, int world)
{
    memset(a, 0, sizeof *a);
    a->row = calloc((size_t)row_len(world), sizeof *a->row);
    return a->row ? 0 : so_err(SO_ENOMEM, "out of memory");
}

void ck_agreement_deinit(ck_agreement *a)
{
    free(a->row);
    a->row = NULL;
}

void ck_agreement_fill(ck_agreement *a, const so_ckpt_transport *t, const ck_progress *mine)
{
    int r = t->rank;
    memset(a->row, 0, (size_t)row_len(t->world) * sizeof *a->row);
    a->covers_ckpt = mine->covers_ckpt;
    a->covers_flush = mine->covers_flush;
    if (mine->covers_ckpt) {
        a->row[ROW_CKPT_DONE] = mine->ckpt_done;
        a->row[ROW_CKPT_FAILED] = mine->ckpt_failed;
        a->row[ROW_SHARDS + 2 * r] = mine->ckpt_done ? mine->shard_crc : 0;
        a->row[ROW_SHARDS + 2 * r + 1] = mine->ckpt_done ? (int64_t)mine->shard_bytes : 0;
    }
    if (mine->covers_flush) {
        a->row[ROW_FLUSH_DONE] = mine->flush_done;
        a->row[ROW_FLUSH_FAILED] = a->flush_failed = mine->flush_failed;
    }
}

int ck_agreement_sum(ck_agreement *a, const so_ckpt_transport *t)
{
    return t->allreduce_i64(t->ctx, a->row, row_len(t->world), SO_CKPT_SUM);
}

int ck_agreement_post(ck_agreement *a, const so_ckpt_transport *t, long step)
{
    a->posted_step = step;
    return t->isum_start(t->ctx, a->row, row_len(t->world), &a->req);
}

int ck_agreement_complete(ck_agreement *a, const so_ckpt_transport *t)
{
    void *req = a->req;
    a->req = NULL;
    return req ? t->isum_wait(t->ctx, req) : 0;
}

void ck_agreement_outcome(ck_agreement *a, int world, ck_outcome *out)
{
    const int64_t *v = a->row;
    *out = (ck_outcome){.flush_failed_here = a->flush_failed};
    if (a->covers_flush) {
        out->flush_ended = v[ROW_FLUSH_DONE] == world || v[ROW_FLUSH_FAILED] > 0;
        out->flush_failed = v[ROW_FLUSH_FAILED] > 0;
    }
    if (a->covers_ckpt) {
        out->ckpt_ended = v[ROW_CKPT_DONE] == world || v[ROW_CKPT_FAILED] > 0;
        out->ckpt_all_done = v[ROW_CKPT_DONE] == world;
        out->ckpt_failed = v[ROW_CKPT_FAILED] > 0;
    }
    a->covers_ckpt = a->covers_flush = 0;
}

void ck_agreement_shard(const ck_agreement *a, int rank, uint32_t *crc, uint64_t *bytes)
{
    *crc = (uint32_t)a->row[ROW_SHARDS + 2 * rank];
    *bytes = (uint64_t)a->row[ROW_SHARDS + 2 * rank + 1];
}
