/* The arithmetic behind `predict` timing layers at a batch that fits: the
 * memory estimate grows by exactly the per-sample bytes, the chosen batch is
 * the target when it fits and else the largest fitting power of two (with
 * its half as the check), batch 1 not fitting is SO_ENOMEM, scaling is
 * proportional, and the linearity figure is exact on made-up times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "scaleout/err.h"
#include "scaleout/predict.h"
#include "scaleout/zoo.h"

static so_graph *build(const char *name)
{
    const so_zoo_entry *z = so_zoo_find(name);
    so_graph *g = NULL;
    assert_non_null(z);
    assert_int_equal(so_zoo_build(name, z->c, z->h, z->w, z->classes, &g), 0);
    return g;
}

/* Every sample adds the same bytes; optimizer slots add 4 bytes per parameter each. */
static void test_train_bytes(void **state)
{
    (void)state;
    so_graph *g = build("resnet20");
    double b1 = so_predict_train_bytes(g, 1, 0), b2 = so_predict_train_bytes(g, 2, 0);
    double b8 = so_predict_train_bytes(g, 8, 0);
    assert_true(b2 > b1);
    assert_true(b8 - b1 == 7 * (b2 - b1));
    assert_true(so_predict_train_bytes(g, 1, 2) - b1 == 8.0 * (double)so_graph_nparams(g));
    so_graph_destroy(g);
}

static void test_choose_batch(void **state)
{
    (void)state;
    so_graph *g = build("resnet20");
    double per = so_predict_train_bytes(g, 2, 1) - so_predict_train_bytes(g, 1, 1);
    int m, c;
    /* Room for 100 samples, no time limit: the target 64 itself, no check. */
    so_predict_limits l = {.target = 64, .optim_slots = 1, .max_bytes = so_predict_train_bytes(g, 100, 1)};
    assert_int_equal(so_predict_choose_batch(g, &l, &m, &c), 0);
    assert_int_equal(m, 64);
    assert_int_equal(c, 0);
    /* A target of 1000: 64 is the largest power of two within 100 samples' bytes, 32 the check. */
    l.target = 1000;
    assert_int_equal(so_predict_choose_batch(g, &l, &m, &c), 0);
    assert_int_equal(m, 64);
    assert_int_equal(c, 32);
    /* Time: a step of 2.5 samples' training FLOPs (3 x forward) allows batch 2. */
    l.flops_per_s = 1e9;
    l.step_seconds = 3 * so_graph_flops(g) * 2.5 / 1e9;
    assert_int_equal(so_predict_choose_batch(g, &l, &m, &c), 0);
    assert_int_equal(m, 2);
    assert_int_equal(c, 1);
    /* Not even one sample fits. */
    l.max_bytes = so_predict_train_bytes(g, 1, 1) - per / 2;
    assert_int_equal(so_predict_choose_batch(g, &l, &m, &c), SO_ENOMEM);
    so_graph_destroy(g);
}

/* Times in proportion; the rest of a step along the line through the two
 * batches, between the measured value and its proportional scaling. */
static void test_scale(void **state)
{
    (void)state;
    double f[3] = {0, 1, 2}, b[3] = {0, 4, 8}, other = 3;
    so_predict_scale(3, f, b, &other, 4, 16, 0, 0);
    assert_true(f[1] == 4 && f[2] == 8 && b[1] == 16 && b[2] == 32);
    assert_true(other == 3); /* no check batch: kept */
    other = 3;
    so_predict_scale(3, f, b, &other, 4, 16, 2, 2); /* 2 at batch 2, 3 at 4: 1 + 0.5 per sample */
    assert_true(other == 9);
    other = 3;
    so_predict_scale(3, f, b, &other, 4, 16, 2, 3.5); /* shrinking with the batch: kept */
    assert_true(other == 3);
    other = 3;
    so_predict_scale(3, f, b, &other, 4, 16, 2, 0); /* steeper than proportional: capped at 12 */
    assert_true(other == 12);
}

static void test_linearity(void **state)
{
    (void)state;
    double flo[3] = {99, 1, 1}, blo[3] = {99, 2, 2}; /* node 0 (the input) is not counted */
    double fhi[3] = {0, 1.5, 1.5}, bhi[3] = {0, 3, 3};
    /* batch 2: 6 s, batch 4: 9 s; per sample 3 against 2.25 */
    assert_true(so_predict_linearity(3, flo, blo, 2, fhi, bhi, 4) == 3.0 / 2.25);
    assert_true(so_predict_linearity(3, fhi, bhi, 4, fhi, bhi, 4) == 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_bytes),
        cmocka_unit_test(test_choose_batch),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_linearity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
