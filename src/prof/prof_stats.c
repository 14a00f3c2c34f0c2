/* Communication statistics (per collective, algorithm and use, with a table
 * by power-of-two message size, like OSU DeepIntrospect), the POP
 * multiplicative metrics, and one rank's statistics as JSON. */
#include "prof_internal.h"

#include <math.h>
#include <string.h>

#include "scaleout/cpu.h"
#include "scaleout/json.h"
#include "scaleout/threads.h"

int prof_size_bin(uint64_t bytes)
{
    int k = 0;
    while (k < PROF_NBINS - 1 && ((uint64_t)1 << k) < bytes)
        k++;
    return k;
}

static prof_cstat *find_stat(so_prof *p, int coll, int algo, so_prof_use use)
{
    for (int i = 0; i < p->nstats; i++)
        if (p->stats[i].coll == coll && p->stats[i].algo == algo && p->stats[i].use == use)
            return &p->stats[i];
    if (p->nstats == PROF_MAX_STATS)
        return NULL;
    prof_cstat *s = &p->stats[p->nstats++];
    memset(s, 0, sizeof *s);
    s->coll = coll;
    s->algo = algo;
    s->use = use;
    return s;
}

void prof_stats_add(so_prof *p, const so_prof_comm_event *e)
{
    int coll = prof_intern(p, e->coll ? e->coll : "?"), algo = prof_intern(p, e->algo ? e->algo : "?");
    prof_cstat *s = coll < 0 || algo < 0 ? NULL : find_stat(p, coll, algo, e->use);
    if (!s)
        return;
    double lat = e->t_finished - e->t_started;
    s->calls++;
    s->bytes += e->bytes;
    s->seconds += lat;
    s->queue += e->t_started - e->t_queued;
    prof_bin *b = &s->bins[prof_size_bin(e->bytes)];
    if (!b->n || lat < b->min)
        b->min = lat;
    if (!b->n || lat > b->max)
        b->max = lat;
    b->n++;
    b->sum += lat;
}

void so_prof_totals_pack(const so_prof_totals *t, double *v)
{
    const double f[SO_PROF_TOTALS_FIELDS] = {t->runtime, t->useful, t->data_wait, t->forward,
                                             t->backward, t->comm_wait, t->optimizer, t->eval,
                                             t->comm_pure, t->comm_queue, t->comm_blocking, 0};
    memcpy(v, f, sizeof f);
    v[SO_PROF_TOTALS_FIELDS] = (double)t->steps;
}

void so_prof_totals_unpack(const double *v, so_prof_totals *t)
{
    *t = (so_prof_totals){v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10],
                          (long)v[SO_PROF_TOTALS_FIELDS]};
}

void so_prof_pop_compute(const so_prof_totals *r, int n, so_prof_pop *out)
{
    *out = (so_prof_pop){.overlap_pct = -1, .step_load_balance = -1};
    double sum_useful = 0, max_useful = 0, runtime = 0, wait = 0, pure = 0, data = 0, rt_sum = 0;
    for (int i = 0; i < n; i++) {
        sum_useful += r[i].useful;
        max_useful = fmax(max_useful, r[i].useful);
        runtime = fmax(runtime, r[i].runtime);
        rt_sum += r[i].runtime;
        wait += r[i].comm_wait;
        pure += r[i].comm_pure;
        data += r[i].data_wait;
    }
    if (n < 1)
        return;
    out->useful_mean = sum_useful / n;
    out->useful_max = max_useful;
    out->runtime = runtime;
    out->load_balance = max_useful > 0 ? out->useful_mean / max_useful : 0;
    out->comm_efficiency = runtime > 0 ? max_useful / runtime : 0;
    out->parallel_efficiency = out->load_balance * out->comm_efficiency;
    out->data_wait_share = rt_sum > 0 ? data / rt_sum : 0;
    if (pure > 0)
        out->overlap_pct = fmin(100, fmax(0, 100 * (1 - wait / pure)));
}

void so_prof_pop_steps(const double *u, int world, long nsteps, so_prof_pop *out)
{
    double sum_mean = 0, sum_max = 0;
    for (long s = 0; s < nsteps; s++) {
        double sum = 0, mx = 0;
        for (int r = 0; r < world; r++) {
            sum += u[(size_t)r * nsteps + s];
            mx = fmax(mx, u[(size_t)r * nsteps + s]);
        }
        sum_mean += sum / world;
        sum_max += mx;
    }
    out->step_load_balance = sum_max > 0 ? sum_mean / sum_max : -1;
}

static void write_totals(so_json *js, const so_prof *p)
{
    so_prof_totals t;
    so_prof_get_totals(p, &t);
    so_json_obj_begin(js, "totals");
    so_json_int(js, "steps", t.steps);
    so_json_num(js, "runtime_s", t.runtime);
    so_json_num(js, "useful_s", t.useful);
    so_json_num(js, "data_wait_s", t.data_wait);
    so_json_num(js, "forward_s", t.forward);
    so_json_num(js, "backward_s", t.backward);
    so_json_num(js, "comm_wait_s", t.comm_wait);
    so_json_num(js, "optimizer_s", t.optimizer);
    so_json_num(js, "eval_s", t.eval);
    so_json_num(js, "comm_pure_s", t.comm_pure);
    so_json_num(js, "comm_queue_s", t.comm_queue);
    so_json_num(js, "comm_blocking_s", t.comm_blocking);
    so_json_obj_end(js);
}

/* GFLOP/s of one core at a layer's precision: the BF16 peak for BF16
 * layers; for FP32 ones the FP32 peak, or the rate measured in FMA chains
 * where that is clearly lower (the rule of the run's MFU, cmd_train.c). */
static double layer_peak_gflops(int bf16)
{
    if (bf16)
        return so_cpu_bf16_peak_gflops();
    double peak = so_cpu_peak_gflops(), fma = so_cpu_fma_gflops();
    return fma > 0 && fma < 0.8 * peak ? fma : peak;
}

/* A layer's model FLOPs over the measured steps (forward + backward ~ 3x the
 * forward's, the convention of the run's MFU), their rate and its share of
 * the peak of its precision on the run's threads. */
static void write_layer_rate(so_json *js, const so_prof *p, int i)
{
    double flops = 3.0 * p->node_flops[i] * (double)p->lay_nfwd[i], secs = p->lay_fwd[i] + p->lay_bwd[i];
    if (flops <= 0 || secs <= 0)
        return; /* memory-bound ops count no FLOPs */
    int threads = so_threads_get() > 0 ? so_threads_get() : 1;
    double rate = flops / secs * 1e-9, peak = layer_peak_gflops(p->node_bf16[i]) * threads;
    so_json_num(js, "flops", flops);
    so_json_num(js, "gflops_per_s", rate);
    so_json_num(js, "peak_gflops", peak);
    if (peak > 0)
        so_json_num(js, "mfu", rate / peak);
    else
        so_json_null(js, "mfu");
}

static void write_layers(so_json *js, const so_prof *p)
{
    so_json_arr_begin(js, "layers");
    for (int i = 0; i < p->nnodes; i++) {
        if (p->lay_fwd[i] == 0 && p->lay_bwd[i] == 0)
            continue;
        so_json_obj_begin(js, NULL);
        so_json_str(js, "name", p->names[p->node_name[i]]);
        so_json_str(js, "block", p->names[p->node_block[i]]);
        so_json_int(js, "node", p->node_order[i]);
        if (p->node_edge[i])
            so_json_str(js, "edge", p->node_edge[i] == 1 ? "send" : "recv");
        so_json_num(js, "forward_s", p->lay_fwd[i]);
        so_json_num(js, "backward_s", p->lay_bwd[i]);
        so_json_str(js, "precision", p->node_bf16[i] ? "bf16" : "fp32");
        write_layer_rate(js, p, i);
        so_json_obj_end(js);
    }
    so_json_arr_end(js);
}

static void write_sizes(so_json *js, const prof_cstat *s)
{
    so_json_arr_begin(js, "sizes");
    for (int k = 0; k < PROF_NBINS; k++) {
        const prof_bin *b = &s->bins[k];
        if (!b->n)
            continue;
        so_json_obj_begin(js, NULL);
        so_json_int(js, "max_bytes", (int64_t)((uint64_t)1 << k));
        so_json_int(js, "count", (int64_t)b->n);
        so_json_num(js, "avg_s", b->sum / (double)b->n);
        so_json_num(js, "min_s", b->min);
        so_json_num(js, "max_s", b->max);
        so_json_obj_end(js);
    }
    so_json_arr_end(js);
}

static void write_comm(so_json *js, const so_prof *p)
{
    so_json_arr_begin(js, "comm");
    for (int i = 0; i < p->nstats; i++) {
        const prof_cstat *s = &p->stats[i];
        so_json_obj_begin(js, NULL);
        so_json_str(js, "collective", p->names[s->coll]);
        so_json_str(js, "algorithm", p->names[s->algo]);
        so_json_str(js, "use", so_prof_use_name(s->use));
        so_json_int(js, "calls", (int64_t)s->calls);
        so_json_int(js, "bytes", (int64_t)s->bytes);
        so_json_num(js, "seconds", s->seconds);
        so_json_num(js, "queue_seconds", s->queue);
        write_sizes(js, s);
        so_json_obj_end(js);
    }
    so_json_arr_end(js);
}

int so_prof_write_rank_json(const so_prof *p, FILE *f)
{
    so_json js;
    so_json_init(&js, f, 0);
    so_json_obj_begin(&js, NULL);
    so_json_int(&js, "rank", p->cfg.rank);
    so_json_int(&js, "events", (int64_t)p->nev);
    so_json_int(&js, "events_dropped", (int64_t)p->dropped);
    write_totals(&js, p);
    write_layers(&js, p);
    write_comm(&js, p);
    prof_io_write_json(&js, (so_prof *)p); /* const but for its mutex */
    so_json_obj_end(&js);
    return ferror(f) ? -2 : 0;
}
