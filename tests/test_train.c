/* so_train driven without MPI: a fake so_dist (one process that calls itself
 * rank 0 of 2 and whose "allreduce" leaves the gradients as they are) and a
 * fake strategy that counts the calls. Checks the seam's contract: when and
 * how often each strategy call comes, overlap and accumulation as the data-
 * parallel strategy sees them, buckets that tile the gradients once per step,
 * the auto plan's step, and that an identity allreduce trains bit for bit
 * like the local step. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scaleout/strategy.h"
#include "scaleout/train.h"
#include "scaleout/zoo.h"

enum { BATCH = 8, SAMPLES = 64 };

typedef struct {
    so_dataset *ds;
    so_model *m;
    so_optim *opt;
    so_loader *l;
} rig;

static void rig_make(rig *r)
{
    memset(r, 0, sizeof *r);
    so_graph *g = NULL;
    assert_int_equal(so_dataset_synthetic(SAMPLES, 1, 28, 28, 10, 7, &r->ds), 0);
    assert_int_equal(so_zoo_build("lenet5", 1, 28, 28, 10, &g), 0);
    assert_int_equal(so_model_create(g, "ref", BATCH, 42, &r->m), 0);
    so_optim_config oc;
    so_optim_defaults(&oc, SO_OPT_MOMENTUM);
    assert_int_equal(so_optim_create(&oc, r->m->nparams, &r->opt), 0);
    so_loader_config lc = {.batch = BATCH, .shuffle = 1, .drop_last = 1, .seed = 3, .rank = 0, .world = 1};
    assert_int_equal(so_loader_create(r->ds, &lc, &r->l), 0);
}

static void rig_free(rig *r)
{
    so_loader_destroy(r->l);
    so_optim_destroy(r->opt);
    so_model_destroy(r->m);
    so_dataset_destroy(r->ds);
}

static so_train_config config(long steps)
{
    so_train_config c;
    so_train_defaults(&c);
    c.steps = steps;
    c.eval_every = -1;
    c.throughput_skip = 0;
    c.first_bucket_bytes = 4096; /* LeNet-5 (~250 KB of gradients) gets several buckets */
    c.bucket_bytes = 16384;
    return c;
}

/* ---- a fake group: identity allreduce, events in order ----------------------- */

enum { EV_SUBMIT, EV_BACKWARD_END, EV_WAIT };
typedef struct {
    int kind, bucket;
    size_t off, count;
} event;

typedef struct {
    so_dist d;
    const so_model *m;
    event ev[4096];
    int nev;
    int bcasts, waits;
} fake_dist;

static void log_event(fake_dist *f, int kind, int bucket, size_t off, size_t count)
{
    if (f->nev < (int)(sizeof f->ev / sizeof *f->ev))
        f->ev[f->nev++] = (event){kind, bucket, off, count};
}

static int f_submit(void *ctx, float *buf, size_t count, int bucket)
{
    fake_dist *f = ctx;
    log_event(f, EV_SUBMIT, bucket, (size_t)(buf - f->m->grads), count);
    return 0;
}

static int f_wait(void *ctx, double *waited)
{
    fake_dist *f = ctx;
    f->waits++;
    log_event(f, EV_WAIT, -1, 0, 0);
    *waited = 0;
    return 0;
}

static int f_sum(void *ctx, double *v, int n) { (void)ctx, (void)v, (void)n; return 0; }
static int f_bcast(void *ctx, float *buf, size_t count) { (void)buf, (void)count; ((fake_dist *)ctx)->bcasts++; return 0; }
/* A cost model where every bucket is expensive: auto planning fuses them. */
static double f_cost(void *ctx, size_t bytes) { (void)ctx; return 1e-3 + bytes * 1e-12; }

static void on_span(void *arg, so_span_kind kind, long step, int id, double t0, double t1)
{
    (void)step, (void)id, (void)t0, (void)t1;
    if (kind == SO_SPAN_BACKWARD)
        log_event(arg, EV_BACKWARD_END, -1, 0, 0);
}

static void fake_init(fake_dist *f, const so_model *m)
{
    memset(f, 0, sizeof *f);
    f->m = m;
    f->d = (so_dist){.rank = 0, .world = 2, .ctx = f, .grad_submit = f_submit, .grad_wait = f_wait,
                     .sum = f_sum, .max = f_sum, .bcast = f_bcast, .cost = f_cost};
}

/* Per step: the submits cover [0, nparams) exactly once; with overlap they
 * all come before the end of the last backward, without it all after. */
static void check_steps(const fake_dist *f, size_t nparams, int accumulate, int overlap, long steps)
{
    int e = 0;
    for (long s = 0; s < steps; s++) {
        char *covered = calloc(nparams, 1);
        int backward_ends = 0, after_last = 0;
        size_t total = 0;
        for (; e < f->nev && f->ev[e].kind != EV_WAIT; e++) {
            const event *v = &f->ev[e];
            if (v->kind == EV_BACKWARD_END) {
                backward_ends++;
                continue;
            }
            assert_true(v->off + v->count <= nparams);
            for (size_t i = v->off; i < v->off + v->count; i++) {
                assert_int_equal(covered[i], 0);
                covered[i] = 1;
            }
            total += v->count;
            after_last += backward_ends == accumulate;
            assert_true(backward_ends >= accumulate - 1); /* never during the earlier micro-batches */
        }
        assert_int_equal(backward_ends, accumulate);
        assert_int_equal(total, nparams);
        if (overlap)
            assert_int_equal(after_last, 0);
        else
            assert_true(after_last > 0);
        assert_true(e < f->nev); /* the step's wait */
        e++;
        free(covered);
    }
}

static void run_dp(int accumulate, int overlap)
{
    rig r;
    rig_make(&r);
    fake_dist f;
    fake_init(&f, r.m);
    so_train_hooks hooks = {&f, on_span, NULL, NULL};
    so_train_config c = config(3);
    c.accumulate = accumulate;
    c.overlap = overlap;
    c.hooks = &hooks;
    so_train_result res;
    assert_int_equal(so_train(r.m, r.opt, r.l, NULL, &c, &f.d, NULL, NULL, &res), 0);
    assert_true(res.nbuckets > 2);
    assert_int_equal(f.bcasts, 1);   /* parameters; LeNet-5 has no running statistics */
    assert_int_equal(f.waits, 3);
    check_steps(&f, r.m->nparams, accumulate, overlap, 3);
    so_train_result_free(&res);
    rig_free(&r);
}

static void test_dp_overlap(void **state) { (void)state; run_dp(1, 1); }
static void test_dp_no_overlap(void **state) { (void)state; run_dp(1, 0); }
static void test_dp_accumulate(void **state) { (void)state; run_dp(3, 1); }

/* An identity allreduce must leave training exactly as the local step. */
static void test_dp_matches_local(void **state)
{
    (void)state;
    rig a, b;
    rig_make(&a);
    rig_make(&b);
    fake_dist f;
    fake_init(&f, b.m);
    so_train_config c = config(4);
    so_train_result ra, rb;
    assert_int_equal(so_train(a.m, a.opt, a.l, NULL, &c, NULL, NULL, NULL, &ra), 0);
    assert_int_equal(so_train(b.m, b.opt, b.l, NULL, &c, &f.d, NULL, NULL, &rb), 0);
    assert_memory_equal(a.m->params, b.m->params, a.m->nparams * sizeof(float));
    so_train_result_free(&ra);
    so_train_result_free(&rb);
    rig_free(&a);
    rig_free(&b);
}

/* auto_buckets: one warm-up step, two timed ones, the plan after step 3;
 * resumed at step 5, after step 8. */
static void test_dp_auto_plan(void **state)
{
    (void)state;
    for (long start = 0; start <= 5; start += 5) {
        rig r;
        rig_make(&r);
        fake_dist f;
        fake_init(&f, r.m);
        so_train_config c = config(start + 6);
        c.auto_buckets = 1;
        c.start_step = start;
        so_train_result res;
        assert_int_equal(so_train(r.m, r.opt, r.l, NULL, &c, &f.d, NULL, NULL, &res), 0);
        assert_int_equal(res.bucket_plan_step, start + 3);
        assert_true(res.nbuckets >= 1);
        assert_int_equal(r.m->timing, 0); /* measuring switched off again */
        so_train_result_free(&res);
        rig_free(&r);
    }
}

/* ---- a fake strategy: the order and count of the seam's calls ---------------- */

typedef struct {
    int starts, begins, readies, dones, updates, step_dones, finishes;
    int last_k, bad_order;
    long last_step;
    size_t grad_floats;
} counting;

static int c_start(void *self, so_model *m, const so_train_config *c, so_train_result *r)
{
    (void)m, (void)c, (void)r;
    ((counting *)self)->starts++;
    return 0;
}

static void c_begin(void *self, int k, int K)
{
    counting *s = self;
    s->bad_order |= k != (s->begins % K);
    s->begins++;
    s->last_k = k;
}

static int c_ready(void *self, int node, size_t off, size_t n)
{
    counting *s = self;
    (void)node, (void)off;
    s->readies++;
    s->grad_floats += n;
    return 0;
}

static int c_done(void *self, double *exposed)
{
    counting *s = self;
    *exposed = 0;
    s->dones++;
    return 0;
}

/* Leaves the parameters alone: the strategy, not the loop, updates. */
static int c_update(void *self, so_optim *opt, float *params, float *grads, float lr)
{
    (void)opt, (void)params, (void)grads, (void)lr;
    ((counting *)self)->updates++;
    return 0;
}

static int c_step_done(void *self, long step)
{
    counting *s = self;
    s->bad_order |= step != s->last_step + 1;
    s->last_step = step;
    s->step_dones++;
    return 0;
}

static void c_finish(void *self) { ((counting *)self)->finishes++; }

static void test_custom_strategy(void **state)
{
    (void)state;
    static const so_strategy_ops ops = {.name = "counting", .start = c_start, .backward_begin = c_begin,
                                        .grads_ready = c_ready, .grads_done = c_done, .update = c_update,
                                        .step_done = c_step_done, .finish = c_finish};
    rig r;
    rig_make(&r);
    float *before = malloc(r.m->nparams * sizeof *before);
    memcpy(before, r.m->params, r.m->nparams * sizeof *before);
    counting s = {0};
    so_strategy st = {.ops = &ops, .self = &s};
    so_train_config c = config(5);
    c.accumulate = 2;
    c.strategy = &st;
    so_train_result res;
    assert_int_equal(so_train(r.m, r.opt, r.l, NULL, &c, NULL, NULL, NULL, &res), 0);
    assert_int_equal(s.starts, 1);
    assert_int_equal(s.begins, 10);
    assert_int_equal(s.dones, 5);
    assert_int_equal(s.updates, 5);
    assert_int_equal(s.step_dones, 5);
    assert_int_equal(s.finishes, 1);
    assert_int_equal(s.bad_order, 0);
    assert_int_equal(s.grad_floats, 10 * r.m->nparams); /* every parameter, every micro-batch */
    assert_memory_equal(before, r.m->params, r.m->nparams * sizeof *before);
    free(before);
    so_train_result_free(&res);
    rig_free(&r);
}

/* ---- --clip-norm against a loop written out by hand ---------------------------- */

/* K micro-batches of forward and backward, the mean, the norm summed in
 * double one element after another, torch's coefficient, the step. */
static double reference_step(rig *r, int K, float clip, float lr)
{
    so_model *m = r->m;
    for (int k = 0; k < K; k++) {
        const float *x;
        const int32_t *y;
        int n;
        assert_int_equal(so_loader_next(r->l, &x, &y, &n), 1);
        m->accumulate_grads = k > 0;
        assert_int_equal(so_model_forward(m, x, y, n, 1), 0);
        assert_int_equal(so_model_backward(m), 0);
    }
    double sq = 0;
    for (size_t i = 0; i < m->nparams; i++) {
        m->grads[i] *= 1.0f / (float)K;
        sq += (double)m->grads[i] * m->grads[i];
    }
    double norm = sqrt(sq), coef = clip / (norm + 1e-6);
    for (size_t i = 0; coef < 1 && i < m->nparams; i++)
        m->grads[i] *= (float)coef;
    so_optim_step(r->opt, m->params, m->grads, lr);
    so_model_params_changed(m);
    return norm;
}

static void max_rel_diff(const float *a, const float *b, size_t n, double tol)
{
    double scale = 0, err = 0;
    for (size_t i = 0; i < n; i++) {
        scale = fmax(scale, fabs(a[i]));
        err = fmax(err, fabs((double)a[i] - b[i]));
    }
    if (err > tol * scale)
        fail_msg("max |a-b| %g > %g x max |a| %g", err, tol, scale);
}

/* Clipping on every step (a small bound) locally, through the data-parallel
 * strategy (an identity allreduce) and with accumulation; a bound never
 * reached changes no bit. */
static void test_clip_norm(void **state)
{
    (void)state;
    enum { STEPS = 4 };
    for (int variant = 0; variant < 3; variant++) {
        int K = variant == 2 ? 2 : 1;
        rig a, b;
        rig_make(&a);
        rig_make(&b);
        so_loader_start_epoch(a.l, 0);
        double norm = 0;
        for (int s = 0; s < STEPS; s++)
            norm = reference_step(&a, K, 0.05f, 0.01f);
        fake_dist f;
        fake_init(&f, b.m);
        so_train_config c = config(STEPS);
        c.accumulate = K;
        c.clip_norm = 0.05f;
        so_train_result res;
        assert_int_equal(so_train(b.m, b.opt, b.l, NULL, &c, variant == 0 ? NULL : &f.d, NULL, NULL, &res), 0);
        assert_int_equal(res.clipped_steps, STEPS);
        assert_true(fabs(res.grad_norm - norm) <= 1e-9 * norm);
        max_rel_diff(a.m->params, b.m->params, a.m->nparams, 1e-6);
        so_train_result_free(&res);
        rig_free(&a);
        rig_free(&b);
    }
    rig a, b;
    rig_make(&a);
    rig_make(&b);
    so_train_config c = config(3);
    so_train_result ra, rb;
    assert_int_equal(so_train(a.m, a.opt, a.l, NULL, &c, NULL, NULL, NULL, &ra), 0);
    c.clip_norm = 1e30f;
    assert_int_equal(so_train(b.m, b.opt, b.l, NULL, &c, NULL, NULL, NULL, &rb), 0);
    assert_int_equal(rb.clipped_steps, 0);
    assert_memory_equal(a.m->params, b.m->params, a.m->nparams * sizeof(float));
    so_train_result_free(&ra);
    so_train_result_free(&rb);
    rig_free(&a);
    rig_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dp_overlap),      cmocka_unit_test(test_dp_no_overlap),
        cmocka_unit_test(test_dp_accumulate),   cmocka_unit_test(test_dp_matches_local),
        cmocka_unit_test(test_dp_auto_plan),    cmocka_unit_test(test_custom_strategy),
        cmocka_unit_test(test_clip_norm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
