/* Tests of llm.c's GPT-2 model file (scaleout/llmc.h): the parameter counts
 * of GPT-2 124M (llm.c's 124,475,904 with the padded vocabulary, Hugging
 * Face's 124,439,808 without), files written the way llm.c's train_gpt2.py
 * writes them (tests/llmc_model_ref.py, FP32 and BF16) read back tensor by
 * tensor and layer by layer, a write/read round trip, and every malformed
 * header or size: one line naming the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_util.h"

#include "scaleout/err.h"
#include "scaleout/llmc.h"

static char tmpdir[] = "/tmp/so_test_llmc_XXXXXX";

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return so_test_rmtree(tmpdir);
}

static void test_gpt2_counts(void **state)
{
    (void)state;
    so_llmc_config c = {1024, 50257, 50304, 12, 12, 768};
    so_llmc_tensor t[SO_LLMC_NTENSORS];
    size_t total;
    assert_int_equal(so_llmc_layout(&c, t, &total), 0);
    assert_int_equal(total, 124475904);
    assert_int_equal(total - (size_t)(c.padded_vocab_size - c.vocab_size) * c.channels, 124439808);
    assert_string_equal(t[SO_LLMC_QKVW].name, "qkvw");
    assert_int_equal(t[SO_LLMC_QKVW].ndim, 3);
    assert_int_equal(t[SO_LLMC_QKVW].shape[0], 12);
    assert_int_equal(t[SO_LLMC_QKVW].shape[1], 3 * 768);
    assert_int_equal(t[SO_LLMC_QKVW].shape[2], 768);
    assert_true(t[SO_LLMC_QKVW].hf_transposed);
    assert_false(t[SO_LLMC_QKVB].hf_transposed);
    assert_string_equal(t[SO_LLMC_FCPROJW].hf_name, "transformer.h.%d.mlp.c_proj.weight");
    assert_int_equal(t[SO_LLMC_WTE].offset, 0);
    assert_int_equal(t[SO_LLMC_WPE].offset, 50304 * 768);
    assert_int_equal(t[SO_LLMC_LNFB].offset + t[SO_LLMC_LNFB].count, total);
    /* the other sizes of the family: each an exact function of its header */
    so_llmc_config xl = {1024, 50257, 50304, 48, 25, 1600};
    assert_int_equal(so_llmc_layout(&xl, t, &total), 0);
    assert_int_equal(total, 1557611200 + (size_t)47 * 1600); /* Hugging Face's gpt2-xl: 1,557,611,200 */
    so_llmc_config bad[] = {{0, 10, 10, 1, 1, 4}, {8, 11, 10, 1, 1, 4}, {8, 10, 10, 1, 3, 4},
                            {8, 10, 10, 5000, 1, 4}, {8, 10, 1 << 25, 1, 1, 4}, {8, 10, 10, 1, 1, -4}};
    const char *why[] = {"max_seq_len 0", "vocab_size 11 is above", "not a multiple of num_heads 3",
                         "num_layers 5000", "padded_vocab_size 33554432", "channels -4"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        expect_err(so_llmc_layout(&bad[k], t, &total), SO_EINVAL, why[k]);
}

/* The reference's value of element i of tensor k's slice of a layer. */
static float ref_value(int k, int layer, size_t i) { return (float)(k * 15 + layer * 3 + (int)(i % 5) - 100); }

static void check_file(const char *path, const so_llmc_config *c, int version)
{
    so_llmc_model *m = NULL;
    assert_int_equal(so_llmc_read(path, &m), 0);
    assert_int_equal(m->version, version);
    assert_memory_equal(&m->cfg, c, sizeof *c);
    for (int k = 0; k < SO_LLMC_NTENSORS; k++) {
        int layers = m->t[k].per_layer ? c->num_layers : 1;
        for (int l = 0; l < layers; l++) {
            size_t n;
            const float *v = so_llmc_slice(m, k, l, &n);
            assert_int_equal(n * (size_t)layers, m->t[k].count);
            for (size_t i = 0; i < n; i++)
                if (v[i] != ref_value(k, l, i))
                    fail_msg("%s layer %d [%zu] = %g, written %g", m->t[k].name, l, i, v[i], ref_value(k, l, i));
        }
    }
    so_llmc_free(m);
}

static int reference(const char *out, const so_llmc_config *c, const char *extra)
{
    const char *src = getenv("SCALEOUT_SOURCE_DIR");
    if (!src || system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
        print_message("SKIP: /usr/bin/python3 with numpy is missing\n");
        return 0;
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/llmc_model_ref.py '%s' %d %d %d %d %d %d %s", src, out,
             c->num_layers, c->num_heads, c->channels, c->max_seq_len, c->vocab_size, c->padded_vocab_size, extra);
    assert_int_equal(system(cmd), 0);
    return 1;
}

static void test_read_reference(void **state)
{
    (void)state;
    so_llmc_config c = {16, 50, 64, 3, 2, 8};
    char path[512];
    snprintf(path, sizeof path, "%s/ref_fp32.bin", tmpdir);
    if (!reference(path, &c, ""))
        skip();
    check_file(path, &c, SO_LLMC_VERSION_FP32);
    snprintf(path, sizeof path, "%s/ref_bf16.bin", tmpdir);
    assert_true(reference(path, &c, "bf16"));
    check_file(path, &c, SO_LLMC_VERSION_BF16);
}

static void test_write_read(void **state)
{
    (void)state;
    so_llmc_config c = {8, 30, 32, 2, 4, 12};
    so_llmc_tensor t[SO_LLMC_NTENSORS];
    size_t n;
    assert_int_equal(so_llmc_layout(&c, t, &n), 0);
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)i * 0.25f - 7.0f;
    char path[512];
    snprintf(path, sizeof path, "%s/rt.bin", tmpdir);
    assert_int_equal(so_llmc_write(path, &c, p, n), 0);
    so_llmc_model *m = NULL;
    assert_int_equal(so_llmc_read(path, &m), 0);
    assert_int_equal(m->nparams, n);
    assert_memory_equal(m->params, p, n * sizeof *p);
    size_t cnt;
    const float *s = so_llmc_slice(m, SO_LLMC_FCW, 1, &cnt);
    assert_int_equal(cnt, 4 * 12 * 12);
    assert_true(s == m->params + t[SO_LLMC_FCW].offset + cnt);
    s = so_llmc_slice(m, SO_LLMC_LNFB, 0, &cnt);
    assert_int_equal(cnt, 12);
    so_llmc_free(m);
    expect_err(so_llmc_write(path, &c, p, n - 1), SO_EINVAL, "parameters given");
    snprintf(path, sizeof path, "%s/no/such/rt.bin", tmpdir);
    expect_err(so_llmc_write(path, &c, p, n), SO_EIO, "no/such/rt.bin");
    free(p);
}

static void put_le32(uint8_t *b, int32_t v)
{
    uint32_t u = (uint32_t)v;
    b[0] = (uint8_t)u, b[1] = (uint8_t)(u >> 8), b[2] = (uint8_t)(u >> 16), b[3] = (uint8_t)(u >> 24);
}

static void test_bad_files(void **state)
{
    (void)state;
    so_llmc_config c = {4, 6, 8, 1, 1, 4};
    so_llmc_tensor t[SO_LLMC_NTENSORS];
    size_t n;
    assert_int_equal(so_llmc_layout(&c, t, &n), 0);
    size_t len = 1024 + 4 * n;
    uint8_t *b = calloc(len + 8, 1);
    int32_t h[8] = {20240326, 3, 4, 6, 1, 1, 4, 8};
    for (int i = 0; i < 8; i++)
        put_le32(b + 4 * i, h[i]);
    so_llmc_model m;
    assert_int_equal(so_llmc_parse(b, len, "m.bin", &m), 0);
    assert_int_equal(m.nparams, n);
    expect_err(so_llmc_parse(b, len - 4, "m.bin", &m), SO_EFORMAT, "m.bin: header says");
    expect_err(so_llmc_parse(b, len - 4, "m.bin", &m), SO_EFORMAT, "(truncated)");
    expect_err(so_llmc_parse(b, len + 4, "m.bin", &m), SO_EFORMAT, "but the file has");
    expect_err(so_llmc_parse(b, len + 2, "m.bin", &m), SO_EFORMAT, "but the file has");
    expect_err(so_llmc_parse(b, 1000, "m.bin", &m), SO_EFORMAT, "m.bin: 1000 bytes is too short");
    put_le32(b + 4, 4);
    expect_err(so_llmc_parse(b, len, "m.bin", &m), SO_EFORMAT, "m.bin: version 4");
    put_le32(b + 4, 3);
    put_le32(b, 20240520);
    expect_err(so_llmc_parse(b, len, "m.bin", &m), SO_EFORMAT, "m.bin: bad magic 20240520");
    put_le32(b, 20240326);
    put_le32(b + 16, 0); /* num_layers */
    expect_err(so_llmc_parse(b, len, "m.bin", &m), SO_EFORMAT, "m.bin: num_layers 0");
    put_le32(b + 16, 1);
    put_le32(b + 20, 3); /* num_heads */
    expect_err(so_llmc_parse(b, len, "m.bin", &m), SO_EFORMAT, "m.bin: channels 4 are not a multiple");
    put_le32(b + 20, 1);
    put_le32(b + 8, 0x7fffffff); /* max_seq_len */
    expect_err(so_llmc_parse(b, len, "m.bin", &m), SO_EFORMAT, "max_seq_len 2147483647");
    put_le32(b + 8, 4);
    /* BF16 size rules: 2 bytes a parameter */
    put_le32(b + 4, 5);
    expect_err(so_llmc_parse(b, len, "m.bin", &m), SO_EFORMAT, "header says");
    /* From disk too: the path is named; a directory is refused. */
    char path[512];
    snprintf(path, sizeof path, "%s/bad.bin", tmpdir);
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, 100, f);
    fclose(f);
    so_llmc_model *mp = NULL;
    expect_err(so_llmc_read(path, &mp), SO_EFORMAT, "bad.bin: 100 bytes is too short");
    expect_err(so_llmc_read(tmpdir, &mp), SO_EIO, "is not a regular file");
    assert_null(mp);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_counts), cmocka_unit_test(test_read_reference),
        cmocka_unit_test(test_write_read),  cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
