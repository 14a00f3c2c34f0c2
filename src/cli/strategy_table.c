/* `plan --strategy` / `predict --strategy` (strategy_table.h): what each
 * strategy holds per rank and how long its step takes, from the library's
 * own accounting and simulation; this file only chooses and prints. */
#include "strategy_table.h"

#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "scaleout/err.h"
#include "scaleout/job.h"
#include "scaleout/zoo.h"
#ifdef SCALEOUT_HAVE_MPI
#include "scaleout/comm.h"
#endif

int strat_parse(const char *list, const so_strategy_kind **kinds, int *n)
{
    *n = 0;
    if (!strcmp(list, "all")) {
        for (const so_strategy_kind *k; (k = so_strategy_kind_at(*n)) && *n < STRAT_MAX;)
            kinds[(*n)++] = k;
        return 0;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *name = strtok_r(buf, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        if (*n == STRAT_MAX)
            return so_err(SO_EINVAL, "--strategy: at most %d strategies", STRAT_MAX);
        int rc = so_strategy_lookup(name, &kinds[*n]);
        if (rc)
            return rc;
        (*n)++;
    }
    return *n ? 0 : so_err(SO_EINVAL, "--strategy: no strategy named in '%s'", list);
}

int strat_rows(const strat_query *q, const so_strategy_kind *const *kinds, int n, strat_row *rows, int *best)
{
    *best = -1;
    for (int i = 0; i < n; i++) {
        strat_row *r = &rows[i];
        *r = (strat_row){.name = kinds[i]->name, .activations = q->act_bytes};
        int rc = so_predict_strategy(q->c, kinds[i], q->sc, q->world, q->nslots, q->cost, q->ctx, &r->p);
        if (rc)
            return rc;
        r->total = r->p.mem.params + r->p.mem.grads + r->p.mem.optimizer + r->p.mem.messages + r->activations;
        r->fits = !(q->max_bytes > 0) || r->total <= q->max_bytes;
        if (r->fits && (*best < 0 || r->p.step_seconds < rows[*best].p.step_seconds))
            *best = i;
    }
    return 0;
}

void strat_print(const strat_query *q, const strat_row *rows, int n, int best)
{
    printf("%-7s %11s %11s %11s %11s %11s %5s %9s %9s %9s %9s\n", "strategy", "weights MB", "grads MB",
           "optim MB", "act MB", "total MB", "fits", "step s", "comm s", "exposed s", "img/s");
    for (int i = 0; i < n; i++) {
        const strat_row *r = &rows[i];
        printf("%-7s %11.1f %11.1f %11.1f %11.1f %11.1f %5s %9.4f %9.4f %9.4f %9.1f\n", r->name,
               r->p.mem.params / 1e6, r->p.mem.grads / 1e6, r->p.mem.optimizer / 1e6, r->activations / 1e6,
               r->total / 1e6, r->fits ? "yes" : "no", r->p.step_seconds, r->p.comm_seconds,
               r->p.comm_exposed_seconds, r->p.images_per_sec);
    }
    if (best >= 0)
        printf("fastest that fits%s: %s (%.4f s per step, %.1f MB per rank)\n",
               q->max_bytes > 0 ? " --max-memory" : "", rows[best].name, rows[best].p.step_seconds,
               rows[best].total / 1e6);
    else
        printf("none fits --max-memory %.1f MB per rank\n", q->max_bytes / 1e6);
}

void strat_print_scale(int nodes, int ranks, const strat_row *rows, int n, int best, int header)
{
    if (header)
        printf("%7s %7s %-8s %11s %5s %10s %12s %10s  %s\n", "nodes", "ranks", "strategy", "MB/rank", "fits",
               "step ms", "images/s", "exposed ms", "fastest that fits");
    for (int i = 0; i < n; i++) {
        const strat_row *r = &rows[i];
        printf("%7d %7d %-8s %11.1f %5s %10.2f %12.1f %10.2f  %s\n", nodes, ranks, r->name, r->total / 1e6,
               r->fits ? "yes" : "no", r->p.step_seconds * 1e3, r->p.images_per_sec, r->p.comm_exposed_seconds * 1e3,
               i == best ? "<-" : "");
    }
}

void strat_json(so_json *js, const strat_row *rows, int n, int best)
{
    so_json_arr_begin(js, "strategies");
    for (int i = 0; i < n; i++) {
        const strat_row *r = &rows[i];
        so_json_obj_begin(js, NULL);
        so_json_str(js, "strategy", r->name);
        so_json_num(js, "weights", r->p.mem.params);
        so_json_num(js, "gradients", r->p.mem.grads);
        so_json_num(js, "optimizer", r->p.mem.optimizer);
        so_json_num(js, "messages", r->p.mem.messages);
        so_json_num(js, "activations", r->activations);
        so_json_num(js, "total", r->total);
        so_json_bool(js, "fits", r->fits);
        so_json_num(js, "step_seconds", r->p.step_seconds);
        so_json_num(js, "comm_seconds", r->p.comm_seconds);
        so_json_num(js, "comm_exposed_seconds", r->p.comm_exposed_seconds);
        so_json_num(js, "images_per_sec", r->p.images_per_sec);
        so_json_int(js, "units", r->p.units);
        so_json_obj_end(js);
    }
    so_json_arr_end(js);
    if (best >= 0)
        so_json_str(js, "fastest_that_fits", rows[best].name);
    else
        so_json_null(js, "fastest_that_fits");
}

/* ---- scaleout plan --strategy ----------------------------------------------------- */

typedef struct {
    int world, rpn;
    const void *table;           /* so_comm_tuning of --tune (NULL: the built-in model) */
} plan_cost;

/* One allreduce over the plan's ranks: the comm layer's cost model of the
 * algorithm `auto` picks (one node, or nodes of --ranks-per-node). */
static double allreduce_cost(void *ctx, size_t bytes)
{
    const plan_cost *c = ctx;
#ifdef SCALEOUT_HAVE_MPI
    return so_comm_predict(SO_ALLREDUCE_AUTO, bytes, c->world, c->rpn, c->table);
#else /* a shared-memory ring: 2 (p-1) steps of 2 us and 2 (p-1)/p of the bytes at 5 GB/s */
    double p = c->world;
    return 2 * (p - 1) * 2e-6 + 2 * (p - 1) / p * (double)bytes / 5e9;
#endif
}

static int optim_nslots(const char *name, int *n)
{
    so_optim_kind kind;
    so_optim_config oc;
    so_optim *o = NULL;
    int rc = so_optim_parse(name, &kind);
    if (!rc) {
        so_optim_defaults(&oc, kind);
        rc = so_optim_create(&oc, 1, &o);
    }
    *n = rc ? 0 : so_optim_nslots(o);
    so_optim_destroy(o);
    return rc;
}

/* How much slower a rank computes than measured here when a node's ranks x
 * threads outnumber its cores (*cores; 1: they do not): the ranks
 * take turns on the cores. VGG-16 b2 at np 4 on 2 cores steps in 2.0 s
 * where its layers timed alone add up to 1.1 s. */
static double core_sharing(const strat_plan_args *a, int ranks_on_node, long *cores)
{
    *cores = a->cores > 0 ? a->cores : sysconf(_SC_NPROCESSORS_ONLN);
    long want = (long)ranks_on_node * (a->threads > 0 ? a->threads : 1);
    return *cores > 0 && want > *cores ? (double)want / (double)*cores : 1;
}

static void scale_layer_times(so_job_layer_times *lt, double k)
{
    for (int i = 0; i < lt->n; i++) {
        lt->t_fwd[i] *= k;
        lt->t_bwd[i] *= k;
    }
    lt->t_other *= k;
}

static int write_plan_json(const strat_plan_args *a, const so_job_layer_times *lt, const strat_row *rows, int n,
                           int best, int seq_len, double sharing)
{
    FILE *f = fopen(a->json, "w");
    if (!f)
        return cli_error("plan", CLI_USAGE, "--json: cannot write '%s'", a->json);
    so_json js;
    so_json_init(&js, f, 1);
    so_json_obj_begin(&js, NULL);
    so_json_str(&js, "kind", "plan-strategies");
    so_json_str(&js, "model", a->model);
    so_json_int(&js, "world", a->world);
    so_json_int(&js, "batch_size", a->batch);
    if (seq_len)
        so_json_int(&js, "seq_len", seq_len);
    so_json_str(&js, "optimizer", a->optimizer);
    so_json_num(&js, "max_memory", a->max_bytes);
    so_json_int(&js, "measured_batch", lt->measured_batch);
    so_json_num(&js, "compute_slowdown_sharing_cores", sharing);
    strat_json(&js, rows, n, best);
    so_json_obj_end(&js);
    return fclose(f) ? cli_error("plan", CLI_FAIL, "--json: error writing '%s'", a->json) : CLI_OK;
}

int strat_plan(const strat_plan_args *a)
{
    const so_strategy_kind *kinds[STRAT_MAX];
    int nk = 0, nslots = 0, rc = strat_parse(a->strategies, kinds, &nk);
    if (!rc)
        rc = optim_nslots(a->optimizer, &nslots);
    if (rc)
        return cli_error("plan", CLI_USAGE, "%s", so_errmsg());
    plan_cost pc = {a->world, a->ranks_per_node > 0 && a->ranks_per_node < a->world ? a->ranks_per_node : 0, NULL};
#ifdef SCALEOUT_HAVE_MPI
    so_comm_tuning table;
    if (a->tune && so_comm_tuning_load(a->tune, &table))
        return cli_error("plan", CLI_USAGE, "--tune: %s", so_errmsg());
    pc.table = a->tune ? &table : NULL;
#endif
    so_job_config c;
    so_job_defaults(&c);
    c.model = a->model;
    c.threads = a->threads;
    c.optimizer = a->optimizer;
    if (a->seq_len)
        c.seq_len = a->seq_len;
    so_job_measure_config mc = {.batch = a->batch, .run = {.warmup = 1, .steps = a->steps, .max_seconds = 4},
                                .progress = cli_measure_progress, .progress_ctx = (void *)"plan"};
    so_job_layer_times lt;
    if ((rc = so_job_measure_model(&c, &mc, &lt)))
        return cli_error("plan", cli_exit_code(rc), "measuring %s: %s", a->model, so_errmsg());
    long cores;
    double sharing = core_sharing(a, pc.rpn ? pc.rpn : a->world, &cores);
    scale_layer_times(&lt, sharing);
    so_graph *g = NULL;
    strat_row rows[STRAT_MAX];
    int best = -1;
    so_strategy_config sc = a->sc;
    sc.accumulate = a->accumulate;
    rc = so_job_model_graph(&c, &g); /* the shape measured: a GPT-2 at --seq-len */
    so_predict_compute pcmp = {g, lt.t_fwd, lt.t_bwd, lt.t_other, a->batch, sc.first_bucket_bytes, sc.bucket_bytes};
    strat_query q = {&pcmp, a->world, nslots, lt.act_bytes, a->max_bytes, &sc, allreduce_cost, &pc};
    if (!rc)
        rc = strat_rows(&q, kinds, nk, rows, &best);
    if (rc) {
        rc = cli_error("plan", cli_exit_code(rc), "%s", so_errmsg());
    } else {
        int T = so_graph_takes_tokens(g) ? so_graph_input_shape(g).h : 0; /* a GPT-2's sequences */
        char seqs[48] = "";
        if (T)
            snprintf(seqs, sizeof seqs, " (sequences of %d tokens)", T);
        printf("%s on %d rank(s)%s, batch %d%s per rank, %s: memory per rank (the trainer's accounting; activations "
               "measured at batch %d) and time per step (layers timed here, collectives by the cost model)\n",
               a->model, a->world, pc.rpn ? " (nodes of --ranks-per-node)" : " on one node", a->batch, seqs, a->optimizer,
               lt.measured_batch);
        if (sharing > 1)
            printf("%d rank(s) x %d thread(s) per node share %ld core(s): the layers' times are %.2fx those measured\n",
                   pc.rpn ? pc.rpn : a->world, a->threads > 0 ? a->threads : 1, cores, sharing);
        strat_print(&q, rows, nk, best);
        if (a->json)
            rc = write_plan_json(a, &lt, rows, nk, best, T, sharing);
    }
    so_graph_destroy(g);
    so_job_layer_times_free(&lt);
    return rc;
}
