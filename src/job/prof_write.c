/* The profiler's output on rank 0 (prof_write.h): the two JSON files
 * written as text (the ranks' parts are JSON text already, joined here in
 * rank order) and the summary lines (docs/PROFILING.md, docs/FORMATS.md). */
#include "prof_write.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scaleout/ckpt.h"
#include "scaleout/err.h"
#include "scaleout/json.h"
#include "scaleout/threads.h"

/* Writes the world parts (consecutive in `parts`) joined by sep. */
static void write_parts(FILE *f, const prof_parts *parts, int world, const char *sep)
{
    size_t off = 0;
    for (int r = 0; r < world; r++) {
        if (r)
            fputs(sep, f);
        fwrite(parts->text + off, 1, parts->sizes[r], f);
        off += parts->sizes[r];
    }
}

int prof_write_timeline(const prof_run *run, const prof_parts *events)
{
    FILE *f = fopen(run->timeline, "w");
    if (!f)
        return so_err(SO_EIO, "cannot write '%s'", run->timeline);
    fputs("{\"traceEvents\":[\n", f);
    write_parts(f, events, run->world, ",\n");
    fprintf(f, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"tool\":\"scaleout %s\",\"detail\":\"%s\","
               "\"timeline_steps\":\"%s\",\"clock_offsets_us\":[", SCALEOUT_VERSION, so_prof_detail_name(run->detail),
            run->timeline_steps);
    for (int r = 0; r < run->world; r++)
        fprintf(f, "%s%.3f", r ? "," : "", run->clocks[r].offset * 1e6);
    fputs("],\"clock_drift_ppm\":[", f);
    for (int r = 0; r < run->world; r++)
        fprintf(f, "%s%.3f", r ? "," : "", run->clocks[r].drift * 1e6);
    fputs("]}}\n", f);
    return fclose(f) ? so_err(SO_EIO, "error writing '%s'", run->timeline) : 0;
}

/* ---- profile.json ----------------------------------------------------------------- */

/* "key=value" lines as a JSON object of strings. */
static void config_object(so_json *js, const char *config)
{
    so_json_obj_begin(js, "config");
    for (const char *s = config; s && *s;) {
        const char *nl = strchr(s, '\n'), *eq = strchr(s, '=');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        if (eq && eq < s + n) {
            char key[64], val[256];
            snprintf(key, sizeof key, "%.*s", (int)(eq - s), s);
            snprintf(val, sizeof val, "%.*s", (int)(s + n - eq - 1), eq + 1);
            so_json_str(js, key, val);
        }
        s += n + (nl ? 1 : 0);
    }
    so_json_obj_end(js);
}

static double median(const double *v, long n)
{
    if (n < 1)
        return 0;
    double *c = malloc((size_t)n * sizeof *c);
    if (!c)
        return 0;
    memcpy(c, v, (size_t)n * sizeof *c);
    for (long i = 1; i < n; i++) /* insertion sort: step counts are modest */
        for (long j = i; j > 0 && c[j - 1] > c[j]; j--) {
            double t = c[j];
            c[j] = c[j - 1];
            c[j - 1] = t;
        }
    double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    free(c);
    return m;
}

static void write_environment(so_json *js, const prof_run *run)
{
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    so_json_obj_begin(js, "environment");
    so_json_str(js, "host", host);
    so_json_str(js, "scaleout", SCALEOUT_VERSION);
    so_json_str(js, "git", run->build_id);
    so_json_int(js, "world_size", run->world);
    so_json_int(js, "threads", so_threads_get());
    so_json_str(js, "allreduce", run->allreduce);
    so_json_str(js, "detail", so_prof_detail_name(run->detail));
    so_json_str(js, "timeline_steps", run->timeline_steps);
    so_json_int(js, "statistics_skip_steps", run->skip_steps);
    so_json_int(js, "unix_time", (int64_t)time(NULL));
    so_json_obj_end(js);
}

static void write_throughput(so_json *js, const so_train_result *r)
{
    so_json_obj_begin(js, "throughput");
    so_json_int(js, "steps", r->steps);
    so_json_num(js, "images_per_sec", r->images_per_sec);
    so_json_num(js, "wall_seconds", r->wall_seconds);
    so_json_num(js, "median_step_s", median(r->step_seconds, r->nstep_seconds));
    so_json_int(js, "gradient_buckets", r->nbuckets);
    if (r->sync_period > 0 && r->steps > 0) { /* --sync local, diloco, gossip (docs/COMPRESSION.md) */
        so_json_num(js, "sync_bytes_per_step", r->sync_bytes_sent / (double)r->steps);
        so_json_int(js, "sync_steps_between_averages", r->sync_period);
    }
    if (r->pipe_bubble_formula > 0) { /* pipeline stages (docs/PARALLELISM.md) */
        so_json_num(js, "pipeline_bubble_measured", r->pipe_bubble);
        so_json_num(js, "pipeline_bubble_formula", r->pipe_bubble_formula);
        so_json_num(js, "pipeline_bubble_stage_times", r->pipe_bubble_stages);
        so_json_num(js, "pipeline_bytes_per_step", r->steps > 0 ? r->pipe_bytes_sent / (double)r->steps : 0);
        so_json_str(js, "pipeline_wire", r->pipe_wire_bf16 ? "bf16" : "f32");
    }
    if (r->ps_workers > 0) { /* the parameter server (--sync ssp:S, async) */
        so_json_num(js, "ps_bytes_per_step", r->ps_bytes_per_step);
        so_json_num(js, "ps_staleness_mean", r->ps_staleness_mean);
        so_json_num(js, "ps_staleness_max", r->ps_staleness_max);
    }
    so_json_obj_end(js);
}

static void write_pop(so_json *js, const so_prof_pop *pop)
{
    so_json_obj_begin(js, "pop");
    so_json_num(js, "load_balance", pop->load_balance);
    so_json_num(js, "comm_efficiency", pop->comm_efficiency);
    so_json_num(js, "parallel_efficiency", pop->parallel_efficiency);
    if (pop->overlap_pct >= 0)
        so_json_num(js, "overlap_pct", pop->overlap_pct);
    else
        so_json_null(js, "overlap_pct");
    so_json_num(js, "data_wait_share", pop->data_wait_share);
    if (pop->step_load_balance >= 0)
        so_json_num(js, "step_load_balance", pop->step_load_balance);
    else
        so_json_null(js, "step_load_balance");
    so_json_num(js, "runtime_s", pop->runtime);
    so_json_obj_end(js);
}

/* The document's opening up to the clocks; the caller goes on as text. */
static void write_header(FILE *f, const prof_run *run, const so_train_result *r, const char *config,
                         const so_prof_pop *pop)
{
    so_json js;
    so_json_init(&js, f, 1);
    so_json_obj_begin(&js, NULL);
    so_json_str(&js, "format", "scaleout-profile");
    so_json_int(&js, "version", 1);
    config_object(&js, config);
    write_environment(&js, run);
    write_throughput(&js, r);
    write_pop(&js, pop);
    so_json_arr_begin(&js, "clock_offsets_s");
    for (int i = 0; i < run->world; i++)
        so_json_num(&js, NULL, run->clocks[i].offset);
    so_json_arr_end(&js);
    so_json_arr_begin(&js, "clock_drifts");
    for (int i = 0; i < run->world; i++)
        so_json_num(&js, NULL, run->clocks[i].drift);
    so_json_arr_end(&js);
}

/* "pipeline_schedule": the step, the layout, and the ranks' lanes. */
static void write_schedule(FILE *f, const prof_run *run, const prof_schedule *s)
{
    const prof_sched_layout *l = s->layout;
    fprintf(f, ",\n  \"pipeline_schedule\": {\"step\": %ld, \"chosen\": \"median duration on rank 0 among the "
               "detailed steps after the first\", \"schedule\": \"%s\", \"stages\": %d, \"replicas\": %d, "
               "\"microbatches\": %d, \"virtual_stages\": %d, \"max_spans\": %d, ",
            s->step, l->schedule, l->stages, l->replicas, l->microbatches, l->chunks, PROF_SCHED_SPANS);
    if (isfinite(s->step_ms))
        fprintf(f, "\"step_ms\": %.3f,\n    \"ranks\": [\n    ", s->step_ms);
    else
        fputs("\"step_ms\": null,\n    \"ranks\": [\n    ", f);
    write_parts(f, &s->lanes, run->world, ",\n    ");
    fputs("]}", f);
}

int prof_write_profile(const prof_run *run, const so_train_result *r, const char *config, const so_prof_pop *pop,
                       const prof_schedule *sched, const prof_parts *stats)
{
    FILE *f = fopen(run->profile, "w");
    if (!f)
        return so_err(SO_EIO, "cannot write '%s'", run->profile);
    write_header(f, run, r, config, pop);
    if (sched)
        write_schedule(f, run, sched);
    fputs(",\n  \"ranks\": [\n", f); /* the ranks' objects follow as text */
    write_parts(f, stats, run->world, ",\n");
    fputs("\n  ]\n}\n", f);
    return fclose(f) ? so_err(SO_EIO, "error writing '%s'", run->profile) : 0;
}

/* ---- the summary lines -------------------------------------------------------------- */

static void print_summary(FILE *out, const prof_run *run, const so_train_result *r, const so_prof_totals *all,
                          const so_prof_pop *pop)
{
    long steps = all[0].steps > 0 ? all[0].steps : 1;
    fprintf(out, "profile: %d rank(s), %ld of %ld steps (the first %d left out): parallel efficiency %.2f = load "
           "balance %.2f x communication efficiency %.2f; per-step load balance %.2f\n", run->world, all[0].steps,
           r->steps, run->skip_steps, pop->parallel_efficiency, pop->load_balance, pop->comm_efficiency,
           pop->step_load_balance);
    fprintf(out, "profile: per step %.2f ms compute, %.2f ms data wait (%.1f%%)", 1e3 * pop->useful_mean / steps,
           1e3 * all[0].data_wait / steps, 100 * pop->data_wait_share);
    if (pop->overlap_pct >= 0)
        fprintf(out, ", %.2f ms gradient communication, %.0f%% overlapped, %.2f ms exposed",
               1e3 * all[0].comm_pure / steps, pop->overlap_pct, 1e3 * all[0].comm_wait / steps);
    fprintf(out, "\n");
    if (r->ps_workers > 0)
        fprintf(out, "profile: parameter server: %.1f KB per worker step, staleness mean %.2f, max %.0f steps\n",
                r->ps_bytes_per_step / 1e3, r->ps_staleness_mean, r->ps_staleness_max);
    if (r->sync_period > 0 && r->steps > 0) /* --sync local, diloco, gossip */
        fprintf(out, "profile: relaxed sync: %.1f KB per step by each rank, %ld averages, every %d step(s)\n",
                r->sync_bytes_sent / (double)r->steps / 1e3, r->sync_rounds, r->sync_period);
    if (run->timeline[0])
        fprintf(out, "profile: timeline %s", run->timeline);
    if (run->profile[0])
        fprintf(out, "%sstatistics %s (scaleout report %s)", run->timeline[0] ? ", " : "profile: ", run->profile,
               run->profile);
    fprintf(out, "\n");
}

/* One line of the background checkpoint work, when there was any. */
static void print_io(FILE *out, const double *v)
{
    const char *sep = "profile: checkpoint I/O (all ranks): ";
    for (int k = 0; k < SO_CKPT_IO_KINDS; k++) {
        if (v[3 * k] <= 0)
            continue;
        fprintf(out, "%s%s %.0f x, %.2f MB in %.1f ms (%.0f MB/s)", sep, so_ckpt_io_name((so_ckpt_io_kind)k), v[3 * k],
               v[3 * k + 1] / 1e6, v[3 * k + 2] * 1e3, v[3 * k + 2] > 0 ? v[3 * k + 1] / v[3 * k + 2] / 1e6 : 0);
        sep = "; ";
    }
    if (sep[0] == ';')
        fprintf(out, "\n");
}

int prof_write_summary(const prof_run *run, const so_train_result *r, const so_prof_totals *all,
                       const so_prof_pop *pop, const double *io, char **out)
{
    size_t len = 0;
    FILE *f = open_memstream(out, &len);
    if (!f)
        return so_err(SO_ENOMEM, "out of memory");
    print_summary(f, run, r, all, pop);
    print_io(f, io);
    return fclose(f) ? so_err(SO_ENOMEM, "out of memory") : 0;
}
