/* `scaleout report DIR-or-JSON... [-o report.html] [--text]`: reads the
 * profile.json of one or more profiled runs and writes one self-contained
 * HTML page (Chart.js and the page script are embedded in this binary and
 * inlined into the page: no network, no install paths) or prints the same
 * tables as text. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "report.h"
#include "scaleout/err.h"
#include "scaleout/file.h"

/* Assets compiled in by cmake/embed.cmake. */
extern const unsigned char so_asset_chartjs[], so_asset_report_js[], so_asset_report_css[];
extern const size_t so_asset_chartjs_len, so_asset_report_js_len, so_asset_report_css_len;

#define MAX_RUNS 64
#define MAX_PROFILE_BYTES ((size_t)1 << 30)

typedef struct {
    const char *output;
    int text;
} report_args;

#define SUMMARY                                                                                           \
    "Reads profile.json files (or directories written by `scaleout train --profile DIR`), before or\n"    \
    "after the options (after `--` every argument is a path), and writes one self-contained HTML report\n" \
    "(-o FILE) or prints its tables (--text).\n"                                                           \
    "usage: scaleout report DIR-or-JSON... [-o report.html] [--text]"

/* Loads a profile.json (or DIR/profile.json) and checks it is one. */
static int load(const char *arg, char *path, size_t plen, so_prof_jv **doc)
{
    struct stat st;
    if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(path, plen, "%s/profile.json", arg);
    else
        snprintf(path, plen, "%s", arg);
    void *text = NULL;
    size_t n = 0;
    int rc = so_file_read_all(path, MAX_PROFILE_BYTES, &text, &n);
    if (rc)
        return rc;
    rc = so_prof_json_parse(text, n, doc);
    free(text);
    if (rc)
        return so_err(rc, "%s: not valid JSON: %s", path, so_errmsg());
    if (strcmp(so_prof_jv_str(so_prof_jv_get(*doc, "format"), ""), "scaleout-profile") ||
        so_prof_jv_len(so_prof_jv_get(*doc, "ranks")) < 1) {
        so_prof_json_free(*doc);
        *doc = NULL;
        return so_err(SO_EFORMAT, "%s: not a scaleout profile (needs \"format\": \"scaleout-profile\" and ranks)",
                      path);
    }
    return 0;
}

/* JSON inside <script>: '<' only occurs in strings, where \u003c means the
 * same, so "</script>" in a label cannot end the element. */
static void write_script_json(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] == '<')
            fputs("\\u003c", f);
        else
            fputc(s[i], f);
}

static int write_html(const rpt_report *r, const char *path)
{
    char *json = NULL;
    size_t jlen = 0;
    FILE *m = open_memstream(&json, &jlen);
    if (!m)
        return so_err(SO_ENOMEM, "out of memory");
    rpt_write_json(r, m);
    fclose(m);
    FILE *f = fopen(path, "w");
    if (!f) {
        free(json);
        return so_err(SO_EIO, "-o: cannot write '%s': %s", path, strerror(errno));
    }
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>scaleout report</title>\n"
               "<style>\n");
    fwrite(so_asset_report_css, 1, so_asset_report_css_len, f);
    fputs("</style>\n</head>\n<body>\n<h1 id=\"report-title\"></h1>\n<pre id=\"report-errors\"></pre>\n"
          "<div id=\"report\"></div>\n<footer>Written by scaleout report " SCALEOUT_VERSION
          "; charts by Chart.js (MIT license), embedded.</footer>\n<script>\n", f);
    fwrite(so_asset_chartjs, 1, so_asset_chartjs_len, f);
    fputs("\n</script>\n<script>\nwindow.REPORT = ", f);
    write_script_json(f, json, jlen);
    fputs(";\n</script>\n<script>\n", f);
    fwrite(so_asset_report_js, 1, so_asset_report_js_len, f);
    fputs("</script>\n</body>\n</html>\n", f);
    free(json);
    return fclose(f) ? so_err(SO_EIO, "-o: error writing '%s'", path) : 0;
}

/* Whether option argument `arg` (-o, --name) takes the next argument as its value. */
static int takes_value(const char *arg, const cli_opt *opts)
{
    if (!strcmp(arg, "-o"))
        return 1;
    for (; arg[0] == '-' && arg[1] == '-' && opts->name; opts++)
        if (!strcmp(arg + 2, opts->name))
            return opts->type != OPT_FLAG;
    return 0;
}

/* Splits argv into options (with their values) and paths, each in order, so
 * paths may come before or after the options. Returns the number of options;
 * argv[0..n) holds them afterwards and paths[0..*npaths) the paths. */
static int split_args(int argc, char **argv, const cli_opt *opts, char **paths, int *npaths)
{
    int nopt = 0;
    *npaths = 0;
    for (int i = 0; i < argc; i++) {
        char *arg = argv[i];
        if (!strcmp(arg, "--")) {
            while (++i < argc)
                paths[(*npaths)++] = argv[i];
        } else if (arg[0] != '-' || !arg[1]) {
            paths[(*npaths)++] = arg;
        } else {
            argv[nopt++] = arg;
            if (takes_value(arg, opts) && i + 1 < argc)
                argv[nopt++] = argv[++i];
        }
    }
    return nopt;
}

/* The report of inputs[0..nin) as a says; returns a CLI exit code. */
static int report_run(const report_args *a, char **inputs, int nin)
{
    if (nin == 0)
        return cli_error("report", CLI_USAGE, "no profile given (scaleout report DIR-or-JSON... -o FILE | --text)");
    if (nin > MAX_RUNS)
        return cli_error("report", CLI_USAGE, "%d profiles given, at most %d", nin, MAX_RUNS);
    if (!a->output && !a->text)
        return cli_error("report", CLI_USAGE, "say where the report goes: -o FILE (HTML) or --text");
    int rc = 0;
    rpt_run runs[MAX_RUNS] = {0};
    char paths[MAX_RUNS][1024];
    int loaded = 0;
    for (; !rc && loaded < nin; loaded++)
        if ((rc = load(inputs[loaded], paths[loaded], sizeof paths[0], &runs[loaded].doc)))
            break;
        else
            runs[loaded].path = inputs[loaded];
    rpt_report r = {0};
    if (!rc)
        rc = rpt_build(runs, nin, &r);
    if (!rc && a->text)
        rpt_write_text(&r, stdout);
    if (!rc && a->output)
        rc = write_html(&r, a->output);
    rpt_free(&r);
    for (int i = 0; i < loaded; i++)
        so_prof_json_free(runs[i].doc);
    if (rc)
        return cli_error("report", rc == SO_ENOMEM ? CLI_FAIL : CLI_USAGE, "%s", so_errmsg());
    return CLI_OK;
}

int cmd_report(int argc, char **argv)
{
    report_args a = {0};
    const cli_opt opts[] = {
        {"output", OPT_STR, &a.output, "FILE", "HTML file to write (-o)", 0, -1, NULL},
        {"text", OPT_FLAG, &a.text, NULL, "print the tables on stdout", 0, -1, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    static const char *const aliases[][2] = {{"-o", "--output"}, {NULL, NULL}};
    char **inputs = malloc((size_t)(argc > 0 ? argc : 1) * sizeof *inputs);
    if (!inputs)
        return cli_error("report", CLI_FAIL, "out of memory");
    int nin = 0, nopt = split_args(argc, argv, opts, inputs, &nin);
    cli_short_aliases(nopt, argv, aliases);
    int rc = cli_parse("report", SUMMARY, opts, nopt, argv);
    if (!rc)
        rc = report_run(&a, inputs, nin);
    free(inputs);
    return rc == CLI_HELP ? CLI_OK : rc;
}
