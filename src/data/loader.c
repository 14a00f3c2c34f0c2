/* The batch loader: per-epoch seeded shuffle, DistributedSampler sharding,
 * normalisation through a 256-entry table per channel, CIFAR-style crop/flip
 * augmentation, and an optional producer thread filling a ring of batch
 * buffers ahead of the training loop. All buffers are allocated at creation:
 * nothing is allocated per batch. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"
#include "scaleout/data.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"
#include "scaleout/rng.h"
#include "scaleout/timer.h"

#define MAX_PREFETCH 64
/* Stream ids for so_rng_derive so shuffling and augmentation never share numbers. */
#define STREAM_SHUFFLE 0x5348554646ULL /* "SHUFF" */
#define STREAM_AUGMENT 0x4155474dULL   /* "AUGM" */

typedef struct {
    float *x;   /* batch*c*h*w, NCHW */
    int32_t *y; /* batch */
    int n;      /* valid samples */
} batch_slot;

struct so_loader {
    const so_dataset *d;
    so_loader_config cfg;
    size_t sample;       /* c*h*w */
    float lut[3][256];   /* pixel value -> normalised float, per channel */
    int32_t *perm;       /* n: this epoch's permutation */
    int32_t *idx;        /* this rank's shard, `count` entries */
    int count, steps, epoch;
    batch_slot *slots;   /* nslots = prefetch + 1 (one held by the consumer) */
    int nslots;
    double wait;
    img_stream *stream;  /* image data sets: the decode threads and their ring */
    int32_t *fixed;      /* fixed_shard: this rank's samples (count) */

    /* Producer state, guarded by mu when the thread exists. */
    pthread_t thread;
    int has_thread;
    pthread_mutex_t mu;
    pthread_cond_t to_producer, to_consumer;
    int stop, active, busy;   /* busy: the producer is filling a slot outside the lock */
    unsigned gen;             /* bumped by start_epoch so stale fills are discarded */
    int produced, consumed;   /* steps of this epoch */
    int head, filled, held;   /* ring: consumer's next slot, ready slots, slot lent to the caller */
};

/* ---- per-sample work ---------------------------------------------------- */

static void build_lut(so_loader *l)
{
    for (int c = 0; c < 3 && c < l->d->c; c++)
        for (int v = 0; v < 256; v++)
            l->lut[c][v] = ((float)v / 255.0f - l->d->mean[c]) / l->d->std[c];
}

/* Plain copy of sample i into out (c*h*w floats). */
static void copy_sample(const so_loader *l, int i, float *out)
{
    const so_dataset *d = l->d;
    if (d->values) {
        memcpy(out, d->values + (size_t)i * l->sample, l->sample * sizeof *out);
        return;
    }
    const uint8_t *src = d->pixels + (size_t)i * l->sample;
    size_t hw = (size_t)d->h * d->w;
    for (int c = 0; c < d->c; c++, src += hw, out += hw) {
        const float *lut = l->lut[c];
        for (size_t p = 0; p < hw; p++)
            out[p] = lut[src[p]];
    }
}

/* Random crop (offsets dy, dx in [0, 2*pad]) of the zero-padded image, then
 * an optional horizontal flip: out(y, x) = padded(y + dy, (flip ? w-1-x : x) + dx).
 * Padding is a black pixel (0) before normalisation, as torchvision's
 * RandomCrop(padding=4) pads before Normalize; synthetic values pad with 0. */
static void augment_sample(const so_loader *l, int i, int pad, int dy, int dx, int flip, float *out)
{
    const so_dataset *d = l->d;
    size_t hw = (size_t)d->h * d->w;
    for (int c = 0; c < d->c; c++) {
        const float *lut = d->values ? NULL : l->lut[c];
        const float *vsrc = d->values ? d->values + (size_t)i * l->sample + c * hw : NULL;
        const uint8_t *psrc = d->values ? NULL : d->pixels + (size_t)i * l->sample + c * hw;
        float padv = lut ? lut[0] : 0.0f;
        for (int y = 0; y < d->h; y++, out += d->w) {
            int sy = y + dy - pad;
            for (int x = 0; x < d->w; x++) {
                int sx = (flip ? d->w - 1 - x : x) + dx - pad;
                if (sy < 0 || sy >= d->h || sx < 0 || sx >= d->w)
                    out[x] = padv;
                else if (lut)
                    out[x] = lut[psrc[(size_t)sy * d->w + sx]];
                else
                    out[x] = vsrc[(size_t)sy * d->w + sx];
            }
        }
    }
}

static int crop_pad(const so_loader *l)
{
    if (l->cfg.pad < 0)
        return 0;
    return l->cfg.pad == 0 ? 4 : l->cfg.pad;
}

/* Fills slot s with step `step` of the current epoch. Reads only state that
 * start_epoch changes while the producer is idle, so it runs outside the lock. */
static void fill_batch(const so_loader *l, int step, batch_slot *s)
{
    const so_loader_config *cfg = &l->cfg;
    int start = step * cfg->batch;
    int nb = l->count - start < cfg->batch ? l->count - start : cfg->batch;
    int pad = crop_pad(l), flip = !cfg->no_flip;
    /* Seeded per (seed, epoch, rank, step): reproducible whichever thread fills it. */
    so_rng r;
    uint64_t seed = so_rng_derive(so_rng_derive(so_rng_derive(cfg->seed, STREAM_AUGMENT), (uint64_t)l->epoch),
                                  (uint64_t)cfg->rank);
    so_rng_seed(&r, so_rng_derive(seed, (uint64_t)step));
    for (int k = 0; k < nb; k++) {
        int i = l->idx[start + k];
        float *out = s->x + (size_t)k * l->sample;
        s->y[k] = l->d->labels[i];
        if (cfg->augment) {
            int dy = (int)so_rng_below(&r, (uint64_t)(2 * pad + 1));
            int dx = (int)so_rng_below(&r, (uint64_t)(2 * pad + 1));
            int f = flip && (so_rng_u64(&r) >> 63);
            augment_sample(l, i, pad, dy, dx, f, out);
        } else {
            copy_sample(l, i, out);
        }
    }
    /* Keep the unused tail of a partial batch deterministic. */
    memset(s->x + (size_t)nb * l->sample, 0, (size_t)(cfg->batch - nb) * l->sample * sizeof(float));
    memset(s->y + nb, 0, (size_t)(cfg->batch - nb) * sizeof(int32_t));
    s->n = nb;
}

/* ---- producer thread ------------------------------------------------------ */

static void *producer_main(void *arg)
{
    so_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        int free_slots = l->nslots - l->filled - l->held;
        if (!l->active || l->produced >= l->steps || free_slots == 0) {
            pthread_cond_wait(&l->to_producer, &l->mu);
            continue;
        }
        unsigned gen = l->gen;
        int step = l->produced;
        batch_slot *s = &l->slots[(l->head + l->filled) % l->nslots];
        l->busy = 1;
        pthread_mutex_unlock(&l->mu);
        fill_batch(l, step, s);
        pthread_mutex_lock(&l->mu);
        l->busy = 0;
        if (gen == l->gen) { /* otherwise start_epoch abandoned this epoch */
            l->filled++;
            l->produced++;
        }
        pthread_cond_broadcast(&l->to_consumer);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Stops production for the current epoch and waits until the producer is idle. */
static void producer_quiesce(so_loader *l)
{
    pthread_mutex_lock(&l->mu);
    l->gen++;
    l->active = 0;
    while (l->busy)
        pthread_cond_wait(&l->to_consumer, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

/* ---- creation --------------------------------------------------------------- */

static int check_config(const so_dataset *d, const so_loader_config *c)
{
    if (!d || !c || d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1 || !d->labels ||
        (!d->pixels && !d->values && !d->images))
        return so_err(SO_EINVAL, "loader: dataset is empty or incomplete");
    if (!d->images && (c->decode_threads || c->stage_local || c->fixed_shard))
        return so_err(SO_EINVAL, "loader: --decode-threads, --stage-local and fixed shards are for image data sets");
    if (d->pixels && !d->values && d->c > 3)
        return so_err(SO_EINVAL, "loader: %d channels, pixel datasets have at most 3", d->c);
    if (c->batch < 1)
        return so_err(SO_EINVAL, "loader: batch size %d is not positive", c->batch);
    if (c->world < 1 || c->rank < 0 || c->rank >= c->world)
        return so_err(SO_EINVAL, "loader: rank %d is not in 0..%d (world %d)", c->rank, c->world - 1, c->world);
    if (c->prefetch < 0 || c->prefetch > MAX_PREFETCH)
        return so_err(SO_EINVAL, "loader: prefetch %d is not in 0..%d", c->prefetch, MAX_PREFETCH);
    int side = d->h > d->w ? d->h : d->w;
    if (c->augment && c->pad > side)
        return so_err(SO_EINVAL, "loader: crop padding %d is larger than the %dx%d image", c->pad, d->h, d->w);
    return 0;
}

/* Shard size and steps per epoch (the same every epoch). */
static int plan_shard(so_loader *l)
{
    const so_loader_config *c = &l->cfg;
    int n = l->d->n;
    if (n < c->world)
        return so_err(SO_EINVAL, "loader: dataset has %d samples, fewer than the %d ranks", n, c->world);
    int total = c->drop_last ? n / c->world * c->world : n;
    l->count = (total - c->rank + c->world - 1) / c->world;
    l->steps = c->drop_last ? l->count / c->batch : (l->count + c->batch - 1) / c->batch;
    if (l->steps < 1)
        return so_err(SO_EINVAL, "loader: batch %d is larger than the %d samples of rank %d's shard (drop_last gives no steps)",
                      c->batch, l->count, c->rank);
    return 0;
}

static int alloc_buffers(so_loader *l)
{
    size_t bx = (size_t)l->cfg.batch * l->sample;
    if (l->sample > SIZE_MAX / sizeof(float) / (size_t)l->cfg.batch / (size_t)l->nslots)
        return so_err(SO_EINVAL, "loader: batch of %d samples of %zu values is too large", l->cfg.batch, l->sample);
    l->perm = malloc((size_t)l->d->n * sizeof *l->perm);
    l->idx = malloc((size_t)l->count * sizeof *l->idx);
    l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
    if (!l->perm || !l->idx || !l->slots)
        return so_err(SO_ENOMEM, "loader: cannot allocate index tables");
    if (l->d->images) /* the stream owns the batch buffers */
        return img_stream_create(l->d, &l->cfg, &l->stream);
    for (int s = 0; s < l->nslots; s++) {
        l->slots[s].x = so_alloc(bx * sizeof(float));
        l->slots[s].y = so_alloc((size_t)l->cfg.batch * sizeof(int32_t));
        if (!l->slots[s].x || !l->slots[s].y)
            return so_err(SO_ENOMEM, "loader: cannot allocate %d batch buffers of %zu floats", l->nslots, bx);
    }
    return 0;
}

static int start_thread(so_loader *l)
{
    if (pthread_mutex_init(&l->mu, NULL) != 0)
        return so_err(SO_ENOMEM, "loader: cannot create a mutex");
    pthread_cond_init(&l->to_producer, NULL);
    pthread_cond_init(&l->to_consumer, NULL);
    if (pthread_create(&l->thread, NULL, producer_main, l) != 0) {
        pthread_cond_destroy(&l->to_producer);
        pthread_cond_destroy(&l->to_consumer);
        pthread_mutex_destroy(&l->mu);
        return so_err(SO_ENOMEM, "loader: cannot start the prefetch thread");
    }
    l->has_thread = 1;
    return 0;
}

int so_loader_create(const so_dataset *d, const so_loader_config *c, so_loader **out)
{
    so_loader *l = NULL;
    int rc;
    *out = NULL;
    if ((rc = check_config(d, c)))
        return rc;
    if (!(l = calloc(1, sizeof *l)))
        return so_err(SO_ENOMEM, "loader: out of memory");
    l->d = d;
    l->cfg = *c;
    l->sample = (size_t)d->c * d->h * d->w;
    l->nslots = c->prefetch + 1;
    l->epoch = -1;
    build_lut(l);
    if (l->cfg.stage_local)
        l->cfg.fixed_shard = 1;
    if ((rc = plan_shard(l)) || (rc = alloc_buffers(l)) || (c->prefetch > 0 && !d->images && (rc = start_thread(l))))
        goto out;
    *out = l;
out:
    if (rc)
        so_loader_destroy(l);
    return rc;
}

void so_loader_destroy(so_loader *l)
{
    if (!l)
        return;
    img_stream_destroy(l->stream);
    free(l->fixed);
    if (l->has_thread) {
        pthread_mutex_lock(&l->mu);
        l->stop = 1;
        l->gen++;
        pthread_cond_signal(&l->to_producer);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
        pthread_cond_destroy(&l->to_producer);
        pthread_cond_destroy(&l->to_consumer);
        pthread_mutex_destroy(&l->mu);
    }
    for (int s = 0; l->slots && s < l->nslots; s++) {
        so_free(l->slots[s].x);
        so_free(l->slots[s].y);
    }
    free(l->slots);
    free(l->perm);
    free(l->idx);
    free(l);
}

/* ---- epochs and batches ----------------------------------------------------- */

/* Fisher-Yates over 0..n-1 seeded by (seed, epoch), identical on every rank. */
static void make_permutation(so_loader *l, int epoch)
{
    int n = l->d->n;
    for (int i = 0; i < n; i++)
        l->perm[i] = i;
    if (!l->cfg.shuffle)
        return;
    so_rng r;
    so_rng_seed(&r, so_rng_derive(so_rng_derive(l->cfg.seed, STREAM_SHUFFLE), (uint64_t)epoch));
    for (int i = n - 1; i > 0; i--) {
        int j = (int)so_rng_below(&r, (uint64_t)i + 1);
        int32_t t = l->perm[i];
        l->perm[i] = l->perm[j];
        l->perm[j] = t;
    }
}

/* fixed_shard: the rank's samples are its DistributedSampler shard of
 * epoch 0's permutation, every epoch, in an order shuffled per epoch. */
static int fixed_shard_order(so_loader *l, int epoch)
{
    if (!l->fixed) {
        if (!(l->fixed = malloc((size_t)l->count * sizeof *l->fixed)))
            return so_err(SO_ENOMEM, "loader: out of memory");
        make_permutation(l, 0);
        for (int k = 0; k < l->count; k++)
            l->fixed[k] = l->perm[l->cfg.rank + (size_t)k * l->cfg.world];
    }
    memcpy(l->idx, l->fixed, (size_t)l->count * sizeof *l->idx);
    if (!l->cfg.shuffle || epoch == 0)
        return 0;
    so_rng r;
    so_rng_seed(&r, so_rng_derive(so_rng_derive(so_rng_derive(l->cfg.seed, STREAM_SHUFFLE), (uint64_t)epoch),
                                  (uint64_t)l->cfg.rank + 1));
    for (int i = l->count - 1; i > 0; i--) {
        int j = (int)so_rng_below(&r, (uint64_t)i + 1);
        int32_t t = l->idx[i];
        l->idx[i] = l->idx[j];
        l->idx[j] = t;
    }
    return 0;
}

int so_loader_start_epoch(so_loader *l, int epoch)
{
    return so_loader_start_epoch_at(l, epoch, 0);
}

int so_loader_start_epoch_at(so_loader *l, int epoch, int first)
{
    if (!l || epoch < 0)
        return so_err(SO_EINVAL, "so_loader_start_epoch: bad loader or epoch %d", epoch);
    if (first < 0 || first > l->steps)
        return so_err(SO_EINVAL, "resume position: batch %d of an epoch of %d", first, l->steps);
    if (l->has_thread)
        producer_quiesce(l);
    if (l->cfg.fixed_shard) {
        int rc = fixed_shard_order(l, epoch);
        if (rc)
            return rc;
    } else {
        make_permutation(l, epoch);
        for (int k = 0; k < l->count; k++)
            l->idx[k] = l->perm[l->cfg.rank + (size_t)k * l->cfg.world];
    }
    l->epoch = epoch;
    if (l->stream)
        return img_stream_start(l->stream, epoch, l->idx, l->count, l->steps, first);
    if (!l->has_thread) {
        l->consumed = first;
        return 0;
    }
    /* Reset the ring under the lock: the idle producer may still wake spuriously. */
    pthread_mutex_lock(&l->mu);
    l->consumed = l->produced = first;
    l->head = l->filled = l->held = 0;
    l->active = 1;
    pthread_cond_signal(&l->to_producer);
    pthread_mutex_unlock(&l->mu);
    return 0;
}

/* Prefetch path: releases the previously lent slot, then waits for the next. */
static int next_prefetched(so_loader *l, batch_slot **out)
{
    int rc = 1;
    pthread_mutex_lock(&l->mu);
    if (l->held) {
        l->held = 0;
        pthread_cond_signal(&l->to_producer);
    }
    if (l->consumed >= l->steps) {
        rc = 0;
        goto out;
    }
    if (l->filled == 0) {
        double t0 = so_now();
        while (l->filled == 0)
            pthread_cond_wait(&l->to_consumer, &l->mu);
        l->wait += so_now() - t0;
    }
    *out = &l->slots[l->head];
    l->head = (l->head + 1) % l->nslots;
    l->filled--;
    l->held = 1;
    l->consumed++;
out:
    pthread_mutex_unlock(&l->mu);
    return rc;
}

int so_loader_next(so_loader *l, const float **x, const int32_t **y, int *n)
{
    batch_slot *s = NULL;
    if (!l || l->epoch < 0)
        return so_err(SO_EINVAL, "so_loader_next: call so_loader_start_epoch first");
    if (l->stream)
        return img_stream_next(l->stream, x, y, n);
    if (l->has_thread) {
        if (next_prefetched(l, &s) == 0)
            return 0;
    } else {
        if (l->consumed >= l->steps)
            return 0;
        /* Synchronous: the whole fill is time the caller waits for data. */
        double t0 = so_now();
        s = &l->slots[0];
        fill_batch(l, l->consumed++, s);
        l->wait += so_now() - t0;
    }
    *x = s->x;
    *y = s->y;
    *n = s->n;
    return 1;
}

int so_loader_steps(const so_loader *l) { return l ? l->steps : 0; }

const int32_t *so_loader_indices(const so_loader *l, int *count)
{
    int have = l && l->epoch >= 0;
    *count = have ? l->count : 0;
    return have ? l->idx : NULL;
}

double so_loader_wait_seconds(const so_loader *l)
{
    if (!l)
        return 0.0;
    if (l->stream)
        return img_stream_wait(l->stream);
    return l->wait; /* written only by the consumer thread, inside next() */
}

void so_loader_get_stats(const so_loader *l, so_loader_stats *out)
{
    memset(out, 0, sizeof *out);
    if (l && l->stream)
        img_stream_stats(l->stream, out);
}
