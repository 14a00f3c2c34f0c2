/* The compressor of data parallelism's gradients (grad_compress.h): the
 * model's weight tensors become the matrices PowerSGD may compress (a conv
 * weight OIHW as O x IHW, a dense weight (out, in)); vectors and everything
 * else go uncompressed inside their bucket. */
#include <stdio.h>
#include <stdlib.h>

#include "grad_compress.h"
#include "scaleout/err.h"
#include "scaleout/graph.h"

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
