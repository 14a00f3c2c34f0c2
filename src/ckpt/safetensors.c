/* The safetensors format (ckpt.h): a strict parser of the header (a JSON
 * object of tensor entries plus an optional __metadata__ object of strings;
 * nothing else is accepted), fuzzed by fuzz/fuzz_safetensors.c. Export and
 * import for a model are in st_model.c. */
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
