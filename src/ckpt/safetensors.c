/* The safetensors format (ckpt.h): a strict parser of the header (a JSON
 * object of tensor entries plus an optional __metadata__ object of strings;
 * nothing else is accepted) that is fuzzed, an exporter writing a model's
 * tensors under PyTorch state_dict names, and a loader for --init-from. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_internal.h"
#include "scaleout/err.h"

#define MAX_HEADER (100u << 20)
#define MAX_TENSORS (1 << 20)

typedef struct {
    const char *p, *end, *what, *base;
} jp;

static int jerr(const jp *j, const char *why)
{
    return so_err(SO_EFORMAT, "%s: safetensors header: %s at byte %td", j->what, why, j->p - j->base);
}

static void ws(jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int expect(jp *j, char c)
{
    ws(j);
    if (j->p >= j->end || *j->p != c) {
        char why[32];
        snprintf(why, sizeof why, "expected '%c'", c);
        return jerr(j, why);
    }
    j->p++;
    return 0;
}

/* A JSON string into out (cap bytes, truncation is an error); \u escapes outside ASCII become '?'. */
static int jstring(jp *j, char *out, size_t cap)
{
    int rc = expect(j, '"');
    size_t n = 0;
    while (!rc) {
        if (j->p >= j->end)
            return jerr(j, "unterminated string");
        char c = *j->p++;
        if (c == '"')
            break;
        if ((unsigned char)c < 0x20)
            return jerr(j, "control character in a string");
        if (c == '\\') {
            if (j->p >= j->end)
                return jerr(j, "unterminated string");
            char e = *j->p++;
            const char *map = strchr("\"\\/bfnrt", e);
            if (!map && e != 'u')
                return jerr(j, "bad escape");
            if (e == 'u') {
                if (j->end - j->p < 4)
                    return jerr(j, "bad \\u escape");
                unsigned v = 0;
                for (int k = 0; k < 4; k++) {
                    char h = *j->p++;
                    int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                          : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                    if (d < 0)
                        return jerr(j, "bad \\u escape");
                    v = v * 16 + (unsigned)d;
                }
                c = v < 0x80 && v >= 0x20 ? (char)v : '?';
            } else {
                c = "\"\\/\b\f\n\r\t"[map - "\"\\/bfnrt"];
            }
        }
        if (n + 1 >= cap)
            return jerr(j, "string too long");
        out[n++] = c;
    }
    if (!rc)
        out[n] = '\0';
    return rc;
}

static int juint(jp *j, uint64_t *v)
{
    ws(j);
    if (j->p >= j->end || *j->p < '0' || *j->p > '9')
        return jerr(j, "expected a non-negative integer");
    *v = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (*v > (1ULL << 53))
            return jerr(j, "integer too large");
        *v = *v * 10 + (uint64_t)(*j->p++ - '0');
    }
    return 0;
}

/* ',' between members or the closing bracket: *more = 1 after a ','. */
static int next(jp *j, char close, int *more)
{
    ws(j);
    if (j->p < j->end && *j->p == ',') {
        j->p++;
        *more = 1;
        return 0;
    }
    *more = 0;
    return expect(j, close);
}

static int juint_array(jp *j, uint64_t *v, int max, int *n)
{
    int rc = expect(j, '['), more = 1;
    *n = 0;
    ws(j);
    if (!rc && j->p < j->end && *j->p == ']') {
        j->p++;
        return 0;
    }
    while (!rc && more) {
        if (*n == max)
            return jerr(j, "array too long");
        if (!(rc = juint(j, &v[(*n)++])))
            rc = next(j, ']', &more);
    }
    return rc;
}

static int dtype_size(const char *d)
{
    static const struct { const char *name; int size; } t[] = {
        {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4},
        {"I16", 2}, {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"U16", 2}, {"U32", 4}, {"U64", 8}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!strcmp(d, t[i].name))
            return t[i].size;
    return 0;
}

static int jtensor(jp *j, so_st_tensor *t)
{
    int rc = expect(j, '{'), more = 1, have = 0;
    while (!rc && more) {
        char key[32];
        uint64_t v[8];
        int n;
        if ((rc = jstring(j, key, sizeof key)) || (rc = expect(j, ':')))
            return rc;
        if (!strcmp(key, "dtype")) {
            rc = jstring(j, t->dtype, sizeof t->dtype);
            have |= 1;
        } else if (!strcmp(key, "shape")) {
            rc = juint_array(j, v, 8, &n);
            t->ndim = n;
            for (int k = 0; k < n; k++)
                t->shape[k] = (int64_t)v[k];
            have |= 2;
        } else if (!strcmp(key, "data_offsets")) {
            rc = juint_array(j, v, 2, &n);
            if (!rc && n != 2)
                return jerr(j, "data_offsets needs two numbers");
            t->begin = v[0];
            t->end = v[1];
            have |= 4;
        } else {
            return jerr(j, "unknown key in a tensor entry");
        }
        if (!rc)
            rc = next(j, '}', &more);
    }
    return rc ? rc : have == 7 ? 0 : jerr(j, "tensor entry without dtype, shape or data_offsets");
}

static int jmetadata(jp *j)
{
    int rc = expect(j, '{'), more = 1;
    ws(j);
    if (!rc && j->p < j->end && *j->p == '}') {
        j->p++;
        return 0;
    }
    while (!rc && more) {
        char s[1024];
        if ((rc = jstring(j, s, sizeof s)) || (rc = expect(j, ':')) || (rc = jstring(j, s, sizeof s)))
            return rc;
        rc = next(j, '}', &more);
    }
    return rc;
}

/* Element count times dtype size equals end - begin, inside the data. */
static int check_tensor(const jp *j, const so_st_tensor *t, size_t data_len)
{
    int size = dtype_size(t->dtype);
    if (!size)
        return so_err(SO_EFORMAT, "%s: tensor '%s': unknown dtype '%s'", j->what, t->name, t->dtype);
    uint64_t n = 1;
    for (int k = 0; k < t->ndim; k++) {
        if (t->shape[k] != 0 && n > (1ULL << 50) / (uint64_t)t->shape[k])
            return so_err(SO_EFORMAT, "%s: tensor '%s': shape too large", j->what, t->name);
        n *= (uint64_t)t->shape[k];
    }
    if (t->begin > t->end || t->end > data_len || t->end - t->begin != n * (uint64_t)size)
        return so_err(SO_EFORMAT, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] do not match its "
                                  "shape and dtype or the %zu data bytes", j->what, t->name, t->begin, t->end,
                      data_len);
    return 0;
}

static int jheader(jp *j, so_st_tensor **tv, int *n, size_t data_len)
{
    int rc = expect(j, '{'), more = 1, cap = 0;
    ws(j);
    if (!rc && j->p < j->end && *j->p == '}') {
        j->p++;
        more = 0;
    }
    while (!rc && more) {
        so_st_tensor t;
        memset(&t, 0, sizeof t);
        if ((rc = jstring(j, t.name, sizeof t.name)) || (rc = expect(j, ':')))
            break;
        if (!strcmp(t.name, "__metadata__")) {
            if (!(rc = jmetadata(j)))
                rc = next(j, '}', &more);
            continue;
        }
        if ((rc = jtensor(j, &t)) || (rc = check_tensor(j, &t, data_len)))
            break;
        if (*n == cap) {
            if (cap >= MAX_TENSORS) {
                rc = jerr(j, "too many tensors");
                break;
            }
            cap = cap ? 2 * cap : 64;
            so_st_tensor *g = realloc(*tv, (size_t)cap * sizeof *g);
            if (!g) {
                rc = so_err(SO_ENOMEM, "out of memory");
                break;
            }
            *tv = g;
        }
        (*tv)[(*n)++] = t;
        rc = next(j, '}', &more);
    }
    ws(j);
    if (!rc && j->p != j->end)
        rc = jerr(j, "trailing bytes after the header object");
    return rc;
}

int so_ckpt_safetensors_parse(const uint8_t *buf, size_t len, const char *what, so_st_tensor **t, int *n,
                              const uint8_t **data, size_t *data_len)
{
    *t = NULL;
    *n = 0;
    if (len < 8)
        return so_err(SO_EFORMAT, "%s: too short for a safetensors file", what);
    uint64_t hl = 0;
    for (int k = 7; k >= 0; k--)
        hl = hl << 8 | buf[k];
    if (hl < 2 || hl > MAX_HEADER || hl > len - 8)
        return so_err(SO_EFORMAT, "%s: header length %" PRIu64 " does not fit the %zu-byte file", what, hl, len);
    *data = buf + 8 + hl;
    *data_len = len - 8 - (size_t)hl;
    jp j = {(const char *)buf + 8, (const char *)buf + 8 + hl, what, (const char *)buf + 8};
    int rc = jheader(&j, t, n, *data_len);
    if (rc) {
        free(*t);
        *t = NULL;
        *n = 0;
    }
    return rc;
}

/* ---- export ------------------------------------------------------------------------ */

typedef struct {
    char name[160];
    const void *src;
    const char *dtype;
    int ndim;
    int64_t dims[4];
    size_t bytes;
} out_tensor;

/* The model's tensors in state_dict order, num_batches_tracked after running_var. */
static int list_tensors(const so_model *m, const float *params, const float *bufs, const int64_t *nbt,
                        out_tensor **out, int *n)
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
                o->src = nbt;
                o->dtype = "I64";
                o->bytes = 8;
                continue;
            }
            o->src = (td[e].is_buffer ? bufs : params) + td[e].off;
            o->dtype = "F32";
            o->ndim = td[e].ndim;
            memcpy(o->dims, td[e].dims, sizeof o->dims);
            o->bytes = td[e].count * 4;
        }
    }
    return 0;
}

int so_ckpt_safetensors_save(const char *path, const so_model *m, const float *params, const float *bufs,
                             int64_t batches_tracked)
{
    out_tensor *t;
    int n;
    int rc = list_tensors(m, params, bufs, &batches_tracked, &t, &n);
    size_t cap = 256 + (size_t)n * 512, hl = 0;
    char *h = rc ? NULL : malloc(cap);
    if (!rc && !h)
        rc = so_err(SO_ENOMEM, "out of memory");
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
            ok = fwrite(t[i].src, 1, t[i].bytes, f) == t[i].bytes;
        if ((fclose(f) != 0 || !ok))
            rc = so_err(SO_EIO, "error writing '%s'", path);
    }
    free(h);
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

int so_ckpt_safetensors_load(const char *path, so_model *m)
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
        if (!used[i] && !(l > s && !strcmp(t[i].name + l - s, ".num_batches_tracked")))
            rc = so_err(SO_EINVAL, "%s: tensor '%s' does not exist in this model", path, t[i].name);
    }
    if (!rc)
        so_model_params_changed(m);
    free(used);
    free(t);
    free(buf);
    return rc;
}
