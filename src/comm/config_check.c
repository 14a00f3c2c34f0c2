/* The start-up configuration check of a data-parallel job: ranks started with
 * different settings (batch, model, seed, library versions ...) would train
 * garbage or hang in mismatched collectives. Cheap when all agree (one
 * allreduce of a hash); on a mismatch every rank gets the same message naming
 * the first differing key, so every rank can exit with status 2 instead of hanging. */
#include "comm_internal.h"

#include "scaleout/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a, 64 bit: not cryptographic, only to compare texts cheaply. */
static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* 1 if the hashes of all ranks are equal: max(h) == min(h), computed in one
 * allreduce-max of {h, ~h} because ~ reverses the order (max ~h = ~min h). */
static int hashes_agree(so_comm *c, const char *text, int *agree)
{
    uint64_t h = fnv1a(text);
    int64_t v[2];
    memcpy(&v[0], &h, sizeof h);
    v[1] = ~v[0];
    int rc = so_comm_allreduce_i64(c, v, 2, SO_REDUCE_MAX);
    *agree = !rc && v[0] == ~v[1];
    return rc;
}

/* Broadcasts `root`'s text; every rank gets a malloc'ed copy in *out. */
static int bcast_text(so_comm *c, const char *text, int root, char **out)
{
    uint64_t n = strlen(text);
    int rc = so_comm_bcast_bytes(c, &n, sizeof n, root);
    if (rc)
        return rc;
    char *t = malloc(n + 1);
    if (!t) /* every rank got the same n, so every rank fails here together */
        return so_err(SO_ENOMEM, "config check: cannot allocate %llu bytes", (unsigned long long)n);
    if (c->rank == root)
        memcpy(t, text, n);
    t[n] = '\0';
    rc = so_comm_bcast_bytes(c, t, n, root);
    if (rc) {
        free(t);
        return rc;
    }
    *out = t;
    return 0;
}

/* One "key=value" line of a text: pointers into it, lengths without '\n'. */
typedef struct {
    const char *key, *val;
    int klen, vlen;
} kv_line;

/* Parses the line at *p and advances *p past it; 0 at the end of the text. */
static int next_line(const char **p, kv_line *l)
{
    if (!**p)
        return 0;
    const char *s = *p, *nl = strchr(s, '\n'), *end = nl ? nl : s + strlen(s);
    const char *eq = memchr(s, '=', (size_t)(end - s));
    l->key = s;
    l->klen = (int)((eq ? eq : end) - s);
    l->val = eq ? eq + 1 : end;
    l->vlen = (int)(end - l->val);
    *p = nl ? nl + 1 : end;
    return 1;
}

/* Finds key in text; 1 and *out if present. */
static int find_key(const char *text, const kv_line *k, kv_line *out)
{
    const char *p = text;
    while (next_line(&p, out))
        if (out->klen == k->klen && memcmp(out->key, k->key, (size_t)k->klen) == 0)
            return 1;
    return 0;
}

/* Writes the first difference between t0 (rank 0) and tr (rank r) to buf. */
static void describe_diff(const char *t0, const char *tr, int r, char *buf, size_t len)
{
    const char *p = t0;
    kv_line a, b;
    while (next_line(&p, &a)) {
        if (!find_key(tr, &a, &b)) {
            snprintf(buf, len, "configuration mismatch: %.*s=%.*s on rank 0 but no '%.*s' on rank %d",
                     a.klen, a.key, a.vlen, a.val, a.klen, a.key, r);
            return;
        }
        if (a.vlen != b.vlen || memcmp(a.val, b.val, (size_t)a.vlen) != 0) {
            snprintf(buf, len, "configuration mismatch: %.*s=%.*s on rank 0 but %.*s=%.*s on rank %d",
                     a.klen, a.key, a.vlen, a.val, b.klen, b.key, b.vlen, b.val, r);
            return;
        }
    }
    for (p = tr; next_line(&p, &b);)
        if (!find_key(t0, &b, &a)) {
            snprintf(buf, len, "configuration mismatch: no '%.*s' on rank 0 but %.*s=%.*s on rank %d",
                     b.klen, b.key, b.klen, b.key, b.vlen, b.val, r);
            return;
        }
    snprintf(buf, len, "configuration mismatch between rank 0 and rank %d: same keys and values, "
                       "different order or formatting", r);
}

/* Slow path after a hash mismatch: find the lowest differing rank r, share
 * rank 0's and rank r's texts, and describe the difference identically everywhere. */
static int explain_mismatch(so_comm *c, const char *text, char *errbuf, size_t len)
{
    char *t0 = NULL, *tr = NULL;
    int rc = bcast_text(c, text, 0, &t0);
    if (rc)
        goto out;
    int64_t r = strcmp(text, t0) ? c->rank : c->size;
    if ((rc = so_comm_allreduce_i64(c, &r, 1, SO_REDUCE_MIN)))
        goto out;
    if (r == c->size) /* a hash disagreed but every text equals rank 0's: cannot happen */
        r = 0;
    if ((rc = bcast_text(c, text, (int)r, &tr)))
        goto out;
    char msg[512];
    describe_diff(t0, tr, (int)r, msg, sizeof msg);
    if (len)
        snprintf(errbuf, len, "%s", msg);
    rc = so_err(SO_EINVAL, "%s", msg);
out:
    free(t0);
    free(tr);
    return rc;
}

int so_comm_check_config(so_comm *c, const char *config_text, char *errbuf, size_t len)
{
    if (len)
        errbuf[0] = '\0';
    if (!config_text)
        return so_err(SO_EINVAL, "config check: NULL configuration text");
    int agree = 0;
    int rc = hashes_agree(c, config_text, &agree);
    if (rc || agree)
        return rc;
    return explain_mismatch(c, config_text, errbuf, len);
}
