/* The naive scheme (--ckpt-mode naive), the baseline the sharded one is
 * measured against: the ranks' small sections are gathered and rank 0
 * writes everything in one file and the MANIFEST. A leaf: ckpt.c fills the
 * manifest, then makes the ranks agree on the outcome (the others wait
 * there) and prunes. */
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

/* Rank 0: the replicated state, every rank's section (in buf already), then
 * the MANIFEST, into j->dir. 0 or SO_EIO with err. */
static int rank0_write(const ck_naive_job *j, uint8_t *buf, size_t bytes, so_ckpt_stats *st, char *err, size_t cap)
{
    so_ckpt_shard sh = {0, j->rep_bytes, 0, j->t->world, bytes, 0};
    ck_rep_get(j->m, j->opt, buf, 0, j->rep_bytes);
    double t0 = so_now();
    int rc = ck_mkdirs(j->dir);
    if (rc)
        ck_fmt(err, cap, "%s", so_errmsg());
    else
        rc = ck_write_atomic(j->dir, "shard-0.bin", buf, bytes, 0, j->delay_ms, &sh.crc, err, cap);
    j->manifest->shards = &sh;
    char *text = NULL;
    size_t len = 0;
    uint32_t crc;
    if (!rc && !(rc = so_ckpt_manifest_format(j->manifest, &text, &len)))
        rc = ck_write_atomic(j->dir, "MANIFEST", text, len, 0, 0, &crc, err, cap) ? SO_EIO : 0;
    free(text);
    j->manifest->shards = NULL;
    st->write_seconds += so_now() - t0;
    st->write_bytes += (double)bytes;
    return rc;
}

int ck_naive_write(const ck_naive_job *j, so_ckpt_stats *st, int *failed, char *err, size_t cap)
{
    const so_ckpt_transport *t = j->t;
    int w = t->world;
    size_t bytes = (size_t)(j->rep_bytes + (uint64_t)w * j->rank_bytes);
    *failed = 0;
    int rc = grow(j->buf, j->cap, t->rank == 0 ? bytes : (size_t)j->rank_bytes * w);
    if (rc)
        return rc;
    uint8_t *ranks = *j->buf + (t->rank == 0 ? j->rep_bytes : 0);
    ck_rank_get(j->m, j->rank_state, ranks + (size_t)t->rank * j->rank_bytes);
    for (int r = 0; r < w && !rc; r++) /* gather the small per-rank sections */
        rc = t->bcast(t->ctx, ranks + (size_t)r * j->rank_bytes, (size_t)j->rank_bytes, r);
    if (!rc && t->rank == 0)
        *failed = rank0_write(j, *j->buf, bytes, st, err, cap) != 0;
    return rc;
}
