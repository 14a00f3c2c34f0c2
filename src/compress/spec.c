/* The methods of --compress by name, their parameters, and the size of what
 * each rank sends (scaleout/compress.h). Every message size is a closed
 * formula of (n, parameters), so the strategy's byte counters can be checked
 * against it and the predictor can price a method without running it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/compress.h"
#include "scaleout/err.h"

static const char *const names[SO_COMPRESS_METHODS] = {"none", "fp16", "bf16", "topk", "randk",
                                                       "qsgd", "sign", "powersgd", "auto"};

const char *so_compress_method_name(so_compress_method m)
{
    return (unsigned)m < SO_COMPRESS_METHODS ? names[m] : "?";
}

/* A number after the method's colon: "0.01" for a ratio, "4" for bits. The
 * whole field must be the number (no trailing characters). */
static int field_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return end == s || (*end && *end != ':') || errno ? -1 : 0;
}

static int field_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    *out = strtol(s, &end, 10);
    return end == s || (*end && *end != ':') || errno ? -1 : 0;
}

#define FAIL(...) so_err(SO_EINVAL, "--compress: " __VA_ARGS__)

static int parse_ratio(const char *text, const char *arg, so_compress_spec *s)
{
    if (!arg)
        return FAIL("'%s' needs a ratio: %s:R with R in (0, 1], e.g. %s:0.01", text, names[s->method],
                    names[s->method]);
    if (field_double(arg, &s->ratio) || strchr(arg, ':'))
        return FAIL("'%s': the ratio '%s' is not a number", text, arg);
    if (!(s->ratio > 0 && s->ratio <= 1))
        return FAIL("'%s': the ratio %g is outside (0, 1]", text, s->ratio);
    return 0;
}

static int parse_qsgd(const char *text, const char *arg, so_compress_spec *s)
{
    long bits, block = SO_QSGD_DEFAULT_BLOCK;
    if (!arg)
        return FAIL("'%s' needs the bits: qsgd:B[:D] with B in 1..16, e.g. qsgd:4", text);
    if (field_long(arg, &bits))
        return FAIL("'%s': the bits '%s' are not an integer", text, arg);
    if (bits < 1 || bits > 16)
        return FAIL("'%s': BITS %ld is outside 1..16", text, bits);
    const char *b = strchr(arg, ':');
    if (b && (field_long(b + 1, &block) || strchr(b + 1, ':')))
        return FAIL("'%s': the block size '%s' is not an integer", text, b + 1);
    if (block < 1 || block > (1L << 30))
        return FAIL("'%s': the block size %ld is outside 1..2^30", text, block);
    s->bits = (int)bits;
    s->block = (int)block;
    return 0;
}

static int parse_powersgd(const char *text, const char *arg, so_compress_spec *s)
{
    long rank, start = SO_POWERSGD_DEFAULT_START;
    if (!arg)
        return FAIL("'%s' needs the rank: powersgd:r[:START_STEP], e.g. powersgd:4", text);
    if (field_long(arg, &rank))
        return FAIL("'%s': the rank '%s' is not an integer", text, arg);
    if (rank < 1 || rank > 4096)
        return FAIL("'%s': the rank %ld is outside 1..4096", text, rank);
    const char *b = strchr(arg, ':');
    if (b && (field_long(b + 1, &start) || strchr(b + 1, ':')))
        return FAIL("'%s': the start step '%s' is not an integer", text, b + 1);
    if (start < 0)
        return FAIL("'%s': the start step %ld is negative", text, start);
    s->rank = (int)rank;
    s->start_step = start;
    return 0;
}

int so_compress_parse(const char *text, so_compress_spec *out)
{
    *out = (so_compress_spec){.method = SO_COMPRESS_NONE, .ratio = 1, .block = SO_QSGD_DEFAULT_BLOCK};
    if (!text || !*text)
        return FAIL("empty method (none, fp16, bf16, topk:R, randk:R, qsgd:B[:D], sign, powersgd:r[:S], auto)");
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        if (*p < 0x20 || *p >= 0x7f) /* messages quote the text: keep them one printable line */
            return FAIL("byte 0x%02x at offset %zu is not a printable character", *p, (size_t)(p - (const unsigned char *)text));
    const char *colon = strchr(text, ':');
    size_t len = colon ? (size_t)(colon - text) : strlen(text);
    const char *arg = colon ? colon + 1 : NULL;
    int m = 0;
    while (m < SO_COMPRESS_METHODS && !(strlen(names[m]) == len && !strncmp(names[m], text, len)))
        m++;
    if (m == SO_COMPRESS_METHODS)
        return FAIL("unknown method '%s' (none, fp16, bf16, topk:R, randk:R, qsgd:B[:D], sign, powersgd:r[:S], auto)",
                    text);
    out->method = (so_compress_method)m;
    switch (out->method) {
    case SO_COMPRESS_TOPK:
    case SO_COMPRESS_RANDK:
        return parse_ratio(text, arg, out);
    case SO_COMPRESS_QSGD:
        return parse_qsgd(text, arg, out);
    case SO_COMPRESS_POWERSGD:
        return parse_powersgd(text, arg, out);
    default:
        return arg ? FAIL("'%s': %s takes no parameter", text, names[m]) : 0;
    }
}

int so_compress_format(const so_compress_spec *s, char *buf, size_t size)
{
    const char *name = so_compress_method_name(s->method);
    switch (s->method) {
    case SO_COMPRESS_TOPK:
    case SO_COMPRESS_RANDK: {
        char r[32]; /* "0.01" where that reads back exactly, else all 17 digits */
        snprintf(r, sizeof r, "%g", s->ratio);
        if (strtod(r, NULL) != s->ratio)
            snprintf(r, sizeof r, "%.17g", s->ratio);
        return snprintf(buf, size, "%s:%s", name, r);
    }
    case SO_COMPRESS_QSGD:
        return snprintf(buf, size, "%s:%d:%d", name, s->bits, s->block);
    case SO_COMPRESS_POWERSGD:
        return snprintf(buf, size, "%s:%d:%ld", name, s->rank, s->start_step);
    default:
        return snprintf(buf, size, "%s", name);
    }
}

int so_compress_biased(const so_compress_spec *s)
{
    return s->method == SO_COMPRESS_TOPK || s->method == SO_COMPRESS_SIGN || s->method == SO_COMPRESS_POWERSGD;
}

size_t so_compress_k(size_t n, double ratio)
{
    double k = floor(ratio * (double)n + 0.5);
    return n == 0 ? 0 : k < 1 ? 1 : k > (double)n ? n : (size_t)k;
}

int so_compress_topk_dense(size_t n, size_t k, int ranks) { return (double)k * ranks >= (double)n; }

static size_t words32(size_t n) { return (n + 31) / 32; }

size_t so_compress_qsgd_words(size_t n, int bits, int block)
{
    return (n + (size_t)block - 1) / (size_t)block + (size_t)(bits + 1) * words32(n);
}

size_t so_compress_sign_words(size_t n) { return 1 + words32(n); }

int so_compress_powersgd_fits(size_t rows, size_t cols, int rank)
{
    return (double)(rows + cols) * rank * 2 < (double)rows * cols;
}
