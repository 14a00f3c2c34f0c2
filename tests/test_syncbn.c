/* Synchronised batchnorm without MPI: two "ranks" are two models on two
 * threads whose allsum hook meets at a barrier. Their forward outputs, their
 * averaged gradients and their running statistics must equal one model's on
 * the union of both batches, over several SGD steps (from the second step the
 * running mean is non-zero, which the statistics use as their shift). */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "isa_cap.h"
#include "scaleout/err.h"
#include "scaleout/model.h"
#include "scaleout/rng.h"
#include "scaleout/threads.h"
#include "scaleout/zoo.h"

enum { HALF = 4, STEPS = 3, C = 3, HW = 8, CLASSES = 10, MAXV = 4096 };

typedef struct {
    pthread_barrier_t bar;
    double part[2][MAXV];
    int calls;
} meeting;

typedef struct {
    meeting *mt;
    int rank;
    so_model *m;
    const float *x;
    const int32_t *y;
    float *logits;
    int rc;
} replica;

/* Each rank posts its vector, both wait, both read the sum, both wait again
 * so neither overwrites its slot while the other still reads. */
static int allsum(void *arg, double *v, int n)
{
    replica *r = arg;
    meeting *mt = r->mt;
    if (n > MAXV)
        return so_err(SO_EINVAL, "test allsum: %d floats", n);
    memcpy(mt->part[r->rank], v, (size_t)n * sizeof *v);
    pthread_barrier_wait(&mt->bar);
    for (int i = 0; i < n; i++)
        v[i] = mt->part[0][i] + mt->part[1][i];
    if (r->rank == 0)
        mt->calls++;
    pthread_barrier_wait(&mt->bar);
    return 0;
}

static void *run_replica(void *arg)
{
    replica *r = arg;
    r->rc = so_model_forward(r->m, r->x, r->y, HALF, 1);
    if (!r->rc)
        r->rc = so_model_logits(r->m, r->logits);
    if (!r->rc)
        r->rc = so_model_backward(r->m);
    return NULL;
}

static so_model *make(const char *backend, int batch)
{
    so_graph *g = NULL;
    if (so_zoo_build("resnet20", C, HW, HW, CLASSES, &g))
        fail_msg("build: %s", so_errmsg());
    so_model *m = NULL;
    if (so_model_create(g, backend, batch, 7, &m))
        fail_msg("create: %s", so_errmsg());
    return m;
}

static double max_rel(const float *a, const float *b, size_t n)
{
    double worst = 0, scale = 1e-3;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(a[i]));
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, fabs((double)a[i] - b[i]) / scale);
    return worst;
}

static void sgd(so_model *m, const float *g)
{
    for (size_t i = 0; i < m->nparams; i++)
        m->params[i] -= 0.05f * g[i];
    so_model_params_changed(m);
}

static void check_backend(const char *backend, int synced)
{
    so_model *whole = make(backend, 2 * HALF);
    meeting mt = {.calls = 0};
    pthread_barrier_init(&mt.bar, NULL, 2);
    replica rep[2];
    for (int r = 0; r < 2; r++) {
        rep[r] = (replica){.mt = &mt, .rank = r, .m = make(backend, HALF)};
        if (synced) {
            rep[r].m->bn_allsum = allsum;
            rep[r].m->bn_allsum_arg = &rep[r];
        }
        rep[r].logits = malloc(HALF * CLASSES * sizeof(float));
    }
    size_t per = (size_t)C * HW * HW, np = whole->nparams;
    float *x = malloc(2 * HALF * per * sizeof *x), *logits = malloc(2 * HALF * CLASSES * sizeof *logits);
    float *avg = malloc(np * sizeof *avg);
    int32_t y[2 * HALF];
    so_rng rng;
    so_rng_seed(&rng, 99);
    double worst_out = 0, worst_grad = 0, worst_buf = 0;
    for (int step = 0; step < STEPS; step++) {
        for (size_t i = 0; i < 2 * HALF * per; i++)
            x[i] = 3.0f * (float)so_rng_uniform(&rng) - 1.0f; /* mean far from 0: tests the shifted sums */
        for (int i = 0; i < 2 * HALF; i++)
            y[i] = (int32_t)so_rng_below(&rng, CLASSES);
        assert_int_equal(so_model_forward(whole, x, y, 2 * HALF, 1), 0);
        assert_int_equal(so_model_logits(whole, logits), 0);
        assert_int_equal(so_model_backward(whole), 0);
        pthread_t th[2];
        for (int r = 0; r < 2; r++) {
            rep[r].x = x + (size_t)r * HALF * per;
            rep[r].y = y + r * HALF;
            pthread_create(&th[r], NULL, run_replica, &rep[r]);
        }
        for (int r = 0; r < 2; r++) {
            pthread_join(th[r], NULL);
            assert_int_equal(rep[r].rc, 0);
            worst_out = fmax(worst_out, max_rel(logits + r * HALF * CLASSES, rep[r].logits, HALF * CLASSES));
        }
        for (size_t i = 0; i < np; i++)
            avg[i] = 0.5f * (rep[0].m->grads[i] + rep[1].m->grads[i]);
        worst_grad = fmax(worst_grad, max_rel(whole->grads, avg, np));
        worst_buf = fmax(worst_buf, max_rel(whole->bufs, rep[0].m->bufs, whole->nbufs));
        sgd(whole, whole->grads);
        for (int r = 0; r < 2; r++)
            sgd(rep[r].m, avg);
    }
    print_message("%s synced=%d: outputs %.2e, gradients %.2e, running stats %.2e (max relative)\n", backend, synced,
                  worst_out, worst_grad, worst_buf);
    if (synced) {
        assert_true(mt.calls > 0);
        assert_true(worst_out < 2e-5);
        assert_true(worst_grad < 2e-4);
        assert_true(worst_buf < 2e-5);
    } else { /* per-replica statistics really differ: the check above can fail */
        assert_true(worst_grad > 1e-3);
    }
    for (int r = 0; r < 2; r++) {
        so_model_destroy(rep[r].m);
        free(rep[r].logits);
    }
    so_model_destroy(whole);
    pthread_barrier_destroy(&mt.bar);
    free(x);
    free(logits);
    free(avg);
}

static void test_ref_synced(void **state) { (void)state; check_backend("ref", 1); }
static void test_onednn_synced(void **state) { (void)state; check_backend("onednn", 1); }
static void test_unsynced_differs(void **state) { (void)state; check_backend("ref", 0); }

int main(void)
{
    if (isa_cap_redundant())
        return 77;
    so_threads_set(1, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_synced),
        cmocka_unit_test(test_onednn_synced),
        cmocka_unit_test(test_unsynced_differs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
