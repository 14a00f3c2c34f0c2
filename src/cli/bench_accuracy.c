/* `scaleout bench accuracy`: time to a target test accuracy (MLPerf Training
 * style), or for token data to a validation loss. Trains with evaluation
 * after every epoch (and every --eval-steps steps within one) until the
 * figure reaches --target / --target-loss (a step_end hook returns SO_STOP)
 * or the epoch/step budget ends, and logs in the MLPerf logging format
 * (":::MLLOG {json}" lines) so the MLPerf tools can read the log. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "bench.h"
#include "cli.h"
#include "env.h"
#include "kernels.h"
#include "scaleout/compress.h"
#include "scaleout/err.h"
#include "scaleout/job.h"
#include "scaleout/timer.h"
#include "scaleout/zoo.h"

/* The flags: those that shape the job write into its configuration; the
 * rest are the benchmark's own. */
typedef struct {
    so_job_config cfg;
    const char *json, *mllog, *error_feedback;
    int no_pin;
    float target;      /* test accuracy to reach (-1: --target-loss instead) */
    float target_loss; /* validation loss to reach, token data (-1: --target instead) */
} acc_args;

static const char *const datasets[] = {"fashion-mnist", "mnist", "cifar10", "tokens", "synthetic", NULL};
static const char *const optimizers[] = {"sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adam", "adamw", NULL};
static const char *const schedules[] = {"constant", "cosine", NULL};
static const char *const on_off[] = {"on", "off", NULL};
static const char *const shuffles[] = {"on", "off", "llmc", NULL};

static int parse(acc_args *a, int argc, char **argv)
{
    *a = (acc_args){.target = -1, .target_loss = -1};
    so_job_defaults(&a->cfg);
    a->cfg.epochs = 10;
    const cli_opt opts[] = {
        {"model", OPT_STR, &a->cfg.model, "NAME", "model from the zoo", 0, -1, NULL},
        {"dataset", OPT_CHOICE, &a->cfg.dataset, "NAME", "data set (its test split is evaluated)", 0, -1, datasets},
        {"data-dir", OPT_STR, &a->cfg.data_dir, "DIR", "directory of the data set files", 0, -1, NULL},
        {"target", OPT_FLOAT, &a->target, "ACC", "test accuracy to reach, in (0, 1] (this or --target-loss)", 1, 0, NULL},
        {"target-loss", OPT_FLOAT, &a->target_loss, "L", "validation loss to reach instead (--dataset tokens; MLPerf's "
         "LLM benchmark's log perplexity)", 1, 0, NULL},
        {"seq-len", OPT_INT, &a->cfg.seq_len, "T", "--dataset tokens: tokens per sequence", 1, 1 << 24, NULL},
        {"shuffle", OPT_CHOICE, &a->cfg.shuffle, "on|off|llmc", "training order, as train --shuffle (off: llm.c's "
         "order, which a peer can replay)", 0, -1, shuffles},
        {"eval-batches", OPT_INT, &a->cfg.eval_batches, "N", "evaluate on at most N batches per rank (0 = the whole "
         "split)", 0, 1 << 30, NULL},
        {"init-from", OPT_STR, &a->cfg.ckpt.init_from, "FILE", "initial parameters, as train --init-from (a peer "
         "starts from the same file)", 0, -1, NULL},
        {"clip-norm", OPT_FLOAT, &a->cfg.clip_norm, "X", "clip the gradient to global L2 norm X (0 = off)", 0, 1e30, NULL},
        {"max-epochs", OPT_INT, &a->cfg.epochs, "N", "epoch budget", 1, 1 << 20, NULL},
        {"max-steps", OPT_LONG, &a->cfg.steps, "N", "step budget (0 = epochs only)", 0, 1e15, NULL},
        {"eval-steps", OPT_LONG, &a->cfg.eval_steps, "N", "also evaluate every N steps within an epoch (a finer time "
         "to the target; 0 = after every epoch only)", 0, 1e15, NULL},
        {"batch-size", OPT_INT, &a->cfg.batch, "N", "samples per step on each rank", 1, 1 << 20, NULL},
        {"optimizer", OPT_CHOICE, &a->cfg.optimizer, "NAME", "optimizer", 0, -1, optimizers},
        {"lr", OPT_FLOAT, &a->cfg.lr, "X", "learning rate", 0, 1e6, NULL},
        {"momentum", OPT_FLOAT, &a->cfg.momentum, "X", "momentum", 0, 1, NULL},
        {"weight-decay", OPT_FLOAT, &a->cfg.weight_decay, "X", "weight decay", 0, 1e3, NULL},
        {"lr-schedule", OPT_CHOICE, &a->cfg.lr_schedule, "NAME", "learning-rate schedule; cosine decays to 0 over the whole "
         "budget (--max-steps, else --max-epochs)", 0, -1, schedules},
        {"augment", OPT_FLAG, &a->cfg.augment, NULL, "random crop (pad 4) and horizontal flip", 0, -1, NULL},
        {"seed", OPT_LONG, &a->cfg.seed, "N", "random seed", 0, 9.2e18, NULL},
        {"threads", OPT_INT, &a->cfg.threads, "N", "compute threads per process", 1, 1024, NULL},
        {"no-pin", OPT_FLAG, &a->no_pin, NULL, "do not pin compute threads to cores", 0, -1, NULL},
        {"backend", OPT_CHOICE, &a->cfg.backend, "NAME", "compute backend", 0, -1, cli_backends},
        {"precision", OPT_CHOICE, &a->cfg.precision, "NAME", "compute precision: fp32, bf16 (native AVX-512 BF16 only), auto (bf16 where native)", 0, -1, cli_precisions},
        {"conv-algo", OPT_CHOICE, &a->cfg.conv_algo, "NAME", "convolution algorithm: auto (Winograd where faster), direct, winograd", 0, -1, cli_conv_algos},
        {"synthetic-samples", OPT_INT, &a->cfg.synthetic_samples, "N", "synthetic data set size", 0, 1 << 30, NULL},
        {"allreduce", OPT_STR, &a->cfg.allreduce, "ALGO", "allreduce algorithm for gradients", 0, -1, NULL},
        {"compress", OPT_STR, &a->cfg.compress, "METHOD", "gradient compression (as train --compress; docs/COMPRESSION.md)", 0, -1, NULL},
        {"error-feedback", OPT_CHOICE, &a->error_feedback, "on|off", "as train --error-feedback", 0, -1, on_off},
        {"sync", OPT_STR, &a->cfg.sync, "METHOD", "how often ranks agree on the model (as train --sync; docs/COMPRESSION.md)", 0, -1, NULL},
        {"local-after", OPT_LONG, &a->cfg.local_after, "S", "as train --local-after", 0, 1e15, NULL},
        {"outer-lr", OPT_FLOAT, &a->cfg.outer_lr, "X", "as train --outer-lr", 0, 1e3, NULL},
        {"outer-momentum", OPT_FLOAT, &a->cfg.outer_momentum, "X", "as train --outer-momentum", 0, 1, NULL},
        {"mllog", OPT_STR, &a->mllog, "FILE", "write the :::MLLOG lines to FILE instead of stdout", 0, -1, NULL},
        {"json", OPT_STR, &a->json, "FILE", "write the result record (docs/FORMATS.md)", 0, -1, NULL},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    int rc = cli_parse("bench accuracy", "Trains until the test accuracy reaches --target (or the validation loss "
                       "--target-loss); MLPerf-style log.", opts,
                       argc, argv);
    if (rc)
        return rc;
    if (a->target == -1 && a->target_loss == -1)
        return cli_error("bench accuracy", CLI_USAGE, "--target is required (e.g. --target 0.90; or --target-loss L)");
    if (a->target != -1 && a->target_loss != -1)
        return cli_error("bench accuracy", CLI_USAGE, "--target and --target-loss exclude each other");
    if (a->target != -1 && !(a->target > 0 && a->target <= 1))
        return cli_error("bench accuracy", CLI_USAGE, "--target: %g is outside (0, 1]", a->target);
    if (a->target_loss != -1 && !(a->target_loss > 0))
        return cli_error("bench accuracy", CLI_USAGE, "--target-loss: %g is not above 0", a->target_loss);
    if (so_zoo_check(a->cfg.model))
        return cli_error("bench accuracy", CLI_USAGE, "--model: %s (see `scaleout models`)", so_errmsg());
    so_compress_spec cs;
    if (so_compress_parse(a->cfg.compress, &cs))
        return cli_error("bench accuracy", CLI_USAGE, "%s", so_errmsg());
    a->cfg.error_feedback = a->error_feedback ? !strcmp(a->error_feedback, "on") : -1;
    return CLI_OK;
}

/* MLPerf logging: one JSON object per line after ":::MLLOG ", wall-clock ms. */
typedef struct {
    FILE *f;
    int on;               /* rank 0 only */
    double offset_ms;     /* wall-clock ms minus so_now() ms */
} mllog;

static void json_escaped(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* value: JSON text; meta: extra metadata members (JSON text without braces) or NULL. */
static void ml_event(mllog *m, double t, const char *type, const char *key, const char *value, int line,
                     const char *meta_fmt, ...)
{
    if (!m->on)
        return;
    fprintf(m->f, ":::MLLOG {\"namespace\": \"\", \"time_ms\": %.0f, \"event_type\": \"%s\", \"key\": \"%s\", "
                  "\"value\": %s, \"metadata\": {\"file\": \"%s\", \"lineno\": %d",
            m->offset_ms + t * 1e3, type, key, value, strrchr("/" __FILE__, '/') + 1, line);
    if (meta_fmt) {
        va_list ap;
        va_start(ap, meta_fmt);
        fputs(", ", m->f);
        vfprintf(m->f, meta_fmt, ap);
        va_end(ap);
    }
    fputs("}}\n", m->f);
    fflush(m->f);
}

#define POINT(m, key, value, ...) ml_event(m, so_now(), "POINT_IN_TIME", key, value, __LINE__, __VA_ARGS__)

static void ml_str(mllog *m, const char *key, const char *v, int line)
{
    if (!m->on)
        return;
    char buf[512];
    FILE *mem = fmemopen(buf, sizeof buf, "w");
    if (!mem)
        return;
    json_escaped(mem, v);
    fclose(mem);
    buf[sizeof buf - 1] = 0;
    ml_event(m, so_now(), "POINT_IN_TIME", key, buf, line, NULL);
}

/* One evaluation: where in training it ran and what it gave. */
typedef struct {
    long step;            /* optimizer steps done */
    double epoch;         /* epochs done, fractional within one (--eval-steps) */
    double train_seconds; /* training time up to it, evaluations left out */
    double metric;        /* test accuracy, or validation loss under --target-loss */
} acc_eval;

/* State shared by the hooks: the recorder, the MLLOG writer, the stop rule. */
typedef struct {
    const acc_args *a;
    bench_rec *rec;
    mllog *ml;
    double eval_t0, eval_t1, run_start, reached_at;
    int epochs_done, reached, last_epoch;
    double last_metric;   /* the last evaluation's test accuracy, or validation loss under --target-loss */
    double train_seconds; /* the finished epochs' training time (evaluations left out) */
    acc_eval *evals;      /* every evaluation, in order; the one that reached the target is reached_eval */
    int nevals, cap_evals, reached_eval;
} acc_state;

/* The evaluation's figure the target is on, and whether it is reached. */
static double metric(const acc_args *a, const so_epoch_stats *e)
{
    return a->target_loss > 0 ? e->test_loss : e->test_accuracy;
}

static int reached(const acc_args *a, double m)
{
    return a->target_loss > 0 ? m <= a->target_loss : m >= a->target;
}

static void on_span(void *arg, so_span_kind kind, long step, int id, double t0, double t1)
{
    acc_state *s = arg;
    if (kind == SO_SPAN_EVAL) {
        s->eval_t0 = t0;
        s->eval_t1 = t1;
    }
    bench_rec_span(s->rec, kind, step, id, t0, t1);
}

/* An evaluation's result (epoch: epochs done, fractional inside one):
 * MLLOG events, the record, the stop rule. */
static void on_eval(acc_state *s, const so_epoch_stats *e, double epoch, long step, double train_seconds)
{
    ml_event(s->ml, s->eval_t0, "INTERVAL_START", "eval_start", "null", __LINE__, "\"epoch_num\": %g", epoch);
    ml_event(s->ml, s->eval_t1, "INTERVAL_END", "eval_stop", "null", __LINE__, "\"epoch_num\": %g", epoch);
    char v[64]; /* under --target-loss the loss, as MLPerf's LLM benchmark logs its log perplexity */
    s->last_metric = metric(s->a, e);
    snprintf(v, sizeof v, "%.6f", s->last_metric);
    ml_event(s->ml, s->eval_t1, "POINT_IN_TIME", "eval_accuracy", v, __LINE__, "\"epoch_num\": %g", epoch);
    if (s->nevals == s->cap_evals) { /* out of memory: the record lacks the point, the run goes on */
        int cap = s->cap_evals ? 2 * s->cap_evals : 64;
        acc_eval *p = realloc(s->evals, (size_t)cap * sizeof *p);
        if (p) {
            s->evals = p;
            s->cap_evals = cap;
        }
    }
    int kept = s->nevals < s->cap_evals;
    if (kept)
        s->evals[s->nevals++] = (acc_eval){step, epoch, train_seconds, s->last_metric};
    if (reached(s->a, s->last_metric) && !s->reached) {
        s->reached = 1;
        s->reached_at = s->eval_t1;
        s->reached_eval = kept ? s->nevals - 1 : -1;
    }
}

static void on_progress(void *arg, const so_progress *p)
{
    acc_state *s = arg;
    if (p->eval) { /* inside the epoch (--eval-steps) */
        on_eval(s, p->eval, p->epoch + (double)p->step / (double)p->steps, (long)p->epoch * p->steps + p->step,
                s->train_seconds + p->eval->seconds);
        if (s->ml->on)
            printf("epoch %.2f: %s %.4f\n", p->epoch + (double)p->step / (double)p->steps,
                   s->a->target_loss > 0 ? "validation loss" : "test accuracy", s->last_metric);
        return;
    }
    if (!p->done)
        return;
    const so_epoch_stats *e = p->done;
    int ep = e->epoch + 1;
    bench_rec *r = s->rec;
    double end = r->n ? r->t1[r->n - 1] : so_now();
    ml_event(s->ml, end, "INTERVAL_END", "epoch_stop", "null", __LINE__, "\"epoch_num\": %d", ep);
    s->epochs_done = ep;
    s->train_seconds += e->seconds;
    if (e->test_accuracy < 0)
        return;
    on_eval(s, e, e->epoch + (double)p->step / (double)p->steps, (long)e->epoch * p->steps + p->step,
            s->train_seconds);
    if (s->ml->on)
        printf("epoch %d: loss %.4f, %s %.4f, %.1f s, %.0f images/sec\n", ep, e->loss,
               s->a->target_loss > 0 ? "validation loss" : "test accuracy", s->last_metric, e->seconds,
               e->images_per_sec);
}

static int on_step_end(void *arg, const so_train_state *st)
{
    acc_state *s = arg;
    if (s->reached) /* after an epoch's evaluation, or one within it */
        return SO_STOP;
    if (!st->epoch_end)
        return 0;
    if (st->epoch < s->last_epoch)
        ml_event(s->ml, so_now(), "INTERVAL_START", "epoch_start", "null", __LINE__, "\"epoch_num\": %d",
                 st->epoch + 1);
    return 0;
}

static void log_config(mllog *ml, const acc_args *a, so_job *j, int world)
{
    char v[64];
    ml_str(ml, "submission_benchmark", a->cfg.model, __LINE__);
    ml_str(ml, "submission_org", "scaleout", __LINE__);
    ml_str(ml, "submission_division", "open", __LINE__);
    ml_str(ml, "submission_status", "research", __LINE__);
    snprintf(v, sizeof v, "%s (git %s)", SCALEOUT_VERSION, cli_git_commit());
    ml_str(ml, "submission_platform", v, __LINE__);
    snprintf(v, sizeof v, "%d", a->cfg.batch * world);
    POINT(ml, "global_batch_size", v, NULL);
    snprintf(v, sizeof v, "%ld", a->cfg.seed);
    POINT(ml, "seed", v, NULL);
    ml_str(ml, "opt_name", a->cfg.optimizer, __LINE__);
    snprintf(v, sizeof v, "%g", a->cfg.lr);
    POINT(ml, "opt_base_learning_rate", v, NULL);
    ml_str(ml, "opt_learning_rate_schedule", a->cfg.lr_schedule, __LINE__);
    POINT(ml, "gradient_accumulation_steps", "1", NULL);
    snprintf(v, sizeof v, "%d", so_job_dataset(j, 1)->n);
    POINT(ml, "train_samples", v, NULL);
    snprintf(v, sizeof v, "%d", so_job_dataset(j, 0) ? so_job_dataset(j, 0)->n : 0);
    POINT(ml, "eval_samples", v, NULL);
    snprintf(v, sizeof v, "%g", a->target_loss > 0 ? a->target_loss : a->target);
    POINT(ml, "target_accuracy", v, NULL);
}

static int write_json(const acc_args *a, const acc_state *s, const so_train_result *r, double tta, int world)
{
    FILE *f;
    so_json js;
    int rc = bench_json_begin("bench accuracy", a->json, "accuracy", &js, &f);
    if (rc)
        return rc;
    env_info e;
    env_collect(&e);
    so_json_obj_begin(&js, "config");
    so_json_str(&js, "model", a->cfg.model);
    so_json_str(&js, "dataset", a->cfg.dataset);
    so_json_str(&js, "backend", a->cfg.backend);
    so_json_str(&js, "conv_algo", a->cfg.conv_algo);
    if (a->target_loss > 0)
        so_json_num(&js, "target_loss", a->target_loss);
    else
        so_json_num(&js, "target", a->target);
    so_json_int(&js, "max_epochs", a->cfg.epochs);
    so_json_int(&js, "max_steps", a->cfg.steps);
    so_json_int(&js, "eval_steps", a->cfg.eval_steps);
    so_json_int(&js, "batch_size", a->cfg.batch);
    so_json_int(&js, "global_batch_size", (int64_t)a->cfg.batch * world);
    so_json_int(&js, "world_size", world);
    so_json_str(&js, "optimizer", a->cfg.optimizer);
    so_json_num(&js, "lr", a->cfg.lr);
    so_json_str(&js, "lr_schedule", a->cfg.lr_schedule);
    so_json_num(&js, "momentum", a->cfg.momentum);
    so_json_num(&js, "weight_decay", a->cfg.weight_decay);
    so_json_bool(&js, "augment", a->cfg.augment);
    so_json_int(&js, "seed", a->cfg.seed);
    so_json_int(&js, "threads", a->cfg.threads);
    so_json_str(&js, "compress", a->cfg.compress ? a->cfg.compress : "none");
    so_json_str(&js, "sync", a->cfg.sync ? a->cfg.sync : "sync");
    so_json_str(&js, "shuffle", a->cfg.shuffle);
    if (a->cfg.ckpt.init_from)
        so_json_str(&js, "init_from", a->cfg.ckpt.init_from);
    so_json_obj_end(&js);
    env_write_json(&js, &e, a->cfg.threads, !a->no_pin);
    so_json_obj_begin(&js, "results");
    so_json_str(&js, "status", s->reached ? "success" : "aborted");
    so_json_bool(&js, "reached", s->reached);
    if (s->reached) {
        so_json_num(&js, "time_to_accuracy_seconds", tta);
        if (s->reached_eval >= 0) {
            const acc_eval *at = &s->evals[s->reached_eval];
            so_json_num(&js, "train_seconds_to_target", at->train_seconds);
            so_json_num(&js, "epochs_to_target", at->epoch);
            so_json_int(&js, "steps_to_target", at->step);
        }
    } else {
        so_json_null(&js, "time_to_accuracy_seconds");
    }
    so_json_num(&js, "run_seconds", r->wall_seconds);
    so_json_int(&js, "epochs", s->epochs_done);
    so_json_int(&js, "steps", r->steps);
    so_json_num(&js, "images_per_sec", r->images_per_sec);
    so_json_num(&js, a->target_loss > 0 ? "final_loss" : "final_accuracy", s->last_metric);
    if (r->compress_bytes_dense > 0 && r->steps > 0) { /* rank 0's, per step */
        so_json_num(&js, "compress_bytes_per_step", r->compress_bytes_sent / (double)r->steps);
        so_json_num(&js, "dense_bytes_per_step", r->compress_bytes_dense / (double)r->steps);
        so_json_num(&js, "compress_seconds", r->compress_encode_s);
        so_json_num(&js, "decompress_seconds", r->compress_decode_s);
    }
    cli_compress_auto_json(&js, r);
    if (r->sync_period > 0 && r->steps > 0) { /* rank 0's, per step */
        so_json_num(&js, "sync_bytes_per_step", r->sync_bytes_sent / (double)r->steps);
        so_json_int(&js, "sync_rounds", r->sync_rounds);
    }
    so_json_obj_end(&js);
    so_json_arr_begin(&js, "epochs");
    for (int i = 0; i < r->nepochs; i++) {
        const so_epoch_stats *ep = &r->epochs[i];
        so_json_obj_begin(&js, NULL);
        so_json_int(&js, "epoch", ep->epoch + 1);
        so_json_num(&js, "loss", ep->loss);
        if (ep->test_accuracy >= 0) {
            so_json_num(&js, "test_accuracy", ep->test_accuracy);
            so_json_num(&js, "test_loss", ep->test_loss);
        } else {
            so_json_null(&js, "test_accuracy");
        }
        so_json_num(&js, "seconds", ep->seconds);
        so_json_num(&js, "images_per_sec", ep->images_per_sec);
        so_json_obj_end(&js);
    }
    so_json_arr_end(&js);
    so_json_arr_begin(&js, "evaluations");
    for (int i = 0; i < s->nevals; i++) {
        so_json_obj_begin(&js, NULL);
        so_json_int(&js, "step", s->evals[i].step);
        so_json_num(&js, "epoch", s->evals[i].epoch);
        so_json_num(&js, "train_seconds", s->evals[i].train_seconds);
        so_json_num(&js, a->target_loss > 0 ? "test_loss" : "test_accuracy", s->evals[i].metric);
        so_json_obj_end(&js);
    }
    so_json_arr_end(&js);
    bench_raw_json(&js, s->rec);
    return bench_json_end("bench accuracy", a->json, &js, f);
}

/* The job: evaluation after every epoch, the budget in epochs or steps, the
 * recorder's hooks (a step_end that stops at the target). */
static void job_config(const acc_args *a, const so_train_hooks *hooks, so_job_config *c)
{
    *c = a->cfg;
    c->pin_threads = !a->no_pin;
    c->eval_every = 1;
    c->hooks = hooks;
    c->build_id = cli_git_commit();
}

static int run(const acc_args *a, so_job *j, acc_state *s, double init_start)
{
    int world = so_job_world(j), rank = so_job_rank(j);
    mllog *ml = s->ml;
    ml_event(ml, init_start, "INTERVAL_START", "init_start", "null", __LINE__, NULL);
    log_config(ml, a, j, world);
    long spe = so_loader_steps(so_job_train_loader(j));
    long total = a->cfg.steps ? a->cfg.steps : (long)a->cfg.epochs * spe;
    s->last_epoch = spe > 0 ? (int)((total + spe - 1) / spe) - 1 : 0;
    ml_event(ml, so_now(), "INTERVAL_END", "init_stop", "null", __LINE__, NULL);
    double start = so_now();
    ml_event(ml, start, "INTERVAL_START", "run_start", "null", __LINE__, NULL);
    ml_event(ml, start, "INTERVAL_START", "epoch_start", "null", __LINE__, "\"epoch_num\": 1");
    so_train_result r;
    int rc = so_job_train(j, on_progress, s, &r);
    if (rc) {
        rc = cli_job_train_error("bench accuracy", j, rc);
    } else {
        double stop = s->reached ? s->reached_at : so_now(), tta = stop - start;
        ml_event(ml, stop, "INTERVAL_END", "run_stop", "null", __LINE__, "\"status\": \"%s\"",
                 s->reached ? "success" : "aborted");
        if (rank == 0) {
            const char *what = a->target_loss > 0 ? "validation loss" : "test accuracy";
            double target = a->target_loss > 0 ? a->target_loss : a->target;
            if (s->reached && s->reached_eval >= 0)
                printf("reached %s %.4f %s %.4f in %.1f s (time to accuracy; %.1f s of training), %g epoch(s), "
                       "%ld steps, %.0f images/sec\n", what, s->last_metric, a->target_loss > 0 ? "<=" : ">=", target,
                       tta, s->evals[s->reached_eval].train_seconds, s->evals[s->reached_eval].epoch, r.steps,
                       r.images_per_sec);
            else if (s->reached)
                printf("reached %s %.4f %s %.4f in %.1f s (time to accuracy), %d epoch(s), %ld steps, "
                       "%.0f images/sec\n", what, s->last_metric, a->target_loss > 0 ? "<=" : ">=", target, tta,
                       s->epochs_done, r.steps, r.images_per_sec);
            else
                printf("did not reach %s %.4f within the budget: last %.4f after %d epoch(s), %.1f s, "
                       "%.0f images/sec\n", what, target, s->last_metric, s->epochs_done, tta, r.images_per_sec);
            cli_compress_auto_print(&r);
            rc = a->json ? write_json(a, s, &r, tta, world) : CLI_OK;
        }
    }
    so_train_result_free(&r);
    return rc;
}

/* Real clock minus monotonic clock, in ms: MLPerf wants Unix-epoch times. */
static double wall_offset_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec * 1e3 + tv.tv_usec / 1e3 - so_now() * 1e3;
}

int cmd_bench_accuracy(int argc, char **argv)
{
    acc_args a;
    int rc = parse(&a, argc, argv);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    double init_start = so_now();
    acc_state s = {.a = &a, .ml = NULL, .last_metric = -1};
    bench_rec rec;
    so_train_hooks unused;
    if ((rc = bench_rec_init(&rec, &unused)))
        return cli_error("bench accuracy", cli_exit_code(rc), "%s", so_errmsg());
    s.rec = &rec;
    so_train_hooks hooks = {&s, on_span, on_step_end, NULL};
    so_job_config cfg;
    job_config(&a, &hooks, &cfg);
    so_job *j = NULL;
    rc = so_job_create(&cfg, &j);
    if (!rc && !so_job_test_loader(j)) /* the same data set everywhere: every rank finds it alike */
        rc = so_err(SO_EINVAL, "--dataset %s has no test split to evaluate", a.cfg.dataset);
    int rank = so_job_rank(j);
    mllog ml = {stdout, rank == 0, wall_offset_ms()};
    s.ml = &ml;
    if (!rc && rank == 0 && a.mllog && !(ml.f = fopen(a.mllog, "w")))
        rc = so_err(SO_EINVAL, "--mllog: cannot write '%s'", a.mllog);
    if (rc)
        rc = cli_job_setup_error("bench accuracy", j, rc);
    else
        rc = run(&a, j, &s, init_start);
    if (ml.f && ml.f != stdout && fclose(ml.f) && !rc)
        rc = cli_error("bench accuracy", CLI_FAIL, "--mllog: error writing '%s'", a.mllog);
    so_job_free(j);
    bench_rec_free(&rec);
    free(s.evals);
    return rc;
}
