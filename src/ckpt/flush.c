/* Level 3: every M-th complete checkpoint is copied to the shared directory
 * by the flush thread (session.h, ck_flush). A leaf: this file starts the
 * copy, reports its progress and ends it once the ranks agreed; ckpt.c
 * decides when, and rank 0 there writes the shared MANIFEST, last. */
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
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

void ck_flush_start(ck_flush *f, ck_worker *flusher, const ck_flush_job *j)
{
    ck_task *t = &f->task;
    memset(t, 0, sizeof *t);
    t->kind = CK_TASK_COPY;
    t->prepare = flush_mkdir;
    ck_fmt(t->dir, sizeof t->dir, "%s", j->to_dir);
    ck_fmt(t->name, sizeof t->name, "shard-%d.bin", j->rank);
    ck_fmt(t->src, sizeof t->src, "%s/%s", j->from_dir, t->name);
    t->delay_ms = j->delay_ms;
    t->step = j->step;
    t->io = CK_IO(SO_CKPT_IO_FLUSH);
    free(f->manifest_text);
    f->manifest_text = j->manifest_text;
    f->manifest_len = j->manifest_len;
    f->step = j->step;
    f->crc = j->crc;
    f->active = 1;
    ck_worker_submit(flusher, t);
}

void ck_flush_progress(ck_flush *f, ck_worker *flusher, int block, int *done, int *bad)
{
    ck_task *t = &f->task;
    *done = ck_task_done(flusher, t, block);
    *bad = *done && (t->rc || t->crc != f->crc);
    if (*done && !t->rc && t->crc != f->crc)
        ck_fmt(t->err, sizeof t->err, "%s/%s: copy does not match the checksum in the manifest", t->dir, t->name);
}

int ck_flush_end(ck_flush *f, int failed, int bad_here, so_ckpt_stats *st, char *msg, size_t cap)
{
    ck_task *t = &f->task;
    f->active = 0;
    if (failed) {
        ck_fmt(msg, cap, "flush of checkpoint %ld to the shared level failed: %s", f->step,
               bad_here ? t->err : "see the message of another rank");
        return SO_EIO;
    }
    st->flushes++;
    st->flush_seconds += t->seconds;
    st->flush_bytes += (double)t->bytes;
    return 0;
}
