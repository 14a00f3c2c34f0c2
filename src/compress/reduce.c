/* The compressed average of gradient buckets over a process group
 * (scaleout/compress.h): per method, what one bucket's submit encodes and
 * which collective carries it, and the continuation that decodes what came
 * back. Every decode runs in rank order on what every rank received, so all
 * ranks hold the same bits afterwards.
 *
 *   method     collective                      message words per rank
 *   fp16/bf16  allreduce, 16-bit wire           n / 2
 *   topk       allgather (idx, val)             2k   (dense allreduce of n when ranks k >= n)
 *   randk      allreduce of the k shared picks  k
 *   qsgd       allgather of norms + bit planes  ceil(n/D) + (B+1) ceil(n/32)
 *   sign       allgather of scale + sign plane  1 + ceil(n/32)
 *   powersgd   allreduce [P | rest], then       sum rows r + rest, then sum cols r
 *              allreduce Q, chained by `then`
 */
#include <stdlib.h>
#include <string.h>

#include "scaleout/compress.h"
#include "scaleout/dtype.h"
#include "scaleout/err.h"
#include "scaleout/timer.h"

/* One bucket's messages in flight and the buffers reused from step to step. */
typedef struct {
    so_compressor *c;
    so_group *g;
    float *buf;          /* grads + lo: the bucket, corrected, then the average */
    size_t lo, n;
    long step;
    so_handle *h;        /* in flight until wait */
    size_t k;            /* topk, randk: values picked */
    size_t words;        /* allgather: words per rank */
    uint32_t *msg, *all; /* this rank's message; every rank's (allgather) */
    uint32_t *idx;       /* randk: the shared indices */
    void *scratch;       /* topk selection, 16-bit rounding, randk bitmap */
    float *pq, *q;       /* powersgd: [P's | uncompressed values], the Q's */
    int *mi, nm;         /* powersgd: the bucket's compressed matrices */
    size_t cap[7];       /* bytes allocated for msg, all, idx, scratch, pq, q, mi */
    double decode_seconds;
} slot;

struct so_compressor {
    so_compress_spec spec;
    int ef;                  /* error feedback on */
    size_t n;
    so_compress_matrix *mats;
    int nmats;
    float **Q;               /* powersgd: Q^T of each matrix (r x cols), warm start */
    uint64_t seed;
    float *res;              /* error feedback: n residuals, by offset */
    slot **slots;            /* by bucket id */
    int nslots;
    so_compressor_stats st;
};

/* ---- buffers ---------------------------------------------------------------------- */

/* Makes *p hold at least `bytes` (64-byte aligned, contents not kept). */
static int grow(void **p, size_t *cap, size_t bytes)
{
    if (bytes <= *cap)
        return 0;
    free(*p);
    *p = NULL;
    *cap = 0;
    size_t want = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(p, 64, want)) {
        *p = NULL;
        return so_err(SO_ENOMEM, "out of memory for a compressed bucket (%zu bytes)", want);
    }
    *cap = want;
    return 0;
}

enum { B_MSG, B_ALL, B_IDX, B_SCRATCH, B_PQ, B_Q, B_MI };

static int slot_get(so_compressor *c, int bucket, slot **out)
{
    if (bucket < 0)
        return so_err(SO_EINVAL, "compressor: bucket %d is negative", bucket);
    if (bucket >= c->nslots) {
        int n = bucket + 1;
        slot **s = realloc(c->slots, (size_t)n * sizeof *s);
        if (!s)
            return so_err(SO_ENOMEM, "out of memory for compressed buckets");
        memset(s + c->nslots, 0, (size_t)(n - c->nslots) * sizeof *s);
        c->slots = s;
        c->nslots = n;
    }
    if (!c->slots[bucket] && !(c->slots[bucket] = calloc(1, sizeof(slot))))
        return so_err(SO_ENOMEM, "out of memory for a compressed bucket");
    *out = c->slots[bucket];
    return 0;
}

static void slot_free(slot *s)
{
    if (!s)
        return;
    free(s->msg);
    free(s->all);
    free(s->idx);
    free(s->scratch);
    free(s->pq);
    free(s->q);
    free(s->mi);
    free(s);
}

/* ---- shared steps ------------------------------------------------------------------ */

static void scale(float *x, size_t n, float f)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= f;
}

/* Attaches the decoding continuation to h; the slot's handle is its result. */
static int chain(slot *s, so_handle *h, so_then_fn fn)
{
    int rc = so_group_then(s->g, h, fn, s, &s->h);
    if (rc) { /* the operation still runs on our buffers: let it end first */
        so_group_wait(s->g, h);
        s->h = NULL;
    }
    return rc;
}

static void sent(slot *s, size_t words)
{
    s->c->st.bytes_sent += (double)words * 4;
}

/* The allgather every rank's `words`-word message, then fn. */
static int gather(slot *s, so_then_fn fn)
{
    so_handle *h;
    size_t R = (size_t)s->g->size;
    int rc = grow((void **)&s->all, &s->cap[B_ALL], R * s->words * 4);
    if (!rc)
        rc = so_group_iallgather(s->g, s->msg, s->all, R * s->words, NULL, SO_DTYPE_F32, NULL, &h);
    if (!rc)
        rc = chain(s, h, fn);
    sent(s, s->words);
    return rc;
}

/* The dense FP32 (or 16-bit wire) average of the bucket in place, then fn (may be NULL). */
static int dense(slot *s, so_dtype wire, so_then_fn fn)
{
    so_group_opts o = {.wire = wire};
    so_handle *h;
    int rc = so_group_iallreduce(s->g, s->buf, s->buf, s->n, SO_DTYPE_F32, SO_REDUCE_AVG, &o, &h);
    if (rc)
        return rc;
    sent(s, wire == SO_DTYPE_F32 ? s->n : (s->n + 1) / 2);
    if (fn)
        return chain(s, h, fn);
    s->h = h;
    return 0;
}

static double begin_decode(int status, slot *s)
{
    (void)s;
    return status ? 0 : so_now();
}

static int end_decode(slot *s, double t0)
{
    s->decode_seconds += so_now() - t0;
    return 0;
}

/* ---- fp16 / bf16 ---------------------------------------------------------------------- */

/* The wire rounds the corrected bucket once on the way in; the residual is
 * what that rounding drops. */
static int enc_half(so_compressor *c, slot *s)
{
    so_dtype wire = c->spec.method == SO_COMPRESS_FP16 ? SO_DTYPE_F16 : SO_DTYPE_BF16;
    if (c->ef) {
        int rc = grow(&s->scratch, &s->cap[B_SCRATCH], s->n * 2);
        if (rc)
            return rc;
        float *r = c->res + s->lo;
        uint16_t *t = s->scratch;
        if (wire == SO_DTYPE_F16) {
            so_f32_to_f16(t, s->buf, s->n);
            so_f16_to_f32(r, t, s->n);
        } else {
            so_f32_to_bf16(t, s->buf, s->n);
            so_bf16_to_f32(r, t, s->n);
        }
        so_compress_sub(r, s->buf, r, s->n);
    }
    return dense(s, wire, NULL);
}

/* ---- top-k -------------------------------------------------------------------------- */

static int dec_topk(void *arg, int status, so_handle **follow)
{
    slot *s = arg;
    (void)follow;
    double t0 = begin_decode(status, s);
    if (status)
        return status;
    size_t R = (size_t)s->g->size, k = s->k;
    memset(s->buf, 0, s->n * sizeof *s->buf);
    for (size_t r = 0; r < R; r++) {
        const uint32_t *m = s->all + r * 2 * k;
        so_compress_sparse_add(s->buf, m, (const float *)(m + k), k);
    }
    scale(s->buf, s->n, 1.0f / (float)R);
    return end_decode(s, t0);
}

static int enc_topk(so_compressor *c, slot *s)
{
    size_t k = s->k = so_compress_k(s->n, c->spec.ratio);
    int rc = grow(&s->scratch, &s->cap[B_SCRATCH], so_compress_topk_scratch(s->n));
    if (!rc)
        rc = grow((void **)&s->msg, &s->cap[B_MSG], 2 * k * 4);
    if (rc)
        return rc;
    uint32_t *idx = s->msg;
    float *val = (float *)(s->msg + k);
    so_compress_topk(s->buf, s->n, k, idx, val, s->scratch);
    if (c->ef) { /* the residual: everything not picked */
        memcpy(c->res + s->lo, s->buf, s->n * sizeof(float));
        so_compress_sparse_zero(c->res + s->lo, idx, k);
    }
    if (so_compress_topk_dense(s->n, k, s->g->size)) { /* SparCML: the sum is dense anyway */
        memset(s->buf, 0, s->n * sizeof *s->buf);
        so_compress_sparse_add(s->buf, idx, val, k);
        return dense(s, SO_DTYPE_F32, NULL);
    }
    s->words = 2 * k;
    return gather(s, dec_topk);
}

/* ---- random-k ------------------------------------------------------------------------ */

static int dec_randk(void *arg, int status, so_handle **follow)
{
    slot *s = arg;
    (void)follow;
    double t0 = begin_decode(status, s);
    if (status)
        return status;
    /* Without error feedback, n/k makes the estimate unbiased. */
    float f = s->c->ef ? 1.0f : (float)((double)s->n / (double)s->k);
    memset(s->buf, 0, s->n * sizeof *s->buf);
    so_compress_scatter(s->buf, s->idx, (const float *)s->msg, s->k, f);
    return end_decode(s, t0);
}

static int enc_randk(so_compressor *c, slot *s)
{
    size_t k = s->k = so_compress_k(s->n, c->spec.ratio);
    int rc = grow((void **)&s->idx, &s->cap[B_IDX], k * 4);
    if (!rc)
        rc = grow((void **)&s->msg, &s->cap[B_MSG], k * 4);
    if (!rc)
        rc = grow(&s->scratch, &s->cap[B_SCRATCH], (s->n + 63) / 64 * 8);
    if (rc)
        return rc;
    memset(s->scratch, 0, (s->n + 63) / 64 * 8);
    /* Rank 0 in the key: every rank draws the same indices. */
    so_compress_randk_indices(s->n, k, so_compress_key(c->seed, (uint64_t)s->step, s->lo, 0), s->idx, s->scratch);
    so_compress_gather((float *)s->msg, s->buf, s->idx, k);
    if (c->ef) {
        memcpy(c->res + s->lo, s->buf, s->n * sizeof(float));
        so_compress_sparse_zero(c->res + s->lo, s->idx, k);
    }
    so_handle *h;
    rc = so_group_iallreduce(s->g, s->msg, s->msg, k, SO_DTYPE_F32, SO_REDUCE_AVG, NULL, &h);
    if (rc)
        return rc;
    sent(s, k);
    return chain(s, h, dec_randk);
}

/* ---- QSGD and sign --------------------------------------------------------------------- */

static int dec_bits(void *arg, int status, so_handle **follow)
{
    slot *s = arg;
    (void)follow;
    double t0 = begin_decode(status, s);
    if (status)
        return status;
    const so_compress_spec *sp = &s->c->spec;
    size_t R = (size_t)s->g->size;
    for (size_t r = 0; r < R; r++) {
        const uint32_t *m = s->all + r * s->words;
        if (sp->method == SO_COMPRESS_QSGD)
            so_compress_qsgd_decode(s->buf, m, s->n, sp->bits, sp->block, r > 0);
        else
            so_compress_sign_decode(s->buf, m, s->n, r > 0);
    }
    scale(s->buf, s->n, 1.0f / (float)R);
    return end_decode(s, t0);
}

static int enc_bits(so_compressor *c, slot *s)
{
    const so_compress_spec *sp = &c->spec;
    int q = sp->method == SO_COMPRESS_QSGD;
    s->words = q ? so_compress_qsgd_words(s->n, sp->bits, sp->block) : so_compress_sign_words(s->n);
    int rc = grow((void **)&s->msg, &s->cap[B_MSG], s->words * 4);
    if (rc)
        return rc;
    if (q) /* the draws differ per rank: their errors average out */
        so_compress_qsgd_encode(s->msg, s->buf, s->n, sp->bits, sp->block,
                                so_compress_key(c->seed, (uint64_t)s->step, s->lo, (uint64_t)s->g->rank + 1));
    else
        so_compress_sign_encode(s->msg, s->buf, s->n);
    if (c->ef) {
        float *r = c->res + s->lo;
        if (q)
            so_compress_qsgd_decode(r, s->msg, s->n, sp->bits, sp->block, 0);
        else
            so_compress_sign_decode(r, s->msg, s->n, 0);
        so_compress_sub(r, s->buf, r, s->n);
    }
    return gather(s, dec_bits);
}

/* ---- PowerSGD -------------------------------------------------------------------------- */

/* The bucket's matrices that go compressed (whole, and worth it at rank r). */
static int psgd_pick(so_compressor *c, slot *s)
{
    int rc = grow((void **)&s->mi, &s->cap[B_MI], (size_t)(c->nmats + 1) * sizeof(int));
    if (rc)
        return rc;
    s->nm = 0;
    for (int i = 0; i < c->nmats; i++) {
        const so_compress_matrix *m = &c->mats[i];
        if (m->off >= s->lo && m->off + m->rows * m->cols <= s->lo + s->n &&
            so_compress_powersgd_fits(m->rows, m->cols, c->spec.rank))
            s->mi[s->nm++] = i;
    }
    return 0;
}

/* Copies the values of the bucket outside its compressed matrices to (to_msg)
 * or from the end of pq, after the P's (at offset `at`); returns how many. */
static size_t psgd_rest(slot *s, size_t at, int to_msg)
{
    size_t pos = 0, cnt = 0;
    for (int j = 0; j <= s->nm; j++) {
        const so_compress_matrix *m = j < s->nm ? &s->c->mats[s->mi[j]] : NULL;
        size_t end = m ? m->off - s->lo : s->n;
        if (end > pos) {
            if (to_msg)
                memcpy(s->pq + at + cnt, s->buf + pos, (end - pos) * sizeof(float));
            else
                memcpy(s->buf + pos, s->pq + at + cnt, (end - pos) * sizeof(float));
            cnt += end - pos;
        }
        if (m)
            pos = end + m->rows * m->cols;
    }
    return cnt;
}

static size_t psgd_p_words(const slot *s)
{
    size_t w = 0;
    for (int j = 0; j < s->nm; j++)
        w += s->c->mats[s->mi[j]].rows * (size_t)s->c->spec.rank;
    return w;
}

static size_t psgd_q_words(const slot *s)
{
    size_t w = 0;
    for (int j = 0; j < s->nm; j++)
        w += s->c->mats[s->mi[j]].cols * (size_t)s->c->spec.rank;
    return w;
}

/* After the Q allreduce: M ~ P Q^T; Q kept for the next step's warm start. */
static int psgd_done(void *arg, int status, so_handle **follow)
{
    slot *s = arg;
    (void)follow;
    double t0 = begin_decode(status, s);
    if (status)
        return status;
    so_compressor *c = s->c;
    int r = c->spec.rank;
    size_t po = 0, qo = 0;
    for (int j = 0; j < s->nm; j++) {
        const so_compress_matrix *m = &c->mats[s->mi[j]];
        float *M = s->buf + (m->off - s->lo), *P = s->pq + po, *Qt = s->q + qo;
        if (c->ef) { /* the approximation A into the residual, then residual = M - A, M = A */
            float *res = c->res + m->off;
            so_compress_psgd_approx(res, P, Qt, m->rows, m->cols, r, 1.0f);
            for (size_t i = 0; i < m->rows * m->cols; i++) {
                float a = res[i];
                res[i] = M[i] - a;
                M[i] = a;
            }
        } else {
            so_compress_psgd_approx(M, P, Qt, m->rows, m->cols, r, 1.0f);
        }
        memcpy(c->Q[s->mi[j]], Qt, (size_t)r * m->cols * sizeof(float));
        po += m->rows * (size_t)r;
        qo += m->cols * (size_t)r;
    }
    return end_decode(s, t0);
}

/* After the [P | rest] allreduce: the rest is averaged; P orthonormalised,
 * Q = M^T P from this rank's own M, and the Q allreduce submitted. */
static int psgd_mid(void *arg, int status, so_handle **follow)
{
    slot *s = arg;
    double t0 = begin_decode(status, s);
    if (status)
        return status;
    so_compressor *c = s->c;
    int r = c->spec.rank;
    size_t po = 0, qo = 0;
    for (int j = 0; j < s->nm; j++) {
        const so_compress_matrix *m = &c->mats[s->mi[j]];
        float *P = s->pq + po;
        so_compress_psgd_orthonormalize(P, m->rows, r);
        so_compress_psgd_q(s->q + qo, s->buf + (m->off - s->lo), P, m->rows, m->cols, r);
        po += m->rows * (size_t)r;
        qo += m->cols * (size_t)r;
    }
    psgd_rest(s, po, 0);
    end_decode(s, t0);
    return so_group_iallreduce(s->g, s->q, s->q, qo, SO_DTYPE_F32, SO_REDUCE_AVG, NULL, follow);
}

static int enc_powersgd(so_compressor *c, slot *s)
{
    if (s->step < c->spec.start_step)
        return dense(s, SO_DTYPE_F32, NULL);
    int rc = psgd_pick(c, s);
    if (rc)
        return rc;
    if (c->ef) /* the uncompressed values are sent exactly; psgd_done sets the matrices' */
        memset(c->res + s->lo, 0, s->n * sizeof(float));
    if (!s->nm) /* nothing here is worth compressing (biases, small layers) */
        return dense(s, SO_DTYPE_F32, NULL);
    size_t pw = psgd_p_words(s), qw = psgd_q_words(s), rest = s->n;
    for (int j = 0; j < s->nm; j++)
        rest -= c->mats[s->mi[j]].rows * c->mats[s->mi[j]].cols;
    if ((rc = grow((void **)&s->pq, &s->cap[B_PQ], (pw + rest) * 4)) ||
        (rc = grow((void **)&s->q, &s->cap[B_Q], qw * 4 + 4)))
        return rc;
    size_t po = 0;
    for (int j = 0; j < s->nm; j++) {
        const so_compress_matrix *m = &c->mats[s->mi[j]];
        so_compress_psgd_orthonormalize_qt(c->Q[s->mi[j]], m->cols, c->spec.rank);
        so_compress_psgd_p(s->pq + po, s->buf + (m->off - s->lo), c->Q[s->mi[j]], m->rows, m->cols, c->spec.rank);
        po += m->rows * (size_t)c->spec.rank;
    }
    psgd_rest(s, pw, 1);
    so_handle *h;
    rc = so_group_iallreduce(s->g, s->pq, s->pq, pw + rest, SO_DTYPE_F32, SO_REDUCE_AVG, NULL, &h);
    if (rc)
        return rc;
    sent(s, pw + rest + qw);
    if ((rc = so_group_then(s->g, h, psgd_mid, s, &h))) {
        so_group_wait(s->g, h);
        return rc;
    }
    return chain(s, h, psgd_done); /* h completes with the Q allreduce */
}

/* ---- the compressor ------------------------------------------------------------------ */

typedef int (*encoder)(so_compressor *c, slot *s);

static encoder encoder_of(so_compress_method m)
{
    switch (m) {
    case SO_COMPRESS_FP16:
    case SO_COMPRESS_BF16:
        return enc_half;
    case SO_COMPRESS_TOPK:
        return enc_topk;
    case SO_COMPRESS_RANDK:
        return enc_randk;
    case SO_COMPRESS_QSGD:
    case SO_COMPRESS_SIGN:
        return enc_bits;
    case SO_COMPRESS_POWERSGD:
        return enc_powersgd;
    default:
        return NULL;
    }
}

static int check_mats(const so_compressor_config *cf)
{
    for (int i = 0; i < cf->nmats; i++) {
        const so_compress_matrix *m = &cf->mats[i];
        if (!m->rows || !m->cols || m->off + m->rows * m->cols > cf->n ||
            (i && m->off < cf->mats[i - 1].off + cf->mats[i - 1].rows * cf->mats[i - 1].cols))
            return so_err(SO_EINVAL, "compressor: matrix %d (offset %zu, %zu x %zu) is outside the buffer or "
                                     "overlaps the one before", i, m->off, m->rows, m->cols);
    }
    return 0;
}

static int psgd_init(so_compressor *c, const so_compressor_config *cf)
{
    if (!cf->nmats)
        return 0;
    if (!(c->mats = malloc((size_t)cf->nmats * sizeof *c->mats)) || !(c->Q = calloc((size_t)cf->nmats, sizeof *c->Q)))
        return so_err(SO_ENOMEM, "out of memory for PowerSGD's matrices");
    memcpy(c->mats, cf->mats, (size_t)cf->nmats * sizeof *c->mats);
    c->nmats = cf->nmats;
    for (int i = 0; i < c->nmats; i++) {
        size_t len = (size_t)c->spec.rank * c->mats[i].cols;
        if (!so_compress_powersgd_fits(c->mats[i].rows, c->mats[i].cols, c->spec.rank))
            continue;
        if (!(c->Q[i] = malloc(len * sizeof(float))))
            return so_err(SO_ENOMEM, "out of memory for PowerSGD's Q");
        so_compress_psgd_init(c->Q[i], c->mats[i].cols, c->spec.rank, so_compress_key(c->seed, 0, (uint64_t)i, 0));
    }
    return 0;
}

int so_compressor_create(const so_compressor_config *cf, so_compressor **out)
{
    *out = NULL;
    if (!encoder_of(cf->spec.method))
        return so_err(SO_EINVAL, "--compress %s has no compressor", so_compress_method_name(cf->spec.method));
    int rc = check_mats(cf);
    if (rc)
        return rc;
    so_compressor *c = calloc(1, sizeof *c);
    if (!c)
        return so_err(SO_ENOMEM, "out of memory for the compressor");
    c->spec = cf->spec;
    c->ef = cf->error_feedback < 0 ? so_compress_biased(&cf->spec) : cf->error_feedback != 0;
    c->n = cf->n;
    c->seed = cf->seed;
    if (c->ef && !(c->res = calloc(cf->n ? cf->n : 1, sizeof(float))))
        rc = so_err(SO_ENOMEM, "out of memory for the error-feedback residual (%zu floats)", cf->n);
    if (!rc && cf->spec.method == SO_COMPRESS_POWERSGD)
        rc = psgd_init(c, cf);
    if (rc) {
        so_compressor_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

void so_compressor_destroy(so_compressor *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->nslots; i++)
        slot_free(c->slots[i]);
    for (int i = 0; c->Q && i < c->nmats; i++)
        free(c->Q[i]);
    free(c->Q);
    free(c->mats);
    free(c->slots);
    free(c->res);
    free(c);
}

int so_compressor_submit(so_compressor *c, so_group *g, float *grads, size_t lo, size_t hi, int bucket, long step)
{
    slot *s = NULL;
    if (hi < lo || hi > c->n)
        return so_err(SO_EINVAL, "compressor: bucket [%zu, %zu) is outside the %zu-float buffer", lo, hi, c->n);
    int rc = slot_get(c, bucket, &s);
    if (rc)
        return rc;
    if (s->h)
        return so_err(SO_EINVAL, "compressor: bucket %d submitted twice before a wait", bucket);
    s->c = c;
    s->g = g;
    s->buf = grads + lo;
    s->lo = lo;
    s->n = hi - lo;
    s->step = step;
    double t0 = so_now();
    int uncompressed = c->spec.method == SO_COMPRESS_POWERSGD && step < c->spec.start_step;
    if (c->ef && !uncompressed)
        so_compress_add(s->buf, c->res + lo, s->n);
    rc = encoder_of(c->spec.method)(c, s);
    c->st.encode_seconds += so_now() - t0;
    c->st.bytes_dense += (double)s->n * 4;
    c->st.buckets++;
    return rc;
}

int so_compressor_wait(so_compressor *c, so_group *g, double *waited)
{
    double t0 = so_now();
    int rc = 0;
    for (int i = 0; i < c->nslots; i++) {
        slot *s = c->slots[i];
        if (!s || !s->h)
            continue;
        int r = so_group_wait(g, s->h);
        s->h = NULL;
        rc = rc ? rc : r;
        c->st.decode_seconds += s->decode_seconds;
        s->decode_seconds = 0;
    }
    if (waited)
        *waited = so_now() - t0;
    return rc;
}

int so_compressor_error_feedback(const so_compressor *c) { return c->ef; }

float *so_compressor_residual(so_compressor *c) { return c->res; }

void so_compressor_stats_get(const so_compressor *c, so_compressor_stats *out) { *out = c->st; }

/* ---- the state kept between steps, for checkpoints ----------------------------------- */

/* The state's pieces in their saved order: the residual, then each
 * compressed matrix's Q^T, copied out of (into = 0) or into the bytes
 * (NULL: only counted). Returns the bytes. */
static size_t state_walk(so_compressor *c, uint8_t *bytes, int into)
{
    size_t off = 0;
    for (int i = -1; i < c->nmats; i++) {
        float *p = i < 0 ? (c->ef ? c->res : NULL) : c->Q ? c->Q[i] : NULL;
        size_t n = i < 0 ? c->n : (size_t)c->spec.rank * c->mats[i].cols;
        if (!p)
            continue;
        if (bytes && into)
            memcpy(p, bytes + off, n * sizeof(float));
        else if (bytes)
            memcpy(bytes + off, p, n * sizeof(float));
        off += n * sizeof(float);
    }
    return off;
}

size_t so_compressor_state_bytes(const so_compressor *c) { return state_walk((so_compressor *)c, NULL, 0); }

void so_compressor_state_get(const so_compressor *c, void *dst) { state_walk((so_compressor *)c, dst, 0); }

void so_compressor_state_set(so_compressor *c, const void *src) { state_walk(c, (uint8_t *)src, 1); }

double so_compress_bucket_bytes(const so_compress_spec *s, size_t n, const so_compress_matrix *mats, int nmats,
                                int ranks, long step)
{
    size_t k = so_compress_k(n, s->ratio), w = n;
    switch (s->method) {
    case SO_COMPRESS_FP16:
    case SO_COMPRESS_BF16:
        w = (n + 1) / 2;
        break;
    case SO_COMPRESS_TOPK:
        w = so_compress_topk_dense(n, k, ranks) ? n : 2 * k;
        break;
    case SO_COMPRESS_RANDK:
        w = k;
        break;
    case SO_COMPRESS_QSGD:
        w = so_compress_qsgd_words(n, s->bits, s->block);
        break;
    case SO_COMPRESS_SIGN:
        w = so_compress_sign_words(n);
        break;
    case SO_COMPRESS_POWERSGD:
        for (int i = 0; step >= s->start_step && i < nmats; i++)
            if (so_compress_powersgd_fits(mats[i].rows, mats[i].cols, s->rank))
                w -= mats[i].rows * mats[i].cols - (mats[i].rows + mats[i].cols) * (size_t)s->rank;
        break;
    default:
        break;
    }
    return (double)w * 4;
}
