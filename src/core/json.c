/* Streaming JSON writer (see json.h). Output is valid JSON as long as the
 * begin/end calls nest; non-finite numbers are written as null because JSON
 * has no NaN. */
#include "scaleout/json.h"

#include <math.h>

void so_json_init(so_json *j, FILE *f, int pretty)
{
    j->f = f;
    j->depth = 0;
    j->count[0] = 0;
    j->pretty = pretty;
}

static void indent(so_json *j)
{
    if (!j->pretty)
        return;
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++)
        fputs("  ", j->f);
}

static void escaped(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Comma, newline and "key": before any value. */
static void prefix(so_json *j, const char *key)
{
    if (j->depth > 0) {
        if (j->count[j->depth]++)
            fputc(',', j->f);
        indent(j);
    }
    if (key) {
        escaped(j->f, key);
        fputs(j->pretty ? ": " : ":", j->f);
    }
}

static void open(so_json *j, const char *key, char c)
{
    prefix(j, key);
    fputc(c, j->f);
    if (j->depth + 1 < SO_JSON_DEPTH)
        j->count[++j->depth] = 0;
}

static void close(so_json *j, char c)
{
    int had = j->count[j->depth];
    if (j->depth > 0)
        j->depth--;
    if (had)
        indent(j);
    fputc(c, j->f);
    if (j->depth == 0 && j->pretty)
        fputc('\n', j->f);
}

void so_json_obj_begin(so_json *j, const char *key) { open(j, key, '{'); }
void so_json_obj_end(so_json *j) { close(j, '}'); }
void so_json_arr_begin(so_json *j, const char *key) { open(j, key, '['); }
void so_json_arr_end(so_json *j) { close(j, ']'); }

void so_json_str(so_json *j, const char *key, const char *v)
{
    prefix(j, key);
    if (v)
        escaped(j->f, v);
    else
        fputs("null", j->f);
}

void so_json_num(so_json *j, const char *key, double v)
{
    prefix(j, key);
    if (isfinite(v))
        fprintf(j->f, "%.9g", v);
    else
        fputs("null", j->f);
}

void so_json_int(so_json *j, const char *key, int64_t v)
{
    prefix(j, key);
    fprintf(j->f, "%lld", (long long)v);
}

void so_json_bool(so_json *j, const char *key, int v)
{
    prefix(j, key);
    fputs(v ? "true" : "false", j->f);
}

void so_json_null(so_json *j, const char *key)
{
    prefix(j, key);
    fputs("null", j->f);
}
