/* The model of a `scaleout report`: sections of tables (shared by the text
 * and the HTML output) and chart descriptions (HTML only, rendered by the
 * vendored Chart.js), built from one or more profile.json documents. */
#ifndef SCALEOUT_CLI_REPORT_H
#define SCALEOUT_CLI_REPORT_H
#include <stdio.h>

#include "scaleout/json.h"
#include "scaleout/prof.h"

#define RPT_COLS 14
#define RPT_CELL 48
#define RPT_SETS 4

typedef struct {
    char caption[160];
    int ncols;
    char cols[RPT_COLS][RPT_CELL];
    int nrows, cap;
    char (*rows)[RPT_COLS][RPT_CELL];
} rpt_table;

/* A bar or line chart over string labels; datasets may use a second y axis. */
typedef struct {
    char title[160], type[8];       /* "bar" or "line" */
    int horizontal, stacked;
    char xtitle[64], ytitle[64], y2title[64];
    int nlabels;
    char (*labels)[RPT_CELL];
    int nsets;
    struct {
        char label[64], type[8];    /* type "" = the chart's */
        int y2;                     /* on the right axis */
        double *v;                  /* nlabels values (NaN = gap) */
    } set[RPT_SETS];
} rpt_chart;

/* A measured schedule drawn as lanes (one per rank) of bars on a time axis
 * in ms: profile.json's "pipeline_schedule" (report_lanes.c). */
typedef struct {
    int lane;
    char kind;          /* 'F' forward, 'B' backward, 'C' comm wait, 'O' optimizer */
    char label[16];     /* "F3", "B3c1" (micro-batch 3, chunk 1), "" */
    double t0, t1;
} rpt_bar;

typedef struct {
    char title[160];
    int nlanes;
    char lanes[16][RPT_CELL];
    int nbars, cap;
    rpt_bar *bars;
    double t_end;       /* ms: the axis's end */
} rpt_lanes;
#define RPT_LANES 16    /* lanes drawn; more ranks show replica 0's stages */

#define RPT_TABLES 4
#define RPT_CHARTS 3
typedef struct {
    char title[160], note[600];
    int ntables, ncharts;
    rpt_table table[RPT_TABLES];
    rpt_chart chart[RPT_CHARTS];
    rpt_lanes *lanes;   /* NULL: none; drawn before the charts */
} rpt_section;

typedef struct {
    char title[200];
    int n, cap;
    rpt_section *s;
} rpt_report;

/* One loaded profile: its path (for labels) and parsed document. */
typedef struct {
    const char *path;
    so_prof_jv *doc;
} rpt_run;

/* Builds the report of n runs (n >= 1). 0 or SO_ENOMEM. */
int rpt_build(const rpt_run *runs, int n, rpt_report *out);
void rpt_free(rpt_report *r);

/* The lanes of a "pipeline_schedule" object; NULL when it has no spans or
 * out of memory. Lanes are ranks ordered by replica and stage. */
rpt_lanes *rpt_lanes_from_json(const so_prof_jv *sched);
/* Text: one row of ~100 columns per lane, a time axis and a legend. */
void rpt_lanes_write_text(const rpt_lanes *l, FILE *f);
/* A Chart.js floating-bar configuration (the page script labels the bars). */
void rpt_lanes_write_json(const rpt_lanes *l, so_json *js);

/* Text: every section's title, note and tables with aligned columns. */
void rpt_write_text(const rpt_report *r, FILE *f);
/* The report as JSON for the page script: {"title", "sections": [{"title",
 * "note", "tables": [...], "charts": [Chart.js configurations]}]}. */
void rpt_write_json(const rpt_report *r, FILE *f);

#endif
