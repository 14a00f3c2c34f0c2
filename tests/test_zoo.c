/* Model zoo tests: every model builds with its default input and has exactly
 * the parameter count of its PyTorch definition (resnetN of any depth too); tensor names and shapes equal
 * the PyTorch state_dicts (ResNet-50: torchvision's); FLOPs match published figures;
 * bad requests fail with messages that name the model. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scaleout/backend.h"
#include "scaleout/err.h"
#include "scaleout/gpt2.h"
#include "scaleout/model.h"
#include "scaleout/zoo.h"

/* Parameter counts (trainable; BN running stats excluded) at the default input
 * and classes. Source: /usr/bin/python3 bench/torch_models.py (torch 1.13,
 * torchvision 0.14): torchvision.models.<name>() for alexnet, vgg*, resnet18..101,
 * the twins defined there for the rest (GPT-2: bench/torch_gpt2.py, llm.c's
 * padded vocabulary of 50304; 124,475,904 is llm.c's count). Same numbers as
 * tests/data/zoo_params.txt. */
static const struct {
    const char *name;
    size_t params;
} torch_params[] = {
    {"mlp", 1863690},        {"lenet5", 61706},         {"smallcnn", 468010},     {"alexnet", 61100840},
    {"vgg11", 132863336},    {"vgg16", 138357544},      {"vgg19", 143667240},     {"resnet20", 272474},
    {"resnet32", 466906},    {"resnet56", 855770},      {"resnet110", 1730714},   {"resnet164", 1703258},
    {"resnet1001", 10327706}, {"resnet18", 11689512},   {"resnet34", 21797672},   {"resnet50", 25557032},
    {"resnet101", 44549160}, {"resnet152", 60192808},  {"gpt2", 124475904},       {"gpt2-medium", 354871296},
    {"gpt2-large", 774090240}, {"gpt2-xl", 1557686400},
};
#define NMODELS ((int)(sizeof torch_params / sizeof torch_params[0]))

/* Path of a file in tests/data: $SCALEOUT_SOURCE_DIR (set by ctest) or the
 * source directory compiled in by tests/cmake/zoo.cmake. */
static FILE *open_data(const char *file)
{
    const char *dir = getenv("SCALEOUT_SOURCE_DIR");
    char path[1024];
    if (dir)
        snprintf(path, sizeof path, "%s/tests/data/%s", dir, file);
    else
        snprintf(path, sizeof path, "%s/%s", SO_TEST_DATA, file);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s", path);
    return f;
}

static so_graph *build_default(const char *name)
{
    const so_zoo_entry *e = so_zoo_find(name);
    assert_non_null(e);
    so_graph *g = NULL;
    int rc = so_zoo_build(name, e->c, e->h, e->w, e->classes, &g);
    if (rc)
        fail_msg("%s: %s", name, so_errmsg());
    return g;
}

static void test_list_and_find(void **state)
{
    (void)state;
    int n = 0;
    const so_zoo_entry *list = so_zoo_list(&n);
    assert_int_equal(n, NMODELS);
    for (int i = 0; i < n; i++) {
        assert_string_equal(list[i].name, torch_params[i].name); /* display order = table order */
        assert_ptr_equal(so_zoo_find(list[i].name), &list[i]);
        assert_true(list[i].description && list[i].description[0]);
    }
    assert_null(so_zoo_find("resnet51"));
    assert_null(so_zoo_find(NULL));
    /* any-depth CIFAR ResNets resolve to their family (rule in zoo.h) */
    const so_zoo_entry *fam = so_zoo_families(&n);
    assert_int_equal(n, 3);
    assert_ptr_equal(so_zoo_find("gpt2:L=4,H=4,C=128,T=64,V=512"), &fam[2]);
    assert_ptr_equal(so_zoo_find("gpt2-xl:T=2048"), &fam[2]);
    assert_ptr_equal(so_zoo_find("gpt2:L=x"), &fam[2]); /* the family's; so_zoo_check says why not */
    assert_ptr_equal(so_zoo_find("gpt2"), &list[18]);
    assert_null(so_zoo_find("gpt3"));
    assert_null(so_zoo_find("gpt2-small"));
    assert_ptr_equal(so_zoo_find("resnet44"), &fam[0]);
    assert_ptr_equal(so_zoo_find("resnet1202"), &fam[0]);
    assert_ptr_equal(so_zoo_find("resnet8"), &fam[0]);
    assert_ptr_equal(so_zoo_find("resnet47"), &fam[1]);
    assert_ptr_equal(so_zoo_find("resnet11"), &fam[1]);
    assert_ptr_equal(so_zoo_find("preresnet164"), &fam[1]);
    assert_ptr_equal(so_zoo_find("preresnet20"), &fam[1]); /* 20 = 9*2+2: pre-activation when asked */
    assert_ptr_equal(so_zoo_find("resnet164"), &list[11]); /* listed names come first */
    assert_ptr_equal(so_zoo_find("resnet152"), &list[17]); /* ImageNet, not the 6n+2 form */
    assert_null(so_zoo_find("resnet2"));
    assert_null(so_zoo_find("resnet020"));
    assert_null(so_zoo_find("preresnet26"));
    assert_null(so_zoo_find("resnet100004")); /* 6n+2, but above the cap */
    assert_null(so_zoo_find("wideresnet20"));
}

/* resnetN beyond the table: parameter counts of the PyTorch twins
 * (bench/torch_models.py's build(), which applies the same rule). The
 * basic-block form at 20 and 110 and the pre-activation one at 164 and 1001
 * are the listed models; preresnet164 is resnet164 with the same names. */
static void test_any_depth(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        size_t params;
    } ref[] = {{"resnet44", 661338},     {"resnet1202", 19424026}, {"resnet47", 497690}, {"preresnet20", 219482},
               {"preresnet164", 1703258}, {"resnet20", 272474},    {"resnet110", 1730714}};
    for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++) {
        so_graph *g = NULL;
        if (so_zoo_build(ref[i].name, 3, 32, 32, 10, &g))
            fail_msg("%s: %s", ref[i].name, so_errmsg());
        if (so_graph_nparams(g) != ref[i].params)
            fail_msg("%s: %zu parameters, torch has %zu", ref[i].name, so_graph_nparams(g), ref[i].params);
        so_graph_destroy(g);
    }
    so_graph *a = build_default("resnet164"), *b = NULL;
    assert_int_equal(so_zoo_build("preresnet164", 3, 32, 32, 10, &b), 0);
    assert_int_equal(so_graph_size(a), so_graph_size(b));
    for (int i = 0; i < so_graph_size(a); i++)
        assert_string_equal(so_graph_node(a, i)->name, so_graph_node(b, i)->name);
    so_graph_destroy(a);
    so_graph_destroy(b);
}

/* One training step of zoo model `name` on `batch` deterministic samples
 * with `backend`: returns the loss after checking it and every gradient are
 * finite and most gradients non-zero. */
static float train_step(const char *name, const char *backend, int batch)
{
    so_graph *g = build_default(name);
    size_t np = so_graph_nparams(g), nx = (size_t)batch * 3 * 32 * 32;
    so_model *m = NULL;
    if (so_model_create(g, backend, batch, 7, &m))
        fail_msg("%s on %s: %s", name, backend, so_errmsg());
    float *x = malloc(nx * sizeof *x);
    int32_t y[2] = {3, 8};
    assert_non_null(x);
    assert_true(batch <= 2);
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    assert_int_equal(so_model_forward(m, x, y, batch, 1), 0);
    assert_int_equal(so_model_backward(m), 0);
    float loss = m->loss;
    if (!isfinite(loss) || loss < 0.5f || loss > 10.0f)
        fail_msg("%s on %s: loss %g", name, backend, (double)loss);
    size_t nonzero = 0;
    for (size_t i = 0; i < np; i++) {
        if (!isfinite(m->grads[i]))
            fail_msg("%s on %s: gradient %zu is %g", name, backend, i, (double)m->grads[i]);
        nonzero += m->grads[i] != 0.0f;
    }
    assert_true(nonzero > np / 2);
    so_model_destroy(m);
    free(x);
    return loss;
}

/* The sanitizer build instruments the ref backend's loops (~40 s for
 * resnet164 there): it checks the same bottleneck blocks on a shallow twin. */
#if defined(__SANITIZE_ADDRESS__)
#define PRE_BOTH "preresnet29"
#else
#define PRE_BOTH "resnet164"
#endif

/* resnet164 trains on 2 samples with both backends, to the same loss (same
 * seed and data; near ln 10 at initialisation); resnet1001 on 1 sample with
 * onednn (under a second; on ref it takes seconds). The test peaks at ~350 MB. */
static void test_preresnet_steps(void **state)
{
    (void)state;
    float ref = train_step(PRE_BOTH, "ref", 2);
    if (!so_backend_find("onednn"))
        return;
    float dnn = train_step(PRE_BOTH, "onednn", 2);
    if (fabsf(ref - dnn) > 1e-3f * ref)
        fail_msg(PRE_BOTH " loss: ref %.6f, onednn %.6f", (double)ref, (double)dnn);
    train_step("resnet1001", "onednn", 1);
}

/* Builds every model at its default input: parameter counts equal PyTorch's,
 * the loss has `classes` logits, every ReLU was fused (each follows a conv,
 * dense, BN or add with no other consumer), and parameterised nodes carry
 * distinct PyTorch module names, not generated ones. */
static void test_param_counts(void **state)
{
    (void)state;
    for (int m = 0; m < NMODELS; m++) {
        so_graph *g = build_default(torch_params[m].name);
        if (so_graph_nparams(g) != torch_params[m].params)
            fail_msg("%s: %zu parameters, torch has %zu", torch_params[m].name, so_graph_nparams(g),
                     torch_params[m].params);
        assert_int_equal(so_graph_classes(g), so_zoo_find(torch_params[m].name)->classes);
        for (int i = 1; i < so_graph_size(g); i++) {
            const so_node *nd = so_graph_node(g, i);
            assert_int_not_equal(nd->op, SO_OP_RELU);
            if (!nd->nparam)
                continue;
            /* generated names are "<op><index>"; "conv1" is also a real module name, so
             * only dense/batchnorm prefixes prove a missing name; duplicates are wrong too */
            if (!strncmp(nd->name, "dense", 5) || !strncmp(nd->name, "batchnorm", 9))
                fail_msg("%s: node %d has the generated name %s", torch_params[m].name, i, nd->name);
            for (int j = 1; j < i; j++)
                if (!strcmp(so_graph_node(g, j)->name, nd->name))
                    fail_msg("%s: nodes %d and %d are both named %s", torch_params[m].name, j, i, nd->name);
        }
        so_graph_destroy(g);
    }
}

/* tests/data/zoo_params.txt is what bench/torch_models.py prints; the shell
 * test test_torch_models.sh checks torch reproduces it, this checks it agrees
 * with the table above, so C, file and torch are one chain. */
static void test_params_file(void **state)
{
    (void)state;
    FILE *f = open_data("zoo_params.txt");
    char name[64];
    size_t count;
    int m = 0, specs = 0;
    while (fscanf(f, "%63s %zu", name, &count) == 2) {
        if (m < NMODELS) {
            assert_string_equal(name, torch_params[m].name);
            assert_int_equal(count, torch_params[m].params);
            m++;
            continue;
        }
        /* then GPT-2 specs (Hugging Face's unpadded vocabulary): built here */
        so_zoo_entry z;
        so_graph *g = NULL;
        if (so_zoo_resolve(name, &z) || so_zoo_build(name, z.c, z.h, z.w, z.classes, &g))
            fail_msg("%s: %s", name, so_errmsg());
        if (so_graph_nparams(g) != count)
            fail_msg("%s: %zu parameters, torch has %zu", name, so_graph_nparams(g), count);
        so_graph_destroy(g);
        specs++;
    }
    fclose(f);
    assert_int_equal(m, NMODELS);
    assert_int_equal(specs, 4);
}

/* Compares g's tensors, in node order, as "[model ]name.suffix d0,d1,.." with
 * the next lines of f; returns how many matched (fails on any difference). */
static int compare_keys(const so_graph *g, FILE *f, const char *model)
{
    char want[256], got[256];
    int lines = 0;
    for (int i = 1; i < so_graph_size(g); i++) {
        so_tensor_desc t[4];
        int nt = so_node_tensors(g, i, t);
        for (int k = 0; k < nt; k++) {
            int len = snprintf(got, sizeof got, "%s%s%s.%s ", model ? model : "", model ? " " : "",
                               so_graph_node(g, i)->name, t[k].suffix);
            for (int d = 0; d < t[k].ndim; d++)
                len += snprintf(got + len, sizeof got - (size_t)len, "%s%lld", d ? "," : "", (long long)t[k].dims[d]);
            if (!fgets(want, sizeof want, f))
                fail_msg("torch has fewer tensors; extra: %s", got);
            want[strcspn(want, "\n")] = 0;
            if (strcmp(got, want))
                fail_msg("tensor %d: got '%s', torch '%s'", lines, got, want);
            lines++;
        }
    }
    return lines;
}

/* Every tensor of resnet50, in node order, as "name.suffix d0,d1,.." equals the
 * torchvision state_dict (keys and shapes, num_batches_tracked excluded) dumped
 * by `bench/torch_models.py --keys resnet50` into tests/data/resnet50_keys.txt. */
static void test_resnet50_names(void **state)
{
    (void)state;
    so_graph *g = build_default("resnet50");
    FILE *f = open_data("resnet50_keys.txt");
    assert_int_equal(compare_keys(g, f, NULL), 267); /* 161 parameters + 2 x 53 BN buffers */
    char extra[256];
    if (fgets(extra, sizeof extra, f))
        fail_msg("torchvision has more tensors, next: %s", extra);
    fclose(f);
    so_graph_destroy(g);
}

/* The same for every model against its PyTorch twin at the default input
 * (`bench/torch_models.py --keys all` -> tests/data/zoo_keys.txt): names,
 * order and shapes agree, so a state_dict loads into either side by name. */
static void test_all_names(void **state)
{
    (void)state;
    FILE *f = open_data("zoo_keys.txt");
    for (int m = 0; m < NMODELS; m++) {
        so_graph *g = build_default(torch_params[m].name);
        assert_true(compare_keys(g, f, torch_params[m].name) > 0);
        so_graph_destroy(g);
    }
    char extra[256];
    if (fgets(extra, sizeof extra, f))
        fail_msg("zoo_keys.txt has more tensors, next: %s", extra);
    fclose(f);
}

/* Forward FLOPs per sample (2 per multiply-add, convs and dense layers) against
 * torchvision's documented GMACs (0.14 docs "GFLOPS" column, which counts MACs). */
static void test_flops(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        double gmacs;
    } ref[] = {{"resnet50", 4.09}, {"resnet18", 1.81}, {"resnet101", 7.80}, {"vgg16", 15.47}, {"alexnet", 0.71}};
    for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++) {
        so_graph *g = build_default(ref[i].name);
        double f = so_graph_flops(g), want = 2e9 * ref[i].gmacs;
        if (fabs(f - want) > 0.02 * want)
            fail_msg("%s: %.4g FLOPs, expected %.4g +- 2%%", ref[i].name, f, want);
        so_graph_destroy(g);
    }
    so_graph *g = build_default("resnet50"); /* the brief's figure: ~8.2 GFLOPs */
    assert_true(fabs(so_graph_flops(g) - 8.2e9) < 0.02 * 8.2e9);
    so_graph_destroy(g);
}

/* Non-default inputs and classes re-size the layers that depend on them. */
static void test_other_shapes(void **state)
{
    (void)state;
    so_graph *g = NULL;
    assert_int_equal(so_zoo_build("resnet18", 3, 64, 64, 100, &g), 0);
    assert_int_equal(so_graph_nparams(g), 11689512 - (512 * 1000 + 1000) + (512 * 100 + 100));
    assert_int_equal(so_graph_classes(g), 100);
    so_graph_destroy(g);
    assert_int_equal(so_zoo_build("mlp", 3, 32, 32, 10, &g), 0);
    assert_int_equal(so_graph_nparams(g), 1863690 - 784 * 1024 + 3072 * 1024);
    so_graph_destroy(g);
    assert_int_equal(so_zoo_build("resnet20", 3, 32, 32, 100, &g), 0);
    assert_int_equal(so_graph_nparams(g), 272474 + 90 * 64 + 90);
    so_graph_destroy(g);
    /* smallcnn on 3x32x32: conv1 has 3x the weights, fc1 sees 64*8*8 */
    assert_int_equal(so_zoo_build("smallcnn", 3, 32, 32, 10, &g), 0);
    assert_int_equal(so_graph_nparams(g), 468010 + 2 * 288 + 64 * (64 - 49) * 128);
    so_graph_destroy(g);
}

/* Asserts so_zoo_build fails with SO_EINVAL, out stays NULL, and the message
 * contains each of the given fragments. */
static void expect_error(const char *name, int c, int h, int w, int classes, const char *frag1, const char *frag2)
{
    so_graph *g = (so_graph *)&g;
    assert_int_equal(so_zoo_build(name, c, h, w, classes, &g), SO_EINVAL);
    assert_null(g);
    const char *msg = so_errmsg();
    if (!strstr(msg, frag1) || (frag2 && !strstr(msg, frag2)))
        fail_msg("message '%s' lacks '%s'/'%s'", msg, frag1, frag2 ? frag2 : "");
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("resnet51", 3, 224, 224, 1000, "unknown model 'resnet51'", "resnet18/34/50/101/152");
    expect_error("resnet51", 3, 32, 32, 10, "6n+2", "9n+2");
    expect_error("resnet2", 3, 32, 32, 10, "unknown model 'resnet2'", "n >= 1");
    expect_error("preresnet26", 3, 32, 32, 10, "unknown model 'preresnet26'", "9n+2");
    expect_error("resnet100004", 3, 32, 32, 10, "unknown model", "N <= 100000");
    expect_error("wideresnet20", 3, 32, 32, 10, "unknown model", "preresnet<9n+2>");
    expect_error("resnet", 3, 32, 32, 10, "unknown model 'resnet'", "resnet50, ");
    expect_error("resnet164", 3, 2, 2, 10, "resnet164: ", "too small");
    expect_error("resnet44", 3, 2, 2, 10, "resnet44: ", "too small");
    expect_error(NULL, 3, 224, 224, 1000, "unknown model", NULL);
    expect_error("resnet50", 3, 8, 8, 1000, "resnet50: ", "too small");
    expect_error("resnet20", 3, 2, 2, 10, "resnet20: ", "too small");
    expect_error("alexnet", 3, 64, 64, 1000, "alexnet: ", "224x224");
    expect_error("alexnet", 3, 448, 448, 1000, "alexnet: ", "13x13");
    expect_error("vgg16", 3, 32, 32, 10, "vgg16: ", "224x224");
    expect_error("lenet5", 1, 8, 8, 10, "lenet5: ", "does not fit");
    expect_error("mlp", 1, 28, 28, 1, "mlp: ", "classes");
    expect_error("smallcnn", 0, 28, 28, 10, "smallcnn: ", "not positive");
}

/* GPT-2: llm.c's and Hugging Face's parameter counts of the 124M model
 * (padded and unpadded vocabulary), specs and their defaults, the FLOPs
 * per token, the module names, and specs that do not parse. */
static void test_gpt2(void **state)
{
    (void)state;
    so_graph *g = NULL;
    assert_int_equal(so_zoo_build("gpt2", 1, 1024, 1, 50257, &g), 0);
    assert_int_equal(so_graph_nparams(g), 124475904); /* llm.c: num_parameters 124475904 */
    assert_int_equal(so_graph_classes(g), 50257);
    assert_int_equal(so_graph_targets(g), 1024);
    assert_true(so_graph_takes_tokens(g));
    /* forward FLOPs: 2 x the matrices' weights per token (wte counted once,
     * as the LM head) + causal attention's 2 x 2 x C x T(T+1)/2 per layer */
    double mat = 12.0 * (12.0 * 768 * 768) + 50304.0 * 768;
    double want = 2.0 * mat * 1024 + 12 * 4.0 * 768 * 1024 * 1025 / 2;
    assert_true(fabs(so_graph_flops(g) - want) < 1e-6 * want);
    so_gpt2_config c;
    assert_int_equal(so_gpt2_graph_config(g, &c), 0);
    assert_true(c.layers == 12 && c.heads == 12 && c.channels == 768 && c.context == 1024 && c.vocab == 50257 &&
                c.padded_vocab == 50304);
    so_graph_destroy(g);
    assert_int_equal(so_zoo_build("gpt2:Vp=50257", 1, 64, 1, 50257, &g), 0);
    assert_int_equal(so_graph_nparams(g), 124439808); /* Hugging Face's GPT2LMHeadModel */
    so_graph_destroy(g);
    so_zoo_entry z;
    assert_int_equal(so_zoo_resolve("gpt2:L=4,H=4,C=128,T=64,V=512", &z), 0);
    assert_true(z.c == 1 && z.h == 64 && z.w == 1 && z.classes == 512);
    assert_int_equal(so_zoo_build(z.name, z.c, z.h, z.w, z.classes, &g), SO_EINVAL); /* the family's form */
    assert_int_equal(so_zoo_build("gpt2:L=4,H=4,C=128,T=64,V=512", 1, 64, 1, 512, &g), 0);
    /* wte 512x128, wpe 64x128, 4 x (12 C^2 + 13 C), ln_f */
    assert_int_equal(so_graph_nparams(g), 512 * 128 + 64 * 128 + 4 * (12 * 128 * 128 + 13 * 128) + 2 * 128);
    char spec[128];
    assert_int_equal(so_gpt2_graph_config(g, &c), 0);
    so_gpt2_spec(&c, spec, sizeof spec);
    assert_string_equal(spec, "gpt2:L=4,H=4,C=128,T=64,V=512,Vp=512");
    so_graph_destroy(g);
    /* a shorter sequence than the context builds; a longer one, a wider vocabulary do not */
    assert_int_equal(so_zoo_build("gpt2:L=1,H=2,C=8,T=16,V=30", 1, 9, 1, 30, &g), 0);
    so_graph_destroy(g);
}

static void test_gpt2_errors(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *frag;
    } bad[] = {
        {"gpt2:L=0", "L = '0' is not an integer in [1, 1024]"},
        {"gpt2:L=4,H=3,C=128", "C = 128 is not divisible by H = 3"},
        {"gpt2:V=100,Vp=64", "Vp = 64 is below V = 100"},
        {"gpt2:Q=1", "unknown key 'Q'"},
        {"gpt2:L4", "'L4' is not key=value"},
        {"gpt2:L=", "L = '' is not an integer"},
        {"gpt2:dropout=1", "not a probability"},
        {"gpt2:T=99999999", "T = '99999999' is not an integer"},
        {"gpt2-medium:C=12x", "C = '12x'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        so_graph *g = (so_graph *)&g;
        if (so_zoo_check(bad[i].spec) != SO_EINVAL || !strstr(so_errmsg(), bad[i].frag))
            fail_msg("%s: '%s' lacks '%s'", bad[i].spec, so_errmsg(), bad[i].frag);
        assert_int_equal(so_zoo_build(bad[i].spec, 1, 16, 1, 50, &g), SO_EINVAL);
        assert_null(g);
        assert_non_null(strstr(so_errmsg(), bad[i].frag));
    }
    expect_error("gpt2:L=1,H=1,C=8,T=16,V=30", 1, 17, 1, 30, "above the context 16", NULL);
    expect_error("gpt2:L=1,H=1,C=8,T=16,V=30", 1, 16, 1, 31, "vocabulary of 31 tokens exceeds", "V = 30");
    expect_error("gpt2:L=1,H=1,C=8,T=16,V=30", 3, 16, 1, 30, "tokens of shape (1,T,1)", NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_and_find),
        cmocka_unit_test(test_any_depth),
        cmocka_unit_test(test_preresnet_steps),
        cmocka_unit_test(test_param_counts),
        cmocka_unit_test(test_params_file),
        cmocka_unit_test(test_resnet50_names),
        cmocka_unit_test(test_all_names),
        cmocka_unit_test(test_flops),
        cmocka_unit_test(test_other_shapes),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_gpt2_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
