/* A small JSON reader for profile files (`scaleout report`): parses a whole
 * document into a tree of values (objects keep their key order). Strict
 * RFC 8259 syntax, nesting limited to SO_PROF_JSON_DEPTH, errors name the
 * line. Untrusted input: fuzzed by fuzz/fuzz_prof_json.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/prof.h"

struct so_prof_jv {
    so_prof_jtype type;
    double num;
    char *str;          /* string value */
    char *key;          /* member name when inside an object */
    so_prof_jv *kids;   /* array elements / object members */
    int n, cap;
};

typedef struct {
    const char *s, *end;
    int line, depth;
} parser;

static int perr(const parser *p, const char *what)
{
    return so_err(SO_EFORMAT, "line %d: %s", p->line, what);
}

static void skip_ws(parser *p)
{
    for (; p->s < p->end; p->s++) {
        if (*p->s == '\n')
            p->line++;
        else if (*p->s != ' ' && *p->s != '\t' && *p->s != '\r')
            return;
    }
}

static void put_utf8(char *out, size_t *n, unsigned cp)
{
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xC0 | (cp >> 6));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xE0 | (cp >> 12));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*n)++] = (char)(0xF0 | (cp >> 18));
        out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static int hex4(parser *p, unsigned *out)
{
    if (p->end - p->s < 4)
        return perr(p, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *p->s++;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return perr(p, "bad \\u escape");
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return 0;
}

static int escape(parser *p, char *out, size_t *n)
{
    char c = *p->s++;
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k = c ? strchr(from, c) : NULL;
    if (k) {
        out[(*n)++] = to[k - from];
        return 0;
    }
    if (c != 'u')
        return perr(p, "bad escape in string");
    unsigned cp, lo;
    int rc = hex4(p, &cp);
    if (!rc && cp >= 0xD800 && cp < 0xDC00) { /* a surrogate pair */
        if (p->end - p->s < 2 || p->s[0] != '\\' || p->s[1] != 'u')
            return perr(p, "lone surrogate in string");
        p->s += 2;
        if ((rc = hex4(p, &lo)))
            return rc;
        if (lo < 0xDC00 || lo > 0xDFFF)
            return perr(p, "bad surrogate pair in string");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (!rc && cp >= 0xDC00 && cp <= 0xDFFF) {
        return perr(p, "lone surrogate in string");
    }
    if (!rc)
        put_utf8(out, n, cp);
    return rc;
}

/* At the opening quote; *out is malloc'ed (escapes only shrink the text). */
static int string(parser *p, char **out)
{
    const char *q = ++p->s;
    while (q < p->end && *q != '"')
        q += *q == '\\' && q + 1 < p->end ? 2 : 1;
    if (q >= p->end)
        return perr(p, "unterminated string");
    char *s = malloc((size_t)(q - p->s) + 8); /* a malformed last escape may write past q's share */
    if (!s)
        return so_err(SO_ENOMEM, "out of memory reading JSON");
    size_t n = 0;
    int rc = 0;
    while (!rc && p->s < q) {
        unsigned char c = (unsigned char)*p->s;
        if (c < 0x20)
            rc = perr(p, "control character in string");
        else if (c == '\\') {
            p->s++;
            rc = escape(p, s, &n);
        } else
            s[n++] = *p->s++;
    }
    if (!rc && p->s != q)
        rc = perr(p, "bad escape in string");
    if (rc) {
        free(s);
        return rc;
    }
    p->s = q + 1;
    s[n] = 0;
    *out = s;
    return 0;
}

static int number(parser *p, double *out)
{
    const char *q = p->s;
    if (q < p->end && *q == '-')
        q++;
    if (q >= p->end || *q < '0' || *q > '9')
        return perr(p, "unexpected character");
    if (*q == '0' && q + 1 < p->end && q[1] >= '0' && q[1] <= '9')
        return perr(p, "leading zero in number");
    size_t n = 0;
    while (q + n < p->end && strchr("0123456789+-.eE", q[n]) && q[n])
        n++;
    char buf[64];
    size_t len = (size_t)(q - p->s) + n;
    if (len >= sizeof buf)
        return perr(p, "number too long");
    memcpy(buf, p->s, len);
    buf[len] = 0;
    char *e;
    *out = strtod(buf, &e);
    if (*e || !isfinite(*out) || buf[len - 1] == '.' || strstr(buf, ".e") || strstr(buf, ".E"))
        return perr(p, "malformed number");
    p->s += len;
    return 0;
}

static int literal(parser *p, const char *word, so_prof_jtype type, so_prof_jv *v)
{
    size_t n = strlen(word);
    if ((size_t)(p->end - p->s) < n || memcmp(p->s, word, n))
        return perr(p, "unexpected character");
    p->s += n;
    v->type = type;
    v->num = type == SO_PROF_JTRUE;
    return 0;
}

static int value(parser *p, so_prof_jv *v);

static so_prof_jv *add_kid(so_prof_jv *v)
{
    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 4;
        so_prof_jv *k = realloc(v->kids, (size_t)cap * sizeof *k);
        if (!k)
            return NULL;
        v->kids = k;
        v->cap = cap;
    }
    so_prof_jv *k = &v->kids[v->n++];
    memset(k, 0, sizeof *k);
    return k;
}

/* Arrays and objects: elements separated by commas up to `close`. */
static int container(parser *p, so_prof_jv *v, char close)
{
    v->type = close == ']' ? SO_PROF_JARRAY : SO_PROF_JOBJECT;
    if (++p->depth > SO_PROF_JSON_DEPTH)
        return perr(p, "nesting too deep");
    p->s++;
    skip_ws(p);
    if (p->s < p->end && *p->s == close) {
        p->s++;
        p->depth--;
        return 0;
    }
    for (;;) {
        so_prof_jv *k = add_kid(v);
        if (!k)
            return so_err(SO_ENOMEM, "out of memory reading JSON");
        skip_ws(p);
        int rc = 0;
        if (close == '}') {
            if (p->s >= p->end || *p->s != '"')
                return perr(p, "expected a member name");
            if ((rc = string(p, &k->key)))
                return rc;
            skip_ws(p);
            if (p->s >= p->end || *p->s++ != ':')
                return perr(p, "expected ':'");
        }
        if ((rc = value(p, k)))
            return rc;
        skip_ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
            continue;
        }
        if (p->s < p->end && *p->s == close) {
            p->s++;
            p->depth--;
            return 0;
        }
        return perr(p, close == ']' ? "expected ',' or ']'" : "expected ',' or '}'");
    }
}

static int value(parser *p, so_prof_jv *v)
{
    skip_ws(p);
    if (p->s >= p->end)
        return perr(p, "unexpected end of input");
    switch (*p->s) {
    case '{': return container(p, v, '}');
    case '[': return container(p, v, ']');
    case '"': v->type = SO_PROF_JSTRING; return string(p, &v->str);
    case 't': return literal(p, "true", SO_PROF_JTRUE, v);
    case 'f': return literal(p, "false", SO_PROF_JFALSE, v);
    case 'n': return literal(p, "null", SO_PROF_JNULL, v);
    default: v->type = SO_PROF_JNUMBER; return number(p, &v->num);
    }
}

static void free_kids(so_prof_jv *v)
{
    for (int i = 0; i < v->n; i++)
        free_kids(&v->kids[i]);
    free(v->kids);
    free(v->str);
    free(v->key);
}

void so_prof_json_free(so_prof_jv *v)
{
    if (!v)
        return;
    free_kids(v);
    free(v);
}

int so_prof_json_parse(const char *text, size_t n, so_prof_jv **out)
{
    *out = NULL;
    so_prof_jv *v = calloc(1, sizeof *v);
    if (!v)
        return so_err(SO_ENOMEM, "out of memory reading JSON");
    parser p = {text, text + n, 1, 0};
    int rc = value(&p, v);
    skip_ws(&p);
    if (!rc && p.s != p.end)
        rc = perr(&p, "text after the JSON value");
    if (rc) {
        so_prof_json_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

so_prof_jtype so_prof_jv_type(const so_prof_jv *v) { return v ? v->type : SO_PROF_JNULL; }
int so_prof_jv_len(const so_prof_jv *v) { return v && (v->type == SO_PROF_JARRAY || v->type == SO_PROF_JOBJECT) ? v->n : 0; }
const so_prof_jv *so_prof_jv_at(const so_prof_jv *v, int i) { return i >= 0 && i < so_prof_jv_len(v) ? &v->kids[i] : NULL; }
const char *so_prof_jv_key(const so_prof_jv *v) { return v ? v->key : NULL; }

const so_prof_jv *so_prof_jv_get(const so_prof_jv *v, const char *key)
{
    if (!v || v->type != SO_PROF_JOBJECT)
        return NULL;
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->kids[i].key, key))
            return &v->kids[i];
    return NULL;
}

double so_prof_jv_num(const so_prof_jv *v, double dflt)
{
    return v && v->type == SO_PROF_JNUMBER ? v->num : dflt;
}

const char *so_prof_jv_str(const so_prof_jv *v, const char *dflt)
{
    return v && v->type == SO_PROF_JSTRING ? v->str : dflt;
}
