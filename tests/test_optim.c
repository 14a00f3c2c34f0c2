/* Optimizer and learning-rate schedule tests: exact hand-computed trajectories
 * (dyadic numbers, so float arithmetic is exact), a table of 4-step trajectories
 * from torch.optim 1.13 for every rule with and without weight decay, state
 * save/restore, schedules at chosen steps, and parse/config errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "scaleout/err.h"
#include "scaleout/optim.h"

#define N 4
#define STEPS 4

/* One small problem shared by all tests: p0 and a fixed gradient per step. */
static const float P0[N] = {1.0f, -2.0f, 0.5f, 3.0f};
static const float G[STEPS][N] = {
    {0.5f, -1.0f, 0.25f, 2.0f},
    {0.25f, 0.5f, -0.75f, 1.0f},
    {-0.5f, 1.5f, 0.0f, -1.0f},
    {1.0f, -0.25f, 0.5f, 0.5f},
};

/* Runs `steps` steps of config c at constant lr from P0; p receives the result. */
static void run(const so_optim_config *c, float lr, int steps, float p[N])
{
    so_optim *o = NULL;
    assert_int_equal(so_optim_create(c, N, &o), 0);
    memcpy(p, P0, sizeof P0);
    for (int t = 0; t < steps; t++)
        so_optim_step(o, p, G[t], lr);
    assert_int_equal(so_optim_steps(o), steps);
    so_optim_destroy(o);
}

static so_optim_config config(so_optim_kind kind, float mu, float wd)
{
    so_optim_config c;
    so_optim_defaults(&c, kind);
    c.momentum = mu;
    c.weight_decay = wd;
    return c;
}

static void assert_exact(const float got[N], const float want[N])
{
    for (int i = 0; i < N; i++)
        if (got[i] != want[i])
            fail_msg("element %d: got %.9g, want %.9g", i, (double)got[i], (double)want[i]);
}

/* ---- hand-computed, exact: lr = 0.5, mu = 0.5, wd in {0, 0.5} ---- */

/* SGD: p <- p - lr (g + wd p).
 * wd 0:   p1 = p0 - 0.5 g0 = (0.75, -1.5, 0.375, 2)
 *         p2 = p1 - 0.5 g1 = (0.625, -1.75, 0.75, 1.5)
 *         p3 = p2 - 0.5 g2 = (0.875, -2.5, 0.75, 2)
 * wd 0.5: p <- 0.75 p - 0.5 g
 *         p1 = (0.75-0.25, -1.5+0.5, 0.375-0.125, 2.25-1) = (0.5, -1, 0.25, 1.25)
 *         p2 = (0.375-0.125, -0.75-0.25, 0.1875+0.375, 0.9375-0.5) = (0.25, -1, 0.5625, 0.4375)
 *         p3 = (0.1875+0.25, -0.75-0.75, 0.421875, 0.328125+0.5) = (0.4375, -1.5, 0.421875, 0.828125) */
static void test_sgd_exact(void **state)
{
    (void)state;
    static const float want[2][3][N] = {
        {{0.75f, -1.5f, 0.375f, 2.0f}, {0.625f, -1.75f, 0.75f, 1.5f}, {0.875f, -2.5f, 0.75f, 2.0f}},
        {{0.5f, -1.0f, 0.25f, 1.25f}, {0.25f, -1.0f, 0.5625f, 0.4375f}, {0.4375f, -1.5f, 0.421875f, 0.828125f}},
    };
    float p[N];
    for (int w = 0; w < 2; w++)
        for (int s = 1; s <= 3; s++) {
            so_optim_config c = config(SO_OPT_SGD, 0.0f, w ? 0.5f : 0.0f);
            run(&c, 0.5f, s, p);
            assert_exact(p, want[w][s - 1]);
        }
}

/* Momentum, dampening 0: b <- mu b + g (b1 = g0, as torch's first-step clone),
 * plain p <- p - lr b; Nesterov p <- p - lr (g + mu b).
 *   b1 = (0.5, -1, 0.25, 2)   b2 = (0.5, 0, -0.625, 2)   b3 = (-0.25, 1.5, -0.3125, 0)
 *   momentum: p1 = (0.75, -1.5, 0.375, 2)  p2 = (0.5, -1.5, 0.6875, 1)  p3 = (0.625, -2.25, 0.84375, 1)
 *   nesterov: d1 = 1.5 g0 = (0.75, -1.5, 0.375, 3)            p1 = (0.625, -1.25, 0.3125, 1.5)
 *             d2 = g1 + 0.5 b2 = (0.5, 0.5, -1.0625, 2)       p2 = (0.375, -1.5, 0.84375, 0.5)
 *             d3 = g2 + 0.5 b3 = (-0.625, 2.25, -0.15625, -1) p3 = (0.6875, -2.625, 0.921875, 1) */
static void test_momentum_exact(void **state)
{
    (void)state;
    static const float want[2][3][N] = {
        {{0.75f, -1.5f, 0.375f, 2.0f}, {0.5f, -1.5f, 0.6875f, 1.0f}, {0.625f, -2.25f, 0.84375f, 1.0f}},
        {{0.625f, -1.25f, 0.3125f, 1.5f}, {0.375f, -1.5f, 0.84375f, 0.5f}, {0.6875f, -2.625f, 0.921875f, 1.0f}},
    };
    float p[N];
    for (int k = 0; k < 2; k++)
        for (int s = 1; s <= 3; s++) {
            so_optim_config c = config(k ? SO_OPT_NESTEROV : SO_OPT_MOMENTUM, 0.5f, 0.0f);
            run(&c, 0.5f, s, p);
            assert_exact(p, want[k][s - 1]);
        }
    /* the momentum buffer after 3 steps is b3 */
    so_optim_config c = config(SO_OPT_MOMENTUM, 0.5f, 0.0f);
    so_optim *o = NULL;
    assert_int_equal(so_optim_create(&c, N, &o), 0);
    memcpy(p, P0, sizeof p);
    for (int t = 0; t < 3; t++)
        so_optim_step(o, p, G[t], 0.5f);
    assert_int_equal(so_optim_nslots(o), 1);
    assert_exact(so_optim_slot(o, 0), (const float[N]){-0.25f, 1.5f, -0.3125f, 0.0f});
    so_optim_destroy(o);
}

/* First steps by hand, up to eps: Adagrad s1 = g^2 so p1 = p0 - lr g/|g| = p0 - lr sign(g);
 * Adam m1/(1-b1) = g, v1/(1-b2) = g^2, same p1; RMSprop v1 = 0.01 g^2 so
 * p1 = p0 - lr g / (0.1 |g|) = p0 - 10 lr sign(g). lr = 0.1; element 3 uses g = 2. */
static void test_adaptive_first_step(void **state)
{
    (void)state;
    static const struct {
        so_optim_kind kind;
        float scale;
    } cases[] = {{SO_OPT_ADAGRAD, 1}, {SO_OPT_ADAM, 1}, {SO_OPT_ADAMW, 1}, {SO_OPT_RMSPROP, 10}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        so_optim_config c = config(cases[k].kind, 0.0f, 0.0f);
        float p[N];
        run(&c, 0.1f, 1, p);
        for (int i = 0; i < N; i++) {
            float want = P0[i] - cases[k].scale * 0.1f * (G[0][i] > 0 ? 1.0f : -1.0f);
            assert_float_equal(p[i], want, 1e-6);
        }
    }
}

/* ---- against PyTorch 1.13 ----
 * Generated once with /usr/bin/python3 (torch 1.13): for each optimizer
 * (torch.optim.SGD(lr=0.1[, momentum=0.9[, nesterov=True]]), Adagrad, RMSprop,
 * Adam, AdamW, all other arguments default, weight_decay 0 or 0.1), p = P0 and
 * p.grad = G[t] before each of 4 steps; rows are p after steps 1..4, printed
 * with %.9g. Defaults used here: momentum 0.9, Adam betas (0.9, 0.999), eps 1e-8;
 * Adagrad eps 1e-10; RMSprop alpha 0.99, eps 1e-8. */
static const struct {
    const char *kind;
    float wd;
    float p[STEPS][N];
} torch_ref[] = {
    {"sgd", 0.0f, {
        {0.949999988f, -1.89999998f, 0.474999994f, 2.79999995f},
        {0.925000012f, -1.94999993f, 0.550000012f, 2.70000005f},
        {0.975000024f, -2.0999999f, 0.550000012f, 2.79999995f},
        {0.875f, -2.07499981f, 0.5f, 2.75f},
    }},
    {"sgd", 0.1f, {
        {0.939999998f, -1.88f, 0.469999999f, 2.76999998f},
        {0.905600011f, -1.91120005f, 0.540300012f, 2.64229989f},
        {0.946543992f, -2.04208803f, 0.534897029f, 2.71587682f},
        {0.837078571f, -1.99666715f, 0.479548067f, 2.63871813f},
    }},
    {"momentum", 0.0f, {
        {0.949999988f, -1.89999998f, 0.474999994f, 2.79999995f},
        {0.879999995f, -1.86000001f, 0.527499974f, 2.51999998f},
        {0.866999984f, -1.97399998f, 0.574749947f, 2.36800003f},
        {0.755299985f, -2.05159998f, 0.567274928f, 2.18120003f},
    }},
    {"momentum", 0.1f, {
        {0.939999998f, -1.88f, 0.469999999f, 2.76999998f},
        {0.851599991f, -1.80320001f, 0.513300002f, 2.43529987f},
        {0.813524008f, -1.86604798f, 0.547137022f, 2.2097168f},
        {0.671120346f, -1.87895072f, 0.522118926f, 1.93459499f},
    }},
    {"nesterov", 0.0f, {
        {0.904999971f, -1.80999994f, 0.452499986f, 2.61999989f},
        {0.816999972f, -1.824f, 0.574750006f, 2.26799989f},
        {0.85529995f, -2.07660007f, 0.617275f, 2.23119998f},
        {0.654769957f, -2.12144017f, 0.560547471f, 2.01307988f},
    }},
    {"nesterov", 0.1f, {
        {0.885999978f, -1.77199996f, 0.442999989f, 2.56299996f},
        {0.773065984f, -1.73613191f, 0.552783012f, 2.13800287f},
        {0.782211125f, -1.92681217f, 0.577571809f, 2.01795053f},
        {0.547537386f, -1.89494014f, 0.49888292f, 1.70580447f},
    }},
    {"adagrad", 0.0f, {
        {0.899999976f, -1.89999998f, 0.400000006f, 2.9000001f},
        {0.855278611f, -1.94472134f, 0.494868338f, 2.85527873f},
        {0.921945274f, -2.02489972f, 0.494868338f, 2.89610362f},
        {0.841945291f, -2.01165438f, 0.441416085f, 2.87610364f},
    }},
    {"adagrad", 0.1f, {
        {0.899999976f, -1.89999998f, 0.400000006f, 2.9000001f},
        {0.850698709f, -1.92501223f, 0.492114633f, 2.85108209f},
        {0.902253091f, -1.9975878f, 0.485742956f, 2.8772471f},
        {0.821800947f, -1.97336638f, 0.427836239f, 2.84954476f},
    }},
    {"rmsprop", 0.0f, {
        {2.38418579e-07f, -1.0f, -0.499999642f, 2.0f},
        {-0.449012965f, -1.44901323f, 0.449158311f, 1.55098677f},
        {0.220997185f, -2.25337505f, 0.449158311f, 1.96231794f},
        {-0.58187747f, -2.11984587f, -0.0893952847f, 1.75989532f},
    }},
    {"rmsprop", 0.1f, {
        {1.78813934e-07f, -1.0f, -0.499999702f, 2.0f},
        {-0.386264354f, -1.31766045f, 0.436907113f, 1.53560519f},
        {0.255307883f, -2.05516887f, 0.385549545f, 1.84831333f},
        {-0.520032525f, -1.81558526f, -0.151257694f, 1.60187721f},
    }},
    {"adam", 0.0f, {
        {0.900000036f, -1.89999998f, 0.400000006f, 2.9000001f},
        {0.806782067f, -1.87336624f, 0.449418992f, 2.80678225f},
        {0.795703769f, -1.91230524f, 0.487619996f, 2.76711178f},
        {0.74375546f, -1.93621671f, 0.482972652f, 2.72363782f},
    }},
    {"adam", 0.1f, {
        {0.900000036f, -1.89999998f, 0.400000006f, 2.9000001f},
        {0.805009782f, -1.85374725f, 0.442482352f, 2.80515027f},
        {0.775511503f, -1.87573612f, 0.47160396f, 2.75124907f},
        {0.71450603f, -1.87954986f, 0.457433224f, 2.69290209f},
    }},
    {"adamw", 0.0f, {
        {0.900000036f, -1.89999998f, 0.400000006f, 2.9000001f},
        {0.806782067f, -1.87336624f, 0.449418992f, 2.80678225f},
        {0.795703769f, -1.91230524f, 0.487619996f, 2.76711178f},
        {0.74375546f, -1.93621671f, 0.482972652f, 2.72363782f},
    }},
    {"adamw", 0.1f, {
        {0.890000045f, -1.88f, 0.395000011f, 2.87000012f},
        {0.78788209f, -1.83456624f, 0.440468997f, 2.7480824f},
        {0.768924952f, -1.85515964f, 0.474265307f, 2.68093109f},
        {0.709287405f, -1.86051953f, 0.464875311f, 2.61064792f},
    }},
};

/* Agreement to a few float ulps of the values' scale: the rules are the same,
 * only rounding of the hyper-parameters (lr is a float here, a double in torch)
 * and of sqrt/division may differ. */
#define TORCH_ATOL 4e-7
#define TORCH_RTOL 2e-6

static void test_against_torch(void **state)
{
    (void)state;
    for (size_t r = 0; r < sizeof torch_ref / sizeof torch_ref[0]; r++) {
        so_optim_kind kind;
        assert_int_equal(so_optim_parse(torch_ref[r].kind, &kind), 0);
        so_optim_config c = config(kind, kind == SO_OPT_MOMENTUM || kind == SO_OPT_NESTEROV ? 0.9f : 0.0f,
                                   torch_ref[r].wd);
        for (int s = 1; s <= STEPS; s++) {
            float p[N];
            run(&c, 0.1f, s, p);
            for (int i = 0; i < N; i++) {
                double want = torch_ref[r].p[s - 1][i], err = fabs((double)p[i] - want);
                if (err > TORCH_ATOL + TORCH_RTOL * fabs(want))
                    fail_msg("%s wd %g step %d element %d: got %.9g, torch %.9g", torch_ref[r].kind,
                             (double)torch_ref[r].wd, s, i, (double)p[i], want);
            }
        }
    }
}

/* Saving slots + step counter and restoring them into a fresh optimizer must
 * continue the trajectory bit for bit (what a checkpoint resume relies on). */
static void test_state_roundtrip(void **state)
{
    (void)state;
    for (int k = SO_OPT_SGD; k <= SO_OPT_ADAMW; k++) {
        so_optim_config c = config((so_optim_kind)k, 0.9f, 0.1f);
        float whole[N], resumed[N];
        run(&c, 0.1f, STEPS, whole);

        so_optim *a = NULL, *b = NULL;
        assert_int_equal(so_optim_create(&c, N, &a), 0);
        assert_int_equal(so_optim_create(&c, N, &b), 0);
        memcpy(resumed, P0, sizeof resumed);
        for (int t = 0; t < 2; t++)
            so_optim_step(a, resumed, G[t], 0.1f);
        for (int i = 0; i < so_optim_nslots(a); i++) {
            assert_true(((uintptr_t)so_optim_slot(a, i) & 63) == 0);
            memcpy(so_optim_slot(b, i), so_optim_slot(a, i), N * sizeof(float));
        }
        assert_null(so_optim_slot(a, so_optim_nslots(a)));
        assert_null(so_optim_slot(a, -1));
        so_optim_set_steps(b, so_optim_steps(a));
        for (int t = 2; t < STEPS; t++)
            so_optim_step(b, resumed, G[t], 0.1f);
        assert_exact(resumed, whole);
        so_optim_destroy(a);
        so_optim_destroy(b);
    }
}

static void test_slots_and_names(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int nslots;
    } want[] = {{"sgd", 0}, {"momentum", 1}, {"nesterov", 1}, {"adagrad", 1},
                {"rmsprop", 1}, {"adam", 2}, {"adamw", 2}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        so_optim_kind kind;
        assert_int_equal(so_optim_parse(want[i].name, &kind), 0);
        assert_string_equal(so_optim_name(kind), want[i].name);
        so_optim_config c;
        so_optim_defaults(&c, kind);
        so_optim *o = NULL;
        assert_int_equal(so_optim_create(&c, 0, &o), 0); /* empty models are legal */
        assert_int_equal(so_optim_nslots(o), want[i].nslots);
        so_optim_step(o, NULL, NULL, 0.1f);
        assert_int_equal(so_optim_steps(o), 1);
        so_optim_destroy(o);
    }
    so_optim_destroy(NULL);
}

/* A step over ranges is the whole step, element for element: the flat
 * buffer in two pieces whose state sits in the other order (a shard's
 * compact state), for every rule with weight decay; a range outside the
 * state is refused. */
static void test_step_ranges(void **state)
{
    (void)state;
    for (int kind = SO_OPT_SGD; kind <= SO_OPT_ADAMW; kind++) {
        so_optim_config c = config((so_optim_kind)kind, 0.5f, 0.125f);
        if (kind != SO_OPT_MOMENTUM && kind != SO_OPT_NESTEROV)
            c.momentum = 0;
        so_optim *whole = NULL, *split = NULL;
        assert_int_equal(so_optim_create(&c, N, &whole), 0);
        assert_int_equal(so_optim_create(&c, N, &split), 0);
        assert_int_equal(so_optim_size(split), N);
        float a[N], b[N];
        memcpy(a, P0, sizeof P0);
        memcpy(b, P0, sizeof P0);
        for (int t = 0; t < STEPS; t++) {
            so_optim_step(whole, a, G[t], 0.25f);
            so_optim_range r[2] = {{b + 1, G[t] + 1, 1, 0, 3}, {b, G[t], 0, 3, 1}};
            assert_int_equal(so_optim_step_ranges(split, r, 2, 0.25f), 0);
        }
        assert_exact(b, a);
        for (int k = 0; k < so_optim_nslots(whole); k++) {
            const float *sw = so_optim_slot(whole, k), *ss = so_optim_slot(split, k);
            assert_true(sw[0] == ss[3] && sw[1] == ss[0] && sw[2] == ss[1] && sw[3] == ss[2]);
        }
        assert_int_equal(so_optim_steps(split), STEPS);
        so_optim_range bad = {b, G[0], 0, 2, 3};
        assert_int_equal(so_optim_step_ranges(split, &bad, 1, 0.25f), SO_EINVAL);
        so_optim_destroy(whole);
        so_optim_destroy(split);
    }
}

static void test_optim_errors(void **state)
{
    (void)state;
    so_optim_kind kind = SO_OPT_SGD;
    assert_int_equal(so_optim_parse("lamb", &kind), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "lamb"));
    assert_non_null(strstr(so_errmsg(), "adamw"));
    assert_int_equal(so_optim_parse("Adam", &kind), SO_EINVAL);
    assert_int_equal(so_optim_parse(NULL, &kind), SO_EINVAL);
    assert_int_equal(kind, SO_OPT_SGD);
    assert_string_equal(so_optim_name((so_optim_kind)42), "?");

    so_optim *o = (so_optim *)&kind;
    so_optim_config c = config(SO_OPT_MOMENTUM, 1.0f, 0.0f);
    assert_int_equal(so_optim_create(&c, N, &o), SO_EINVAL);
    assert_null(o);
    assert_non_null(strstr(so_errmsg(), "momentum"));
    c = config(SO_OPT_NESTEROV, 0.0f, 0.0f);
    assert_int_equal(so_optim_create(&c, N, &o), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "nesterov"));
    c = config(SO_OPT_SGD, 0.0f, -0.1f);
    assert_int_equal(so_optim_create(&c, N, &o), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "weight_decay"));
    c = config(SO_OPT_ADAM, 0.0f, 0.0f);
    c.beta2 = 1.0;
    assert_int_equal(so_optim_create(&c, N, &o), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "betas"));
    c = config(SO_OPT_RMSPROP, 0.0f, 0.0f);
    c.alpha = NAN;
    assert_int_equal(so_optim_create(&c, N, &o), SO_EINVAL);
    c.kind = (so_optim_kind)99;
    assert_int_equal(so_optim_create(&c, N, &o), SO_EINVAL);
}

/* ---- learning-rate schedules ---- */

static so_lr_schedule schedule(so_lr_kind kind, float base)
{
    return (so_lr_schedule){.kind = kind, .base_lr = base, .gamma = 0.1f, .step_size = 30, .total_steps = 100};
}

/* so_optim_set_decay: inside the ranges each element follows the decayed
 * trajectory, outside it the undecayed one, bit for bit, for every rule;
 * an empty list decays nothing; bad lists are refused. */
static void test_decay_mask(void **state)
{
    (void)state;
    static const so_optim_kind kinds[] = {SO_OPT_SGD,    SO_OPT_MOMENTUM, SO_OPT_NESTEROV, SO_OPT_ADAGRAD,
                                          SO_OPT_RMSPROP, SO_OPT_ADAM,     SO_OPT_ADAMW};
    const size_t ranges[] = {1, 2, 3, 4}; /* elements 1 and 3 decay */
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        so_optim_config with = config(kinds[k], 0.5f, 0.25f), without = config(kinds[k], 0.5f, 0.0f);
        float pw[N], pn[N], pm[N], p0[N];
        run(&with, 0.125f, STEPS, pw);
        run(&without, 0.125f, STEPS, pn);
        for (int none = 0; none < 2; none++) {
            so_optim *o = NULL;
            assert_int_equal(so_optim_create(&with, N, &o), 0);
            assert_int_equal(so_optim_set_decay(o, ranges, none ? 0 : 2), 0);
            memcpy(pm, P0, sizeof P0);
            for (int t = 0; t < STEPS; t++)
                so_optim_step(o, pm, G[t], 0.125f);
            so_optim_destroy(o);
            for (int i = 0; i < N; i++)
                p0[i] = !none && (i == 1 || i == 3) ? pw[i] : pn[i];
            assert_exact(pm, p0);
        }
    }
    so_optim *o = NULL;
    so_optim_config c = config(SO_OPT_ADAMW, 0.0f, 0.1f);
    assert_int_equal(so_optim_create(&c, N, &o), 0);
    /* ranges are the model's flat offsets: past a shard's size is allowed */
    const size_t empty[] = {2, 2}, unsorted[] = {2, 3, 0, 1}, overlap[] = {0, 3, 2, 5};
    assert_int_equal(so_optim_set_decay(o, empty, 1), SO_EINVAL);
    assert_int_equal(so_optim_set_decay(o, unsorted, 2), SO_EINVAL);
    assert_int_equal(so_optim_set_decay(o, overlap, 2), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "weight decay range"));
    so_optim_destroy(o);
}

static void test_lr_constant_and_step(void **state)
{
    (void)state;
    so_lr_schedule s = schedule(SO_LR_CONSTANT, 0.1f);
    assert_int_equal(so_lr_check(&s), 0);
    assert_true(so_lr_at(&s, 0) == 0.1f && so_lr_at(&s, 100000) == 0.1f);

    /* 0.4 * 0.1^floor(step/30) */
    s = schedule(SO_LR_STEP, 0.4f);
    assert_int_equal(so_lr_check(&s), 0);
    static const struct {
        long step;
        float lr;
    } at[] = {{0, 0.4f}, {29, 0.4f}, {30, 0.04f}, {59, 0.04f}, {60, 0.004f}, {95, 0.0004f}};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
        assert_float_equal(so_lr_at(&s, at[i].step), at[i].lr, 1e-7 * at[i].lr);
}

/* Goyal et al. warm-up: base 0.4, 5 steps from 0.25*base:
 * lr(t) = 0.4 (0.25 + 0.75 t/5) = 0.1, 0.16, 0.22, 0.28, 0.34, then 0.4. Step
 * decay counts from step 0, so with step_size 10, gamma 0.5 step 10 gives 0.2. */
static void test_lr_warmup(void **state)
{
    (void)state;
    so_lr_schedule s = schedule(SO_LR_STEP, 0.4f);
    s.warmup_steps = 5;
    s.warmup_start = 0.25f;
    s.step_size = 10;
    s.gamma = 0.5f;
    assert_int_equal(so_lr_check(&s), 0);
    static const float want[] = {0.1f, 0.16f, 0.22f, 0.28f, 0.34f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.2f};
    for (long t = 0; t < (long)(sizeof want / sizeof want[0]); t++)
        assert_float_equal(so_lr_at(&s, t), want[t], 1e-7);
    s.kind = SO_LR_CONSTANT;
    assert_float_equal(so_lr_at(&s, 2), 0.22f, 1e-7);
    assert_true(so_lr_at(&s, 5) == 0.4f);
}

/* Cosine, base 1, min 0, 100 steps: lr = (1 + cos(pi t/100))/2:
 * t=25: (1 + 0.70710678)/2 = 0.85355339; 50: 0.5; 75: 0.14644661; >= 100: 0.
 * With 10 warm-up steps, min 0.1 and total 110, the cosine spans steps 10..110:
 * step 10 -> 1, step 60 -> 0.1 + 0.9 * 0.5 = 0.55, step 110 -> 0.1. */
static void test_lr_cosine(void **state)
{
    (void)state;
    so_lr_schedule s = schedule(SO_LR_COSINE, 1.0f);
    assert_int_equal(so_lr_check(&s), 0);
    assert_float_equal(so_lr_at(&s, 0), 1.0f, 1e-7);
    assert_float_equal(so_lr_at(&s, 25), 0.85355339f, 1e-7);
    assert_float_equal(so_lr_at(&s, 50), 0.5f, 1e-7);
    assert_float_equal(so_lr_at(&s, 75), 0.14644661f, 1e-7);
    assert_true(so_lr_at(&s, 100) == 0.0f && so_lr_at(&s, 150) == 0.0f);

    s.warmup_steps = 10;
    s.warmup_start = 0.1f;
    s.min_lr = 0.1f;
    s.total_steps = 110;
    assert_int_equal(so_lr_check(&s), 0);
    assert_float_equal(so_lr_at(&s, 0), 0.1f, 1e-7);
    assert_float_equal(so_lr_at(&s, 5), 0.55f, 1e-7); /* warm-up midpoint: 0.1 + 0.9 * 0.5 */
    assert_float_equal(so_lr_at(&s, 10), 1.0f, 1e-7);
    assert_float_equal(so_lr_at(&s, 60), 0.55f, 1e-7);
    assert_true(so_lr_at(&s, 110) == 0.1f);
    /* monotone non-increasing after warm-up */
    for (long t = 11; t <= 110; t++)
        assert_true(so_lr_at(&s, t) <= so_lr_at(&s, t - 1));
}

static void test_lr_errors(void **state)
{
    (void)state;
    so_lr_kind kind = SO_LR_CONSTANT;
    assert_int_equal(so_lr_parse("cosine", &kind), 0);
    assert_int_equal(kind, SO_LR_COSINE);
    assert_string_equal(so_lr_name(kind), "cosine");
    assert_int_equal(so_lr_parse("step", &kind), 0);
    assert_int_equal(kind, SO_LR_STEP);
    assert_int_equal(so_lr_parse("linear", &kind), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "linear"));
    assert_non_null(strstr(so_errmsg(), "constant"));
    assert_int_equal(so_lr_parse(NULL, &kind), SO_EINVAL);
    assert_int_equal(kind, SO_LR_STEP);

    so_lr_schedule s = schedule(SO_LR_CONSTANT, 0.0f);
    assert_int_equal(so_lr_check(&s), SO_EINVAL);
    s = schedule(SO_LR_STEP, 0.1f);
    s.step_size = 0;
    assert_int_equal(so_lr_check(&s), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "step size"));
    assert_true(so_lr_at(&s, 50) == 0.1f); /* unchecked degenerate schedule: no division by zero */
    s = schedule(SO_LR_COSINE, 0.1f);
    s.warmup_steps = 100;
    s.warmup_start = 0.1f;
    assert_int_equal(so_lr_check(&s), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "total steps"));
    s = schedule(SO_LR_CONSTANT, 0.1f);
    s.warmup_steps = 5;
    s.warmup_start = 2.0f;
    assert_int_equal(so_lr_check(&s), SO_EINVAL);
    s.warmup_steps = -1;
    assert_int_equal(so_lr_check(&s), SO_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_exact),
        cmocka_unit_test(test_momentum_exact),
        cmocka_unit_test(test_adaptive_first_step),
        cmocka_unit_test(test_against_torch),
        cmocka_unit_test(test_state_roundtrip),
        cmocka_unit_test(test_slots_and_names),
        cmocka_unit_test(test_step_ranges),
        cmocka_unit_test(test_optim_errors),
        cmocka_unit_test(test_decay_mask),
        cmocka_unit_test(test_lr_constant_and_step),
        cmocka_unit_test(test_lr_warmup),
        cmocka_unit_test(test_lr_cosine),
        cmocka_unit_test(test_lr_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
