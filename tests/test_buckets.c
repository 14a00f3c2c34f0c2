/* Gradient bucket planning: buckets tile the gradient buffer in backward
 * order, the simulator follows its recurrence, and the joint automatic choice
 * never loses to DDP's fixed 25 MiB / 1 MiB plan under the same cost model:
 * latency-bound costs give few buckets, bandwidth-bound ones small buckets. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "scaleout/zoo.h"
#include "train/buckets.h"

typedef struct {
    double alpha, beta; /* seconds per call, seconds per byte */
} linear_cost;

static double cost(void *ctx, size_t bytes)
{
    const linear_cost *c = ctx;
    return c->alpha + c->beta * (double)bytes;
}

static so_graph *resnet(const char *name)
{
    so_graph *g = NULL;
    assert_int_equal(so_zoo_build(name, 3, 32, 32, 10, &g), 0);
    return g;
}

/* 1 ms of backward per parameterised node: gradients arrive steadily. */
static double *steady_times(const so_graph *g)
{
    double *t = calloc((size_t)so_graph_size(g), sizeof *t);
    for (int i = 1; i < so_graph_size(g); i++)
        t[i] = so_graph_node(g, i)->nparam ? 1e-3 : 0;
    return t;
}

static void test_plan_tiles_buffer(void **state)
{
    (void)state;
    so_graph *g = resnet("resnet20");
    so_bucket_plan p = {0};
    assert_int_equal(so_bucket_plan_build(g, 64 << 10, 256 << 10, &p), 0);
    assert_true(p.n > 2);
    size_t hi = so_graph_nparams(g);
    for (int b = 0; b < p.n; b++) { /* reverse order, contiguous, no gaps */
        assert_int_equal(p.b[b].hi, hi);
        assert_true(p.b[b].lo < p.b[b].hi);
        hi = p.b[b].lo;
    }
    assert_int_equal(hi, 0);
    int closers = 0;
    for (int i = 0; i < so_graph_size(g); i++)
        closers += p.closes[i] >= 0;
    assert_int_equal(closers, p.n);
    so_bucket_plan_free(&p);
    so_graph_destroy(g);
}

/* The bucket that closes last holds the lowest nodes and is only as large as
 * it must be: at least first_bytes, less than that without its top node. */
static void check_small_tail(const char *model, int hw, int classes, size_t first, size_t size)
{
    so_graph *g = NULL;
    assert_int_equal(so_zoo_build(model, 3, hw, hw, classes, &g), 0);
    so_bucket_plan p = {0};
    assert_int_equal(so_bucket_plan_build(g, first, size, &p), 0);
    const so_bucket *t = &p.b[p.n - 1];
    size_t top = 0;
    int lowest = -1;
    for (int i = 0; i < so_graph_size(g); i++) {
        const so_node *nd = so_graph_node(g, i);
        if (nd->nparam && nd->param_off + nd->nparam == t->hi)
            top = nd->nparam;
        if (nd->nparam && lowest < 0)
            lowest = i;
    }
    assert_int_equal(t->lo, 0);
    assert_true((t->hi - t->lo) * sizeof(float) >= first);
    assert_true((t->hi - t->lo - top) * sizeof(float) < first);
    assert_int_equal(p.closes[lowest], p.n - 1);
    print_message("%s: %d buckets, last %.2f MiB, the one before %.2f MiB\n", model, p.n,
                  (double)(t->hi - t->lo) * 4 / (1 << 20), (double)(p.b[p.n - 2].hi - p.b[p.n - 2].lo) * 4 / (1 << 20));
    so_bucket_plan_free(&p);
    so_graph_destroy(g);
}

static void test_plan_small_tail(void **state)
{
    (void)state;
    check_small_tail("resnet50", 224, 1000, 1u << 20, 25u << 20); /* DDP's defaults */
    check_small_tail("resnet56", 32, 10, 64 << 10, 1 << 20);
}

static void test_simulate_recurrence(void **state)
{
    (void)state;
    so_graph *g = resnet("resnet20");
    double *t = steady_times(g);
    so_bucket_plan p = {0};
    assert_int_equal(so_bucket_plan_build(g, 1u << 30, 1u << 30, &p), 0); /* one bucket */
    assert_int_equal(p.n, 1);
    double backward = 0;
    for (int i = 1; i < so_graph_size(g); i++)
        backward += t[i];
    linear_cost c = {1e-3, 1e-9};
    double want = backward + c.alpha + c.beta * (double)so_graph_nparams(g) * sizeof(float);
    assert_true(fabs(so_bucket_plan_simulate(g, &p, t, cost, &c) - want) < 1e-12);
    /* Free communication: the end is the end of backward. */
    linear_cost zero = {0, 0};
    assert_true(fabs(so_bucket_plan_simulate(g, &p, t, cost, &zero) - backward) < 1e-12);
    so_bucket_plan_free(&p);
    free(t);
    so_graph_destroy(g);
}

static void check_auto(const char *model, linear_cost c, int want_few)
{
    so_graph *g = resnet(model);
    double *t = steady_times(g);
    so_bucket_plan def = {0}, best = {0};
    assert_int_equal(so_bucket_plan_build(g, 1u << 20, 25u << 20, &def), 0);
    size_t first = 0, size = 0;
    double predicted = 0;
    assert_int_equal(so_bucket_plan_auto(g, t, cost, &c, &best, &first, &size, &predicted), 0);
    double t_def = so_bucket_plan_simulate(g, &def, t, cost, &c);
    assert_true(fabs(so_bucket_plan_simulate(g, &best, t, cost, &c) - predicted) < 1e-12);
    assert_true(predicted <= t_def);
    print_message("%s alpha %.0e beta %.0e: auto %d buckets (first %zu KiB, then %zu KiB) %.2f ms, "
                  "DDP default %d buckets %.2f ms\n", model, c.alpha, c.beta, best.n, first >> 10, size >> 10,
                  predicted * 1e3, def.n, t_def * 1e3);
    if (want_few)
        assert_true(best.n <= 2);
    else
        assert_true(best.n > def.n && predicted < t_def);
    so_bucket_plan_free(&def);
    so_bucket_plan_free(&best);
    free(t);
    so_graph_destroy(g);
}

/* 50 ms per call, fast wire: fusing everything wins. */
static void test_auto_latency_bound(void **state) { (void)state; check_auto("resnet20", (linear_cost){50e-3, 1e-10}, 1); }
/* Slow wire, cheap calls: ResNet-56's 3.4 MB in small buckets hide behind backward. */
static void test_auto_bandwidth_bound(void **state) { (void)state; check_auto("resnet56", (linear_cost){1e-6, 2e-8}, 0); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_tiles_buffer),
        cmocka_unit_test(test_plan_small_tail),
        cmocka_unit_test(test_simulate_recurrence),
        cmocka_unit_test(test_auto_latency_bound),
        cmocka_unit_test(test_auto_bandwidth_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
