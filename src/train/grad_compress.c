/* The compressor of data parallelism's gradients (grad_compress.h): the
 * model's weight tensors become the matrices PowerSGD may compress (a conv
 * weight OIHW as O x IHW, a dense weight (out, in)); vectors and everything
 * else go uncompressed inside their bucket. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/test_hooks.h"
#include "grad_compress.h"
#include "scaleout/err.h"
#include "scaleout/graph.h"
#include "scaleout/predict.h"
#include "scaleout/timer.h"

/* A link's fitted cost: seconds = alpha + beta bytes; and the 16-bit
 * wires' large allreduce over FP32's, alpha taken off both (0: not probed). */
typedef struct {
    double alpha, beta;
    double wire_ratio[2]; /* fp16, bf16 */
} grad_link;

/* Every parameter tensor of two or more dimensions, in buffer order. */
static int weight_matrices(const so_model *m, so_compress_matrix **out, int *n)
{
    int nodes = so_graph_size(m->g), cap = 0;
    *out = NULL;
    *n = 0;
    for (int i = 0; i < nodes; i++) {
        so_tensor_desc t[4];
        int nt = so_node_tensors(m->g, i, t);
        for (int k = 0; k < nt; k++) {
            if (t[k].is_buffer || t[k].ndim < 2 || t[k].count == 0)
                continue;
            if (*n == cap) {
                cap = cap ? 2 * cap : 16;
                so_compress_matrix *p = realloc(*out, (size_t)cap * sizeof *p);
                if (!p)
                    return so_err(SO_ENOMEM, "out of memory listing the weight matrices");
                *out = p;
            }
            size_t rows = (size_t)t[k].dims[0];
            (*out)[(*n)++] = (so_compress_matrix){t[k].off, rows, t[k].count / rows};
        }
    }
    return 0;
}

static int by_offset(const void *a, const void *b)
{
    size_t x = ((const so_compress_matrix *)a)->off, y = ((const so_compress_matrix *)b)->off;
    return (x > y) - (x < y);
}

int grad_compress_create(const so_compress_spec *spec, int error_feedback, uint64_t seed, const so_model *m,
                         so_compressor **out)
{
    *out = NULL;
    if (spec->method == SO_COMPRESS_NONE)
        return 0;
    if (spec->method == SO_COMPRESS_AUTO)
        return so_err(SO_EINVAL, "--compress auto: the method is chosen by the strategy at set-up (grad_compress_auto)");
    so_compressor_config cf = {.spec = *spec, .error_feedback = error_feedback, .n = m->nparams, .seed = seed};
    so_compress_matrix *mats = NULL;
    int rc = 0;
    if (spec->method == SO_COMPRESS_POWERSGD && !(rc = weight_matrices(m, &mats, &cf.nmats))) {
        qsort(mats, (size_t)cf.nmats, sizeof *mats, by_offset);
        cf.mats = mats;
    }
    if (!rc)
        rc = so_compressor_create(&cf, out);
    free(mats);
    return rc;
}

/* The tag says what the bytes are: a resume under another method, error
 * feedback setting or rank count does not load them. */
static void rank_state_get(void *ctx, void *dst) { so_compressor_state_get(ctx, dst); }
static void rank_state_set(void *ctx, const void *src) { so_compressor_state_set(ctx, src); }

void grad_compress_rank_state(so_compressor *x, const so_compress_spec *spec, so_rank_state *out)
{
    char name[64];
    so_compress_format(spec, name, sizeof name);
    *out = (so_rank_state){.bytes = so_compressor_state_bytes(x), .get = rank_state_get, .set = rank_state_set,
                           .ctx = x};
    snprintf(out->tag, sizeof out->tag, "compress=%s,error_feedback=%s", name,
             so_compressor_error_feedback(x) ? "on" : "off");
}

/* ---- --compress auto ------------------------------------------------------------------ */

/* The methods auto weighs: FP32 first (ties go to it), then those that keep
 * accuracy at a fixed number of epochs (docs/COMPRESSION.md). Each one's
 * steps to the target over FP32's come from what its message loses of this
 * model's gradient, measured (so_compress_steps_factor). */
static const char *const auto_methods[] = {"none", "fp16", "bf16", "topk:0.01", "powersgd:4"};
#define NAUTO ((int)(sizeof auto_methods / sizeof auto_methods[0]))
#define AUTO_MARGIN 0.02 /* a method must be predicted this much sooner at the target than FP32 */

int grad_compress_auto_state_bytes(int error_feedback, uint64_t seed, const so_model *m, uint64_t *bytes)
{
    *bytes = GRAD_AUTO_NAME_BYTES;
    for (int i = 0; i < NAUTO; i++) {
        so_compress_spec spec;
        so_compressor *x = NULL;
        int rc = so_compress_parse(auto_methods[i], &spec);
        if (!rc)
            rc = grad_compress_create(&spec, error_feedback, seed, m, &x);
        if (rc)
            return rc;
        uint64_t n = x ? GRAD_AUTO_NAME_BYTES + so_compressor_state_bytes(x) : 0;
        *bytes = n > *bytes ? n : *bytes;
        so_compressor_destroy(x);
    }
    return 0;
}

int grad_compress_auto_method(const char *name, so_compress_spec *spec)
{
    for (int i = 0; i < NAUTO; i++) {
        char spelled[GRAD_AUTO_NAME_BYTES];
        if (!so_compress_parse(auto_methods[i], spec) && so_compress_format(spec, spelled, sizeof spelled) >= 0 &&
            !strcmp(spelled, name))
            return 0;
    }
    return so_err(SO_EINVAL, "--compress auto: '%s' is not one of the methods it weighs", name);
}

/* The link as measured: the slowest rank's best of PROBE_REPS allreduces of
 * PROBE_SMALL and PROBE_LARGE floats on the job's own group (the algorithm it
 * picks for that size, over the real wires), fitted as alpha + beta bytes. It
 * replaces the communication layer's model, which without a tuning table
 * measured on the link is one node's shared memory. The PROBE_LARGE
 * allreduce on each 16-bit wire too: its conversions run inside the
 * collective, where the loopback calibration does not see them, and on
 * shared memory they cost about what the halved bytes save. */
#define PROBE_SMALL 4096
#define PROBE_LARGE (512 * 1024)
#define PROBE_REPS 3

static int probe_time(so_group *g, float *buf, size_t count, so_dtype wire, double *best)
{
    so_group_opts o = {.wire = wire};
    *best = 1e30;
    for (int i = 0; i < PROBE_REPS; i++) {
        so_handle *h;
        double t0 = so_now();
        int rc = so_group_iallreduce(g, buf, buf, count, SO_DTYPE_F32, SO_REDUCE_AVG, &o, &h);
        if (!rc)
            rc = so_group_wait(g, h);
        if (rc)
            return rc;
        double t = so_now() - t0;
        *best = t < *best ? t : *best;
    }
    return 0;
}

/* Tests only (SCALEOUT_COMPRESS_TEST_LINK_GBPS=G, src/core/test_hooks.h):
 * the link is G Gbit/s with 50 us latency, so auto's choice on one host can
 * be one a slow network would make (every rank reads the same value). */
static void test_link(grad_link *l)
{
    const char *v = so_test_hook("SCALEOUT_COMPRESS_TEST_LINK_GBPS");
    double gbps = v ? atof(v) : 0;
    if (gbps > 0)
        *l = (grad_link){.alpha = 50e-6, .beta = 8 / (gbps * 1e9), .wire_ratio = {0.5, 0.5}};
}

static int link_probe(const so_dist *d, grad_link *out)
{
    float *buf = calloc(PROBE_LARGE, sizeof *buf);
    if (!buf)
        return so_err(SO_ENOMEM, "out of memory probing the link");
    double t[4]; /* small, large, large on the fp16 wire, on the bf16 wire */
    int rc = probe_time(d->group, buf, PROBE_SMALL, SO_DTYPE_F32, &t[0]);
    if (!rc)
        rc = probe_time(d->group, buf, PROBE_LARGE, SO_DTYPE_F32, &t[1]);
    if (!rc)
        rc = probe_time(d->group, buf, PROBE_LARGE, SO_DTYPE_F16, &t[2]);
    if (!rc)
        rc = probe_time(d->group, buf, PROBE_LARGE, SO_DTYPE_BF16, &t[3]);
    free(buf);
    if (!rc)
        rc = d->max(d->ctx, t, 4); /* every rank fits the same line, and picks alike */
    if (rc)
        return rc;
    double db = (double)(PROBE_LARGE - PROBE_SMALL) * sizeof(float);
    out->beta = t[1] > t[0] ? (t[1] - t[0]) / db : 0;
    out->alpha = t[0] - out->beta * PROBE_SMALL * sizeof(float);
    out->alpha = out->alpha > 0 ? out->alpha : 0;
    for (int w = 0; w < 2; w++)
        out->wire_ratio[w] = t[1] > out->alpha ? (t[2 + w] - out->alpha) / (t[1] - out->alpha) : 0;
    test_link(out);
    return 0;
}

static double link_cost(void *ctx, size_t bytes)
{
    const grad_link *l = ctx;
    return l->alpha + l->beta * (double)bytes;
}

/* Method i's measured cost on this CPU over the real buckets: compress and
 * decompress seconds per FP32 byte, bytes ratio, PowerSGD's Q share, and
 * *rel_err, what its message loses of the gradient. */
static int auto_measure(const so_compress_spec *spec, int ef, uint64_t seed, const so_model *m, const size_t *bounds,
                        int nb, int ranks, so_predict_compress_cost *out, double *rel_err)
{
    so_compressor_config cf = {.spec = *spec, .error_feedback = ef, .n = m->nparams, .seed = seed};
    so_compress_matrix *mats = NULL;
    int rc = 0;
    if (spec->method == SO_COMPRESS_POWERSGD && !(rc = weight_matrices(m, &mats, &cf.nmats))) {
        qsort(mats, (size_t)cf.nmats, sizeof *mats, by_offset);
        cf.mats = mats;
    }
    so_compressor_stats st;
    if (!rc)
        rc = so_compress_calibrate(&cf, m->grads, bounds, nb, ranks, &st, rel_err);
    double q = 0; /* PowerSGD: the Q allreduce's words */
    for (int i = 0; i < cf.nmats; i++)
        if (so_compress_powersgd_fits(mats[i].rows, mats[i].cols, spec->rank))
            q += (double)mats[i].cols * spec->rank;
    free(mats);
    if (rc)
        return rc;
    double dense = st.bytes_dense > 0 ? st.bytes_dense : 1;
    out->ratio2 = q * 4 / dense;
    out->ratio = st.bytes_sent / dense - out->ratio2;
    out->gather = (spec->method == SO_COMPRESS_TOPK || spec->method == SO_COMPRESS_QSGD ||
                   spec->method == SO_COMPRESS_SIGN) && out->ratio < 0.9;
    out->encode_per_byte = st.encode_seconds / dense;
    out->decode_per_byte = st.decode_seconds / dense;
    return 0;
}

/* Every rank's worst measurement, so all ranks predict and pick alike. */
static int auto_agree(const so_dist *d, so_predict_compress_cost *mc, double *rel_err, int n)
{
    double v[3 * NAUTO];
    for (int i = 0; i < n; i++) {
        v[3 * i] = mc[i].encode_per_byte;
        v[3 * i + 1] = mc[i].decode_per_byte;
        v[3 * i + 2] = rel_err[i];
    }
    int rc = d->max(d->ctx, v, 3 * n);
    for (int i = 0; i < n; i++) {
        mc[i].encode_per_byte = v[3 * i];
        mc[i].decode_per_byte = v[3 * i + 1];
        rel_err[i] = v[3 * i + 2];
    }
    return rc;
}

int grad_compress_auto(const so_train_config *c, const so_model *m, const so_dist *d, const so_predict_compute *pc,
                       const size_t *bounds, int nb, so_train_result *r, so_compress_spec *pick)
{
    so_predict_compress_cost mc[NAUTO];
    so_compress_spec spec[NAUTO];
    double step[NAUTO];
    int rc = 0, best = 0;
    grad_link link = {0};
    double rel_err[NAUTO] = {0};
    for (int i = 0; !rc && i < NAUTO; i++) {
        mc[i] = (so_predict_compress_cost){.ratio = 1};
        if (!(rc = so_compress_parse(auto_methods[i], &spec[i])) && i > 0)
            rc = auto_measure(&spec[i], c->error_feedback, c->compress_seed, m, bounds, nb, d->world, &mc[i],
                              &rel_err[i]);
    }
    if (!rc)
        rc = auto_agree(d, mc, rel_err, NAUTO);
    for (int i = 0; !rc && i < NAUTO; i++)
        mc[i].steps_factor = so_compress_steps_factor(&spec[i], rel_err[i]);
    if (!rc && d->group)
        rc = link_probe(d, &link);
    double bytes_ratio[NAUTO];
    for (int i = 0; !rc && i < NAUTO; i++) { /* a 16-bit wire costs what its probe took, conversions and all */
        bytes_ratio[i] = mc[i].ratio + mc[i].ratio2;
        int w = spec[i].method == SO_COMPRESS_FP16 ? 0 : spec[i].method == SO_COMPRESS_BF16 ? 1 : -1;
        if (w >= 0 && link.wire_ratio[w] > 0)
            mc[i].ratio = link.wire_ratio[w];
    }
    if (!rc)
        rc = so_predict_compress(pc, d->world, d->group ? link_cost : d->cost, d->group ? (void *)&link : d->ctx, mc,
                                 NAUTO, AUTO_MARGIN, step, &best);
    if (rc)
        return rc;
    size_t grad_bytes = m->nparams * sizeof(float);
    r->compress_auto_n = NAUTO;
    r->compress_auto_pick = best;
    for (int i = 0; i < NAUTO; i++) {
        so_compress_format(&spec[i], r->compress_auto_name[i], sizeof r->compress_auto_name[i]);
        r->compress_auto_predicted[i] = step[i];
        r->compress_auto_ratio[i] = bytes_ratio[i];
        r->compress_auto_overhead[i] = (mc[i].encode_per_byte + mc[i].decode_per_byte) * (double)grad_bytes;
        r->compress_auto_encode[i] = mc[i].encode_per_byte * (double)grad_bytes;
        r->compress_auto_steps_factor[i] = mc[i].steps_factor;
        r->compress_auto_rel_error[i] = rel_err[i];
    }
    so_predict_point one;
    if (!so_predict_step(pc, 1, NULL, NULL, &one))
        r->compress_auto_compute = one.compute_seconds;
    r->compress_auto_other = pc->t_other;
    r->compress_auto_link_alpha = link.alpha;
    r->compress_auto_link_beta = link.beta;
    *pick = spec[best];
    return 0;
}

void grad_compress_report(const so_compressor *x, so_train_result *r)
{
    so_compressor_stats st;
    so_compressor_stats_get(x, &st);
    r->compress_bytes_sent = st.bytes_sent;
    r->compress_bytes_dense = st.bytes_dense;
    r->compress_encode_s = st.encode_seconds;
    r->compress_decode_s = st.decode_seconds;
    r->compress_error_feedback = so_compressor_error_feedback(x);
}

void grad_compress_report_dense(size_t nparams, so_train_result *r)
{
    r->compress_bytes_sent = r->compress_bytes_dense = (double)nparams * sizeof(float) * (double)r->steps;
    r->compress_encode_s = r->compress_decode_s = 0;
    r->compress_error_feedback = 0;
}
