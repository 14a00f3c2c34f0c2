/* Level 3: every M-th complete checkpoint is copied to the shared directory
 * by the flush thread; once the ranks agree every copy is there, rank 0
 * writes the shared MANIFEST, last. */
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/mem.h"
#include "scaleout/timer.h"
#include "session.h"

/* Flush thread: the shared directory is made there (a parallel file system's
 * mkdir can take long). */
static int flush_mkdir(void *arg, ck_task *t)
{
    (void)arg;
    if (!ck_mkdirs(t->dir))
        return 0;
    ck_fmt(t->err, sizeof t->err, "%s", so_errmsg());
    return SO_EIO;
}

int ck_flush_start(so_ckpt *ck)
{
    ck_task *t = &ck->flush.task;
    memset(t, 0, sizeof *t);
    t->kind = CK_TASK_COPY;
    t->prepare = flush_mkdir;
    ck_dir(t->dir, sizeof t->dir, ck->c.shared_dir, ck->pending_manifest.step);
    ck_fmt(t->name, sizeof t->name, "shard-%d.bin", ck->t.rank);
    ck_fmt(t->src, sizeof t->src, "%s/%s", ck->pending_dir, t->name);
    t->delay_ms = ck->delay_ms + ck->flush_delay_ms;
    t->step = ck->pending_manifest.step;
    t->io = CK_IO(SO_CKPT_IO_FLUSH);
    free(ck->flush.manifest_text);
    ck->flush.manifest_text = ck->manifest_text;
    ck->flush.manifest_len = ck->manifest_len;
    ck->manifest_text = NULL;
    ck->flush.step = ck->pending_manifest.step;
    ck->flush.crc = ck->snapshot_task.crc;
    ck->flush.active = 1;
    ck_worker_submit(&ck->flusher, t);
    return 0;
}

void ck_flush_flags(so_ckpt *ck, int block, int *done, int *bad)
{
    ck_task *t = &ck->flush.task;
    *done = ck_task_done(&ck->flusher, t, block);
    *bad = *done && (t->rc || t->crc != ck->flush.crc);
    if (*done && !t->rc && t->crc != ck->flush.crc)
        ck_fmt(t->err, sizeof t->err, "%s/%s: copy does not match the checksum in the manifest", t->dir, t->name);
}

/* All ranks agreed: every copy is at the shared level (rank 0 queues the
 * shared MANIFEST on the flush thread), or a copy failed somewhere. */
int ck_flush_settle(so_ckpt *ck, int failed, int bad)
{
    ck_task *t = &ck->flush.task;
    ck->flush.active = 0;
    if (failed) {
        char msg[800];
        ck_fmt(msg, sizeof msg, "flush of checkpoint %ld to the shared level failed: %s", ck->flush.step,
               bad ? t->err : "see the message of another rank");
        return ck_fail(ck, SO_EIO, msg);
    }
    ck->st.flushes++;
    ck->st.flush_seconds += t->seconds;
    ck->st.flush_bytes += (double)t->bytes;
    if (ck->t.rank == 0)
        return ck_queue_manifest(ck, &ck->flusher, &ck->flush_manifest_task, &ck->flush_manifest_copy, t->dir, ck->flush.manifest_text, ck->flush.manifest_len,
                              ck->c.shared_dir, -1);
    return 0;
}

int ck_flush_advance(so_ckpt *ck)
{
    int rc = ck_agree_settle(ck);
    while (!rc && ck->flush.active)
        if (!(rc = ck_agree_round(ck, 0, 1)) && ck->flush.active)
            ck_nap();
    return rc;
}

