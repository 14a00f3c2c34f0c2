/* `scaleout tune`: measures every allreduce algorithm over a size sweep on
 * this machine and process layout, fits the alpha-beta model per algorithm
 * and per size band (gamma measured locally), and writes the tuning table
 * `auto` reads (--tuning / SCALEOUT_TUNING; format in docs/COLLECTIVES.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "scaleout/err.h"

#ifdef SCALEOUT_HAVE_MPI
#include "coll_bufs.h"
#include "scaleout/comm.h"
#endif

#ifndef SCALEOUT_HAVE_MPI
int cmd_tune(int argc, char **argv)
{
    (void)argc, (void)argv;
    return cli_error("tune", CLI_FAIL, "this build has no MPI (configure with -DSCALEOUT_MPI=ON)");
}
#else

#define NALGO SO_ALLREDUCE_AUTO
#define MAX_SIZES 40

#define MAX_EDGES (SO_TUNING_MAX_BANDS - 1)
#define MAX_REPEAT 15

typedef struct {
    const char *out, *range, *edges;
    int rpn, iters, repeat, plain, levels;
} tune_opts;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Mean seconds per allreduce across ranks for every (size, algorithm),
 * algorithms interleaved per size; with --repeat R the median of R such
 * rounds (the rounds alternate the algorithm order). */
static int measure(so_comm *c, const tune_opts *o, const size_t *sizes, int ns, double t[][NALGO])
{
    size_t maxc = sizes[ns - 1] / sizeof(float) + 1;
    float *send, *recv;
    /* Registered by default: the trainer's gradients live there (hier then runs
     * zero-copy); a table measured on plain memory describes hier's copy path. */
    int rc = coll_bufs_alloc(c, maxc * sizeof(float), !o->plain, &send, &recv);
    for (int i = 0; i < ns && !rc; i++) {
        size_t count = sizes[i] / sizeof(float) ? sizes[i] / sizeof(float) : 1;
        /* The same counts as `bench` (256 MiB per batch, 10..1000 runs, a tenth
         * as warm-up), so the fit and the benchmark time the same thing. */
        double n = (double)(256 << 20) / (double)sizes[i];
        int iters = o->iters > 0 ? o->iters : n > 1000 ? 1000 : n < 10 ? 10 : (int)n;
        int warm = iters / 10 > 2 ? iters / 10 : 2;
        double rep[NALGO][MAX_REPEAT];
        for (int r = 0; r < o->repeat && !rc; r++)
            for (int j = 0; j < NALGO && !rc; j++) {
                int a = r & 1 ? NALGO - 1 - j : j;
                double s = 0;
                rc = so_comm_time_coll(c, SO_COLL_ALLREDUCE, a, send, recv, count, 0, warm, iters, &s);
                if (!rc)
                    rc = so_comm_allreduce_double(c, &s, 1, SO_REDUCE_AVG);
                rep[a][r] = s;
            }
        for (int a = 0; a < NALGO && !rc; a++) {
            qsort(rep[a], (size_t)o->repeat, sizeof(double), cmp_double);
            t[i][a] = rep[a][o->repeat / 2];
        }
    }
    coll_bufs_free(c, !o->plain, send, recv);
    return rc;
}

/* --band-edges "16K,64K,..." into ascending edges[]; the count or -1. */
static int parse_edges(const char *s, uint64_t *edges)
{
    char buf[256], *save = NULL;
    int n = 0;
    snprintf(buf, sizeof buf, "%s", s);
    if (!strcmp(buf, "none"))
        return 0;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t v;
        if (n == MAX_EDGES || cli_parse_bytes(tok, &v) || !v || (n && v <= edges[n - 1]))
            return -1;
        edges[n++] = v;
    }
    return n;
}

/* Rules from the fastest algorithm per size; neighbouring sizes with the same
 * winner merge; the last rule has no limit. */
static void make_rules(so_comm_tuning *tab, const size_t *sizes, int ns, double t[][NALGO])
{
    tab->nrules = 0;
    for (int i = 0; i < ns; i++) {
        int best = 0;
        for (int a = 1; a < NALGO; a++)
            if (t[i][a] < t[i][best])
                best = a;
        if (tab->nrules && tab->rule[tab->nrules - 1].algo == (so_allreduce_algo)best)
            tab->rule[tab->nrules - 1].max_bytes = sizes[i];
        else if (tab->nrules < SO_TUNING_MAX_RULES) {
            tab->rule[tab->nrules].max_bytes = sizes[i];
            tab->rule[tab->nrules++].algo = (so_allreduce_algo)best;
        }
    }
    if (tab->nrules)
        tab->rule[tab->nrules - 1].max_bytes = UINT64_MAX;
}

/* Fits every algorithm's line and bands from t (p ranks, rpn as in comm.h). */
static void fit_all(so_comm_fit *fits, int p, int rpn, double gamma, const size_t *sizes, int ns,
                    double t[][NALGO], const uint64_t *edges, int nedges)
{
    for (int k = 0; k < NALGO && p > 1; k++) {
        size_t by[MAX_SIZES];
        double se[MAX_SIZES];
        for (int i = 0; i < ns; i++)
            by[i] = sizes[i], se[i] = t[i][k];
        if (so_comm_fit_bands((so_allreduce_algo)k, p, rpn, gamma, by, se, ns, edges, nedges, &fits[k]))
            fits[k].valid = 0;
    }
}

/* --levels: the same sweep on this rank's node group (all nodes at once, as
 * in training) and on the node leaders (one rank per node); rank 0's fits,
 * broadcast, go into the table. A level with one rank is left out. */
static int measure_levels(so_comm *c, const tune_opts *o, const size_t *sizes, int ns, const uint64_t *edges,
                          int nedges, so_comm_tuning *tab)
{
    so_comm *groups[SO_LEVELS] = {so_comm_node_group(c), so_comm_leaders_group(c)};
    int rpns[SO_LEVELS] = {0, 1}; /* node: one node holds the group; link: a rank per node */
    double (*t)[NALGO] = calloc(MAX_SIZES, sizeof *t);
    int rc = t ? 0 : so_err(SO_ENOMEM, "out of memory");
    for (int l = 0; l < SO_LEVELS && !rc; l++) {
        so_comm_level *lv = &tab->level[l];
        int p = groups[l] ? so_comm_size(groups[l]) : 0;
        if (p > 1 && !(rc = measure(groups[l], o, sizes, ns, t))) {
            fit_all(lv->fit, p, rpns[l], tab->gamma, sizes, ns, t, edges, nedges);
            lv->valid = 1;
            lv->p = p;
        }
        if (!rc) /* rank 0 is in both groups: its level decides */
            rc = so_comm_bcast_bytes(c, lv, sizeof *lv, 0);
    }
    free(t);
    return rc;
}

/* Sizes of algorithm a whose model time is within +-25 % of the measurement. */
static int within25(const so_comm_tuning *tab, int a, const size_t *sizes, int ns, double t[][NALGO])
{
    int ok = 0;
    for (int i = 0; i < ns; i++) {
        double pr = so_comm_predict((so_allreduce_algo)a, sizes[i], tab->p, tab->ranks_per_node, tab);
        ok += fabs(pr / t[i][a] - 1) <= 0.25;
    }
    return ok;
}

static void print_fit(const so_comm_tuning *tab, int a, int in_line, int in_bands, int ns)
{
    const so_comm_fit *f = &tab->fit[a];
    printf("  %-14s %12.3f %14.5f %14.2f   line %2d/%d, bands %2d/%d within 25%%\n",
           so_allreduce_algo_name((so_allreduce_algo)a), f->alpha * 1e6, f->beta * 1e9,
           f->beta > 0 ? 1e-9 / f->beta : 0, in_line, ns, in_bands, ns);
    for (int k = 0; k < f->nbands; k++) {
        char lim[32];
        if (k == f->nbands - 1)
            snprintf(lim, sizeof lim, "<= *");
        else
            snprintf(lim, sizeof lim, "<= %llu", (unsigned long long)f->band[k].max_bytes);
        printf("    band %-12s %10.3f %14.5f %14.2f\n", lim, f->band[k].alpha * 1e6, f->band[k].beta * 1e9,
               1e-9 / f->band[k].beta);
    }
}

static void report(const so_comm_tuning *tab, const int *in_line, const size_t *sizes, int ns, double t[][NALGO])
{
    printf("# scaleout tune: p=%d ranks_per_node=%d gamma=%.3e s/B (%.2f GB/s reduce)\n", tab->p,
           tab->ranks_per_node, tab->gamma, 1e-9 / tab->gamma);
    uint64_t zc, copied;
    so_comm_hier_path_counts(&zc, &copied);
    printf("# measured on %s; hier above the small-message size: %llu zero-copy calls, %llu through the window\n",
           tab->registered ? "registered buffers (so_comm_buf_alloc), like the trainer's gradients"
                           : "plain memory (--plain)",
           (unsigned long long)zc, (unsigned long long)copied);
    printf("# %-14s %12s %14s %14s   in-sample: sizes within 25%% (one line / bands)\n", "algorithm",
           "alpha(us)", "beta(ns/B)", "1/beta(GB/s)");
    for (int a = 0; a < NALGO; a++)
        print_fit(tab, a, in_line[a], within25(tab, a, sizes, ns, t), ns);
    printf("# %10s", "size(B)");
    for (int a = 0; a < NALGO; a++)
        printf(" %14s", so_allreduce_algo_name((so_allreduce_algo)a));
    printf("   (measured us / banded model error)\n");
    for (int i = 0; i < ns; i++) {
        printf("  %10zu", sizes[i]);
        for (int a = 0; a < NALGO; a++) {
            double pr = so_comm_predict((so_allreduce_algo)a, sizes[i], tab->p, tab->ranks_per_node, tab);
            printf(" %8.1f %+4.0f%%", t[i][a] * 1e6, (pr / t[i][a] - 1) * 100);
        }
        printf("\n");
    }
}

int cmd_tune(int argc, char **argv)
{
    tune_opts o = {"scaleout.tune", "4:16M", "4K,16K,64K,256K,2M,16M,32M", 0, 0, 1, 0, 0};
    const cli_opt opts[] = {
        {"out", OPT_STR, &o.out, "FILE", "where to write the tuning table", 0, -1, NULL},
        {"message-size", OPT_STR, &o.range, "MIN:MAX", "size sweep in bytes, doubling (-m)", 0, -1, NULL},
        {"ranks-per-node", OPT_INT, &o.rpn, "K", "emulate nodes of K ranks (0 = real nodes)", 0, 1e6, NULL},
        {"iterations", OPT_INT, &o.iters, "N", "timed runs per size and algorithm (-i; 0 = auto)", 0, 1e6, NULL},
        {"repeat", OPT_INT, &o.repeat, "R", "rounds per size; the median counts", 1, MAX_REPEAT, NULL},
        {"plain", OPT_FLAG, &o.plain, NULL,
         "measure on plain memory (hier's copy path) instead of registered buffers like the trainer's gradients",
         0, -1, NULL},
        {"band-edges", OPT_STR, &o.edges, "A,B,..", "candidate size-band edges of the fit (none = one line)", 0, -1,
         NULL},
        {"levels", OPT_FLAG, &o.levels, NULL,
         "also fit each level apart: within a node (its ranks) and between nodes (one rank per node), for predict",
         0, -1, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    static const char *const aliases[][2] = {{"-m", "--message-size"}, {"-i", "--iterations"}, {NULL, NULL}};
    cli_short_aliases(argc, argv, aliases);
    int rc = cli_parse("tune", "Measures every allreduce algorithm, fits the cost model and writes the "
                               "table `--allreduce auto` uses; run under mpirun with the job's layout.",
                       opts, argc, argv);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    char lo[64], *hi;
    size_t a, b, sizes[MAX_SIZES];
    int ns = 0;
    snprintf(lo, sizeof lo, "%s", o.range);
    if (!(hi = strchr(lo, ':')) || (*hi++ = 0, cli_parse_bytes(lo, &a)) || cli_parse_bytes(hi, &b) || !a || b < a)
        return cli_error("tune", CLI_USAGE, "--message-size: want MIN:MAX in bytes, got '%s'", o.range);
    for (size_t s = a; s <= b && ns < MAX_SIZES; s *= 2)
        sizes[ns++] = s;
    uint64_t edges[MAX_EDGES];
    int nedges = parse_edges(o.edges, edges);
    if (nedges < 0)
        return cli_error("tune", CLI_USAGE, "--band-edges: want at most %d ascending sizes, got '%s'", MAX_EDGES,
                         o.edges);
    so_comm *c;
    if (so_comm_init(NULL, NULL, &c))
        so_comm_abort(NULL, CLI_FAIL, so_errmsg());
    if (so_comm_set_ranks_per_node(c, o.rpn))
        so_comm_abort(c, CLI_FAIL, so_errmsg());
    so_comm_tuning tab;
    so_comm_tuning_default(&tab);
    tab.p = so_comm_size(c);
    tab.ranks_per_node = o.rpn;
    tab.registered = !o.plain;
    tab.gamma = so_comm_reduce_gamma(16 << 20);
    /* Every rank must hold the same table: rank 0's gamma decides. */
    if (so_comm_bcast_bytes(c, &tab.gamma, sizeof tab.gamma, 0))
        so_comm_abort(c, CLI_FAIL, so_errmsg());
    double (*t)[NALGO] = calloc(MAX_SIZES, sizeof *t);
    if (!t || measure(c, &o, sizes, ns, t))
        so_comm_abort(c, CLI_FAIL, t ? so_errmsg() : "out of memory");
    int in_line[NALGO] = {0};
    fit_all(tab.fit, tab.p, o.rpn, tab.gamma, sizes, ns, t, edges, nedges);
    for (int k = 0; k < NALGO; k++)
        if (tab.fit[k].valid) {
            int nb = tab.fit[k].nbands; /* the single line's score, for the report */
            tab.fit[k].nbands = 0;
            in_line[k] = within25(&tab, k, sizes, ns, t);
            tab.fit[k].nbands = nb;
        }
    make_rules(&tab, sizes, ns, t);
    if (o.levels && measure_levels(c, &o, sizes, ns, edges, nedges, &tab))
        so_comm_abort(c, CLI_FAIL, so_errmsg());
    rc = CLI_OK;
    if (so_comm_rank(c) == 0) {
        report(&tab, in_line, sizes, ns, t);
        for (int l = 0; l < SO_LEVELS; l++)
            if (tab.level[l].valid)
                printf("# level %s: %d ranks measured apart (fits in the file)\n", l ? "link" : "node", tab.level[l].p);
        if (so_comm_tuning_save(&tab, o.out)) {
            fprintf(stderr, "scaleout tune: %s\n", so_errmsg());
            rc = CLI_FAIL;
        } else {
            printf("# wrote %s\n", o.out);
        }
    }
    free(t);
    so_comm_finalize(c);
    return rc;
}
#endif
