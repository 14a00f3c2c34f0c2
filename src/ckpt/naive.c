/* The naive scheme (--ckpt-mode naive), the baseline the sharded one is
 * measured against: the ranks' small sections are gathered, rank 0 writes
 * everything in one file while the others wait at the agreement. */
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/mem.h"
#include "scaleout/timer.h"
#include "session.h"

static int grow(uint8_t **buf, size_t *cap, size_t n)
{
    if (*cap >= n)
        return 0;
    free(*buf);
    *buf = so_alloc(n ? n : 1);
    *cap = *buf ? n : 0;
    return *buf ? 0 : so_err(SO_ENOMEM, "out of memory for a %zu-byte checkpoint buffer", n);
}

int ck_naive(so_ckpt *ck, const so_train_state *s)
{
    int w = ck->t.world;
    size_t bytes = (size_t)(ck->rep_bytes + (uint64_t)w * ck->rank_bytes);
    int rc = grow(&ck->stage, &ck->stage_cap, ck->t.rank == 0 ? bytes : (size_t)ck->rank_bytes * w);
    if (rc)
        return rc;
    uint8_t *ranks = ck->stage + (ck->t.rank == 0 ? ck->rep_bytes : 0);
    ck_rank_get(ck->m, ranks + (size_t)ck->t.rank * ck->rank_bytes);
    for (int r = 0; r < w && !rc; r++) /* gather the small per-rank sections */
        rc = ck->t.bcast(ck->t.ctx, ranks + (size_t)r * ck->rank_bytes, (size_t)ck->rank_bytes, r);
    if (rc)
        return rc;
    char err[600] = "";
    int mine = 0;
    ck_fill_manifest(ck, &ck->pending_manifest, s, 1);
    so_ckpt_shard sh = {0, ck->rep_bytes, 0, w, bytes, 0};
    ck_dir(ck->pending_dir, sizeof ck->pending_dir, ck_level1(ck), s->step);
    if (ck->t.rank == 0) {
        ck_rep_get(ck->m, ck->opt, ck->stage, 0, ck->rep_bytes);
        double t0 = so_now();
        mine = ck_mkdirs(ck->pending_dir);
        if (mine)
            ck_fmt(err, sizeof err, "%s", so_errmsg());
        else
            mine = ck_write_atomic(ck->pending_dir, "shard-0.bin", ck->stage, bytes, 0, ck->delay_ms, &sh.crc, err, sizeof err);
        ck->pending_manifest.shards = &sh;
        char *text = NULL;
        size_t len = 0;
        if (!mine && !(mine = so_ckpt_manifest_format(&ck->pending_manifest, &text, &len)))
            mine = ck_write_manifest(ck, ck->pending_dir, text, len, err, sizeof err);
        free(text);
        ck->pending_manifest.shards = NULL;
        ck->st.write_seconds += so_now() - t0;
        ck->st.write_bytes += (double)bytes;
    }
    int all_done, failed;
    if ((rc = ck_agree_blocking(ck, 1, mine != 0, &all_done, &failed))) /* the barrier */
        return rc;
    if (failed)
        return ck_fail(ck, SO_EIO, err[0] ? err : "rank 0 could not write the checkpoint");
    if (ck->t.rank == 0)
        ck_prune(ck_level1(ck), ck->c.keep, -1);
    ck->st.count++;
    return 0;
}

