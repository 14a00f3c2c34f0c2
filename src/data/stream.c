/* The image loader's engine: decode threads fill a ring of batch buffers
 * that the trainer reads in place (no copy). A thread claims the next
 * sample of this rank's shard (in epoch order) when that sample's batch
 * buffer is free, reads its bytes (bounded read-ahead: only samples whose
 * buffers are free are read), decodes and transforms it into its row of the
 * buffer; the thread that finishes a batch's last sample closes the batch
 * (moving valid samples over skipped ones) and hands it over. Memory is the
 * ring (prefetch + 1 batches) plus each thread's buffers, whatever the data
 * set's size. --stage-local keeps a copy of every sample read in a
 * node-local file and reads it from there afterwards. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_internal.h"
#include "image.h"
#include "scaleout/err.h"
#include "scaleout/log.h"
#include "scaleout/mem.h"
#include "scaleout/timer.h"

enum { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_HELD };

typedef struct {
    float *x;             /* batch x sample floats */
    int32_t *y;
    uint8_t *bad;         /* batch: 1 where the sample was skipped */
    int step, n, remaining, state;
    int err;              /* strict: the first failure's code, message in msg */
    char msg[512];
} img_slot;

typedef struct {
    img_stream *s;
    img_ctx ctx;
    uint8_t *buf;         /* encoded bytes of the current sample */
    size_t cap;
    pthread_t thread;
    int started;
} img_worker;

struct img_stream {
    const so_dataset *d;
    const so_image_source *src;
    so_loader_config cfg;
    float lut[3][256];
    size_t sample;        /* floats per sample */
    img_slot *slots;
    int nslots;
    img_worker *workers;
    int nworkers;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    /* the epoch (changed only while no worker is busy) */
    unsigned gen;
    int active, stop, epoch, steps, count, limit;
    const int32_t *idx;
    int next_claim;       /* this rank's next sample position to decode */
    int consumed, released, held, busy;
    double wait;
    /* statistics, under mu */
    long decoded, skipped;
    double decode_seconds, read_bytes;
    uint8_t *warned;      /* n: samples already warned about */
    /* --stage-local: sample i's copy at stage_off[i] - 1 (0: not staged) */
    int stage_fd;
    uint64_t *stage_off;
    uint32_t *stage_len;
    uint64_t stage_end;
    int stage_failed;
    pthread_mutex_t stage_mu;
    double staged_bytes, stage_seconds, local_bytes;
};

/* ---- staging --------------------------------------------------------------------- */

static int stage_open(img_stream *s)
{
    char path[PATH_MAX];
    s->stage_fd = -1;
    if (!s->cfg.stage_local)
        return 0;
    if ((size_t)snprintf(path, sizeof path, "%s/scaleout-stage-%ld-r%d.bin", s->cfg.stage_local, (long)getpid(),
                         s->cfg.rank) >= sizeof path)
        return so_err(SO_EINVAL, "--stage-local: path too long");
    s->stage_fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (s->stage_fd < 0)
        return so_err(SO_EIO, "--stage-local: %s: %s", path, strerror(errno));
    pthread_mutex_init(&s->stage_mu, NULL); /* destroyed with stage_fd */
    unlink(path); /* gone with the process, whatever way it ends */
    s->stage_off = calloc((size_t)s->d->n, sizeof *s->stage_off);
    s->stage_len = calloc((size_t)s->d->n, sizeof *s->stage_len);
    if (!s->stage_off || !s->stage_len)
        return so_err(SO_ENOMEM, "--stage-local: out of memory for %d entries", s->d->n);
    return 0;
}

static int pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t off)
{
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w, n -= (size_t)w, off += (uint64_t)w;
    }
    return 0;
}

/* Appends sample i's encoded bytes to the local copy (a write failure, such
 * as a full disk, stops staging with one warning; reads go on from the source). */
static void stage_put(img_stream *s, int i, const uint8_t *img, size_t len)
{
    double t0 = so_now();
    pthread_mutex_lock(&s->stage_mu);
    if (s->stage_off[i] || s->stage_failed || len > UINT32_MAX) {
        pthread_mutex_unlock(&s->stage_mu);
        return;
    }
    uint64_t off = s->stage_end;
    s->stage_end += len;
    pthread_mutex_unlock(&s->stage_mu);
    int bad = pwrite_all(s->stage_fd, img, len, off);
    pthread_mutex_lock(&s->stage_mu);
    if (bad && !s->stage_failed) {
        s->stage_failed = 1;
        so_log(SO_LOG_WARN, "--stage-local %s: %s; reading from the data set from here on", s->cfg.stage_local,
               strerror(errno));
    }
    if (!bad) {
        s->stage_off[i] = off + 1;
        s->stage_len[i] = (uint32_t)len;
        s->staged_bytes += (double)len;
    }
    s->stage_seconds += so_now() - t0;
    pthread_mutex_unlock(&s->stage_mu);
}

/* Sample i's bytes from the local copy: 1 when staged and read, 0 when not staged. */
static int stage_get(img_stream *s, img_worker *w, int i, const uint8_t **img, size_t *len)
{
    pthread_mutex_lock(&s->stage_mu);
    uint64_t off = s->stage_off[i];
    size_t n = s->stage_len[i];
    pthread_mutex_unlock(&s->stage_mu);
    if (!off)
        return 0;
    if (n > w->cap) {
        uint8_t *p = realloc(w->buf, n);
        if (!p)
            return 0;
        w->buf = p;
        w->cap = n;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(s->stage_fd, w->buf + got, n - got, (off_t)(off - 1 + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        got += (size_t)r;
    }
    *img = w->buf;
    *len = n;
    pthread_mutex_lock(&s->stage_mu);
    s->local_bytes += (double)n;
    pthread_mutex_unlock(&s->stage_mu);
    return 1;
}

/* ---- one sample -------------------------------------------------------------------- */

/* Reads, decodes and transforms sample i into out; 0 or the error (message in so_errmsg). */
static int load_sample(img_stream *s, img_worker *w, int i, float *out, double *nread)
{
    const uint8_t *img;
    size_t len, got = 0;
    char what[PATH_MAX + 64];
    int staged = s->stage_fd >= 0 && stage_get(s, w, i, &img, &len);
    int rc = 0;
    if (staged)
        snprintf(what, sizeof what, "%s (staged copy)", image_source_file(s->src, (int)s->src->loc[i].file));
    else
        rc = img_read_sample(s->src, i, &w->buf, &w->cap, &img, &len, what, sizeof what, &got);
    *nread = (double)got;
    if (!rc)
        rc = img_transform(&w->ctx, s->src, img, len, what, s->cfg.augment, s->cfg.seed, s->epoch, i,
                           s->cfg.dct_scale, (const float(*)[256])s->lut, out);
    if (!rc && !staged && s->stage_fd >= 0)
        stage_put(s, i, img, len);
    return rc;
}

/* Moves the valid samples of a closed batch over the skipped ones. */
static void compact(img_stream *s, img_slot *sl, int nb)
{
    int n = 0;
    for (int k = 0; k < nb; k++) {
        if (sl->bad[k])
            continue;
        if (n != k) {
            memcpy(sl->x + (size_t)n * s->sample, sl->x + (size_t)k * s->sample, s->sample * sizeof(float));
            sl->y[n] = sl->y[k];
        }
        n++;
    }
    memset(sl->x + (size_t)n * s->sample, 0, (size_t)(s->cfg.batch - n) * s->sample * sizeof(float));
    memset(sl->y + n, 0, (size_t)(s->cfg.batch - n) * sizeof(int32_t));
    sl->n = n;
}

/* A failed sample: warned once per sample and counted; strict runs stop on it. */
static void sample_failed(img_stream *s, img_slot *sl, int k, int i, int rc)
{
    sl->bad[k] = 1;
    s->skipped++;
    if (s->cfg.strict && !sl->err) {
        sl->err = rc;
        snprintf(sl->msg, sizeof sl->msg, "%s (--strict-data)", so_errmsg());
    }
    if (!s->cfg.strict && !s->warned[i]) {
        s->warned[i] = 1;
        so_log(SO_LOG_WARN, "%s: skipped", so_errmsg());
    }
}

/* Claims the next sample under mu: its step and row, or -1 when none is free. */
static int claim(img_stream *s, int *step, int *k)
{
    if (!s->active || s->next_claim >= s->limit)
        return -1;
    int pos = s->next_claim, st = pos / s->cfg.batch;
    if (st >= s->released + s->nslots)
        return -1; /* its buffer is still in use: read no further ahead */
    img_slot *sl = &s->slots[st % s->nslots];
    *step = st;
    *k = pos % s->cfg.batch;
    if (*k == 0) {
        int nb = s->limit - pos < s->cfg.batch ? s->limit - pos : s->cfg.batch;
        *sl = (img_slot){.x = sl->x, .y = sl->y, .bad = sl->bad, .step = st, .n = nb, .remaining = nb,
                         .state = SLOT_FILLING};
        memset(sl->bad, 0, (size_t)s->cfg.batch);
    }
    s->next_claim++;
    return 0;
}

static void *worker_main(void *arg)
{
    img_worker *w = arg;
    img_stream *s = w->s;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        int step, k;
        if (claim(s, &step, &k)) {
            pthread_cond_wait(&s->work, &s->mu);
            continue;
        }
        unsigned gen = s->gen;
        img_slot *sl = &s->slots[step % s->nslots];
        int i = s->idx[step * s->cfg.batch + k];
        s->busy++;
        pthread_mutex_unlock(&s->mu);
        double t0 = so_now(), nread = 0;
        int rc = load_sample(s, w, i, sl->x + (size_t)k * s->sample, &nread);
        sl->y[k] = s->d->labels[i];
        double t1 = so_now();
        pthread_mutex_lock(&s->mu);
        s->busy--;
        s->decode_seconds += t1 - t0;
        s->read_bytes += nread;
        if (gen != s->gen) { /* the epoch was restarted meanwhile */
            pthread_cond_broadcast(&s->done);
            continue;
        }
        s->decoded++;
        if (rc)
            sample_failed(s, sl, k, i, rc);
        if (--sl->remaining == 0) {
            if (!sl->err)
                compact(s, sl, sl->n);
            sl->state = SLOT_READY;
        }
        pthread_cond_broadcast(&s->done);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- life cycle ---------------------------------------------------------------------- */

void img_stream_destroy(img_stream *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    s->gen++;
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->mu);
    for (int t = 0; s->workers && t < s->nworkers; t++) {
        if (s->workers[t].started)
            pthread_join(s->workers[t].thread, NULL);
        img_ctx_deinit(&s->workers[t].ctx);
        free(s->workers[t].buf);
    }
    for (int k = 0; s->slots && k < s->nslots; k++) {
        so_free(s->slots[k].x);
        so_free(s->slots[k].y);
        free(s->slots[k].bad);
    }
    if (s->stage_fd >= 0) {
        close(s->stage_fd);
        pthread_mutex_destroy(&s->stage_mu);
    }
    free(s->stage_off);
    free(s->stage_len);
    free(s->workers);
    free(s->slots);
    free(s->warned);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->done);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static int alloc_slots(img_stream *s)
{
    size_t bx = (size_t)s->cfg.batch * s->sample;
    if (s->sample > SIZE_MAX / sizeof(float) / (size_t)s->cfg.batch / (size_t)s->nslots)
        return so_err(SO_EINVAL, "loader: batch of %d samples of %zu values is too large", s->cfg.batch, s->sample);
    s->slots = calloc((size_t)s->nslots, sizeof *s->slots);
    if (!s->slots)
        return so_err(SO_ENOMEM, "loader: out of memory");
    for (int k = 0; k < s->nslots; k++) {
        img_slot *sl = &s->slots[k];
        sl->x = so_alloc(bx * sizeof(float));
        sl->y = so_alloc((size_t)s->cfg.batch * sizeof(int32_t));
        sl->bad = calloc((size_t)s->cfg.batch, 1);
        if (!sl->x || !sl->y || !sl->bad)
            return so_err(SO_ENOMEM, "loader: cannot allocate %d batch buffers of %zu floats", s->nslots, bx);
        sl->state = SLOT_FREE;
    }
    return 0;
}

static int start_workers(img_stream *s)
{
    s->workers = calloc((size_t)s->nworkers, sizeof *s->workers);
    if (!s->workers)
        return so_err(SO_ENOMEM, "loader: out of memory");
    for (int t = 0; t < s->nworkers; t++) {
        img_worker *w = &s->workers[t];
        w->s = s;
        int rc = img_ctx_init(&w->ctx);
        if (rc)
            return rc;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
            return so_err(SO_ENOMEM, "loader: cannot start decode thread %d", t);
        w->started = 1;
    }
    return 0;
}

int img_stream_create(const so_dataset *d, const so_loader_config *c, img_stream **out)
{
    *out = NULL;
    if (c->decode_threads < 0 || c->decode_threads > 256)
        return so_err(SO_EINVAL, "--decode-threads: %d is not in 1..256", c->decode_threads);
    img_stream *s = calloc(1, sizeof *s);
    if (!s)
        return so_err(SO_ENOMEM, "loader: out of memory");
    s->d = d;
    s->src = d->images;
    s->cfg = *c;
    s->sample = (size_t)d->c * d->h * d->w;
    s->nslots = c->prefetch + 1;
    s->nworkers = c->decode_threads > 0 ? c->decode_threads : 1;
    s->held = -1;
    s->stage_fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->done, NULL);
    img_build_lut(d->mean, d->std, s->lut);
    int rc = 0;
    if (!(s->warned = calloc((size_t)d->n, 1)))
        rc = so_err(SO_ENOMEM, "loader: out of memory");
    if (!rc)
        rc = alloc_slots(s);
    if (!rc)
        rc = stage_open(s);
    if (!rc)
        rc = start_workers(s);
    if (rc)
        img_stream_destroy(s);
    else
        *out = s;
    return rc;
}

/* ---- epochs and batches ------------------------------------------------------------ */

int img_stream_start(img_stream *s, int epoch, const int32_t *idx, int count, int steps, int first)
{
    pthread_mutex_lock(&s->mu);
    s->gen++;
    s->active = 0;
    while (s->busy)
        pthread_cond_wait(&s->done, &s->mu);
    for (int k = 0; k < s->nslots; k++)
        s->slots[k].state = SLOT_FREE;
    s->epoch = epoch;
    s->idx = idx;
    s->count = count;
    s->steps = steps;
    s->limit = s->cfg.drop_last ? steps * s->cfg.batch : count;
    s->next_claim = first * s->cfg.batch;
    s->consumed = s->released = first;
    s->held = -1;
    s->active = 1;
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int img_stream_next(img_stream *s, const float **x, const int32_t **y, int *n)
{
    int rc = 1;
    pthread_mutex_lock(&s->mu);
    if (s->held >= 0) {
        s->slots[s->held].state = SLOT_FREE;
        s->held = -1;
        s->released++;
        pthread_cond_broadcast(&s->work);
    }
    if (s->consumed >= s->steps) {
        rc = 0;
        goto out;
    }
    int k = s->consumed % s->nslots;
    img_slot *sl = &s->slots[k];
    if (!(sl->state == SLOT_READY && sl->step == s->consumed)) {
        double t0 = so_now();
        while (!(sl->state == SLOT_READY && sl->step == s->consumed))
            pthread_cond_wait(&s->done, &s->mu);
        s->wait += so_now() - t0;
    }
    if (sl->err) {
        rc = so_err(sl->err, "%s", sl->msg);
        goto out;
    }
    sl->state = SLOT_HELD;
    s->held = k;
    s->consumed++;
    *x = sl->x;
    *y = sl->y;
    *n = sl->n;
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

double img_stream_wait(const img_stream *s) { return s->wait; }

void img_stream_stats(img_stream *s, so_loader_stats *o)
{
    pthread_mutex_lock(&s->mu);
    o->decoded = s->decoded;
    o->skipped = s->skipped;
    o->decode_seconds = s->decode_seconds;
    o->read_bytes = s->read_bytes;
    o->threads = s->nworkers;
    size_t scratch = 0;
    for (int t = 0; t < s->nworkers; t++)
        scratch += img_ctx_bytes(&s->workers[t].ctx) + s->workers[t].cap;
    o->memory_bound = (size_t)s->nslots * s->cfg.batch * (s->sample * sizeof(float) + sizeof(int32_t) + 1) + scratch;
    pthread_mutex_unlock(&s->mu);
    if (s->stage_fd >= 0) {
        pthread_mutex_lock(&s->stage_mu);
        o->staged_bytes = s->staged_bytes;
        o->stage_seconds = s->stage_seconds;
        o->local_bytes = s->local_bytes;
        pthread_mutex_unlock(&s->stage_mu);
    }
}
