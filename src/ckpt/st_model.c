/* safetensors export and import for a model (ckpt.h): tensors under
 * PyTorch's state_dict names in graph order (weight, bias, running_mean,
 * running_var, num_batches_tracked), the parser in safetensors.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_internal.h"
#include "scaleout/dtype.h"
#include "scaleout/err.h"

/* ---- export ------------------------------------------------------------------------ */

typedef so_st_out out_tensor;

/* The model's tensors in state_dict order, num_batches_tracked after running_var;
 * the float ones as fdtype ("F32" or "BF16"). */
static int list_tensors(const so_model *m, const float *params, const float *bufs, const int64_t *nbt,
                        const char *fdtype, out_tensor **out, int *n)
{
    int cap = 0;
    *out = NULL;
    *n = 0;
    for (int i = 0; i < so_graph_size(m->g); i++) {
        so_tensor_desc td[4];
        int k = so_node_tensors(m->g, i, td);
        const so_node *nd = so_graph_node(m->g, i);
        for (int e = 0; e < k + 1; e++) {
            int is_nbt = e == k;
            if (is_nbt && (k == 0 || strcmp(td[k - 1].suffix, "running_var") != 0))
                continue;
            if (*n + 1 > cap) {
                cap = cap ? cap * 2 : 64;
                out_tensor *g = realloc(*out, (size_t)cap * sizeof *g);
                if (!g)
                    return so_err(SO_ENOMEM, "out of memory");
                *out = g;
            }
            out_tensor *o = &(*out)[(*n)++];
            memset(o, 0, sizeof *o);
            ck_fmt(o->name, sizeof o->name, "%s.%s", nd->name, is_nbt ? "num_batches_tracked" : td[e].suffix);
            if (is_nbt) {
                o->data = nbt;
                o->dtype = "I64";
                o->bytes = 8;
                continue;
            }
            o->data = (td[e].is_buffer ? bufs : params) + td[e].off;
            o->dtype = fdtype;
            o->ndim = td[e].ndim;
            memcpy(o->dims, td[e].dims, sizeof o->dims);
            o->bytes = td[e].count * (strcmp(fdtype, "BF16") ? 4 : 2);
        }
    }
    return 0;
}

#define BF16_CHUNK 4096 /* values converted per write */

/* Writes n FP32 values as BF16 (round to nearest even), a chunk at a time. */
static int write_bf16(FILE *f, const float *src, size_t n)
{
    uint16_t buf[BF16_CHUNK];
    int ok = 1;
    for (size_t i = 0; ok && i < n; i += BF16_CHUNK) {
        size_t k = n - i < BF16_CHUNK ? n - i : BF16_CHUNK;
        so_f32_to_bf16(buf, src + i, k);
        ok = fwrite(buf, sizeof *buf, k, f) == k;
    }
    return ok;
}

/* Writes t's data, transposing a (rows, cols) source a row of output at a
 * time; BF16 tensors are converted from their FP32 source on the way. */
static int write_data(FILE *f, const out_tensor *t)
{
    int bf16 = !strcmp(t->dtype, "BF16");
    if (!t->transposed)
        return bf16 ? write_bf16(f, t->data, t->bytes / 2) : fwrite(t->data, 1, t->bytes, f) == t->bytes;
    size_t rows = (size_t)t->dims[0], cols = (size_t)t->dims[1]; /* of the output; the source is (cols, rows) */
    const float *src = t->data;
    float *row = malloc(cols * sizeof *row + 1);
    int ok = row != NULL;
    for (size_t r = 0; ok && r < rows; r++) {
        for (size_t c = 0; c < cols; c++)
            row[c] = src[c * rows + r];
        ok = bf16 ? write_bf16(f, row, cols) : fwrite(row, sizeof *row, cols, f) == cols;
    }
    free(row);
    return ok;
}

int so_ckpt_safetensors_write(const char *path, const so_st_out *t, int n)
{
    size_t cap = 256 + (size_t)n * 512, hl = 0;
    char *h = malloc(cap);
    int rc = h ? 0 : so_err(SO_ENOMEM, "out of memory");
    uint64_t off = 0;
    if (!rc)
        hl += (size_t)snprintf(h + hl, cap - hl, "{\"__metadata__\":{\"format\":\"pt\",\"producer\":\"scaleout\"}");
    for (int i = 0; !rc && i < n; i++) {
        hl += (size_t)snprintf(h + hl, cap - hl, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name, t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++)
            hl += (size_t)snprintf(h + hl, cap - hl, "%s%" PRId64, d ? "," : "", t[i].dims[d]);
        hl += (size_t)snprintf(h + hl, cap - hl, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off,
                               off + t[i].bytes);
        off += t[i].bytes;
    }
    if (!rc) {
        hl += (size_t)snprintf(h + hl, cap - hl, "}");
        while (hl % 8) /* the data starts 8-byte aligned, as the reference writer does */
            h[hl++] = ' ';
    }
    FILE *f = rc ? NULL : fopen(path, "wb");
    if (!rc && !f)
        rc = so_err(SO_EIO, "cannot create '%s'", path);
    if (f) {
        uint8_t len8[8];
        for (int k = 0; k < 8; k++)
            len8[k] = (uint8_t)((uint64_t)hl >> (8 * k));
        int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(h, 1, hl, f) == hl;
        for (int i = 0; ok && i < n; i++)
            ok = write_data(f, &t[i]);
        if ((fclose(f) != 0 || !ok))
            rc = so_err(SO_EIO, "error writing '%s'", path);
    }
    free(h);
    return rc;
}

int so_ckpt_safetensors_save(const char *path, const so_model *m, const float *params, const float *bufs,
                             int64_t batches_tracked)
{
    return so_ckpt_safetensors_save_as(path, m, params, bufs, batches_tracked, SO_DTYPE_F32);
}

int so_ckpt_safetensors_save_as(const char *path, const so_model *m, const float *params, const float *bufs,
                                int64_t batches_tracked, int dtype)
{
    if (dtype != SO_DTYPE_F32 && dtype != SO_DTYPE_BF16)
        return so_err(SO_EINVAL, "safetensors export: dtype %d is neither F32 nor BF16", dtype);
    out_tensor *t;
    int n;
    int rc = list_tensors(m, params, bufs, &batches_tracked, dtype == SO_DTYPE_BF16 ? "BF16" : "F32", &t, &n);
    if (!rc)
        rc = so_ckpt_safetensors_write(path, t, n);
    free(t);
    return rc;
}

/* ---- import --------------------------------------------------------------------------- */

static int load_tensor(so_model *m, const so_node *nd, const so_tensor_desc *td, const so_st_tensor *t, int nt,
                       const uint8_t *data, uint8_t *used, const char *path)
{
    char name[160];
    ck_fmt(name, sizeof name, "%s.%s", nd->name, td->suffix);
    for (int i = 0; i < nt; i++) {
        if (strcmp(t[i].name, name) != 0)
            continue;
        int same = !strcmp(t[i].dtype, "F32") && t[i].ndim == td->ndim;
        for (int d = 0; same && d < td->ndim; d++)
            same = t[i].shape[d] == td->dims[d];
        if (!same)
            return so_err(SO_EINVAL, "%s: tensor '%s' has dtype %s and a shape of %d dims that do not match the "
                                     "model's (F32, %d dims)", path, name, t[i].dtype, t[i].ndim, td->ndim);
        memcpy((td->is_buffer ? m->bufs : m->params) + td->off, data + t[i].begin, td->count * 4);
        used[i] = 1;
        return 0;
    }
    return so_err(SO_EINVAL, "%s: tensor '%s' is missing", path, name);
}

int so_ckpt_safetensors_load(const char *path, so_model *m) { return so_ckpt_safetensors_load_part(path, m, 0); }

int so_ckpt_safetensors_load_part(const char *path, so_model *m, int others_allowed)
{
    void *buf;
    size_t len = (size_t)-1;
    int rc = ck_read(path, &buf, &len);
    if (rc)
        return rc;
    so_st_tensor *t = NULL;
    int nt = 0;
    const uint8_t *data;
    size_t dlen;
    rc = so_ckpt_safetensors_parse(buf, len, path, &t, &nt, &data, &dlen);
    uint8_t *used = rc ? NULL : calloc((size_t)nt + 1, 1);
    if (!rc && !used)
        rc = so_err(SO_ENOMEM, "out of memory");
    for (int i = 0; !rc && i < so_graph_size(m->g); i++) {
        so_tensor_desc td[4];
        int k = so_node_tensors(m->g, i, td);
        for (int e = 0; !rc && e < k; e++)
            rc = load_tensor(m, so_graph_node(m->g, i), &td[e], t, nt, data, used, path);
    }
    for (int i = 0; !rc && i < nt; i++) {
        size_t l = strlen(t[i].name), s = strlen(".num_batches_tracked");
        if (!used[i] && !others_allowed && !(l > s && !strcmp(t[i].name + l - s, ".num_batches_tracked")))
            rc = so_err(SO_EINVAL, "%s: tensor '%s' does not exist in this model", path, t[i].name);
    }
    if (!rc)
        so_model_params_changed(m);
    free(used);
    free(t);
    free(buf);
    return rc;
}
