/* scaleout's weight layout loops (onednn_wlayout.c) against oneDNN's own
 * reorder, bit for bit: flat OIHW -> each blocked layout the convolutions
 * pick (FP32 and BF16, shapes that fill and that pad the blocks), and FP32
 * blocked -> flat, written and added. Layouts the loops do not take (plain
 * permutations, blocks over H or W) must be refused, not converted wrongly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/onednn/onednn_internal.h"
#include "scaleout/rng.h"

typedef struct {
    dnnl_engine_t eng;
    dnnl_stream_t strm;
} ctx;

static int setup(void **state)
{
    ctx *c = calloc(1, sizeof *c);
    assert_int_equal(dnnl_engine_create(&c->eng, dnnl_cpu, 0), dnnl_success);
    assert_int_equal(dnnl_stream_create(&c->strm, c->eng, dnnl_stream_default_flags), dnnl_success);
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    ctx *c = *state;
    dnnl_stream_destroy(c->strm);
    dnnl_engine_destroy(c->eng);
    free(c);
    return 0;
}

/* dst = reorder(src) by oneDNN (dst added to when sum). */
static void onednn_reorder(ctx *c, const dnnl_memory_desc_t *smd, void *src, const dnnl_memory_desc_t *dmd, void *dst,
                           int sum)
{
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    assert_int_equal(dnnl_primitive_attr_create(&attr), dnnl_success);
    if (sum) {
        assert_int_equal(dnnl_post_ops_create(&po), dnnl_success);
        assert_int_equal(dnnl_post_ops_append_sum(po, 1.0f), dnnl_success);
        assert_int_equal(dnnl_primitive_attr_set_post_ops(attr, po), dnnl_success);
    }
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t p;
    dnnl_memory_t sm, dm;
    assert_int_equal(dnnl_reorder_primitive_desc_create(&pd, smd, c->eng, dmd, c->eng, attr), dnnl_success);
    assert_int_equal(dnnl_primitive_create(&p, pd), dnnl_success);
    assert_int_equal(dnnl_memory_create(&sm, smd, c->eng, src), dnnl_success);
    assert_int_equal(dnnl_memory_create(&dm, dmd, c->eng, dst), dnnl_success);
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, sm}, {DNNL_ARG_TO, dm}};
    assert_int_equal(dnnl_primitive_execute(p, c->strm, 2, a), dnnl_success);
    assert_int_equal(dnnl_stream_wait(c->strm), dnnl_success);
    dnnl_memory_destroy(sm);
    dnnl_memory_destroy(dm);
    dnnl_primitive_destroy(p);
    dnnl_primitive_desc_destroy(pd);
    if (po)
        dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
}

static void fill(float *x, size_t n, uint64_t seed)
{
    so_rng r;
    so_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = so_rng_normal(&r);
}

/* One layout tag at one shape and type: pack and unpack against oneDNN. */
static void check(ctx *c, dnnl_format_tag_t tag, dnnl_data_type_t dt, int64_t O, int64_t I, int64_t H, int64_t W)
{
    dnnl_dims_t d = {O, I, H, W};
    dnnl_memory_desc_t flat, blk;
    assert_int_equal(dnnl_memory_desc_init_by_tag(&flat, 4, d, dnnl_f32, dnnl_oihw), dnnl_success);
    assert_int_equal(dnnl_memory_desc_init_by_tag(&blk, 4, d, dt, tag), dnnl_success);
    od_wlayout L;
    if (!od_wlayout_plan(&blk, &L))
        fail_msg("tag %d (%s) %ldx%ldx%ldx%ld not planned", (int)tag, dt == dnnl_bf16 ? "bf16" : "f32", (long)O,
                 (long)I, (long)H, (long)W);
    size_t n = (size_t)(O * I * H * W), nb = dnnl_memory_desc_get_size(&blk);
    float *w = malloc(n * sizeof *w), *back = malloc(n * sizeof *back), *want = malloc(n * sizeof *want);
    char *mine = malloc(nb), *theirs = malloc(nb);
    fill(w, n, 3);
    memset(mine, 0x5a, nb); /* padding must be written, not left */
    memset(theirs, 0, nb);
    od_wlayout_pack(&L, w, mine);
    onednn_reorder(c, &flat, w, &blk, theirs, 0);
    assert_memory_equal(mine, theirs, nb);
    if (dt == dnnl_f32) { /* gradients: blocked -> flat, written, then added */
        od_wlayout_unpack(&L, (const float *)(void *)theirs, back, 0);
        assert_memory_equal(back, w, n * sizeof *w);
        fill(want, n, 9);
        memcpy(back, want, n * sizeof *back);
        onednn_reorder(c, &blk, theirs, &flat, want, 1);
        od_wlayout_unpack(&L, (const float *)(void *)theirs, back, 1);
        assert_memory_equal(back, want, n * sizeof *want);
    }
    free(w);
    free(back);
    free(want);
    free(mine);
    free(theirs);
}

/* The layouts oneDNN 2.6's FP32 and BF16 convolutions chose in ResNet-50
 * and ResNet-20 (ONEDNN_VERBOSE), and their neighbours. */
static void test_layouts(void **state)
{
    ctx *c = *state;
    const dnnl_format_tag_t f32_tags[] = {dnnl_ABcd16b16a, dnnl_ABcd16a16b, dnnl_BAcd16a16b, dnnl_ABcd8a8b,
                                          dnnl_Acdb16a, dnnl_aBcd16b};
    const dnnl_format_tag_t bf16_tags[] = {dnnl_ABcd8b16a2b, dnnl_BAcd8a16b2a, dnnl_ABcd8a16b2a, dnnl_AcdB16a2b,
                                           dnnl_ABcd16b16a};
    const int64_t shapes[][4] = {{64, 64, 3, 3}, {256, 64, 1, 1}, {64, 3, 7, 7}, {40, 24, 3, 3}, {16, 16, 5, 5}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (size_t t = 0; t < sizeof f32_tags / sizeof f32_tags[0]; t++)
            check(c, f32_tags[t], dnnl_f32, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
        for (size_t t = 0; t < sizeof bf16_tags / sizeof bf16_tags[0]; t++)
            check(c, bf16_tags[t], dnnl_bf16, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
    }
}

static void test_refused(void **state)
{
    (void)state;
    dnnl_dims_t d = {32, 32, 3, 3};
    const dnnl_format_tag_t tags[] = {dnnl_oihw, dnnl_ohwi, dnnl_hwio, dnnl_ABcd32a32b, dnnl_aBCd16b16c};
    for (size_t t = 0; t < sizeof tags / sizeof tags[0]; t++) {
        dnnl_memory_desc_t md;
        assert_int_equal(dnnl_memory_desc_init_by_tag(&md, 4, d, dnnl_f32, tags[t]), dnnl_success);
        od_wlayout L;
        assert_int_equal(od_wlayout_plan(&md, &L), 0);
        assert_int_equal(L.nin, 0); /* what od_wcache and od_gradw test */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests_name("wlayout", tests, setup, teardown);
}
