/* Recursive-descent JSON parser (RFC 8259) for benchmark records. Input is
 * untrusted (files named on the command line), so nesting depth is bounded,
 * every read is bounds-checked and errors name the byte offset; fuzzed by
 * fuzz/fuzz_json.c. \u escapes outside ASCII become '?' (keys are ASCII). */
#include "jread.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/file.h"

#define MAX_DEPTH 64

typedef struct {
    const char *s;
    size_t n, i;
    char *err;
    size_t errlen;
    int failed;
} parser;

static jv *fail(parser *p, const char *what)
{
    if (!p->failed)
        snprintf(p->err, p->errlen, "%s at byte %zu", what, p->i);
    p->failed = 1;
    return NULL;
}

static void ws(parser *p)
{
    while (p->i < p->n && strchr(" \t\r\n", p->s[p->i]) && p->s[p->i])
        p->i++;
}

static int lit(parser *p, const char *w)
{
    size_t k = strlen(w);
    if (p->n - p->i < k || memcmp(p->s + p->i, w, k))
        return 0;
    p->i += k;
    return 1;
}

static int hex4(parser *p, unsigned *out)
{
    if (p->n - p->i < 4)
        return 0;
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        int c = p->s[p->i++] | 0, lc = c | 32;
        int d = c >= '0' && c <= '9' ? c - '0' : lc >= 'a' && lc <= 'f' ? lc - 'a' + 10 : -1;
        if (d < 0)
            return 0;
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return 1;
}

static char *string(parser *p)
{
    p->i++; /* opening quote */
    char *out = malloc(p->n - p->i + 1);
    size_t o = 0;
    if (!out)
        return (char *)fail(p, "out of memory");
    while (p->i < p->n && p->s[p->i] != '"') {
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c < 0x20)
            return free(out), (char *)fail(p, "control character in string");
        if (c != '\\') {
            out[o++] = (char)c;
            continue;
        }
        if (p->i >= p->n)
            break;
        char e = p->s[p->i++];
        unsigned u;
        switch (e) {
        case '"': case '\\': case '/': out[o++] = e; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u':
            if (!hex4(p, &u))
                return free(out), (char *)fail(p, "bad \\u escape");
            out[o++] = u < 0x80 && u ? (char)u : '?';
            break;
        default: return free(out), (char *)fail(p, "bad escape");
        }
    }
    if (p->i >= p->n)
        return free(out), (char *)fail(p, "unterminated string");
    p->i++;
    out[o] = 0;
    return out;
}

static jv *value(parser *p, int depth);

static jv *node(parser *p, jv_type t)
{
    jv *v = calloc(1, sizeof *v);
    if (!v)
        return fail(p, "out of memory");
    v->t = t;
    return v;
}

static jv *container(parser *p, int depth, int obj)
{
    jv *v = node(p, obj ? JV_OBJ : JV_ARR), **tail = v ? &v->kid : NULL;
    if (!v)
        return NULL;
    p->i++;
    ws(p);
    if (p->i < p->n && p->s[p->i] == (obj ? '}' : ']')) {
        p->i++;
        return v;
    }
    for (;;) {
        char *key = NULL;
        ws(p);
        if (obj) {
            if (p->i >= p->n || p->s[p->i] != '"' || !(key = string(p)))
                return jv_free(v), fail(p, "expected a member name");
            ws(p);
            if (p->i >= p->n || p->s[p->i++] != ':')
                return free(key), jv_free(v), fail(p, "expected ':'");
        }
        jv *k = value(p, depth + 1);
        if (!k)
            return free(key), jv_free(v), NULL;
        k->key = key;
        *tail = k;
        tail = &k->next;
        v->len++;
        ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == (obj ? '}' : ']')) {
            p->i++;
            return v;
        }
        return jv_free(v), fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static jv *number(parser *p)
{
    size_t k = p->i;
    while (k < p->n && strchr("+-0123456789.eE", p->s[k]) && p->s[k])
        k++;
    char buf[64];
    if (k == p->i || k - p->i >= sizeof buf)
        return fail(p, "bad number");
    memcpy(buf, p->s + p->i, k - p->i);
    buf[k - p->i] = 0;
    char *end;
    errno = 0;
    double d = strtod(buf, &end);
    if (*end || (buf[0] != '-' && (buf[0] < '0' || buf[0] > '9')))
        return fail(p, "bad number");
    jv *v = node(p, JV_NUM);
    if (v)
        v->num = d;
    p->i = k;
    return v;
}

static jv *value(parser *p, int depth)
{
    if (depth > MAX_DEPTH)
        return fail(p, "nesting too deep");
    ws(p);
    if (p->i >= p->n)
        return fail(p, "unexpected end");
    char c = p->s[p->i];
    jv *v;
    if (c == '{' || c == '[')
        return container(p, depth, c == '{');
    if (c == '"') {
        char *s = string(p);
        if (!s)
            return NULL;
        if (!(v = node(p, JV_STR)))
            return free(s), NULL;
        v->str = s;
        return v;
    }
    if (lit(p, "true") || lit(p, "false")) {
        if ((v = node(p, JV_BOOL)))
            v->num = p->s[p->i - 1] == 'e' && p->s[p->i - 2] == 'u';
        return v;
    }
    if (lit(p, "null"))
        return node(p, JV_NULL);
    return number(p);
}

jv *jv_parse(const char *text, size_t len, char *err, size_t errlen)
{
    char dummy[8];
    parser p = {text, len, 0, err ? err : dummy, err ? errlen : sizeof dummy, 0};
    jv *v = value(&p, 0);
    ws(&p);
    if (v && p.i != p.n) {
        jv_free(v);
        return fail(&p, "trailing characters");
    }
    return v;
}

jv *jv_load(const char *path, char *err, size_t errlen)
{
    void *buf;
    size_t n;
    if (so_file_read_all(path, (size_t)1 << 30, &buf, &n)) {
        snprintf(err, errlen, "%s", so_errmsg());
        return NULL;
    }
    char msg[160];
    jv *v = jv_parse(buf, n, msg, sizeof msg);
    free(buf);
    if (!v)
        snprintf(err, errlen, "%s: not valid JSON (%s)", path, msg);
    return v;
}

void jv_free(jv *v)
{
    while (v) {
        jv *next = v->next;
        jv_free(v->kid);
        free(v->str);
        free(v->key);
        free(v);
        v = next;
    }
}

const jv *jv_path(const jv *v, const char *path)
{
    while (v && path && *path) {
        size_t k = strcspn(path, ".");
        const jv *m = NULL;
        if (v->t == JV_OBJ)
            for (m = v->kid; m && !(strlen(m->key) == k && !strncmp(m->key, path, k)); m = m->next)
                ;
        v = m;
        path += k + (path[k] == '.');
    }
    return v;
}

const jv *jv_at(const jv *arr, int i)
{
    const jv *k = arr && arr->t == JV_ARR ? arr->kid : NULL;
    while (k && i-- > 0)
        k = k->next;
    return k;
}

double jv_num(const jv *v, const char *path, double dflt)
{
    const jv *x = jv_path(v, path);
    return x && x->t == JV_NUM ? x->num : dflt;
}

const char *jv_str(const jv *v, const char *path, const char *dflt)
{
    const jv *x = jv_path(v, path);
    return x && x->t == JV_STR ? x->str : dflt;
}
