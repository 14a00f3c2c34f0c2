/* The tuning table's text format (docs/COLLECTIVES.md, docs/FORMATS.md), the
 * built-in table and the allreduce algorithm names. Kept apart from tune.c
 * and free of MPI so the parser can be fuzzed on its own (fuzz/fuzz_tuning.c). */
#include "tune_internal.h"

#include "scaleout/err.h"
#include "scaleout/file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[SO_ALLREDUCE_COUNT] = {
    [SO_ALLREDUCE_MPI] = "mpi",   [SO_ALLREDUCE_RING] = "ring",
    [SO_ALLREDUCE_RD] = "rd",     [SO_ALLREDUCE_RABENSEIFNER] = "rabenseifner",
    [SO_ALLREDUCE_TREE] = "tree", [SO_ALLREDUCE_HIER] = "hier",
    [SO_ALLREDUCE_AUTO] = "auto",
};

const char *so_allreduce_algo_name(so_allreduce_algo algo)
{
    return (unsigned)algo < SO_ALLREDUCE_COUNT ? names[algo] : NULL;
}

int so_allreduce_algo_parse(const char *name, so_allreduce_algo *out)
{
    for (int i = 0; i < SO_ALLREDUCE_COUNT; i++)
        if (name && strcmp(name, names[i]) == 0) {
            *out = (so_allreduce_algo)i;
            return 0;
        }
    return so_err(SO_EINVAL, "unknown allreduce algorithm '%s' (have: auto, ring, rd, rabenseifner, tree, hier, mpi)",
                  name ? name : "");
}

void so_comm_tuning_default(so_comm_tuning *t)
{
    memset(t, 0, sizeof *t);
    t->version = 1;
    t->gamma = 1.0 / 8e9; /* ~8 GB/s of float sums from memory */
    /* Point-to-point steps through MPI on one node: ~2 us and ~4 GB/s per step
     * (Open MPI / MPICH shared-memory transport); the window: ~0.5 us, ~12 GB/s. */
    for (int a = 0; a < SO_ALLREDUCE_AUTO; a++)
        t->fit[a] = (so_comm_fit){2e-6, 1.0 / 4e9, 0, 0, {{0, 0, 0}}};
    t->fit[SO_ALLREDUCE_MPI] = (so_comm_fit){1e-6, 1.0 / 3e9, 0, 0, {{0, 0, 0}}};
    t->fit[SO_ALLREDUCE_HIER] = (so_comm_fit){0.5e-6, 1.0 / 12e9, 0, 0, {{0, 0, 0}}};
}

static void put_limit(FILE *f, uint64_t max)
{
    if (max == UINT64_MAX)
        fputc('*', f);
    else
        fprintf(f, "%llu", (unsigned long long)max);
}

static const char *const level_names[SO_LEVELS] = {"node", "link"};

/* The fit and band lines of one set of fits; prefix names a level ("" for the job). */
static void put_fits(FILE *f, const char *prefix, const so_comm_fit *fits)
{
    const char *sp = *prefix ? " " : "";
    for (int a = 0; a < SO_ALLREDUCE_AUTO; a++) {
        const so_comm_fit *fit = &fits[a];
        const char *name = so_allreduce_algo_name((so_allreduce_algo)a);
        if (!fit->valid)
            continue;
        fprintf(f, "%s%sfit %s alpha=%.9e beta=%.9e\n", prefix, sp, name, fit->alpha, fit->beta);
        for (int k = 0; k < fit->nbands; k++) {
            fprintf(f, "%s%sband %s max_bytes=", prefix, sp, name);
            put_limit(f, k == fit->nbands - 1 ? UINT64_MAX : fit->band[k].max_bytes);
            fprintf(f, " alpha=%.9e beta=%.9e\n", fit->band[k].alpha, fit->band[k].beta);
        }
    }
}

int so_comm_tuning_save(const so_comm_tuning *t, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return so_err(SO_EIO, "cannot write tuning file %s", path);
    int version = 1; /* older readers cannot skip band or level lines: the lowest version that holds t */
    for (int a = 0; a < SO_ALLREDUCE_AUTO; a++)
        if (t->fit[a].valid && t->fit[a].nbands > 0)
            version = 2;
    for (int l = 0; l < SO_LEVELS; l++)
        if (t->level[l].valid)
            version = 3;
    fprintf(f, "scaleout-tuning v%d p=%d ranks_per_node=%d gamma=%.6e memory=%s\n", version, t->p,
            t->ranks_per_node, t->gamma, t->registered ? "registered" : "plain");
    fprintf(f, "# fit ALGO alpha=SECONDS beta=SECONDS_PER_BYTE   (model: docs/COLLECTIVES.md)\n");
    if (version == 2)
        fprintf(f, "# band ALGO max_bytes=N|* alpha=SECONDS beta=SECONDS_PER_BYTE   (piecewise, ascending)\n");
    put_fits(f, "", t->fit);
    for (int l = 0; l < SO_LEVELS; l++)
        if (t->level[l].valid) {
            fprintf(f, "level %s p=%d\n", level_names[l], t->level[l].p);
            put_fits(f, level_names[l], t->level[l].fit);
        }
    fprintf(f, "# MAX_BYTES ALGO: the first line with message bytes <= MAX_BYTES wins; * = no limit\n");
    for (int i = 0; i < t->nrules; i++) {
        const char *name = so_allreduce_algo_name(t->rule[i].algo);
        put_limit(f, t->rule[i].max_bytes);
        fprintf(f, " %s\n", name ? name : "mpi");
    }
    if (fclose(f) != 0)
        return so_err(SO_EIO, "error writing tuning file %s", path);
    return 0;
}

/* "*" or a decimal byte count; -1 when malformed. */
static int parse_limit(const char *s, uint64_t *out)
{
    if (strcmp(s, "*") == 0) {
        *out = UINT64_MAX;
        return 0;
    }
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || v == UINT64_MAX)
        return -1;
    *out = v;
    return 0;
}

static int concrete_algo(const char *name, so_allreduce_algo *algo)
{
    *algo = SO_ALLREDUCE_AUTO;
    return so_allreduce_algo_parse(name, algo) || *algo == SO_ALLREDUCE_AUTO ? -1 : 0;
}

/* A `band` line into fits: ascending limits per algorithm, alpha >= 0, beta > 0. */
static int parse_band(so_comm_tuning *t, so_comm_fit *fits, const char *line, const char *path, int ln)
{
    char name[32], lim[32];
    double al, be;
    so_allreduce_algo algo;
    uint64_t max;
    if (sscanf(line, "band %31s max_bytes=%31s alpha=%lf beta=%lf", name, lim, &al, &be) != 4)
        return so_err(SO_EFORMAT, "%s:%d: expected 'band ALGO max_bytes=N alpha=S beta=S'", path, ln);
    if (t->version < 2)
        return so_err(SO_EFORMAT, "%s:%d: band lines need a v2 table", path, ln);
    if (concrete_algo(name, &algo))
        return so_err(SO_EFORMAT, "%s:%d: unknown algorithm '%s'", path, ln, name);
    if (parse_limit(lim, &max))
        return so_err(SO_EFORMAT, "%s:%d: bad byte limit '%s'", path, ln, lim);
    if (!(isfinite(al) && al >= 0 && isfinite(be) && be > 0))
        return so_err(SO_EFORMAT, "%s:%d: band needs alpha >= 0 and beta > 0", path, ln);
    so_comm_fit *f = &fits[algo];
    if (f->nbands == SO_TUNING_MAX_BANDS || (f->nbands && max <= f->band[f->nbands - 1].max_bytes))
        return so_err(SO_EFORMAT, "%s:%d: %s band limits must ascend (at most %d bands)", path, ln, name,
                      SO_TUNING_MAX_BANDS);
    f->band[f->nbands++] = (so_comm_band){max, al, be};
    return 0;
}

/* A `fit` line into fits. */
static int parse_fit(so_comm_fit *fits, const char *line, const char *path, int ln)
{
    char name[32];
    double al, be;
    so_allreduce_algo algo;
    if (sscanf(line, "fit %31s alpha=%lf beta=%lf", name, &al, &be) != 3)
        return so_err(SO_EFORMAT, "%s:%d: expected 'fit ALGO alpha=S beta=S'", path, ln);
    if (concrete_algo(name, &algo))
        return so_err(SO_EFORMAT, "%s:%d: unknown algorithm '%s'", path, ln, name);
    if (!(isfinite(al) && al >= 0 && isfinite(be) && be >= 0))
        return so_err(SO_EFORMAT, "%s:%d: fit needs alpha, beta >= 0", path, ln);
    fits[algo].alpha = al;
    fits[algo].beta = be;
    fits[algo].valid = 1;
    return 0;
}

/* `level node|link p=N` declares a level (v3); `node fit ...`, `link band ...`
 * lines then fill it. *lvl = the level index, or -1 for another line. */
static int parse_level(so_comm_tuning *t, const char **line, const char *path, int ln, int *lvl)
{
    *lvl = -1;
    for (int l = 0; l < SO_LEVELS; l++) {
        size_t n = strlen(level_names[l]);
        if (strncmp(*line, level_names[l], n) || (*line)[n] != ' ')
            continue;
        if (!t->level[l].valid)
            return so_err(SO_EFORMAT, "%s:%d: a '%s' line before 'level %s p=N'", path, ln, level_names[l],
                          level_names[l]);
        *line += n + 1;
        *lvl = l;
        return 0;
    }
    char name[16];
    int p;
    if (strncmp(*line, "level ", 6))
        return 0;
    if (sscanf(*line, "level %15s p=%d", name, &p) != 2 || p < 1)
        return so_err(SO_EFORMAT, "%s:%d: expected 'level node|link p=N'", path, ln);
    if (t->version < 3)
        return so_err(SO_EFORMAT, "%s:%d: level lines need a v3 table", path, ln);
    for (int l = 0; l < SO_LEVELS; l++)
        if (!strcmp(name, level_names[l])) {
            t->level[l].valid = 1;
            t->level[l].p = p;
            *lvl = SO_LEVELS; /* consumed */
            return 0;
        }
    return so_err(SO_EFORMAT, "%s:%d: unknown level '%s' (node, link)", path, ln, name);
}

/* One `fit`, `band`, level or rule line into t; SO_EFORMAT with the line number. */
static int parse_line(so_comm_tuning *t, const char *line, const char *path, int ln)
{
    char name[32], lim[32];
    so_allreduce_algo algo;
    int lvl, rc = parse_level(t, &line, path, ln, &lvl);
    if (rc || lvl == SO_LEVELS)
        return rc;
    so_comm_fit *fits = lvl >= 0 ? t->level[lvl].fit : t->fit;
    if (strncmp(line, "band ", 5) == 0)
        return parse_band(t, fits, line, path, ln);
    if (strncmp(line, "fit ", 4) == 0)
        return parse_fit(fits, line, path, ln);
    if (lvl >= 0)
        return so_err(SO_EFORMAT, "%s:%d: expected fit or band after the level's name", path, ln);
    uint64_t max;
    if (sscanf(line, "%31s %31s", lim, name) != 2)
        return so_err(SO_EFORMAT, "%s:%d: expected 'MAX_BYTES ALGO'", path, ln);
    if (concrete_algo(name, &algo))
        return so_err(SO_EFORMAT, "%s:%d: unknown algorithm '%s'", path, ln, name);
    if (parse_limit(lim, &max))
        return so_err(SO_EFORMAT, "%s:%d: bad byte limit '%s'", path, ln, lim);
    if (t->nrules == SO_TUNING_MAX_RULES || (t->nrules && max <= t->rule[t->nrules - 1].max_bytes))
        return so_err(SO_EFORMAT, "%s:%d: limits must ascend (at most %d lines)", path, ln, SO_TUNING_MAX_RULES);
    t->rule[t->nrules].max_bytes = max;
    t->rule[t->nrules++].algo = algo;
    return 0;
}

/* The next line of text[*pos..len) into buf (NUL-terminated, newline dropped);
 * 0 at the end, -1 when a line does not fit. */
static int next_line(const char *text, size_t len, size_t *pos, char *buf, size_t cap)
{
    if (*pos >= len)
        return 0;
    const char *s = text + *pos, *nl = memchr(s, '\n', len - *pos);
    size_t n = nl ? (size_t)(nl - s) : len - *pos;
    *pos += n + (nl != NULL);
    if (n >= cap)
        return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    return 1;
}

/* Bands cover every size: the last one must have no limit. */
static int close_bands(so_comm_fit *fits, const char *path)
{
    for (int a = 0; a < SO_ALLREDUCE_AUTO; a++) {
        so_comm_fit *f = &fits[a];
        if (f->nbands && f->band[f->nbands - 1].max_bytes != UINT64_MAX)
            return so_err(SO_EFORMAT, "%s: the last %s band must be max_bytes=*", path,
                          so_allreduce_algo_name((so_allreduce_algo)a));
        if (f->nbands)
            f->valid = 1;
    }
    return 0;
}

int so_comm_tuning_parse(const char *text, size_t len, const char *path, so_comm_tuning *t)
{
    so_comm_tuning_default(t);
    char line[256];
    size_t pos = 0;
    int r = next_line(text, len, &pos, line, sizeof line);
    if (r <= 0 ||
        sscanf(line, "scaleout-tuning v%d p=%d ranks_per_node=%d gamma=%lf", &t->version, &t->p,
               &t->ranks_per_node, &t->gamma) != 4 ||
        t->version < 1 || t->version > 3 || !(isfinite(t->gamma) && t->gamma >= 0))
        return so_err(SO_EFORMAT, "%s: not a scaleout-tuning v1, v2 or v3 file", path);
    /* Optional trailing key (older readers' sscanf ignores it). */
    const char *mem = strstr(line, " memory=");
    if (mem) {
        mem += strlen(" memory=");
        size_t n = strcspn(mem, " \t\r");
        t->registered = n == 10 && !strncmp(mem, "registered", n);
        if (!t->registered && !(n == 5 && !strncmp(mem, "plain", n)))
            return so_err(SO_EFORMAT, "%s:1: memory= must be registered or plain", path);
    }
    for (int ln = 2; (r = next_line(text, len, &pos, line, sizeof line)) != 0; ln++) {
        if (r < 0)
            return so_err(SO_EFORMAT, "%s:%d: line too long", path, ln);
        char *s = line + strspn(line, " \t\r");
        if (*s == '#' || *s == 0)
            continue;
        int rc = parse_line(t, s, path, ln);
        if (rc)
            return rc;
    }
    int rc = close_bands(t->fit, path);
    for (int l = 0; !rc && l < SO_LEVELS; l++)
        rc = close_bands(t->level[l].fit, path);
    return rc;
}

int so_comm_tuning_load(const char *path, so_comm_tuning *t)
{
    enum { MAX_FILE = 1 << 20 };
    void *buf;
    size_t n;
    int rc = so_file_read_all(path, MAX_FILE - 1, &buf, &n);
    if (rc)
        return rc == SO_EFORMAT ? so_err(SO_EFORMAT, "%s: larger than 1 MiB", path) : rc;
    rc = so_comm_tuning_parse(buf, n, path, t);
    free(buf);
    return rc;
}
