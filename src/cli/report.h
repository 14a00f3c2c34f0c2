/* The model of a `scaleout report`: sections of tables (shared by the text
 * and the HTML output) and chart descriptions (HTML only, rendered by the
 * vendored Chart.js), built from one or more profile.json documents. */
#ifndef SCALEOUT_CLI_REPORT_H
#define SCALEOUT_CLI_REPORT_H
#include <stdio.h>

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

#define RPT_TABLES 4
#define RPT_CHARTS 3
typedef struct {
    char title[160], note[600];
    int ntables, ncharts;
    rpt_table table[RPT_TABLES];
    rpt_chart chart[RPT_CHARTS];
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

/* Text: every section's title, note and tables with aligned columns. */
void rpt_write_text(const rpt_report *r, FILE *f);
/* The report as JSON for the page script: {"title", "sections": [{"title",
 * "note", "tables": [...], "charts": [Chart.js configurations]}]}. */
void rpt_write_json(const rpt_report *r, FILE *f);

#endif
