/* Table-driven option parsing for every subcommand (see cli.h). Unknown
 * flags, missing values, non-numbers and out-of-range values are errors that
 * name the flag; nothing is silently ignored. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "scaleout/err.h"

int cli_error(const char *cmd, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "scaleout %s: %s\n", cmd, msg);
    return code;
}

static const cli_opt *find(const cli_opt *opts, const char *name, size_t len)
{
    for (; opts->name; opts++)
        if (strlen(opts->name) == len && !strncmp(opts->name, name, len))
            return opts;
    return NULL;
}

static int in_range(const cli_opt *o, double v) { return o->min > o->max || (v >= o->min && v <= o->max); }

static int set_number(const char *cmd, const cli_opt *o, const char *v)
{
    char *end;
    errno = 0;
    if (o->type == OPT_FLOAT) {
        double d = strtod(v, &end);
        if (end == v || *end || errno || !isfinite(d))
            return cli_error(cmd, CLI_USAGE, "--%s: '%s' is not a number", o->name, v);
        if (!in_range(o, d))
            return cli_error(cmd, CLI_USAGE, "--%s: %s is outside [%g, %g]", o->name, v, o->min, o->max);
        *(float *)o->dst = (float)d;
        return 0;
    }
    long long n = strtoll(v, &end, 10);
    if (end == v || *end || errno)
        return cli_error(cmd, CLI_USAGE, "--%s: '%s' is not an integer", o->name, v);
    if (!in_range(o, (double)n))
        return cli_error(cmd, CLI_USAGE, "--%s: %s is outside [%.0f, %.0f]", o->name, v, o->min, o->max);
    if (o->type == OPT_INT)
        *(int *)o->dst = (int)n;
    else
        *(long *)o->dst = (long)n;
    return 0;
}

static int set_value(const char *cmd, const cli_opt *o, const char *v)
{
    if (o->type == OPT_STR) {
        if (!*v)
            return cli_error(cmd, CLI_USAGE, "--%s: empty value", o->name);
        *(const char **)o->dst = v;
        return 0;
    }
    if (o->type == OPT_CHOICE) {
        for (const char *const *c = o->choices; *c; c++)
            if (!strcmp(*c, v)) {
                *(const char **)o->dst = *c;
                return 0;
            }
        char list[256] = "";
        for (const char *const *c = o->choices; *c; c++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", c == o->choices ? "" : ", ", *c);
        return cli_error(cmd, CLI_USAGE, "--%s: unknown value '%s' (choose from %s)", o->name, v, list);
    }
    return set_number(cmd, o, v);
}

int cli_parse(const char *cmd, const char *summary, const cli_opt *opts, int argc, char **argv)
{
    return cli_parse_seen(cmd, summary, opts, argc, argv, NULL);
}

int cli_parse_seen(const char *cmd, const char *summary, const cli_opt *opts, int argc, char **argv,
                   unsigned char *seen)
{
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            cli_usage(stdout, cmd, summary, opts);
            return CLI_HELP;
        }
        if (strncmp(arg, "--", 2) != 0)
            return cli_error(cmd, CLI_USAGE, "unexpected argument '%s' (see --help)", arg);
        const char *name = arg + 2, *eq = strchr(name, '=');
        const cli_opt *o = find(opts, name, eq ? (size_t)(eq - name) : strlen(name));
        if (!o)
            return cli_error(cmd, CLI_USAGE, "unknown option '%s' (see --help)", arg);
        if (seen)
            seen[o - opts] = 1;
        if (o->type == OPT_FLAG) {
            if (eq)
                return cli_error(cmd, CLI_USAGE, "--%s takes no value", o->name);
            *(int *)o->dst = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v)
            return cli_error(cmd, CLI_USAGE, "--%s needs a value", o->name);
        int rc = set_value(cmd, o, v);
        if (rc)
            return rc;
    }
    return CLI_OK;
}

static void print_default(FILE *f, const cli_opt *o)
{
    switch (o->type) {
    case OPT_INT: fprintf(f, " (default %d)", *(int *)o->dst); break;
    case OPT_LONG: fprintf(f, " (default %ld)", *(long *)o->dst); break;
    case OPT_FLOAT: fprintf(f, " (default %g)", *(float *)o->dst); break;
    case OPT_STR:
    case OPT_CHOICE:
        if (*(const char **)o->dst)
            fprintf(f, " (default %s)", *(const char **)o->dst);
        break;
    case OPT_FLAG: break;
    }
}

void cli_usage(FILE *f, const char *cmd, const char *summary, const cli_opt *opts)
{
    fprintf(f, "usage: scaleout %s [options]\n\n%s\n\noptions:\n", cmd, summary);
    for (; opts->name; opts++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", opts->name, opts->meta ? " " : "", opts->meta ? opts->meta : "");
        fprintf(f, "  %-26s %s", left, opts->help);
        if (opts->type == OPT_CHOICE) {
            fputs(" [", f);
            for (const char *const *c = opts->choices; *c; c++)
                fprintf(f, "%s%s", c == opts->choices ? "" : "|", *c);
            fputs("]", f);
        }
        print_default(f, opts);
        fputc('\n', f);
    }
}

int cli_check_needs(const char *cmd, const cli_opt *opts, const unsigned char *seen, const cli_need *needs,
                    const void *args)
{
    for (const cli_need *n = needs; n->flag; n++) {
        const cli_opt *o = find(opts, n->flag, strlen(n->flag));
        if (o && seen[o - opts] && !n->met(args))
            return cli_error(cmd, CLI_USAGE, "--%s does nothing without %s", n->flag, n->what);
    }
    return CLI_OK;
}

int cli_parse_max_memory(const char *cmd, const char *arg, size_t *bytes)
{
    if (cli_parse_bytes(arg, bytes) || *bytes == 0)
        return cli_error(cmd, CLI_USAGE, "--max-memory: '%s' is not a size above 0 like 512M or 2G (leave the flag "
                         "out for no cap)", arg);
    return CLI_OK;
}

int cli_exit_code(int so_rc)
{
    return so_rc == SO_EINVAL || so_rc == SO_EIO || so_rc == SO_EFORMAT ? CLI_USAGE : CLI_FAIL;
}

int cli_parse_bucket_mb(const char *cmd, const char *arg, double *mb)
{
    if (!strcmp(arg, "auto")) {
        *mb = -1;
        return CLI_OK;
    }
    char *end;
    *mb = strtod(arg, &end);
    if (*end || end == arg || !(*mb >= 0.001 && *mb <= 4096))
        return cli_error(cmd, CLI_USAGE, "--bucket-mb: '%s' is not auto or a size in [0.001, 4096] MiB", arg);
    return CLI_OK;
}
