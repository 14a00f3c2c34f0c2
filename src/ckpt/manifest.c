/* The checkpoint manifest: a short text file (docs/FORMATS.md) naming the
 * model, the position in training, the layout of the flattened state and one
 * line per shard with its size and CRC32C. Its last line carries the CRC32C
 * of everything before it, so a torn or edited manifest never counts as a
 * checkpoint. The parser is strict (fixed key order) and fuzzed. */
#include "scaleout/ckpt.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"
#include "state.h"

#define MAGIC "scaleout-checkpoint"
#define MAX_WORLD (1 << 20)
#define MAX_ELEMS (1ULL << 40)
#define UNITS_PER_LINE 16 /* boundaries per "units" line: 16 x 14 digits stay within a line */

void so_ckpt_manifest_free(so_ckpt_manifest *m)
{
    if (!m)
        return;
    free(m->shards);
    free(m->units);
    free(m->config);
    m->shards = NULL;
    m->units = NULL;
    m->config = NULL;
}

uint64_t so_ckpt_hash_text(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; s && *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return h;
}

/* ---- formatting ---------------------------------------------------------- */

/* A growing string buffer; err sticks after the first allocation failure. */
typedef struct {
    char *p;
    size_t len, cap;
    int err;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    for (int tries = 0; !b->err && tries < 2; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->err = 1;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->err = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

int so_ckpt_manifest_format(const so_ckpt_manifest *m, char **out, size_t *len)
{
    sbuf b = {0};
    sb_printf(&b, "%s %d\nmodel %s\nmodel_hash %016" PRIx64 "\nconfig_hash %016" PRIx64 "\n", MAGIC, m->version,
              m->model, m->model_hash, m->config_hash);
    sb_printf(&b, "step %ld\nepoch %d\nepoch_step %ld\nworld %d\n", m->step, m->epoch, m->epoch_step, m->world);
    sb_printf(&b, "nparams %" PRIu64 "\nnbufs %" PRIu64 "\noptimizer %s\nnslots %d\noptim_steps %ld\n", m->nparams,
              m->nbufs, m->optimizer, m->nslots, m->optim_steps);
    sb_printf(&b, "rep_bytes %" PRIu64 "\nrank_bytes %" PRIu64 "\n", m->rep_bytes, m->rank_bytes);
    if (m->rank_state_bytes) /* optional: a strategy's per-rank state */
        sb_printf(&b, "rank_state_bytes %" PRIu64 "\nrank_state %s\n", m->rank_state_bytes, m->rank_state);
    sb_printf(&b, "shards %d\n", m->nshards);
    for (int i = 0; i < m->nshards; i++) {
        const so_ckpt_shard *s = &m->shards[i];
        sb_printf(&b, "shard %d %" PRIu64 " %" PRIu64 " %d %d %" PRIu64 " %08" PRIx32 "\n", i, s->rep_off, s->rep_len,
                  s->rank_first, s->rank_count, s->bytes, s->crc);
    }
    if (m->nunits > 0) { /* the strategy's units, a few boundaries per line */
        sb_printf(&b, "layout %d %d %d\n", m->nunits, m->unit_shards, m->unit_replicas);
        for (int v = 0; v <= m->nunits; v += UNITS_PER_LINE) {
            sb_printf(&b, "units");
            for (int k = v; k <= m->nunits && k < v + UNITS_PER_LINE; k++)
                sb_printf(&b, " %" PRIu64, m->units[k]);
            sb_printf(&b, "\n");
        }
    }
    for (const char *c = m->config; c && *c;) {
        const char *nl = strchr(c, '\n');
        int n = nl ? (int)(nl - c) : (int)strlen(c);
        if (n > 0)
            sb_printf(&b, "config %.*s\n", n, c);
        c += n + (nl ? 1 : 0);
    }
    if (!b.err)
        sb_printf(&b, "end %08" PRIx32 "\n", so_crc32c(0, b.p, b.len));
    if (b.err) {
        free(b.p);
        return so_err(SO_ENOMEM, "out of memory formatting a checkpoint manifest");
    }
    *out = b.p;
    *len = b.len;
    return 0;
}

/* ---- parsing ------------------------------------------------------------- */

typedef struct {
    const char *p, *end, *what;
    int line;
    char buf[512]; /* the current line, NUL-terminated */
} lexer;

/* Copies the next line into lx->buf; 0 at the end, -1 if too long. */
static int next_line(lexer *lx)
{
    if (lx->p >= lx->end)
        return 0;
    const char *nl = memchr(lx->p, '\n', (size_t)(lx->end - lx->p));
    size_t n = nl ? (size_t)(nl - lx->p) : (size_t)(lx->end - lx->p);
    if (n >= sizeof lx->buf || memchr(lx->p, '\0', n))
        return -1;
    memcpy(lx->buf, lx->p, n);
    lx->buf[n] = '\0';
    lx->p += n + (nl ? 1 : 0);
    lx->line++;
    return 1;
}

static int bad(const lexer *lx, const char *why)
{
    return so_err(SO_EFORMAT, "%s: line %d: %s", lx->what, lx->line, why);
}

/* Reads "key <u64>" with the exact key; v in [0, max]. */
static int key_u64(lexer *lx, const char *key, uint64_t max, uint64_t *v)
{
    char tail;
    char fmt[64];
    snprintf(fmt, sizeof fmt, "%s %%20" SCNu64 "%%c", key);
    if (next_line(lx) != 1 || strncmp(lx->buf, key, strlen(key)) != 0 || lx->buf[strlen(key)] != ' ')
        return so_err(SO_EFORMAT, "%s: line %d: expected '%s'", lx->what, lx->line, key);
    const char *num = lx->buf + strlen(key) + 1;
    if (*num < '0' || *num > '9' || sscanf(lx->buf, fmt, v, &tail) != 1 || *v > max)
        return so_err(SO_EFORMAT, "%s: line %d: bad value for '%s'", lx->what, lx->line, key);
    return 0;
}

static int key_long(lexer *lx, const char *key, uint64_t max, long *v)
{
    uint64_t u;
    int rc = key_u64(lx, key, max, &u);
    *v = (long)u;
    return rc;
}

static int key_int(lexer *lx, const char *key, uint64_t max, int *v)
{
    uint64_t u;
    int rc = key_u64(lx, key, max, &u);
    *v = (int)u;
    return rc;
}

/* "key word" (word: 1..cap-1 printable characters without spaces). */
static int key_word(lexer *lx, const char *key, char *out, size_t cap)
{
    size_t k = strlen(key);
    if (next_line(lx) != 1 || strncmp(lx->buf, key, k) != 0 || lx->buf[k] != ' ')
        return so_err(SO_EFORMAT, "%s: line %d: expected '%s'", lx->what, lx->line, key);
    const char *w = lx->buf + k + 1;
    size_t n = strlen(w);
    if (n == 0 || n >= cap || strchr(w, ' '))
        return bad(lx, "bad word");
    for (size_t i = 0; i < n; i++)
        if (w[i] < 0x21 || w[i] > 0x7e)
            return bad(lx, "bad character");
    memcpy(out, w, n + 1);
    return 0;
}

static int key_hex64(lexer *lx, const char *key, uint64_t *v)
{
    char w[20], *end;
    int rc = key_word(lx, key, w, sizeof w);
    if (rc)
        return rc;
    if (strlen(w) != 16 || w[0] == '+' || w[0] == '-')
        return bad(lx, "want 16 hex digits");
    *v = strtoull(w, &end, 16);
    return *end ? bad(lx, "want 16 hex digits") : 0;
}

/* The checksum trailer: the last line is "end XXXXXXXX" over all bytes before it. */
static int check_trailer(const char *text, size_t len, const char *what, size_t *body)
{
    if (len < 14 || text[len - 1] != '\n')
        return so_err(SO_EFORMAT, "%s: incomplete manifest (no end line)", what);
    size_t i = len - 1;
    while (i > 0 && text[i - 1] != '\n')
        i--;
    char line[32];
    unsigned crc;
    char tail;
    size_t n = len - 1 - i;
    if (n >= sizeof line)
        return so_err(SO_EFORMAT, "%s: incomplete manifest (no end line)", what);
    memcpy(line, text + i, n);
    line[n] = '\0';
    if (n != 12 || sscanf(line, "end %8x%c", &crc, &tail) != 1)
        return so_err(SO_EFORMAT, "%s: incomplete manifest (no end line)", what);
    if (so_crc32c(0, text, i) != crc)
        return so_err(SO_EFORMAT, "%s: manifest checksum mismatch (damaged or edited)", what);
    *body = i;
    return 0;
}

static int parse_shard(lexer *lx, int i, so_ckpt_shard *s)
{
    int idx, n = 0;
    unsigned crc;
    if (next_line(lx) != 1)
        return bad(lx, "missing shard line");
    if (sscanf(lx->buf, "shard %d %20" SCNu64 " %20" SCNu64 " %d %d %20" SCNu64 " %8x%n", &idx, &s->rep_off,
               &s->rep_len, &s->rank_first, &s->rank_count, &s->bytes, &crc, &n) != 7 ||
        lx->buf[n] != '\0' || idx != i || lx->buf[6] == '-')
        return bad(lx, "bad shard line");
    s->crc = crc;
    return 0;
}

/* The shards must tile the replicated bytes and the ranks in order. */
static int check_layout(lexer *lx, const so_ckpt_manifest *m)
{
    uint64_t off = 0;
    int rank = 0;
    for (int i = 0; i < m->nshards; i++) {
        const so_ckpt_shard *s = &m->shards[i];
        if (s->rep_off != off || s->rep_len > m->rep_bytes - off)
            return bad(lx, "shards do not tile the replicated state");
        if (s->rank_first != rank || s->rank_count < 0 || s->rank_count > m->world - rank)
            return bad(lx, "shards do not cover the ranks in order");
        if (s->bytes != s->rep_len + (uint64_t)s->rank_count * m->rank_bytes)
            return bad(lx, "shard size does not match its contents");
        off += s->rep_len;
        rank += s->rank_count;
    }
    if (off != m->rep_bytes || rank != m->world)
        return bad(lx, "shards do not cover the whole state");
    if (m->rep_bytes != (uint64_t)(1 + m->nslots) * m->nparams * 4 ||
        m->rank_bytes != 32 + m->nbufs * 4 + m->rank_state_bytes)
        return bad(lx, "state sizes do not match the model sizes");
    return 0;
}

/* "rank_state_bytes N" and "rank_state TAG" when the next line says so
 * (a strategy's per-rank state, e.g. compression residuals); nothing
 * otherwise. */
static int parse_rank_state(lexer *lx, so_ckpt_manifest *m)
{
    const char *mark = lx->p;
    int line = lx->line, rc;
    int has = next_line(lx) == 1 && strncmp(lx->buf, "rank_state_bytes ", 17) == 0;
    lx->p = mark;
    lx->line = line;
    if (!has)
        return 0;
    if ((rc = key_u64(lx, "rank_state_bytes", MAX_ELEMS * 4, &m->rank_state_bytes)) ||
        (rc = key_word(lx, "rank_state", m->rank_state, sizeof m->rank_state)))
        return rc;
    return m->rank_state_bytes ? 0 : bad(lx, "rank_state_bytes is 0");
}

static int parse_header(lexer *lx, so_ckpt_manifest *m)
{
    int rc;
    if ((rc = key_word(lx, "model", m->model, sizeof m->model)) || (rc = key_hex64(lx, "model_hash", &m->model_hash)) ||
        (rc = key_hex64(lx, "config_hash", &m->config_hash)) || (rc = key_long(lx, "step", 1ULL << 50, &m->step)) ||
        (rc = key_int(lx, "epoch", 1 << 30, &m->epoch)) ||
        (rc = key_long(lx, "epoch_step", 1ULL << 50, &m->epoch_step)) ||
        (rc = key_int(lx, "world", MAX_WORLD, &m->world)) || (rc = key_u64(lx, "nparams", MAX_ELEMS, &m->nparams)) ||
        (rc = key_u64(lx, "nbufs", MAX_ELEMS, &m->nbufs)) ||
        (rc = key_word(lx, "optimizer", m->optimizer, sizeof m->optimizer)) ||
        (rc = key_int(lx, "nslots", 8, &m->nslots)) || (rc = key_long(lx, "optim_steps", 1ULL << 50, &m->optim_steps)) ||
        (rc = key_u64(lx, "rep_bytes", MAX_ELEMS * 36, &m->rep_bytes)) ||
        (rc = key_u64(lx, "rank_bytes", MAX_ELEMS * 8 + 32, &m->rank_bytes)) || (rc = parse_rank_state(lx, m)) ||
        (rc = key_int(lx, "shards", MAX_WORLD, &m->nshards)))
        return rc;
    if (m->world < 1 || m->nshards < 1 || m->nshards > m->world)
        return bad(lx, "bad world or shard count");
    return 0;
}

/* "layout U S R" then the U + 1 unit boundaries on "units" lines, when the
 * next line says layout; nothing otherwise (data parallelism's checkpoints). */
static int parse_units(lexer *lx, so_ckpt_manifest *m)
{
    const char *mark = lx->p;
    int line = lx->line, n = 0;
    if (next_line(lx) != 1 || strncmp(lx->buf, "layout ", 7) != 0) {
        lx->p = mark;
        lx->line = line;
        return 0;
    }
    if (sscanf(lx->buf, "layout %d %d %d%n", &m->nunits, &m->unit_shards, &m->unit_replicas, &n) != 3 ||
        lx->buf[n] != '\0' || m->nunits < 1 || (uint64_t)m->nunits > m->nparams || m->unit_shards < 1 ||
        m->unit_replicas < 1)
        return bad(lx, "bad layout line");
    if (!(m->units = malloc(((size_t)m->nunits + 1) * sizeof *m->units)))
        return so_err(SO_ENOMEM, "out of memory reading a manifest");
    for (int v = 0; v <= m->nunits;) {
        if (next_line(lx) != 1 || strncmp(lx->buf, "units", 5) != 0)
            return bad(lx, "missing units line");
        const char *p = lx->buf + 5;
        for (int k = 0; k < UNITS_PER_LINE && v <= m->nunits && *p; k++, v++) {
            if (p[0] != ' ' || p[1] < '0' || p[1] > '9' || sscanf(p, " %20" SCNu64 "%n", &m->units[v], &n) != 1)
                return bad(lx, "bad units line");
            p += n;
        }
        if (*p)
            return bad(lx, "bad units line");
    }
    return 0;
}

/* A sharded checkpoint's shards must hold exactly the pieces its units give them. */
static int check_units(lexer *lx, const so_ckpt_manifest *m)
{
    ck_units u = {m->nunits, m->unit_shards, m->unit_replicas, m->units};
    if (ck_units_check(&u, m->nparams, m->world) || m->nshards != m->world)
        return bad(lx, "the shards do not cover the model: its units do not tile the parameters over the ranks");
    for (int i = 0; i < m->nshards; i++)
        if (m->shards[i].rep_len != ck_units_floats(&u, i) * 4 * (uint64_t)(1 + m->nslots))
            return bad(lx, "the shards do not cover the model: a shard's size is not its units' pieces");
    return 0;
}

/* The remaining "config ..." lines become the configuration text. */
static int parse_config(lexer *lx, so_ckpt_manifest *m)
{
    size_t rest = (size_t)(lx->end - lx->p);
    if (!rest)
        return 0;
    if (!(m->config = malloc(rest + 1)))
        return so_err(SO_ENOMEM, "out of memory reading a manifest");
    size_t n = 0;
    int r;
    while ((r = next_line(lx)) == 1) {
        if (strncmp(lx->buf, "config ", 7) != 0)
            return bad(lx, "unexpected line");
        size_t k = strlen(lx->buf + 7);
        memcpy(m->config + n, lx->buf + 7, k);
        m->config[n + k] = '\n';
        n += k + 1;
    }
    m->config[n] = '\0';
    return r < 0 ? bad(lx, "line too long") : 0;
}

int so_ckpt_manifest_parse(const char *text, size_t len, const char *what, so_ckpt_manifest *m)
{
    memset(m, 0, sizeof *m);
    size_t body = 0;
    int rc = check_trailer(text, len, what, &body);
    if (rc)
        return rc;
    lexer lx = {.p = text, .end = text + body, .what = what};
    char magic[32];
    if (key_word(&lx, MAGIC, magic, sizeof magic))
        return so_err(SO_EFORMAT, "%s: not a scaleout checkpoint manifest", what);
    if (strcmp(magic, "1") != 0)
        return so_err(SO_EFORMAT, "%s: checkpoint format version %s, this scaleout reads version %d", what, magic,
                      SO_CKPT_VERSION);
    m->version = 1;
    if ((rc = parse_header(&lx, m)))
        goto out;
    if ((size_t)m->nshards * 16 > (size_t)(lx.end - lx.p)) { /* a shard line is longer than 16 bytes */
        rc = bad(&lx, "fewer shard lines than 'shards' says");
        goto out;
    }
    if (!(m->shards = calloc((size_t)m->nshards, sizeof *m->shards))) {
        rc = so_err(SO_ENOMEM, "out of memory reading a manifest");
        goto out;
    }
    for (int i = 0; i < m->nshards && !rc; i++)
        rc = parse_shard(&lx, i, &m->shards[i]);
    if (!rc)
        rc = check_layout(&lx, m);
    if (!rc)
        rc = parse_units(&lx, m);
    if (!rc && m->nunits)
        rc = check_units(&lx, m);
    if (!rc)
        rc = parse_config(&lx, m);
out:
    if (rc)
        so_ckpt_manifest_free(m);
    return rc;
}
