/* Output of a report model (report.h): aligned text tables for a terminal,
 * and the JSON the HTML page's script renders (tables as DOM, charts as
 * Chart.js configurations). */
#include <math.h>
#include <string.h>

#include "report.h"

/* Prints s wrapped at about `width` columns. */
static void wrap(FILE *f, const char *s, int width)
{
    int col = 0;
    while (*s) {
        size_t n = strcspn(s, " ");
        if (col && col + (int)n > width) {
            fputc('\n', f);
            col = 0;
        }
        fprintf(f, "%s%.*s", col ? " " : "", (int)n, s);
        col += (int)n + (col ? 1 : 0);
        s += n;
        while (*s == ' ')
            s++;
    }
    if (col)
        fputc('\n', f);
}

static void text_table(FILE *f, const rpt_table *t)
{
    int w[RPT_COLS];
    for (int c = 0; c < t->ncols; c++) {
        w[c] = (int)strlen(t->cols[c]);
        for (int r = 0; r < t->nrows; r++)
            if ((int)strlen(t->rows[r][c]) > w[c])
                w[c] = (int)strlen(t->rows[r][c]);
    }
    fprintf(f, "\n%s:\n", t->caption);
    for (int c = 0; c < t->ncols; c++)
        fprintf(f, "%s%*s", c ? "  " : "", c ? w[c] : -w[c], t->cols[c]);
    fputc('\n', f);
    for (int r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++)
            fprintf(f, "%s%*s", c ? "  " : "", c ? w[c] : -w[c], t->rows[r][c]);
        fputc('\n', f);
    }
}

void rpt_write_text(const rpt_report *r, FILE *f)
{
    fprintf(f, "%s\n", r->title);
    for (int i = 0; i < r->n; i++) {
        const rpt_section *s = &r->s[i];
        fprintf(f, "\n== %s ==\n", s->title);
        wrap(f, s->note, 100);
        if (s->lanes)
            rpt_lanes_write_text(s->lanes, f);
        for (int t = 0; t < s->ntables; t++)
            text_table(f, &s->table[t]);
    }
}

static void json_table(so_json *js, const rpt_table *t)
{
    so_json_obj_begin(js, NULL);
    so_json_str(js, "caption", t->caption);
    so_json_arr_begin(js, "columns");
    for (int c = 0; c < t->ncols; c++)
        so_json_str(js, NULL, t->cols[c]);
    so_json_arr_end(js);
    so_json_arr_begin(js, "rows");
    for (int r = 0; r < t->nrows; r++) {
        so_json_arr_begin(js, NULL);
        for (int c = 0; c < t->ncols; c++)
            so_json_str(js, NULL, t->rows[r][c]);
        so_json_arr_end(js);
    }
    so_json_arr_end(js);
    so_json_obj_end(js);
}

static void json_axis(so_json *js, const char *key, const char *title, int stacked, const char *position)
{
    so_json_obj_begin(js, key);
    so_json_bool(js, "stacked", stacked);
    if (position)
        so_json_str(js, "position", position);
    if (title[0]) {
        so_json_obj_begin(js, "title");
        so_json_bool(js, "display", 1);
        so_json_str(js, "text", title);
        so_json_obj_end(js);
    }
    so_json_obj_end(js);
}

/* A Chart.js configuration: {type, data: {labels, datasets}, options}. */
static void json_chart(so_json *js, const rpt_chart *c)
{
    so_json_obj_begin(js, NULL);
    so_json_str(js, "type", c->type);
    so_json_obj_begin(js, "data");
    so_json_arr_begin(js, "labels");
    for (int i = 0; i < c->nlabels; i++)
        so_json_str(js, NULL, c->labels[i]);
    so_json_arr_end(js);
    so_json_arr_begin(js, "datasets");
    for (int d = 0; d < c->nsets; d++) {
        so_json_obj_begin(js, NULL);
        so_json_str(js, "label", c->set[d].label);
        if (c->set[d].type[0])
            so_json_str(js, "type", c->set[d].type);
        if (c->set[d].y2)
            so_json_str(js, "yAxisID", "y2");
        so_json_arr_begin(js, "data");
        for (int i = 0; i < c->nlabels; i++)
            so_json_num(js, NULL, c->set[d].v[i]); /* NaN becomes null: a gap */
        so_json_arr_end(js);
        so_json_obj_end(js);
    }
    so_json_arr_end(js);
    so_json_obj_end(js);
    so_json_obj_begin(js, "options");
    if (c->horizontal)
        so_json_str(js, "indexAxis", "y");
    so_json_obj_begin(js, "plugins");
    so_json_obj_begin(js, "title");
    so_json_bool(js, "display", 1);
    so_json_str(js, "text", c->title);
    so_json_obj_end(js);
    so_json_obj_end(js);
    so_json_obj_begin(js, "scales");
    json_axis(js, "x", c->xtitle, c->stacked, NULL);
    json_axis(js, "y", c->ytitle, c->stacked, NULL);
    int y2 = 0;
    for (int d = 0; d < c->nsets; d++)
        y2 |= c->set[d].y2;
    if (y2)
        json_axis(js, "y2", c->y2title, 0, "right");
    so_json_obj_end(js);
    so_json_obj_end(js);
    so_json_obj_end(js);
}

void rpt_write_json(const rpt_report *r, FILE *f)
{
    so_json js;
    so_json_init(&js, f, 0);
    so_json_obj_begin(&js, NULL);
    so_json_str(&js, "title", r->title);
    so_json_arr_begin(&js, "sections");
    for (int i = 0; i < r->n; i++) {
        const rpt_section *s = &r->s[i];
        so_json_obj_begin(&js, NULL);
        so_json_str(&js, "title", s->title);
        so_json_str(&js, "note", s->note);
        so_json_arr_begin(&js, "tables");
        for (int t = 0; t < s->ntables; t++)
            json_table(&js, &s->table[t]);
        so_json_arr_end(&js);
        so_json_arr_begin(&js, "charts");
        if (s->lanes)
            rpt_lanes_write_json(s->lanes, &js);
        for (int c = 0; c < s->ncharts; c++)
            json_chart(&js, &s->chart[c]);
        so_json_arr_end(&js);
        so_json_obj_end(&js);
    }
    so_json_arr_end(&js);
    so_json_obj_end(&js);
}
