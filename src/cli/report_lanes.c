/* The pipeline schedule of `scaleout report`: profile.json's
 * "pipeline_schedule" as lanes of forward / backward bars per rank, drawn
 * as ASCII rows for the terminal and as a Chart.js floating-bar chart for
 * the page (report.js writes the micro-batch labels onto the bars). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define TEXT_COLS 100

/* ---- from profile.json ------------------------------------------------------ */

static double jnum(const so_prof_jv *o, const char *k, double d) { return so_prof_jv_num(so_prof_jv_get(o, k), d); }

static rpt_bar *push_bar(rpt_lanes *l)
{
    if (l->nbars == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        rpt_bar *g = realloc(l->bars, (size_t)cap * sizeof *g);
        if (!g)
            return NULL;
        l->bars = g;
        l->cap = cap;
    }
    rpt_bar *b = &l->bars[l->nbars++];
    memset(b, 0, sizeof *b);
    return b;
}

static char kind_of(const char *k)
{
    return !strcmp(k, "F") ? 'F' : !strcmp(k, "B") ? 'B' : !strcmp(k, "comm_wait") ? 'C' : 'O';
}

static void add_spans(rpt_lanes *l, int lane, const so_prof_jv *spans)
{
    for (int i = 0; i < so_prof_jv_len(spans); i++) {
        const so_prof_jv *s = so_prof_jv_at(spans, i);
        rpt_bar *b = push_bar(l);
        if (!b)
            return;
        b->lane = lane;
        b->kind = kind_of(so_prof_jv_str(so_prof_jv_get(s, "kind"), "?"));
        b->t0 = jnum(s, "t0_ms", 0);
        b->t1 = jnum(s, "t1_ms", b->t0);
        double k = jnum(s, "micro_batch", -1), c = jnum(s, "chunk", -1);
        if (k >= 0 && c >= 0)
            snprintf(b->label, sizeof b->label, "%c%.0fc%.0f", b->kind, k, c);
        else if (k >= 0)
            snprintf(b->label, sizeof b->label, "%c%.0f", b->kind, k);
        if (b->t1 > l->t_end)
            l->t_end = b->t1;
    }
}

/* Rank objects in lane order: by replica, then stage. */
static int lane_order(const void *a, const void *b)
{
    const so_prof_jv *x = *(const so_prof_jv *const *)a, *y = *(const so_prof_jv *const *)b;
    double d = jnum(x, "replica", 0) - jnum(y, "replica", 0);
    if (d == 0)
        d = jnum(x, "stage", 0) - jnum(y, "stage", 0);
    return (d > 0) - (d < 0);
}

rpt_lanes *rpt_lanes_from_json(const so_prof_jv *sched)
{
    const so_prof_jv *ranks = so_prof_jv_get(sched, "ranks");
    int n = so_prof_jv_len(ranks);
    rpt_lanes *l = n > 0 ? calloc(1, sizeof *l) : NULL;
    const so_prof_jv **order = n > 0 ? malloc((size_t)n * sizeof *order) : NULL;
    if (!l || !order) {
        free(l);
        free(order);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        order[i] = so_prof_jv_at(ranks, i);
    qsort(order, (size_t)n, sizeof *order, lane_order);
    int replicas = (int)jnum(sched, "replicas", 1);
    for (int i = 0; i < n && l->nlanes < RPT_LANES; i++) {
        if (n > RPT_LANES && jnum(order[i], "replica", 0) != 0)
            continue; /* too many ranks: replica 0's stages show the schedule */
        if (replicas > 1)
            snprintf(l->lanes[l->nlanes], RPT_CELL, "stage %.0f replica %.0f (rank %.0f)", jnum(order[i], "stage", 0),
                     jnum(order[i], "replica", 0), jnum(order[i], "rank", 0));
        else
            snprintf(l->lanes[l->nlanes], RPT_CELL, "stage %.0f (rank %.0f)", jnum(order[i], "stage", 0),
                     jnum(order[i], "rank", 0));
        add_spans(l, l->nlanes++, so_prof_jv_get(order[i], "spans"));
    }
    free(order);
    double step_ms = jnum(sched, "step_ms", 0);
    if (step_ms > l->t_end)
        l->t_end = step_ms;
    snprintf(l->title, sizeof l->title, "Step %.0f, %s schedule: one lane per rank (ms since the step's start)",
             jnum(sched, "step", -1), so_prof_jv_str(so_prof_jv_get(sched, "schedule"), "?"));
    if (!l->nbars || !(l->t_end > 0)) {
        free(l->bars);
        free(l);
        return NULL;
    }
    return l;
}

/* ---- text ------------------------------------------------------------------- */

static char fill_of(char kind) { return kind == 'F' ? '=' : kind == 'B' ? '-' : kind == 'C' ? '~' : 'o'; }

/* One bar into a row: its label (without the chunk when the whole label
 * does not fit) as far as it fits, then the kind's fill; at least one
 * column, so a short pass stays visible. */
static void draw_bar(char *row, const rpt_bar *b, double ms_per_col)
{
    int c0 = (int)floor(b->t0 / ms_per_col), c1 = (int)lround(b->t1 / ms_per_col);
    if (c0 < 0)
        c0 = 0;
    if (c1 <= c0)
        c1 = c0 + 1;
    if (c1 > TEXT_COLS)
        c1 = TEXT_COLS;
    int n = (int)strlen(b->label);
    const char *chunk = strchr(b->label, 'c');
    if (n > c1 - c0 && chunk)
        n = (int)(chunk - b->label);
    for (int c = c0; c < c1; c++)
        row[c] = c - c0 < n ? b->label[c - c0] : fill_of(b->kind);
}

void rpt_lanes_write_text(const rpt_lanes *l, FILE *f)
{
    int w = 0;
    for (int i = 0; i < l->nlanes; i++)
        w = (int)strlen(l->lanes[i]) > w ? (int)strlen(l->lanes[i]) : w;
    double ms_per_col = l->t_end / TEXT_COLS;
    fprintf(f, "\n%s:\n", l->title);
    for (int i = 0; i < l->nlanes; i++) {
        char row[TEXT_COLS + 1];
        memset(row, '.', TEXT_COLS);
        row[TEXT_COLS] = 0;
        for (int k = 0; k < l->nbars; k++)
            if (l->bars[k].lane == i)
                draw_bar(row, &l->bars[k], ms_per_col);
        fprintf(f, "%-*s |%s|\n", w, l->lanes[i], row);
    }
    fprintf(f, "%-*s  0 ms%*.*f ms\n", w, "", TEXT_COLS - 4, 3, l->t_end);
    fprintf(f, "one column = %.3f ms; Fk= forward of micro-batch k, Bk- backward (ckc: chunk c), ~ communication "
               "wait, o optimizer, . idle\n", ms_per_col);
}

/* ---- Chart.js ------------------------------------------------------------------ */

static void bar_set(so_json *js, const rpt_lanes *l, const char *label, char kind)
{
    so_json_obj_begin(js, NULL);
    so_json_str(js, "label", label);
    so_json_bool(js, "grouped", 0); /* bars of every dataset share their lane's row */
    so_json_arr_begin(js, "data");
    for (int i = 0; i < l->nbars; i++) {
        const rpt_bar *b = &l->bars[i];
        if (b->kind != kind)
            continue;
        so_json_obj_begin(js, NULL);
        so_json_arr_begin(js, "x");
        so_json_num(js, NULL, b->t0);
        so_json_num(js, NULL, b->t1);
        so_json_arr_end(js);
        so_json_str(js, "y", l->lanes[b->lane]);
        so_json_str(js, "name", b->label);
        so_json_obj_end(js);
    }
    so_json_arr_end(js);
    so_json_obj_end(js);
}

static void title(so_json *js, const char *key, const char *text)
{
    so_json_obj_begin(js, key);
    so_json_bool(js, "display", 1);
    so_json_str(js, "text", text);
    so_json_obj_end(js);
}

void rpt_lanes_write_json(const rpt_lanes *l, so_json *js)
{
    so_json_obj_begin(js, NULL);
    so_json_str(js, "type", "bar");
    so_json_obj_begin(js, "data");
    so_json_arr_begin(js, "labels");
    for (int i = 0; i < l->nlanes; i++)
        so_json_str(js, NULL, l->lanes[i]);
    so_json_arr_end(js);
    so_json_arr_begin(js, "datasets");
    bar_set(js, l, "forward", 'F');
    bar_set(js, l, "backward", 'B');
    bar_set(js, l, "comm wait", 'C');
    bar_set(js, l, "optimizer", 'O');
    so_json_arr_end(js);
    so_json_obj_end(js);
    so_json_obj_begin(js, "options");
    so_json_str(js, "indexAxis", "y");
    so_json_obj_begin(js, "plugins");
    title(js, "title", l->title);
    so_json_obj_begin(js, "barLabels");
    so_json_bool(js, "display", 1);
    so_json_obj_end(js);
    so_json_obj_end(js);
    so_json_obj_begin(js, "scales");
    so_json_obj_begin(js, "x");
    so_json_str(js, "type", "linear");
    so_json_num(js, "min", 0);
    so_json_num(js, "max", l->t_end);
    title(js, "title", "ms since the step's start (rank 0's clock)");
    so_json_obj_end(js);
    so_json_obj_begin(js, "y");
    so_json_bool(js, "stacked", 0);
    so_json_obj_end(js);
    so_json_obj_end(js);
    so_json_obj_end(js);
    so_json_obj_end(js);
}
