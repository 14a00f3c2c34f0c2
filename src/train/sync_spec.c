/* The methods of `train --sync` by name and their one parameter
 * (scaleout/sync.h). Kept apart from the strategies that run them so the
 * CLI, the job's checks and the fuzz target share one grammar. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "scaleout/sync.h"

static const char *const names[SO_SYNC_METHODS] = {"sync", "local", "diloco", "ssp", "async", "gossip"};
#define METHODS_HELP "sync, local:H, diloco:H, ssp:S, async, gossip:ring|torus"

const char *so_sync_method_name(so_sync_method m) { return (unsigned)m < SO_SYNC_METHODS ? names[m] : "?"; }

int so_sync_uses_ps(const so_sync_spec *s) { return s->method == SO_SYNC_SSP || s->method == SO_SYNC_ASYNC; }

#define FAIL(...) so_err(SO_EINVAL, "--sync: " __VA_ARGS__)

/* The integer after the colon: the whole field, within [lo, hi]. */
static int parse_count(const char *text, const char *arg, const char *what, long lo, long hi, int *out)
{
    if (!arg)
        return FAIL("'%s' needs %s: %s:N, e.g. %s:8", text, what, text, text);
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end || errno)
        return FAIL("'%s': %s '%s' is not an integer", text, what, arg);
    if (v < lo || v > hi)
        return FAIL("'%s': %s %ld is outside %ld..%ld", text, what, v, lo, hi);
    *out = (int)v;
    return 0;
}

static int parse_topology(const char *text, const char *arg, so_sync_spec *s)
{
    if (arg && !strcmp(arg, "ring"))
        s->topology = SO_GOSSIP_RING;
    else if (arg && !strcmp(arg, "torus"))
        s->topology = SO_GOSSIP_TORUS;
    else
        return FAIL("'%s': gossip needs its graph, gossip:ring or gossip:torus", text);
    return 0;
}

int so_sync_parse(const char *text, so_sync_spec *out)
{
    *out = (so_sync_spec){.method = SO_SYNC_SYNC, .period = 1};
    if (!text || !*text)
        return FAIL("empty method (" METHODS_HELP ")");
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        if (*p < 0x20 || *p >= 0x7f) /* messages quote the text: keep them one printable line */
            return FAIL("byte 0x%02x at offset %zu is not a printable character", *p,
                        (size_t)(p - (const unsigned char *)text));
    const char *colon = strchr(text, ':');
    size_t len = colon ? (size_t)(colon - text) : strlen(text);
    const char *arg = colon ? colon + 1 : NULL;
    int m = 0;
    while (m < SO_SYNC_METHODS && !(strlen(names[m]) == len && !strncmp(names[m], text, len)))
        m++;
    if (m == SO_SYNC_METHODS)
        return FAIL("unknown method '%s' (" METHODS_HELP ")", text);
    out->method = (so_sync_method)m;
    switch (out->method) {
    case SO_SYNC_LOCAL:
    case SO_SYNC_DILOCO:
        return parse_count(text, arg, "the period H", 1, 1000000, &out->period);
    case SO_SYNC_SSP:
        return parse_count(text, arg, "the staleness bound S", 0, 1000000, &out->staleness);
    case SO_SYNC_GOSSIP:
        return parse_topology(text, arg, out);
    default:
        return arg ? FAIL("'%s': %s takes no parameter", text, names[m]) : 0;
    }
}

int so_sync_format(const so_sync_spec *s, char *buf, size_t size)
{
    const char *name = so_sync_method_name(s->method);
    switch (s->method) {
    case SO_SYNC_LOCAL:
    case SO_SYNC_DILOCO:
        return snprintf(buf, size, "%s:%d", name, s->period);
    case SO_SYNC_SSP:
        return snprintf(buf, size, "%s:%d", name, s->staleness);
    case SO_SYNC_GOSSIP:
        return snprintf(buf, size, "%s:%s", name, s->topology == SO_GOSSIP_TORUS ? "torus" : "ring");
    default:
        return snprintf(buf, size, "%s", name);
    }
}
