/* The write path of a checkpointing session (ckpt.h). At a due step the
 * training thread only records the small per-rank state and queues a task;
 * the writer thread copies this rank's 1/N shard into a staging buffer while
 * the next forward and backward run (the parameters do not change until the
 * next optimizer step, where before_update waits for the copy; the partner
 * exchange is posted at the step end after it), then writes and fsyncs it. Progress is agreed with one
 * non-blocking SUM posted at one step_end and completed at the next, which
 * also carries every shard's CRC: when all shards (and the partner copies)
 * are durable, the node leaders write the MANIFEST, last. Every M-th
 * checkpoint is then copied to the shared level by the flush thread, and
 * rank 0 writes the shared MANIFEST once all copies are there. All decisions
 * come from reduced values, so every rank takes the same branch at the same
 * step. This file drives; the agreement's rows (agree.c), the flush's copy
 * (flush.c), the naive write (naive.c) and the due steps (schedule.c) are
 * leaves it calls. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/mem.h"
#include "scaleout/timer.h"
#include "session.h"

/* ---- the one-process transport --------------------------------------------- */

static int one_bcast(void *ctx, void *buf, size_t n, int root)
{
    (void)ctx, (void)buf, (void)n, (void)root;
    return 0;
}

static int one_allreduce(void *ctx, int64_t *v, int n, so_ckpt_op op)
{
    (void)ctx, (void)v, (void)n, (void)op;
    return 0;
}

static const so_ckpt_transport one = {NULL, 0, 1, 0, 1, 0, 1, one_bcast, one_allreduce, NULL, NULL, NULL, NULL, NULL};

/* ---- set-up ----------------------------------------------------------------- */

static int check_config(const so_ckpt_config *c)
{
    int writes = c->every_steps > 0 || c->every_epochs > 0 || c->mtbf_hours > 0;
    if (writes && !c->local_dir && !c->shared_dir)
        return so_err(SO_EINVAL, "checkpoints need --ckpt-dir or --ckpt-local");
    if (c->keep < 1)
        return so_err(SO_EINVAL, "--ckpt-keep: %d must be >= 1", c->keep);
    if (c->flush_every < 1)
        return so_err(SO_EINVAL, "--ckpt-flush-every: %d must be >= 1", c->flush_every);
    return 0;
}

static void partners(const so_ckpt *ck, int *dst, int *src);

/* Page-aligned, so the shared level's shard writes can bypass the page cache (io.c). */
static void *alloc_raw(size_t n) { return aligned_alloc(4096, (n + 4095) / 4096 * 4096); }

/* Writer thread, at start-up: touches the staging buffer of the shared
 * level (node-local shard files are made by reserve instead). The first
 * snapshot into it must be done by the next update: with its page faults
 * still ahead (~25k for ResNet-50's 100 MB shard) the first checkpoint
 * stalled training 60-170 ms (the rest ~1 ms). Populated in one call first:
 * faulting 200 MB in page by page cost this thread 0.85 s of CPU on that VM. */
static int prefault(void *arg, ck_task *t)
{
    so_ckpt *ck = arg;
    (void)t;
    so_mem_populate(ck->stage, ck->stage_cap);
    memset(ck->stage, 0, ck->stage_cap);
    return 0;
}

/* With a node-local level the shards are written in place into recycled
 * files (slot.c): keep + 3 of each kind cover the kept checkpoints, the one
 * in flight, one a flush holds and one a failed checkpoint left; a run
 * normally needs keep + 1 (see reserve_ahead). */
static int init_slots(so_ckpt *ck)
{
    char tag[32];
    int max = ck->c.keep + 3, rc;
    ck->slots = 1;
    ck_slots_sweep(ck->c.local_dir, ck->t.rank, ck->t.world);
    ck_fmt(tag, sizeof tag, "r%d-own", ck->t.rank);
    if ((rc = ck_slots_init(&ck->own_slots, ck->node_dir, tag, ck->stage_cap, max)))
        return rc;
    ck_fmt(tag, sizeof tag, "r%d-partner", ck->t.rank);
    return ck->partner_buf_cap ? ck_slots_init(&ck->partner_slots, ck->node_dir, tag, ck->partner_buf_cap, max) : 0;
}

/* Writer thread: a free shard file in each pool, made now if there is none
 * (at start-up, the equivalent of the shared level's staging buffer). */
static int reserve(void *arg, ck_task *t)
{
    so_ckpt *ck = arg;
    int own = ck->own_slots.n, part = ck->partner_slots.n;
    ck_slots_reserve(&ck->own_slots);
    ck_slots_reserve(&ck->partner_slots);
    t->len = (size_t)(ck->own_slots.n - own) * ck->stage_cap + (size_t)(ck->partner_slots.n - part) * ck->partner_buf_cap;
    return 0;
}

/* The staging buffers (this rank's shard, the partner's) and the agreement
 * vector, allocated once: a checkpoint never allocates on the training
 * thread. The memory is touched in the background. */
static int alloc_buffers(so_ckpt *ck)
{
    int w = ck->t.world, writes = ck->c.every_steps > 0 || ck->c.every_epochs > 0 || ck->c.mtbf_hours > 0;
    int rc = ck_agreement_init(&ck->agreement, w);
    if (rc)
        return rc;
    ck->rankbuf = malloc(ck->rank_bytes);
    if (!ck->rankbuf)
        return so_err(SO_ENOMEM, "out of memory");
    memset(ck->rankbuf, 0, ck->rank_bytes); /* its page faults now, not at the first checkpoint */
    if (!writes || ck->c.naive)
        return 0;
    uint64_t off, len;
    ck_span(ck, ck->t.rank, &off, &len);
    ck->stage_cap = (size_t)(len + ck->rank_bytes);
    if (ck->c.local_dir && w > 1 && ck->t.exchange_recv) {
        int dst, src;
        partners(ck, &dst, &src);
        ck_span(ck, src, &off, &len);
        ck->partner_buf_cap = (size_t)(len + ck->rank_bytes);
    }
    rc = ck->c.local_dir ? init_slots(ck) : 0;
    if (!rc && !ck->c.local_dir && !(ck->stage = alloc_raw(ck->stage_cap)))
        rc = so_err(SO_ENOMEM, "out of memory for a %zu-byte checkpoint buffer", ck->stage_cap);
    if (rc)
        return rc;
    memset(&ck->prefault_task, 0, sizeof ck->prefault_task);
    ck->prefault_task.kind = CK_TASK_PREPARE;
    ck->prefault_task.prepare = ck->slots ? reserve : prefault;
    ck->prefault_task.prep_arg = ck;
    ck->prefault_task.prep_io = ck->slots ? CK_IO(SO_CKPT_IO_RESERVE) : 0;
    ck_worker_submit(&ck->writer, &ck->prefault_task);
    return 0;
}

int so_ckpt_create(const so_ckpt_config *c, const so_ckpt_transport *t, so_model *m, so_optim *opt, so_ckpt **out)
{
    *out = NULL;
    int rc = check_config(c);
    if (rc)
        return rc;
    so_ckpt *ck = calloc(1, sizeof *ck);
    if (!ck)
        return so_err(SO_ENOMEM, "out of memory");
    ck->c = *c;
    ck->t = t ? *t : one;
    ck->m = m;
    ck->opt = opt;
    ck->model_hash = so_ckpt_model_hash(m);
    ck->config_hash = so_ckpt_hash_text(c->config_text);
    ck->rep_bytes = ck_rep_bytes(m, opt);
    ck->rank_bytes = ck_rank_bytes(m, c->rank_state);
    ck->delay_ms = ck_test_delay_ms();
    ck->flush_delay_ms = ck_test_flush_delay_ms();
    const char *tr = getenv("SCALEOUT_CKPT_TRACE_MS"); /* diagnostics: log stall pieces of at least N ms */
    ck->trace_ms = tr && *tr ? atof(tr) : -1;
    ck->tclock_fd = -2;
    ck->sched.next_auto = c->mtbf_hours > 0 ? 10 : LONG_MAX;
    ck->sched.last_step_time = -1;
    ck_fmt(ck->optim_name, sizeof ck->optim_name, "%s", c->optimizer ? c->optimizer : "optim");
    if (c->local_dir)
        ck_fmt(ck->node_dir, sizeof ck->node_dir, "%s/node%d", c->local_dir, ck->t.node_id);
    if (!(rc = ck_worker_start(&ck->writer, "so-ckpt-write")))
        rc = ck_worker_start(&ck->flusher, "so-ckpt-flush");
    if (!rc)
        rc = ck_units_from_state(ck);
    if (!rc)
        rc = alloc_buffers(ck);
    if (rc) {
        so_ckpt_destroy(ck);
        return rc;
    }
    *out = ck;
    return 0;
}

void so_ckpt_destroy(so_ckpt *ck)
{
    if (!ck)
        return;
    ck_worker_stop(&ck->writer);
    ck_worker_stop(&ck->flusher);
    if (ck->slots) {
        ck_slots_destroy(&ck->own_slots);
        ck_slots_destroy(&ck->partner_slots);
        free(ck->scratch_own);
        free(ck->scratch_part);
    } else {
        free(ck->stage);
    }
    ck_agreement_deinit(&ck->agreement);
    free(ck->rankbuf);
    free(ck->manifest_copy);
    free(ck->flush_manifest_copy);
    free(ck->manifest_text);
    free(ck->flush.manifest_text);
    free(ck->unit_bounds);
    if (ck->tclock_fd >= 0)
        close(ck->tclock_fd);
    free(ck);
}

void so_ckpt_get_stats(so_ckpt *ck, so_ckpt_stats *st)
{
    *st = ck->st;
    st->bg_cpu_seconds = ck_worker_cpu_seconds(&ck->writer) + ck_worker_cpu_seconds(&ck->flusher);
}
int so_ckpt_last_error_is_ckpt(const so_ckpt *ck) { return ck->err_is_ckpt; }

/* ---- helpers ----------------------------------------------------------------- */

/* The directory of level 1 (node-local if configured, else shared). */
static const char *ck_level1(const so_ckpt *ck) { return ck->c.local_dir ? ck->node_dir : ck->c.shared_dir; }

static void ck_dir(char *out, size_t cap, const char *base, long step)
{
    ck_fmt(out, cap, "%s/ckpt-%010ld", base, step);
}

static int ck_fail(so_ckpt *ck, int code, const char *msg)
{
    ck->err_is_ckpt = 1;
    ck->st.failures++;
    return so_err(code, "%s", msg);
}

/* Agreement: v[0] "done" and v[1] "failed" over all ranks (MIN of done, MAX of failed). */
static int agree_blocking(so_ckpt *ck, int done, int failed, int *all_done, int *any_failed)
{
    int64_t v[2] = {done ? 1 : 0, failed ? -1 : 0};
    int rc = ck->t.allreduce_i64(ck->t.ctx, v, 2, SO_CKPT_MIN);
    if (rc) {
        ck->err_is_ckpt = 0;
        return rc;
    }
    *all_done = v[0] == 1;
    *any_failed = v[1] < 0;
    return 0;
}

/* ---- starting a checkpoint ---------------------------------------------------- */

static void fill_manifest(so_ckpt *ck, so_ckpt_manifest *m, const so_train_state *s, int nshards)
{
    memset(m, 0, sizeof *m);
    m->version = SO_CKPT_VERSION;
    ck_fmt(m->model, sizeof m->model, "%s", ck->c.model_name ? ck->c.model_name : "model");
    m->model_hash = ck->model_hash;
    m->config_hash = ck->config_hash;
    m->step = s->step;
    m->epoch = s->epoch;
    m->epoch_step = s->epoch_step;
    m->world = ck->t.world;
    m->nparams = ck->m->nparams;
    m->nbufs = ck->m->nbufs;
    ck_fmt(m->optimizer, sizeof m->optimizer, "%s", ck->optim_name);
    m->nslots = so_optim_nslots(ck->opt);
    m->optim_steps = so_optim_steps(ck->opt);
    m->rep_bytes = ck->rep_bytes;
    m->rank_bytes = ck->rank_bytes;
    if (ck->c.rank_state) {
        m->rank_state_bytes = ck->c.rank_state->bytes;
        ck_fmt(m->rank_state, sizeof m->rank_state, "%s", ck->c.rank_state->tag);
    }
    m->nshards = nshards;
    if (ck->unit_bounds) { /* borrowed, like config */
        m->nunits = ck->units.nunits;
        m->unit_shards = ck->units.shards;
        m->unit_replicas = ck->units.replicas;
        m->units = ck->unit_bounds;
    }
    m->config = (char *)ck->c.config_text;
}

/* Queues "prep (if any), then write buf to dir/name" on the writer thread. */
static void queue_write(so_ckpt *ck, ck_task *t, const char *dir, const char *name, const void *buf, size_t len,
                        int (*prep)(void *, ck_task *))
{
    memset(t, 0, sizeof *t);
    t->kind = CK_TASK_WRITE;
    t->prepare = prep;
    t->prep_arg = ck;
    ck_fmt(t->dir, sizeof t->dir, "%s", dir);
    ck_fmt(t->name, sizeof t->name, "%s", name);
    t->buf = buf;
    t->len = len;
    t->delay_ms = ck->delay_ms;
    t->step = ck->pending_manifest.step;
    if (ck->slots) {
        t->slots = t == &ck->partner_task ? &ck->partner_slots : &ck->own_slots;
        t->no_crc = t == &ck->partner_task;
    }
    t->io = CK_IO(t == &ck->partner_task ? SO_CKPT_IO_PARTNER : SO_CKPT_IO_SHARD);
    t->prep_io = prep ? CK_IO(SO_CKPT_IO_SNAPSHOT) : 0;
    ck_worker_submit(&ck->writer, t);
}

/* Partner of rank r: one node further on (or the next rank on one node). */
static void partners(const so_ckpt *ck, int *dst, int *src)
{
    int w = ck->t.world, shift = ck->t.num_nodes > 1 ? ck->t.node_size : 1;
    shift %= w;
    if (shift == 0)
        shift = 1;
    *dst = (ck->t.rank + shift) % w;
    *src = (ck->t.rank - shift + w) % w;
}

/* Scratch memory in place of a slot that could not be had (the checkpoint
 * fails, but the exchange its partner posted must still be matched). */
static uint8_t *scratch(uint8_t **buf, size_t cap)
{
    if (!*buf && (*buf = malloc(cap)))
        memset(*buf, 0, cap);
    return *buf;
}

/* Writer thread: the files this checkpoint's shard and partner copy are
 * written into; 0, or SO_EIO with t->err (then stage and partner_buf are scratch). */
static int take_slots(so_ckpt *ck, ck_task *t)
{
    ck->stage = ck_slots_take(&ck->own_slots, t->err, sizeof t->err);
    if (!ck->exchange.recv_early) /* else the receive is already posted into its file */
        ck->partner_buf = ck->stage && ck->partner_buf_cap ? ck_slots_take(&ck->partner_slots, t->err, sizeof t->err) : NULL;
    if (ck->stage && (ck->partner_buf || !ck->partner_buf_cap))
        return 0;
    if (!ck->stage)
        ck->stage = scratch(&ck->scratch_own, ck->stage_cap);
    if (ck->partner_buf_cap && !ck->partner_buf)
        ck->partner_buf = scratch(&ck->scratch_part, ck->partner_buf_cap);
    return SO_EIO;
}

/* Writer thread, first step of the shard write: the directory, the files,
 * and the snapshot of this rank's shard (the parameters are frozen until
 * before_update has seen this step finish). */
static int snapshot(void *arg, ck_task *t)
{
    so_ckpt *ck = arg;
    if (ck->slots && take_slots(ck, t))
        return SO_EIO;
    if (ck_mkdirs(ck->pending_dir)) {
        ck_fmt(t->err, sizeof t->err, "%s", so_errmsg());
        return SO_EIO;
    }
    if (ck->delay_ms > 0) /* test hook: a slow snapshot, which before_update must wait for */
        ck_sleep_ms(ck->delay_ms);
    uint64_t off, len;
    ck_span(ck, ck->t.rank, &off, &len);
    ck_shard_get(ck, ck->stage);
    memcpy(ck->stage + len, ck->rankbuf, ck->rank_bytes);
    return 0;
}

/* Due step, training thread: posts the partner exchange's receive now, a
 * step before any partner can post its send (the gradient allreduce of the
 * next step lies between). Posted with the send, after the partner's send
 * may have arrived, the post once took 203 ms (81 ms of its own CPU) at
 * ResNet-50 np 4, most likely the library copying the whole shard inside
 * MPI_Irecv; posted first, the copy happens in a later progress call,
 * normally the gradient thread's. Needs a free partner file
 * without making one (the reserve is done, the writer is not touching the
 * pool: the snapshot task is queued after this); otherwise the writer takes
 * the file and the pair is posted together (post_exchange). */
static int recv_early(so_ckpt *ck)
{
    ck->exchange.recv_early = 0;
    if (!ck->slots || !ck->partner_buf_cap || !ck_task_done(&ck->writer, &ck->prefault_task, 0) ||
        !ck_task_done(&ck->writer, &ck->reserve_task, 0) || ck_slots_free_count(&ck->partner_slots) == 0)
        return 0;
    char err[600];
    uint8_t *b = ck_slots_take(&ck->partner_slots, err, sizeof err);
    if (!b)
        return 0;
    int dst, src;
    partners(ck, &dst, &src);
    int rc = ck->t.exchange_recv(ck->t.ctx, b, ck->partner_buf_cap, src, ck->stage_cap, &ck->exchange.req);
    if (!rc) {
        ck->partner_buf = b;
        ck->exchange.recv_early = 1;
    }
    return rc;
}

/* Records the small per-rank state and queues snapshot + write. */
static int start_scaleout(so_ckpt *ck, const so_train_state *s)
{
    ck_rank_get(ck->m, ck->c.rank_state, ck->rankbuf);
    fill_manifest(ck, &ck->pending_manifest, s, ck->t.world);
    ck_dir(ck->pending_dir, sizeof ck->pending_dir, ck_level1(ck), s->step);
    char name[64];
    ck_fmt(name, sizeof name, "shard-%d.bin", ck->t.rank);
    int rc = recv_early(ck);
    if (rc)
        return rc;
    queue_write(ck, &ck->snapshot_task, ck->pending_dir, name, ck->stage, ck->stage_cap, snapshot);
    ck->partner = ck->partner_buf_cap > 0;
    ck->partner_task.state = CK_IDLE;
    ck->snapping = 1;
    ck->pending = 1;
    ck->pending_since = so_now();
    return 0;
}

/* The snapshot is taken (waits for it): the parameters may change now. The
 * partner exchange is posted later (post_exchange), not here: before_update
 * runs while the data-parallel strategy may still have buckets in flight,
 * and this thread may make no MPI call of its own until they are in. */
static void snapped(so_ckpt *ck)
{
    ck_task_prepared(&ck->writer, &ck->snapshot_task, 1);
    ck->snapping = 0;
    ck->post_due = ck->partner;
}

/* At the step end after the snapshot (or when finishing): posts the partner
 * exchange, also after a failed snapshot, so that the partner's receive is
 * matched; the checkpoint then fails at the agreement on every rank. */
static int post_exchange(so_ckpt *ck)
{
    ck->post_due = 0;
    int dst, src;
    partners(ck, &dst, &src);
    ck->exchange.src = src;
    if (!ck->stage || !ck->partner_buf)
        return so_err(SO_ENOMEM, "out of memory for a %zu-byte checkpoint buffer", ck->partner_buf_cap);
    ck->exchange.posted_now = 1;
    ck->exchange.posted_at = so_now();
    int rc = ck->exchange.recv_early ? 0
                         : ck->t.exchange_recv(ck->t.ctx, ck->partner_buf, ck->partner_buf_cap, src, ck->stage_cap, &ck->exchange.req);
    return rc ? rc : ck->t.exchange_send(ck->t.ctx, ck->exchange.req, ck->stage, ck->stage_cap, dst);
}

/* ---- completing a checkpoint ---------------------------------------------------- */


/* The manifest's shard table from the agreed CRCs and sizes, formatted. */
static int build_manifest(so_ckpt *ck)
{
    int w = ck->t.world;
    so_ckpt_shard *sh = calloc((size_t)w, sizeof *sh);
    if (!sh)
        return so_err(SO_ENOMEM, "out of memory");
    for (int k = 0; k < w; k++) {
        ck_span(ck, k, &sh[k].rep_off, &sh[k].rep_len);
        sh[k].rank_first = k;
        sh[k].rank_count = 1;
        ck_agreement_shard(&ck->agreement, k, &sh[k].crc, &sh[k].bytes);
    }
    ck->pending_manifest.shards = sh;
    free(ck->manifest_text);
    ck->manifest_text = NULL;
    int rc = so_ckpt_manifest_format(&ck->pending_manifest, &ck->manifest_text, &ck->manifest_len);
    free(sh);
    ck->pending_manifest.shards = NULL;
    return rc;
}


/* Queues "write dir/MANIFEST from a private copy of text, then prune base" on w. */
static int queue_manifest(so_ckpt *ck, ck_worker *w, ck_task *t, char **copy, const char *dir, const char *text,
                          size_t len, const char *base, long protect)
{
    ck_task_done(w, t, 1); /* the previous one (long done) still owns *copy */
    free(*copy);
    if (!(*copy = malloc(len + 1)))
        return so_err(SO_ENOMEM, "out of memory");
    memcpy(*copy, text, len + 1);
    memset(t, 0, sizeof *t);
    t->kind = CK_TASK_MANIFEST;
    ck_fmt(t->dir, sizeof t->dir, "%s", dir);
    ck_fmt(t->name, sizeof t->name, "MANIFEST");
    ck_fmt(t->src, sizeof t->src, "%s", base);
    t->buf = *copy;
    t->len = len;
    t->keep = ck->c.keep;
    t->protect = protect;
    t->step = w == &ck->flusher ? ck->flush.step : ck->pending_manifest.step;
    t->io = CK_IO(w == &ck->flusher ? SO_CKPT_IO_FLUSH_MANIFEST : SO_CKPT_IO_MANIFEST);
    ck_worker_submit(w, t);
    return 0;
}

/* A manifest the background thread could not write: the checkpoint does not
 * exist at that level (restore falls back); reported once, on this rank. */
static void check_manifests(so_ckpt *ck)
{
    ck_task *t[2] = {&ck->manifest_task, &ck->flush_manifest_task};
    ck_worker *w[2] = {&ck->writer, &ck->flusher};
    for (int i = 0; i < 2; i++)
        if (t[i]->kind == CK_TASK_MANIFEST && !t[i]->reported && ck_task_done(w[i], t[i], 0) && t[i]->rc) {
            t[i]->reported = 1;
            ck->st.failures++;
            so_log(SO_LOG_WARN, "checkpoint manifest not written, that checkpoint does not exist there: %s",
                   t[i]->err);
        }
}

/* The checkpoint just completed goes to the shared level (flush.c), its
 * manifest text with it for rank 0 to write there once every copy is. */
static void start_flush(so_ckpt *ck)
{
    char to[4096];
    ck_dir(to, sizeof to, ck->c.shared_dir, ck->pending_manifest.step);
    ck_flush_job j = {ck->pending_dir, to, ck->t.rank, ck->pending_manifest.step, ck->snapshot_task.crc,
                      ck->manifest_text, ck->manifest_len, ck->delay_ms + ck->flush_delay_ms};
    ck->manifest_text = NULL; /* the flush holds it now */
    ck_flush_start(&ck->flush, &ck->flusher, &j);
}

/* Every rank's shard is durable: the manifest (written last, by the node
 * leaders on the writer thread), prune, maybe start a flush. */
static int complete(so_ckpt *ck)
{
    int rc = build_manifest(ck);
    int leader = ck->c.local_dir ? ck->t.node_rank == 0 : ck->t.rank == 0;
    if (!rc && leader)
        rc = queue_manifest(ck, &ck->writer, &ck->manifest_task, &ck->manifest_copy, ck->pending_dir, ck->manifest_text,
                            ck->manifest_len, ck_level1(ck), ck->flush.active ? ck->flush.step : -1);
    if (rc)
        return rc;
    ck->st.count++;
    ck->st.last_complete_seconds = so_now() - ck->pending_since;
    /* The partner copy lands in its file as MPI receives it: its time runs
     * from posting the exchange to the file being durable. */
    double part = !ck->partner ? 0 : ck->slots ? ck->partner_task.t_end - ck->exchange.posted_at : ck->partner_task.seconds;
    if (ck->partner) {
        ck->st.partner_seconds += part;
        ck->st.partner_bytes += (double)ck->partner_task.bytes;
    }
    ck->st.write_seconds += ck->snapshot_task.seconds + part;
    ck->st.write_bytes += (double)ck->snapshot_task.bytes + (ck->partner ? (double)ck->partner_task.bytes : 0);
    /* A requested checkpoint (the last before a stop) also goes to the shared
     * level: a requeued job may start on other nodes. */
    if (ck->c.local_dir && ck->c.shared_dir && (ck->st.count % ck->c.flush_every == 0 || ck->sched.in_flight_requested)) {
        if (!ck->flush.active) {
            start_flush(ck);
            return 0;
        }
        if (ck->t.rank == 0)
            so_log(SO_LOG_WARN, "checkpoint %ld is not flushed: the previous flush is still running", ck->pending_manifest.step);
    }
    return 0;
}

/* Local progress of the checkpoint in flight: tests the partner exchange and
 * queues the partner write once it arrived. *done / *bad feed the agreement. */
static int ckpt_progress(so_ckpt *ck, int block, int *done, int *bad)
{
    *done = *bad = 0;
    if (ck->snapping || ck->post_due) /* the exchange is not even posted yet (blocking callers resolve this first) */
        return 0;
    if (ck->exchange.posted_now && !block) {
        /* Posted at the latest step end: testing it now would make
         * this thread do the whole transfer (a shared-memory MPI copies a
         * large message inside whichever call progresses it). One step later
         * the gradient engine's calls have progressed it in the background. */
        ck->exchange.posted_now = 0;
        return 0;
    }
    if (ck->exchange.req) {
        int got = 0, rc = ck->t.exchange_test(ck->t.ctx, ck->exchange.req, block, &got);
        if (rc)
            return rc;
        if (got) {
            ck->exchange.req = NULL;
            char name[64];
            ck_fmt(name, sizeof name, "partner-%d.bin", ck->exchange.src);
            queue_write(ck, &ck->partner_task, ck->pending_dir, name, ck->partner_buf, ck->partner_buf_cap, NULL);
        }
    }
    int own = ck_task_done(&ck->writer, &ck->snapshot_task, block);
    int part = !ck->partner || (!ck->exchange.req && ck_task_done(&ck->writer, &ck->partner_task, block));
    *done = own && part;
    *bad = (own && ck->snapshot_task.rc) || (ck->partner && part && ck->partner_task.rc);
    return 0;
}

/* Removes dir/name and its .tmp. */
static void unlink_in(const char *dir, const char *name)
{
    char path[4200];
    ck_fmt(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
    ck_fmt(path, sizeof path, "%s/%s.tmp", dir, name);
    unlink(path);
}

/* A failed checkpoint's names of this rank (its shard, the partner copy)
 * go at once: pruning only removes debris older than a complete checkpoint,
 * so while failures last each would hold a file of the node-local pool (or
 * space on a full disk) until none is left for the checkpoint that would
 * succeed once the fault is gone. The last rank of the node takes the
 * directory. A directory with a MANIFEST is a complete checkpoint of an
 * earlier run, never touched. */
static void drop_failed(so_ckpt *ck)
{
    char path[4200], name[64];
    ck_fmt(path, sizeof path, "%s/MANIFEST", ck->pending_dir);
    if (access(path, F_OK) == 0)
        return;
    ck_fmt(name, sizeof name, "shard-%d.bin", ck->t.rank);
    unlink_in(ck->pending_dir, name);
    if (ck->partner) {
        ck_fmt(name, sizeof name, "partner-%d.bin", ck->exchange.src);
        unlink_in(ck->pending_dir, name);
    }
    rmdir(ck->pending_dir); /* fails while other ranks' names are there: they drop theirs */
}

/* All ranks agreed the checkpoint finished (all_done) or failed somewhere. */
static int ckpt_end(so_ckpt *ck, int all_done, int failed)
{
    ck->pending = 0;
    if (!failed)
        return all_done ? complete(ck) : 0;
    int done = 0;
    if (ck->exchange.req && !ck->t.exchange_test(ck->t.ctx, ck->exchange.req, 1, &done)) /* partner_buf must be free */
        ck->exchange.req = NULL;
    ck_task_done(&ck->writer, &ck->snapshot_task, 1);
    if (ck->partner && !ck->exchange.req)
        ck_task_done(&ck->writer, &ck->partner_task, 1);
    drop_failed(ck);
    const char *why = ck->snapshot_task.rc ? ck->snapshot_task.err : ck->partner && ck->partner_task.rc ? ck->partner_task.err : NULL;
    char msg[700];
    ck_fmt(msg, sizeof msg, "checkpoint at step %ld failed: %s", ck->pending_manifest.step,
           why ? why : "a shard could not be written on another rank");
    return ck_fail(ck, SO_EIO, msg);
}

static void nap(void)
{
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

/* ---- the ranks' agreement: rounds and what they decide ------------------------------ */

/* The ranks agreed the flush ended: counted, or failed; rank 0 then writes
 * the shared MANIFEST on the flush thread, last. */
static int flush_end(so_ckpt *ck, int failed, int bad_here)
{
    char msg[800];
    if (ck_flush_end(&ck->flush, failed, bad_here, &ck->st, msg, sizeof msg))
        return ck_fail(ck, SO_EIO, msg);
    if (ck->t.rank != 0)
        return 0;
    return queue_manifest(ck, &ck->flusher, &ck->flush_manifest_task, &ck->flush_manifest_copy, ck->flush.task.dir,
                          ck->flush.manifest_text, ck->flush.manifest_len, ck->c.shared_dir, -1);
}

/* This rank's row: the progress of the checkpoint (ckpt) and/or flush (flush) in flight. */
static int local_progress(so_ckpt *ck, int ckpt, int flush, int block)
{
    ck_progress p = {.covers_ckpt = ckpt, .covers_flush = flush};
    int rc = 0;
    if (ckpt && !(rc = ckpt_progress(ck, block, &p.ckpt_done, &p.ckpt_failed))) {
        p.shard_crc = ck->snapshot_task.crc;
        p.shard_bytes = ck->snapshot_task.bytes;
    }
    if (flush)
        ck_flush_progress(&ck->flush, &ck->flusher, block, &p.flush_done, &p.flush_failed);
    ck_agreement_fill(&ck->agreement, &ck->t, &p);
    return rc;
}

/* Acts on the agreed outcome: the same values at the same step on every rank. */
static int act(so_ckpt *ck)
{
    ck_outcome o;
    ck_agreement_outcome(&ck->agreement, ck->t.world, &o);
    int rc = o.flush_ended ? flush_end(ck, o.flush_failed, o.flush_failed_here) : 0; /* first: a completing checkpoint may start a flush */
    if (o.ckpt_ended) {
        int rc2 = ckpt_end(ck, o.ckpt_all_done, o.ckpt_failed);
        rc = rc ? rc : rc2;
    }
    return rc;
}

/* A failure to communicate is not the checkpoint's own. */
static int comm_failed(so_ckpt *ck, int rc)
{
    if (rc)
        ck->err_is_ckpt = 0;
    return rc;
}

/* Blocking round: local progress (waiting for local completion), SUM, act. */
static int agree_round(so_ckpt *ck, int ckpt, int flush)
{
    int rc = local_progress(ck, ckpt, flush, 1);
    if (!rc)
        rc = comm_failed(ck, ck_agreement_sum(&ck->agreement, &ck->t));
    return rc ? rc : act(ck);
}

/* Completes the round posted at an earlier step_end and acts on it. */
static int agree_settle(so_ckpt *ck)
{
    if (!ck->agreement.req)
        return 0;
    int rc = comm_failed(ck, ck_agreement_complete(&ck->agreement, &ck->t));
    return rc ? rc : act(ck);
}

/* Posts this step's row; step_end completes the SUM SETTLE_LAG steps later,
 * by when the gradient traffic in between has progressed it. */
static int agree_post(so_ckpt *ck)
{
    if (!ck->t.isum_start)
        return agree_round(ck, ck->pending, ck->flush.active);
    int rc = local_progress(ck, ck->pending, ck->flush.active, 0);
    return rc ? rc : comm_failed(ck, ck_agreement_post(&ck->agreement, &ck->t, ck->cur_step));
}

/* Finishes the checkpoint in flight (blocking). */
static int finish_checkpoint(so_ckpt *ck)
{
    int rc = agree_settle(ck);
    if (ck->snapping)
        snapped(ck);
    if (!rc && ck->post_due)
        rc = post_exchange(ck);
    while (!rc && ck->pending)
        if (!(rc = agree_round(ck, 1, 0)) && ck->pending)
            nap();
    return rc;
}

/* Finishes the flush in flight (blocking). */
static int finish_flush(so_ckpt *ck)
{
    int rc = agree_settle(ck);
    while (!rc && ck->flush.active)
        if (!(rc = agree_round(ck, 0, 1)) && ck->flush.active)
            nap();
    return rc;
}

/* ---- the hook ------------------------------------------------------------------------ */

/* Diagnostics (SCALEOUT_CKPT_TRACE_MS): the training thread's clocks
 * (tclock.h) at the start of a piece. Only when tracing: a reading costs
 * ~10 us after a training step has evicted the kernel's paths from the
 * caches, and an always-on split of every piece (tried) tripled a ResNet-20
 * checkpoint's stall. The file is opened here, on the training thread. */
static void mark(so_ckpt *ck)
{
    if (ck->trace_ms < 0)
        return;
    if (ck->tclock_fd == -2)
        ck->tclock_fd = ck_tclock_open();
    ck_tclock_read(ck->tclock_fd, &ck->mark);
}

/* A piece's CPU time and context switches tell work from waiting (voluntary:
 * a lock, a condition, the comm layer's sleeping poll) and from what the
 * scheduler took (runqueue wait: preempted; no switch and no CPU time: the
 * virtual CPU stolen by the host). */
static void trace(so_ckpt *ck, double dt, const char *phase)
{
    ck_tclock a = ck->mark, *b = &ck->mark;
    double runq, stolen;
    mark(ck);
    ck_tclock_taken(&a, b, dt, &runq, &stolen);
    if (dt * 1e3 >= ck->trace_ms)
        so_log(SO_LOG_INFO, "checkpoint stall %.3f ms in %s (step %ld, rank %d; thread CPU %.3f ms, context switches "
               "%ld involuntary, %ld voluntary; runqueue %.3f ms, stolen %.3f ms)", dt * 1e3, phase, ck->cur_step,
               ck->t.rank, (b->cpu - a.cpu) * 1e3, b->ivcsw - a.ivcsw, b->vcsw - a.vcsw, runq * 1e3, stolen * 1e3);
}

/* Closes a piece of stall that began at t0 (when the session was active). */
static void account(so_ckpt *ck, double t0, int was_active, const char *phase)
{
    if (!was_active) {
        mark(ck);
        return;
    }
    double now = so_now(), dt = now - t0;
    if (ck->trace_ms >= 0)
        trace(ck, dt, phase);
    ck->sched.cur_stall += dt;
    ck->st.stall_total += dt;
    if (ck->span_fn)
        ck->span_fn(ck->span_arg, t0, now);
}

void so_ckpt_set_span(so_ckpt *ck, so_ckpt_span_fn fn, void *arg)
{
    ck->span_fn = fn;
    ck->span_arg = arg;
}

void so_ckpt_set_io(so_ckpt *ck, so_ckpt_io_fn fn, void *arg)
{
    ck_worker_set_io(&ck->writer, fn, arg);
    ck_worker_set_io(&ck->flusher, fn, arg);
}

const char *so_ckpt_io_name(so_ckpt_io_kind k)
{
    static const char *const names[SO_CKPT_IO_KINDS] = {"snapshot", "shard write", "partner write", "manifest",
                                                        "flush", "flush manifest", "file reserve"};
    return (unsigned)k < SO_CKPT_IO_KINDS ? names[k] : "?";
}

/* Called when a checkpoint has completed: closes its stall account. */
static int closed(so_ckpt *ck, long step)
{
    ck->st.stall_last = ck->sched.cur_stall;
    if (ck->sched.cur_stall > ck->st.stall_max)
        ck->st.stall_max = ck->sched.cur_stall;
    ck->sched.steps_to_complete = step - ck->pending_manifest.step;
    int rc = ck_update_interval(ck, step, ck->sched.cur_stall);
    ck->sched.cur_stall = 0;
    return rc;
}

/* A checkpoint in flight when this call began has completed: its stall
 * account closes. */
static int progressed(so_ckpt *ck, int was_pending, long step, double *t0)
{
    if (!was_pending || ck->pending)
        return 0;
    account(ck, *t0, 1, "completion");
    *t0 = so_now();
    return closed(ck, step);
}

/* May the checkpoint due now start after rc? Yes when rc is 0, and after a
 * failed checkpoint (agreed on every rank) unless the caller stops then: one
 * failure must not cost the next checkpoint too. The caller clears
 * err_is_ckpt before starting, so an error of the start's own says what it is. */
static int may_start(const so_ckpt *ck, int rc) { return !rc || (ck->err_is_ckpt && !ck->c.stop_on_error); }

/* The outcome of a start (rc) after `failed`: the failure, with its message,
 * unless the start failed too. */
static int started(so_ckpt *ck, int failed, int rc)
{
    if (!failed || rc)
        return rc;
    ck->err_is_ckpt = 1;
    return failed;
}

/* --ckpt-mode naive: rank 0 writes everything (naive.c) while the others
 * wait at the agreement on its outcome; then rank 0 prunes. */
static int naive(so_ckpt *ck, const so_train_state *s)
{
    fill_manifest(ck, &ck->pending_manifest, s, 1);
    ck_dir(ck->pending_dir, sizeof ck->pending_dir, ck_level1(ck), s->step);
    ck_naive_job j = {&ck->t, ck->m, ck->c.rank_state, ck->opt, ck->rep_bytes, ck->rank_bytes, &ck->stage, &ck->stage_cap,
                      &ck->pending_manifest, ck->pending_dir, ck->delay_ms};
    char err[600] = "";
    int mine = 0, all_done, failed;
    int rc = ck_naive_write(&j, &ck->st, &mine, err, sizeof err);
    if (rc || (rc = agree_blocking(ck, 1, mine, &all_done, &failed))) /* the barrier */
        return rc;
    if (failed)
        return ck_fail(ck, SO_EIO, err[0] ? err : "rank 0 could not write the checkpoint");
    if (ck->t.rank == 0)
        ck_prune(ck_level1(ck), ck->c.keep, -1);
    ck->st.count++;
    return 0;
}

/* Due: the naive scheme, or (after finishing the previous one) a new snapshot. */
static int start(so_ckpt *ck, const so_train_state *s, double *t0)
{
    ck->sched.in_flight_requested = 0; /* the previous one, finished below, keeps its own flush rule */
    if (ck->c.naive) {
        int rc = naive(ck, s);
        account(ck, *t0, 1, "naive write");
        *t0 = so_now();
        int rc2 = closed(ck, s->step);
        return rc ? rc : rc2;
    }
    int rc = 0;
    if (ck->pending) { /* the previous one is still in flight: finish it first */
        rc = finish_checkpoint(ck);
        int rc2 = progressed(ck, 1, s->step, t0);
        rc = rc ? rc : rc2;
    }
    /* A requested checkpoint (the last before a stop) must reach the shared
     * level, so a flush still running finishes first instead of skipping it. */
    if (!rc && ck->sched.requested && ck->flush.active)
        rc = finish_flush(ck);
    if (!may_start(ck, rc))
        return rc;
    ck->err_is_ckpt = 0;
    ck->sched.in_flight_requested = ck->sched.requested;
    return started(ck, rc, start_scaleout(ck, s));
}

/* Shard files for the next checkpoint are made reserve_lead steps before it
 * is due, when no free one is left (checkpoints 2 .. keep + 1 of a run; the
 * first one's are made at start-up): not in the snapshot, which training
 * waits for, and not for a checkpoint the run never reaches (most of a new
 * file's cost is the first touch of its pages, milliseconds per MB on a VM;
 * docs/CHECKPOINT.md). When the previous checkpoint has not
 * settled by then, its pruning comes later and the pool settles at keep + 2
 * files rather than keep + 1. Reported as "file reserve" work with the step
 * it is for, so the profiler and the overhead attribution see it. The slot
 * pools are only ever touched by the writer thread. */
static void reserve_ahead(so_ckpt *ck, const so_train_state *s)
{
    long to_due = ck_steps_to_due(ck, s);
    if (!ck->slots || to_due > ck_reserve_lead(ck, s) || s->step + to_due == ck->reserved_for ||
        !ck_task_done(&ck->writer, &ck->reserve_task, 0))
        return;
    ck->reserved_for = s->step + to_due;
    memset(&ck->reserve_task, 0, sizeof ck->reserve_task);
    ck->reserve_task.kind = CK_TASK_PREPARE;
    ck->reserve_task.prepare = reserve;
    ck->reserve_task.prep_arg = ck;
    ck->reserve_task.step = ck->reserved_for;
    ck->reserve_task.prep_io = CK_IO(SO_CKPT_IO_RESERVE);
    ck_worker_submit(&ck->writer, &ck->reserve_task);
}

int so_ckpt_step_end(so_ckpt *ck, const so_train_state *s)
{
    double t0 = so_now();
    int was_pending = ck->pending, was_flushing = ck->flush.active, active = ck->pending || ck->flush.active;
    mark(ck);
    ck->cur_step = s->step;
    ck_track_step_time(ck);
    check_manifests(ck);
    ck->err_is_ckpt = 0;
    if (ck->post_due) { /* the snapshot taken at this step's update */
        int rc = post_exchange(ck);
        account(ck, t0, 1, "exchange post");
        if (rc)
            return rc;
        t0 = so_now();
    }
    int polled = ck->agreement.req != NULL && s->step >= ck->agreement.posted_step + SETTLE_LAG, rc = polled ? agree_settle(ck) : 0;
    if (polled) {
        ck_schedule_poll(ck, s, was_pending != ck->pending || was_flushing != ck->flush.active);
        account(ck, t0, active, "poll (agreement)"); /* its own piece: waiting for peers is told apart */
        t0 = so_now();
    }
    if (!rc)
        rc = progressed(ck, was_pending, s->step, &t0);
    if (may_start(ck, rc) && ck_due(ck, s)) {
        int failed = rc;
        ck->err_is_ckpt = 0;
        rc = started(ck, failed, start(ck, s, &t0));
        ck->sched.requested = 0;
        account(ck, t0, 1, "start");
        t0 = so_now();
        active = 0;
        ck->sched.poll_gap = 1;
        ck->sched.next_poll = s->step + 2; /* the exchange is posted at the next step end and tested one step later */
    }
    was_pending = ck->pending;
    if (!rc && !ck->agreement.req && (ck->pending || ck->flush.active) && s->step >= ck->sched.next_poll) {
        rc = agree_post(ck); /* one process: settles at once */
        active = 1;
        if (!ck->t.isum_start)
            ck_schedule_poll(ck, s, was_pending != ck->pending);
        if (!rc)
            rc = progressed(ck, was_pending, s->step, &t0);
    }
    if (!rc)
        reserve_ahead(ck, s);
    account(ck, t0, active, "poll");
    return rc;
}

int so_ckpt_before_update(so_ckpt *ck)
{
    if (!ck->snapping)
        return 0;
    double t0 = so_now();
    mark(ck);
    snapped(ck);
    account(ck, t0, 1, "before_update (snapshot wait)");
    return 0;
}

void so_ckpt_request(so_ckpt *ck) { ck->sched.requested = 1; }

/* The end of training waits until the last checkpoint is durable: the exit
 * drain. Training is over, so it is not a stall of any step; it is reported
 * on its own (and is part of the run's wall time). */
int so_ckpt_finish(so_ckpt *ck)
{
    double t0 = so_now();
    int was_pending = ck->pending, rc = 0;
    /* Mid-run, a checkpoint whose flush is due while the previous flush still
     * runs is not flushed; the run's last one must reach the shared level
     * (a job may restart on other nodes), so the previous flush ends first. */
    if (was_pending && ck->flush.active)
        rc = finish_flush(ck);
    if (!rc)
        rc = finish_checkpoint(ck);
    if (was_pending) {
        int rc2 = closed(ck, ck->pending_manifest.step);
        rc = rc ? rc : rc2;
    }
    if (ck->flush.active) {
        int rc2 = finish_flush(ck);
        rc = rc ? rc : rc2;
    }
    double t1 = so_now();
    ck->st.drain_seconds += t1 - t0;
    if (ck->span_fn && t1 - t0 > 0)
        ck->span_fn(ck->span_arg, t0, t1);
    ck_task_done(&ck->writer, &ck->manifest_task, 1);
    ck_task_done(&ck->flusher, &ck->flush_manifest_task, 1);
    check_manifests(ck);
    return rc;
}
