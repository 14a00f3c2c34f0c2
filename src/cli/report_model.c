/* Builds the sections of `scaleout report` from profile.json documents
 * (docs/FORMATS.md): runs and throughput, POP metrics per run and per rank,
 * the overlap of communication, per-layer time, communication statistics by
 * message size, checkpoint I/O, scaling across runs, and a pipelined run's
 * schedule as lanes (report_lanes.c). Missing fields read
 * as absent (a dash), so profiles of older versions still load. */
#include "report.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/err.h"

/* ---- small helpers ------------------------------------------------------------ */

/* Follows a NULL-terminated chain of member names. */
static const so_prof_jv *jget(const so_prof_jv *v, ...)
{
    va_list ap;
    va_start(ap, v);
    for (const char *k; v && (k = va_arg(ap, const char *));)
        v = so_prof_jv_get(v, k);
    va_end(ap);
    return v;
}

static double num(const so_prof_jv *obj, const char *key) { return so_prof_jv_num(so_prof_jv_get(obj, key), NAN); }
static const char *str(const so_prof_jv *obj, const char *key) { return so_prof_jv_str(so_prof_jv_get(obj, key), "-"); }

static void fmt(char *cell, const char *f, double v)
{
    if (isfinite(v))
        snprintf(cell, RPT_CELL, f, v);
    else
        snprintf(cell, RPT_CELL, "-");
}

static rpt_section *section(rpt_report *r, const char *title, const char *note)
{
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 8;
        rpt_section *s = realloc(r->s, (size_t)cap * sizeof *s);
        if (!s)
            return NULL;
        r->s = s;
        r->cap = cap;
    }
    rpt_section *s = &r->s[r->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->title, sizeof s->title, "%s", title);
    snprintf(s->note, sizeof s->note, "%s", note ? note : "");
    return s;
}

/* A new table with columns from a NULL-terminated list; NULL if the section is full. */
static rpt_table *table(rpt_section *s, const char *caption, const char *const *cols)
{
    if (!s || s->ntables == RPT_TABLES)
        return NULL;
    rpt_table *t = &s->table[s->ntables++];
    snprintf(t->caption, sizeof t->caption, "%s", caption);
    for (; *cols && t->ncols < RPT_COLS; cols++)
        snprintf(t->cols[t->ncols++], RPT_CELL, "%s", *cols);
    return t;
}

/* The next row (cleared), or NULL when out of memory. */
static char (*row(rpt_table *t))[RPT_CELL]
{
    if (!t)
        return NULL;
    if (t->nrows == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        void *g = realloc(t->rows, (size_t)cap * sizeof *t->rows);
        if (!g)
            return NULL;
        t->rows = g;
        t->cap = cap;
    }
    memset(t->rows[t->nrows], 0, sizeof *t->rows);
    return t->rows[t->nrows++];
}

static rpt_chart *chart(rpt_section *s, const char *title, const char *type, int nlabels)
{
    if (!s || s->ncharts == RPT_CHARTS || nlabels < 1)
        return NULL;
    rpt_chart *c = &s->chart[s->ncharts];
    memset(c, 0, sizeof *c);
    c->labels = calloc((size_t)nlabels, sizeof *c->labels);
    if (!c->labels)
        return NULL;
    s->ncharts++;
    c->nlabels = nlabels;
    snprintf(c->title, sizeof c->title, "%s", title);
    snprintf(c->type, sizeof c->type, "%s", type);
    return c;
}

/* A dataset of nlabels values (NaN until set). */
static double *dataset(rpt_chart *c, const char *label, const char *type, int y2)
{
    if (!c || c->nsets == RPT_SETS)
        return NULL;
    double *v = malloc((size_t)c->nlabels * sizeof *v);
    if (!v)
        return NULL;
    for (int i = 0; i < c->nlabels; i++)
        v[i] = NAN;
    snprintf(c->set[c->nsets].label, sizeof c->set[0].label, "%s", label);
    snprintf(c->set[c->nsets].type, sizeof c->set[0].type, "%s", type ? type : "");
    c->set[c->nsets].y2 = y2;
    c->set[c->nsets].v = v;
    c->nsets++;
    return v;
}

static int world_of(const rpt_run *run)
{
    double w = num(jget(run->doc, "environment", NULL), "world_size");
    return isfinite(w) ? (int)w : so_prof_jv_len(jget(run->doc, "ranks", NULL));
}

static const so_prof_jv *totals(const rpt_run *run, int rank)
{
    return jget(so_prof_jv_at(jget(run->doc, "ranks", NULL), rank), "totals", NULL);
}

/* ---- runs and POP ------------------------------------------------------------- */

static void runs_section(rpt_report *r, const rpt_run *runs, int n)
{
    static const char *const cols[] = {"run", "model", "dataset", "ranks", "batch/rank", "threads", "backend",
                                       "allreduce", "steps", "images/s", "median step ms", "host", "git", NULL};
    rpt_section *s = section(r, "Runs", "Configuration and environment of each profiled run; images/s is the "
                                        "global throughput after the warm-up steps.");
    rpt_table *t = table(s, "configuration and throughput", cols);
    for (int i = 0; i < n; i++) {
        char(*c)[RPT_CELL] = row(t);
        if (!c)
            return;
        const so_prof_jv *cfg = jget(runs[i].doc, "config", NULL), *env = jget(runs[i].doc, "environment", NULL),
                         *thr = jget(runs[i].doc, "throughput", NULL);
        snprintf(c[0], RPT_CELL, "%.47s", runs[i].path);
        snprintf(c[1], RPT_CELL, "%s", str(cfg, "model"));
        snprintf(c[2], RPT_CELL, "%s", str(cfg, "dataset"));
        snprintf(c[3], RPT_CELL, "%d", world_of(&runs[i]));
        snprintf(c[4], RPT_CELL, "%s", str(cfg, "batch"));
        fmt(c[5], "%.0f", num(env, "threads"));
        snprintf(c[6], RPT_CELL, "%s", str(cfg, "backend"));
        snprintf(c[7], RPT_CELL, "%s", str(env, "allreduce"));
        fmt(c[8], "%.0f", num(thr, "steps"));
        fmt(c[9], "%.1f", num(thr, "images_per_sec"));
        fmt(c[10], "%.2f", 1e3 * num(thr, "median_step_s"));
        snprintf(c[11], RPT_CELL, "%s", str(env, "host"));
        snprintf(c[12], RPT_CELL, "%s", str(env, "git"));
    }
}

static void pop_section(rpt_report *r, const rpt_run *runs, int n)
{
    static const char *const cols[] = {"run", "ranks", "parallel eff.", "load balance", "comm. eff.", "overlap %",
                                       "data wait %", "per-step LB", NULL};
    rpt_section *s = section(r, "Efficiency (POP metrics)",
                             "Parallel efficiency = load balance x communication efficiency. Load balance = "
                             "mean/max useful compute (forward + backward + optimizer) over ranks; communication "
                             "efficiency = max useful compute / runtime (time inside training steps). Overlap = "
                             "share of gradient communication hidden behind backward. Per-step LB = sum over steps of "
                             "mean/max useful compute: imbalance that moves between ranks from step to step, which "
                             "the run's load balance averages away, shows here. See docs/PROFILING.md.");
    rpt_table *t = table(s, "per run", cols);
    for (int i = 0; i < n; i++) {
        char(*c)[RPT_CELL] = row(t);
        if (!c)
            return;
        const so_prof_jv *pop = jget(runs[i].doc, "pop", NULL);
        snprintf(c[0], RPT_CELL, "%.47s", runs[i].path);
        snprintf(c[1], RPT_CELL, "%d", world_of(&runs[i]));
        fmt(c[2], "%.3f", num(pop, "parallel_efficiency"));
        fmt(c[3], "%.3f", num(pop, "load_balance"));
        fmt(c[4], "%.3f", num(pop, "comm_efficiency"));
        fmt(c[5], "%.1f", num(pop, "overlap_pct"));
        fmt(c[6], "%.2f", 100 * num(pop, "data_wait_share"));
        fmt(c[7], "%.3f", num(pop, "step_load_balance"));
    }
}

/* Runs with pipeline stages: the bubble measured beside the schedule's formula. */
static void pipeline_section(rpt_report *r, const rpt_run *runs, int n)
{
    static const char *const cols[] = {"run", "stages", "micro-batches", "schedule", "bubble measured",
                                       "formula", "with stage times", NULL};
    rpt_table *t = NULL;
    for (int i = 0; i < n; i++) {
        const so_prof_jv *cfg = jget(runs[i].doc, "config", NULL), *thr = jget(runs[i].doc, "throughput", NULL);
        if (!isfinite(num(thr, "pipeline_bubble_formula")))
            continue;
        if (!t)
            t = table(section(r, "Pipeline stages",
                              "Bubble = 1 - (forward + backward + optimizer seconds summed over ranks) / (ranks x "
                              "step seconds), beside the schedule's (P-1)/(M+P-1) ((P-1)/(vM+P-1) interleaved "
                              "with v chunks per rank) for equal stages and the same schedule with the stages' "
                              "measured times. See docs/PARALLELISM.md."),
                      "bubble per run", cols);
        char(*c)[RPT_CELL] = row(t);
        if (!c)
            return;
        snprintf(c[0], RPT_CELL, "%.47s", runs[i].path);
        snprintf(c[1], RPT_CELL, "%s", str(cfg, "pipeline_stages"));
        snprintf(c[2], RPT_CELL, "%s", str(cfg, "microbatches"));
        const char *v = str(cfg, "virtual_stages");
        snprintf(c[3], RPT_CELL, "%s%s%s", str(cfg, "pipeline_schedule"), strcmp(v, "-") && strcmp(v, "1") ? " v=" : "",
                 strcmp(v, "-") && strcmp(v, "1") ? v : "");
        fmt(c[4], "%.3f", num(thr, "pipeline_bubble_measured"));
        fmt(c[5], "%.3f", num(thr, "pipeline_bubble_formula"));
        fmt(c[6], "%.3f", num(thr, "pipeline_bubble_stage_times"));
    }
}

/* Per lane of the pipeline schedule: busy time and idle share of the step. */
static void lane_rows(rpt_table *t, const rpt_lanes *l)
{
    for (int i = 0; i < l->nlanes; i++) {
        double ms[3] = {0, 0, 0}; /* forward, backward, other */
        for (int k = 0; k < l->nbars; k++)
            if (l->bars[k].lane == i)
                ms[l->bars[k].kind == 'F' ? 0 : l->bars[k].kind == 'B' ? 1 : 2] += l->bars[k].t1 - l->bars[k].t0;
        char(*c)[RPT_CELL] = row(t);
        if (!c)
            return;
        snprintf(c[0], RPT_CELL, "%s", l->lanes[i]);
        fmt(c[1], "%.3f", ms[0]);
        fmt(c[2], "%.3f", ms[1]);
        fmt(c[3], "%.3f", ms[2]);
        fmt(c[4], "%.1f", 100 * (1 - (ms[0] + ms[1] + ms[2]) / l->t_end));
    }
}

/* One step of a pipelined run drawn as lanes (profile.json's "pipeline_schedule"). */
static void schedule_section(rpt_report *r, const rpt_run *run)
{
    const so_prof_jv *sched = jget(run->doc, "pipeline_schedule", NULL);
    rpt_lanes *l = sched ? rpt_lanes_from_json(sched) : NULL;
    if (!l)
        return;
    static const char *const cols[] = {"lane", "forward ms", "backward ms", "comm wait + optimizer ms", "idle %",
                                       NULL};
    char title[160];
    snprintf(title, sizeof title, "Pipeline schedule: %.100s", run->path);
    rpt_section *s = section(r, title, "One measured step (of median duration among the detailed steps after the "
                                       "first) as lanes, one per rank, ordered by replica and stage: a bar per "
                                       "forward (Fk, micro-batch k) and backward (Bk) pass, ckc the chunk on an "
                                       "interleaved rank, on rank 0's clock (the timeline's alignment, within "
                                       "tens of microseconds). Gaps are the bubble: a stage waits for the one "
                                       "before it (forward) or after it (backward). See docs/PROFILING.md.");
    if (!s) {
        free(l->bars);
        free(l);
        return;
    }
    s->lanes = l;
    lane_rows(table(s, "per lane, this step", cols), l);
}

/* ---- per rank: POP terms and overlap --------------------------------------------- */

static void rank_section(rpt_report *r, const rpt_run *run)
{
    static const char *const cols[] = {"rank", "steps", "runtime s", "useful s", "comm. eff.", "data wait %",
                                       "grad. comm ms/step", "exposed ms/step", "overlap %", "queue ms/step",
                                       NULL};
    int world = so_prof_jv_len(jget(run->doc, "ranks", NULL)), grads = 0, steps = 0;
    for (int k = 0; k < world; k++) {
        grads |= num(totals(run, k), "comm_pure_s") > 0;
        steps |= num(totals(run, k), "steps") > 0;
    }
    if (!steps)
        return; /* not a training run (libscaleout-prof of an MPI program) */
    char title[160];
    snprintf(title, sizeof title, "Per rank: %.100s", run->path);
    rpt_section *s = section(r, title, "Per-rank terms of the POP metrics (comm. eff. of a rank = its useful "
                                       "compute / the longest runtime) and how much of each rank's gradient "
                                       "communication was hidden behind backward.");
    rpt_table *t = table(s, "POP terms and overlap per rank", cols);
    rpt_chart *ph = chart(s, "Time per step by phase (ms)", "bar", world);
    rpt_chart *ov = grads ? chart(s, "Gradient communication per step (ms): hidden vs exposed", "bar", world) : NULL;
    double *useful = dataset(ph, "useful compute", NULL, 0), *data = dataset(ph, "data wait", NULL, 0),
           *wait = dataset(ph, "comm wait (exposed)", NULL, 0), *other = dataset(ph, "other", NULL, 0);
    double *hidden = dataset(ov, "hidden", NULL, 0), *exposed = dataset(ov, "exposed", NULL, 0);
    if (ph)
        ph->stacked = ph->horizontal = 1, snprintf(ph->xtitle, sizeof ph->xtitle, "ms per step");
    if (ov)
        ov->stacked = 1, snprintf(ov->ytitle, sizeof ov->ytitle, "ms per step");
    double rt_max = NAN;
    for (int k = 0; k < world; k++)
        rt_max = k == 0 || num(totals(run, k), "runtime_s") > rt_max ? num(totals(run, k), "runtime_s") : rt_max;
    for (int k = 0; k < world; k++) {
        const so_prof_jv *tt = totals(run, k);
        double steps = num(tt, "steps"), ms = steps > 0 ? 1e3 / steps : NAN;
        double pure = num(tt, "comm_pure_s"), cw = num(tt, "comm_wait_s");
        char(*c)[RPT_CELL] = row(t);
        if (!c)
            return;
        snprintf(c[0], RPT_CELL, "%d", k);
        fmt(c[1], "%.0f", steps);
        fmt(c[2], "%.3f", num(tt, "runtime_s"));
        fmt(c[3], "%.3f", num(tt, "useful_s"));
        fmt(c[4], "%.3f", num(tt, "useful_s") / rt_max);
        fmt(c[5], "%.2f", 100 * num(tt, "data_wait_s") / num(tt, "runtime_s"));
        fmt(c[6], "%.2f", pure * ms);
        fmt(c[7], "%.2f", cw * ms);
        fmt(c[8], "%.1f", pure > 0 ? fmin(100, fmax(0, 100 * (1 - cw / pure))) : NAN);
        fmt(c[9], "%.2f", num(tt, "comm_queue_s") * ms);
        if (ph) {
            snprintf(ph->labels[k], RPT_CELL, "rank %d", k);
            useful[k] = num(tt, "useful_s") * ms;
            data[k] = num(tt, "data_wait_s") * ms;
            wait[k] = cw * ms;
            other[k] = fmax(0, num(tt, "runtime_s") * ms - useful[k] - data[k] - wait[k]);
        }
        if (ov) {
            snprintf(ov->labels[k], RPT_CELL, "rank %d", k);
            hidden[k] = fmax(0, pure - cw) * ms;
            exposed[k] = fmin(cw, pure > 0 ? pure : cw) * ms;
        }
    }
}

/* ---- per layer --------------------------------------------------------------- */

/* One layer of the per-layer table: its figures merged over the ranks that
 * run it (with pipeline stages, the replicas of its stage; else all). */
typedef struct {
    const so_prof_jv *entry;     /* the first rank's entry (name, block) */
    double node;                 /* its place in the whole model (NaN: an older profile) */
    int edge;                    /* 0 a layer, 1 the send of node's tensor, 2 its recv */
    int seen;                    /* first-seen order: the tie-break */
    double fw, bw;               /* ms per step, summed over ranks */
    double flops, secs;          /* model FLOPs and their seconds, summed over ranks (NaN: not counted) */
    int ranks;
} layer_row;

/* The row of layer entry l (added when new); rows[*n] has room. */
static layer_row *layer_find(layer_row *rows, int *n, const so_prof_jv *l, int hint)
{
    const char *name = str(l, "name");
    if (hint < *n && !strcmp(str(rows[hint].entry, "name"), name)) /* data parallelism: the same order */
        return &rows[hint];
    for (int i = 0; i < *n; i++)
        if (!strcmp(str(rows[i].entry, "name"), name))
            return &rows[i];
    const char *edge = str(l, "edge");
    rows[*n] = (layer_row){.entry = l, .node = num(l, "node"), .seen = *n,
                           .edge = !strcmp(edge, "send") ? 1 : !strcmp(edge, "recv") ? 2 : 0};
    return &rows[(*n)++];
}

/* The whole model's order: by node (a tensor's send and recv after its
 * producer), then as first seen (profiles without "node": rank 0's order). */
static int layer_cmp(const void *a, const void *b)
{
    const layer_row *x = a, *y = b;
    double nx = isfinite(x->node) ? x->node : -1, ny = isfinite(y->node) ? y->node : -1;
    if (nx != ny)
        return nx < ny ? -1 : 1;
    if (x->edge != y->edge)
        return x->edge - y->edge;
    return x->seen - y->seen;
}

/* Every rank's layers merged by name; *n rows, sorted (free the result). */
static layer_row *merge_layers(const so_prof_jv *ranks, int *n)
{
    int world = so_prof_jv_len(ranks), cap = 0;
    for (int k = 0; k < world; k++)
        cap += so_prof_jv_len(jget(so_prof_jv_at(ranks, k), "layers", NULL));
    layer_row *rows = calloc((size_t)cap + 1, sizeof *rows);
    *n = 0;
    for (int k = 0; rows && k < world; k++) {
        const so_prof_jv *rk = so_prof_jv_at(ranks, k), *ls = jget(rk, "layers", NULL);
        double steps = num(jget(rk, "totals", NULL), "steps");
        for (int i = 0; i < so_prof_jv_len(ls); i++) {
            const so_prof_jv *l = so_prof_jv_at(ls, i);
            layer_row *r = layer_find(rows, n, l, i);
            r->fw += 1e3 * num(l, "forward_s") / steps;
            r->bw += 1e3 * num(l, "backward_s") / steps;
            r->flops += num(l, "flops"); /* NaN where the layer counts none (and stays NaN) */
            r->secs += num(l, "forward_s") + num(l, "backward_s");
            r->ranks++;
        }
    }
    if (rows)
        qsort(rows, (size_t)*n, sizeof *rows, layer_cmp);
    return rows;
}

/* Precision, GFLOP/s and MFU: the rate over every rank's FLOPs and seconds,
 * against the first rank's peak (the ranks of one run share a CPU model). */
static void layer_rate_cells(char (*cell)[RPT_CELL], const layer_row *lr)
{
    snprintf(cell[6], RPT_CELL, "%s", str(lr->entry, "precision"));
    double rate = lr->secs > 0 ? lr->flops / lr->secs * 1e-9 : NAN, peak = num(lr->entry, "peak_gflops");
    fmt(cell[7], "%.1f", rate);
    fmt(cell[8], "%.1f", peak > 0 ? 100 * rate / peak : NAN);
}

/* Forward/backward ms per step of each layer, keyed by layer and averaged
 * over the ranks that run it, in the whole model's order; grouped by block
 * when there are more than 40 layers (the chart stays legible). */
static void layer_section(rpt_report *r, const rpt_run *run)
{
    int nl = 0;
    layer_row *rows = merge_layers(jget(run->doc, "ranks", NULL), &nl);
    if (nl == 0) { /* detail "step": no per-layer times */
        free(rows);
        return;
    }
    static const char *const cols[] = {"layer", "block", "forward ms", "backward ms", "total ms", "share %",
                                       "precision", "GFLOP/s", "MFU %", NULL};
    char title[160];
    snprintf(title, sizeof title, "Per-layer time: %.100s", run->path);
    rpt_section *s = section(r, title, "Forward and backward time of each layer per step, mean over the ranks "
                                       "that run it (with pipeline stages, its stage's replicas; evaluation "
                                       "forwards excluded). GFLOP/s: the layer's model FLOPs (forward + "
                                       "backward = 3x the forward's) over its time; MFU: against the peak of "
                                       "its precision (BF16 or FP32) on the run's threads.");
    rpt_table *t = table(s, "layers in graph order", cols);
    double sum = 0;
    for (int i = 0; i < nl; i++) {
        rows[i].fw /= rows[i].ranks;
        rows[i].bw /= rows[i].ranks;
        sum += rows[i].fw + rows[i].bw;
    }
    int blocks = nl > 40, nb = 0;
    rpt_chart *c = chart(s, blocks ? "Forward / backward ms per step, by block" : "Forward / backward ms per step",
                         "bar", nl);
    double *cf = dataset(c, "forward", NULL, 0), *cb = dataset(c, "backward", NULL, 0);
    for (int i = 0; i < nl; i++) {
        const layer_row *lr = &rows[i];
        char(*cell)[RPT_CELL] = row(t);
        if (!cell)
            break;
        snprintf(cell[0], RPT_CELL, "%s", str(lr->entry, "name"));
        snprintf(cell[1], RPT_CELL, "%s", str(lr->entry, "block"));
        fmt(cell[2], "%.3f", lr->fw);
        fmt(cell[3], "%.3f", lr->bw);
        fmt(cell[4], "%.3f", lr->fw + lr->bw);
        fmt(cell[5], "%.1f", sum > 0 ? 100 * (lr->fw + lr->bw) / sum : NAN);
        layer_rate_cells(cell, lr);
        if (!c)
            continue;
        const char *name = blocks ? str(lr->entry, "block") : str(lr->entry, "name");
        if (!nb || strcmp(c->labels[nb - 1], name)) {
            snprintf(c->labels[nb], RPT_CELL, "%s", name);
            cf[nb] = cb[nb] = 0;
            nb++;
        }
        cf[nb - 1] += lr->fw;
        cb[nb - 1] += lr->bw;
    }
    if (c) {
        c->nlabels = nb;
        c->stacked = c->horizontal = 1;
        snprintf(c->xtitle, sizeof c->xtitle, "ms per step");
    }
    free(rows);
}

/* ---- communication ----------------------------------------------------------- */

#define MAXBINS 64
typedef struct {
    char coll[RPT_CELL], algo[RPT_CELL], use[RPT_CELL];
    double calls, bytes, secs;
    double max_bytes[MAXBINS], count[MAXBINS], sum[MAXBINS], min[MAXBINS], max[MAXBINS];
    int nbins;
} comm_key;

/* Merges one rank's entry (a collective/algorithm/use with its size table) into keys. */
static void merge_comm(comm_key *keys, int *nkeys, int cap, const so_prof_jv *e)
{
    int i = 0;
    while (i < *nkeys && (strcmp(keys[i].coll, str(e, "collective")) || strcmp(keys[i].algo, str(e, "algorithm")) ||
                          strcmp(keys[i].use, str(e, "use"))))
        i++;
    if (i == *nkeys) {
        if (*nkeys == cap)
            return;
        memset(&keys[i], 0, sizeof keys[i]);
        snprintf(keys[i].coll, RPT_CELL, "%s", str(e, "collective"));
        snprintf(keys[i].algo, RPT_CELL, "%s", str(e, "algorithm"));
        snprintf(keys[i].use, RPT_CELL, "%s", str(e, "use"));
        (*nkeys)++;
    }
    comm_key *k = &keys[i];
    k->calls += num(e, "calls");
    k->bytes += num(e, "bytes");
    k->secs += num(e, "seconds");
    const so_prof_jv *sz = jget(e, "sizes", NULL);
    for (int j = 0; j < so_prof_jv_len(sz); j++) {
        const so_prof_jv *b = so_prof_jv_at(sz, j);
        double mb = num(b, "max_bytes"), cnt = num(b, "count");
        if (!(cnt > 0))
            continue;
        int q = 0;
        while (q < k->nbins && k->max_bytes[q] != mb)
            q++;
        if (q == k->nbins) {
            if (q == MAXBINS)
                continue;
            k->nbins++;
            k->max_bytes[q] = mb;
            k->min[q] = num(b, "min_s");
            k->max[q] = num(b, "max_s");
        }
        k->count[q] += cnt;
        k->sum[q] += num(b, "avg_s") * cnt;
        k->min[q] = fmin(k->min[q], num(b, "min_s"));
        k->max[q] = fmax(k->max[q], num(b, "max_s"));
    }
}

static void size_label(char *cell, double bytes)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4)
        bytes /= 1024, u++;
    snprintf(cell, RPT_CELL, "<= %g %s", bytes, unit[u]);
}

static int by_size(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Size table and chart rows of one key, sorted by size. */
static void size_rows(rpt_table *t, rpt_chart *c, const comm_key *k, int world)
{
    double order[MAXBINS][2];
    for (int q = 0; q < k->nbins; q++)
        order[q][0] = k->max_bytes[q], order[q][1] = q;
    qsort(order, (size_t)k->nbins, sizeof order[0], by_size);
    double *cnt = c ? dataset(c, "calls per rank", NULL, 0) : NULL, *avg = c ? dataset(c, "avg latency ms", "line", 1) : NULL;
    for (int j = 0; j < k->nbins; j++) {
        int q = (int)order[j][1];
        char(*cell)[RPT_CELL] = row(t);
        if (!cell)
            return;
        snprintf(cell[0], RPT_CELL, "%.47s", k->coll);
        snprintf(cell[1], RPT_CELL, "%.47s", k->algo);
        snprintf(cell[2], RPT_CELL, "%.47s", k->use);
        size_label(cell[3], k->max_bytes[q]);
        fmt(cell[4], "%.0f", k->count[q]);
        fmt(cell[5], "%.3f", 1e3 * k->sum[q] / k->count[q]);
        fmt(cell[6], "%.3f", 1e3 * k->min[q]);
        fmt(cell[7], "%.3f", 1e3 * k->max[q]);
        if (cnt && avg && j < c->nlabels) {
            size_label(c->labels[j], k->max_bytes[q]);
            cnt[j] = k->count[q] / world;
            avg[j] = 1e3 * k->sum[q] / k->count[q];
        }
    }
}

static void comm_section(rpt_report *r, const rpt_run *run)
{
    comm_key keys[32];
    int nkeys = 0;
    const so_prof_jv *ranks = jget(run->doc, "ranks", NULL);
    int world = so_prof_jv_len(ranks);
    for (int k = 0; k < world; k++) {
        const so_prof_jv *cl = jget(so_prof_jv_at(ranks, k), "comm", NULL);
        for (int i = 0; i < so_prof_jv_len(cl); i++)
            merge_comm(keys, &nkeys, 32, so_prof_jv_at(cl, i));
    }
    if (!nkeys)
        return;
    static const char *const cols[] = {"collective", "algorithm", "use", "calls/rank", "MiB/rank", "total ms/rank",
                                       "avg ms", NULL};
    static const char *const scols[] = {"collective", "algorithm", "use", "size", "count", "avg ms", "min ms",
                                        "max ms", NULL};
    char title[160];
    snprintf(title, sizeof title, "Communication: %.100s", run->path);
    rpt_section *s = section(r, title, "Per collective, algorithm and use, summed over ranks (per-rank columns "
                                       "divide by the rank count). Latency = start to finish of each operation "
                                       "on the rank that ran it (includes waiting for late peers). Sizes are "
                                       "power-of-two classes.");
    rpt_table *t = table(s, "totals", cols), *st = table(s, "latency by message size", scols);
    for (int i = 0; i < nkeys; i++) {
        char(*c)[RPT_CELL] = row(t);
        if (!c)
            return;
        snprintf(c[0], RPT_CELL, "%.47s", keys[i].coll);
        snprintf(c[1], RPT_CELL, "%.47s", keys[i].algo);
        snprintf(c[2], RPT_CELL, "%.47s", keys[i].use);
        fmt(c[3], "%.1f", keys[i].calls / world);
        fmt(c[4], "%.3f", keys[i].bytes / world / 1048576.0);
        fmt(c[5], "%.3f", 1e3 * keys[i].secs / world);
        fmt(c[6], "%.3f", keys[i].calls > 0 ? 1e3 * keys[i].secs / keys[i].calls : NAN);
    }
    for (int i = 0; i < nkeys; i++) {
        /* A chart for the gradient allreduces, the traffic that matters. */
        rpt_chart *c = !strcmp(keys[i].use, "gradients") && s->ncharts < RPT_CHARTS
                           ? chart(s, "Gradient allreduce: calls and latency by message size", "bar", keys[i].nbins)
                           : NULL;
        if (c) {
            snprintf(c->xtitle, sizeof c->xtitle, "message size (%.20s, %.20s)", keys[i].coll, keys[i].algo);
            snprintf(c->ytitle, sizeof c->ytitle, "calls per rank");
            snprintf(c->y2title, sizeof c->y2title, "avg latency ms");
        }
        size_rows(st, c, &keys[i], world);
    }
}

/* ---- checkpoint I/O ------------------------------------------------------------- */

/* The checkpoint writer and flush threads' work per rank and kind (profiles
 * with checkpoints; older profiles have no "checkpoint_io"). */
static void ckpt_io_section(rpt_report *r, const rpt_run *run)
{
    static const char *const cols[] = {"rank", "kind", "count", "MB", "seconds", "MB/s", NULL};
    const so_prof_jv *ranks = jget(run->doc, "ranks", NULL);
    int world = so_prof_jv_len(ranks), any = 0;
    for (int k = 0; k < world; k++)
        any |= so_prof_jv_len(jget(so_prof_jv_at(ranks, k), "checkpoint_io", NULL)) > 0;
    if (!any)
        return;
    char title[160];
    snprintf(title, sizeof title, "Checkpoint I/O: %.100s", run->path);
    rpt_section *s = section(r, title, "Work of the checkpoint writer thread (snapshot of the shard, shard and "
                                       "partner writes, manifest) and flush thread (copy to the shared level, "
                                       "its manifest), in the background of training; MB = 10^6 bytes. The "
                                       "timeline shows them as the tracks 'checkpoint I/O' and 'checkpoint flush'.");
    rpt_table *t = table(s, "per rank and kind (all checkpoints)", cols);
    for (int k = 0; k < world; k++) {
        const so_prof_jv *io = jget(so_prof_jv_at(ranks, k), "checkpoint_io", NULL);
        for (int i = 0; i < so_prof_jv_len(io); i++) {
            const so_prof_jv *e = so_prof_jv_at(io, i);
            char(*c)[RPT_CELL] = row(t);
            if (!c)
                return;
            fmt(c[0], "%.0f", num(so_prof_jv_at(ranks, k), "rank"));
            snprintf(c[1], RPT_CELL, "%.40s", str(e, "kind"));
            fmt(c[2], "%.0f", num(e, "count"));
            fmt(c[3], "%.3f", num(e, "bytes") / 1e6);
            fmt(c[4], "%.4f", num(e, "seconds"));
            fmt(c[5], "%.1f", num(e, "mb_per_s"));
        }
    }
}

/* ---- scaling across runs ------------------------------------------------------- */

static int by_world(const void *a, const void *b)
{
    int x = world_of(a), y = world_of(b);
    return (x > y) - (x < y);
}

static void scaling_section(rpt_report *r, const rpt_run *runs, int n)
{
    rpt_run *sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted)
        return;
    memcpy(sorted, runs, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, by_world);
    static const char *const cols[] = {"ranks", "run", "images/s", "speedup", "scaling eff.", "parallel eff.", NULL};
    rpt_section *s = section(r, "Scaling", "Runs ordered by rank count. Speedup and scaling efficiency are "
                                           "relative to the run with the fewest ranks (weak scaling when the "
                                           "batch per rank is fixed).");
    rpt_table *t = table(s, "throughput by rank count", cols);
    rpt_chart *c = chart(s, "Throughput (images/s) vs ranks", "line", n);
    rpt_chart *e = chart(s, "Efficiency vs ranks", "line", n);
    double *meas = dataset(c, "measured", NULL, 0), *ideal = dataset(c, "ideal (linear)", NULL, 0);
    double *se = dataset(e, "scaling efficiency", NULL, 0), *pe = dataset(e, "parallel efficiency (POP)", NULL, 0),
           *lb = dataset(e, "load balance", NULL, 0), *ce = dataset(e, "communication efficiency", NULL, 0);
    double base = num(jget(sorted[0].doc, "throughput", NULL), "images_per_sec");
    int w0 = world_of(&sorted[0]);
    for (int i = 0; i < n; i++) {
        int w = world_of(&sorted[i]);
        double ips = num(jget(sorted[i].doc, "throughput", NULL), "images_per_sec");
        const so_prof_jv *pop = jget(sorted[i].doc, "pop", NULL);
        double sp = ips / base, eff = sp / ((double)w / w0);
        char(*cell)[RPT_CELL] = row(t);
        if (!cell)
            break;
        snprintf(cell[0], RPT_CELL, "%d", w);
        snprintf(cell[1], RPT_CELL, "%.47s", sorted[i].path);
        fmt(cell[2], "%.1f", ips);
        fmt(cell[3], "%.2f", sp);
        fmt(cell[4], "%.3f", eff);
        fmt(cell[5], "%.3f", num(pop, "parallel_efficiency"));
        if (meas && ideal) {
            snprintf(c->labels[i], RPT_CELL, "%d", w);
            meas[i] = ips;
            ideal[i] = base * w / w0;
        }
        if (se && pe && lb && ce) {
            snprintf(e->labels[i], RPT_CELL, "%d", w);
            se[i] = eff;
            pe[i] = num(pop, "parallel_efficiency");
            lb[i] = num(pop, "load_balance");
            ce[i] = num(pop, "comm_efficiency");
        }
    }
    if (c)
        snprintf(c->xtitle, sizeof c->xtitle, "ranks"), snprintf(c->ytitle, sizeof c->ytitle, "images/s");
    if (e)
        snprintf(e->xtitle, sizeof e->xtitle, "ranks");
    free(sorted);
}

int rpt_build(const rpt_run *runs, int n, rpt_report *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->title, sizeof out->title, "scaleout profile report: %s%s",
             str(jget(runs[0].doc, "config", NULL), "model"), n > 1 ? " (several runs)" : "");
    runs_section(out, runs, n);
    pop_section(out, runs, n);
    pipeline_section(out, runs, n);
    for (int i = 0; i < n; i++)
        schedule_section(out, &runs[i]);
    if (n > 1)
        scaling_section(out, runs, n);
    for (int i = 0; i < n; i++) {
        rank_section(out, &runs[i]);
        layer_section(out, &runs[i]);
        comm_section(out, &runs[i]);
        ckpt_io_section(out, &runs[i]);
    }
    return out->n ? 0 : so_err(SO_ENOMEM, "out of memory building the report");
}

void rpt_free(rpt_report *r)
{
    for (int i = 0; i < r->n; i++) {
        for (int t = 0; t < r->s[i].ntables; t++)
            free(r->s[i].table[t].rows);
        if (r->s[i].lanes)
            free(r->s[i].lanes->bars);
        free(r->s[i].lanes);
        for (int c = 0; c < r->s[i].ncharts; c++) {
            free(r->s[i].chart[c].labels);
            for (int d = 0; d < r->s[i].chart[c].nsets; d++)
                free(r->s[i].chart[c].set[d].v);
        }
    }
    free(r->s);
    memset(r, 0, sizeof *r);
}
