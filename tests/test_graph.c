/* Graph construction tests: shape inference per op, sticky errors and their
 * messages, ReLU fusion, parameter/state layout, FLOP counts and the diff
 * write-or-accumulate rule the backends rely on. No backend is involved. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "scaleout/err.h"
#include "scaleout/graph.h"

static void assert_shape(const so_graph *g, int node, int c, int h, int w)
{
    so_shape s = so_graph_node(g, node)->out;
    if (s.c != c || s.h != h || s.w != w)
        print_error("node %d (%s): shape %dx%dx%d, want %dx%dx%d\n", node, so_graph_node(g, node)->name, s.c,
                    s.h, s.w, c, h, w);
    assert_true(s.c == c && s.h == h && s.w == w);
}

static void t_shapes(void **st)
{
    (void)st;
    so_graph *g = so_graph_create(4, 9, 9);
    assert_non_null(g);
    int cv = so_g_conv(g, 0, "conv", 8, 3, 2, 1, 1);         /* (9+2-3)/2+1 = 5 */
    assert_shape(g, cv, 8, 5, 5);
    int gr = so_g_conv_grouped(g, cv, "gconv", 4, 1, 1, 0, 4, 0);
    assert_shape(g, gr, 4, 5, 5);
    so_attrs ra = {.out = 2, .kh = 3, .kw = 1, .sh = 1, .sw = 2, .ph = 0, .pw = 0, .groups = 1};
    int rect = so_graph_add(g, SO_OP_CONV, "rect", &gr, 1, &ra); /* h: 5-3+1, w: (5-1)/2+1 */
    assert_shape(g, rect, 2, 3, 3);
    int mp = so_g_maxpool(g, cv, 2, 2, 0);                   /* floor((5-2)/2)+1 = 2 */
    assert_shape(g, mp, 8, 2, 2);
    int ap = so_g_avgpool(g, cv, 3, 1, 1);
    assert_shape(g, ap, 8, 5, 5);
    assert_shape(g, so_g_gap(g, ap), 8, 1, 1);
    assert_shape(g, so_g_relu(g, ap), 8, 5, 5);
    assert_shape(g, so_g_tanh(g, ap), 8, 5, 5);
    assert_shape(g, so_g_sigmoid(g, ap), 8, 5, 5);
    assert_shape(g, so_g_bn(g, ap, "bn"), 8, 5, 5);
    assert_shape(g, so_g_dropout(g, ap, 0.5f), 8, 5, 5);
    int fl = so_g_flatten(g, mp);
    assert_shape(g, fl, 32, 1, 1);
    assert_shape(g, so_g_add(g, cv, ap), 8, 5, 5);
    int cat_in[3] = {cv, gr, ap};
    assert_shape(g, so_g_concat(g, cat_in, 3), 20, 5, 5);
    int fc = so_g_dense(g, mp, "fc", 10); /* dense flattens its input itself */
    assert_shape(g, fc, 10, 1, 1);
    int loss = so_g_loss(g, fc);
    assert_shape(g, loss, 1, 1, 1);
    assert_int_equal(so_graph_finalize(g), 0);
    assert_int_equal(so_graph_logits(g), fc);
    assert_int_equal(so_graph_classes(g), 10);
    assert_string_equal(so_graph_node(g, fc)->name, "fc");
    assert_string_equal(so_op_name(so_graph_node(g, loss)->op), "softmax_xent");
    so_graph_destroy(g);
}

/* The first error sticks: later adds fail with the same code and message,
 * and finalize reports it. */
static void expect_sticky(so_graph *g, int rc, const char *needle)
{
    assert_int_equal(rc, SO_EINVAL);
    char first[256];
    snprintf(first, sizeof first, "%s", so_errmsg());
    if (!strstr(first, needle))
        print_error("message '%s' lacks '%s'\n", first, needle);
    assert_non_null(strstr(first, needle));
    assert_int_equal(so_g_relu(g, 0), SO_EINVAL);
    assert_string_equal(so_errmsg(), first);
    assert_int_equal(so_graph_finalize(g), SO_EINVAL);
    assert_string_equal(so_errmsg(), first);
    so_graph_destroy(g);
}

static void t_errors(void **st)
{
    (void)st;
    so_graph *g = so_graph_create(4, 8, 8);
    expect_sticky(g, so_g_conv_grouped(g, 0, "c", 6, 3, 1, 1, 4, 0), "groups");
    g = so_graph_create(3, 8, 8);
    expect_sticky(g, so_g_conv_grouped(g, 0, "c", 4, 3, 1, 1, 2, 0), "groups"); /* 3 % 2 */
    g = so_graph_create(3, 4, 4);
    expect_sticky(g, so_g_maxpool(g, 0, 5, 1, 0), "does not fit");
    g = so_graph_create(3, 4, 4);
    expect_sticky(g, so_g_conv(g, 0, "big", 2, 7, 1, 1, 0), "does not fit");
    g = so_graph_create(3, 4, 4);
    expect_sticky(g, so_g_avgpool(g, 0, 2, 2, 2), "pool"); /* padding more than half the window */
    g = so_graph_create(3, 4, 4);
    int c = so_g_conv(g, 0, "c", 5, 1, 1, 0, 0);
    expect_sticky(g, so_g_add(g, 0, c), "add inputs differ");
    g = so_graph_create(3, 4, 4);
    c = so_g_conv(g, 0, "c", 5, 1, 2, 0, 0);
    int in[2] = {0, c};
    expect_sticky(g, so_g_concat(g, in, 2), "spatial");
    g = so_graph_create(3, 4, 4);
    expect_sticky(g, so_g_dropout(g, 0, 1.0f), "dropout");
    g = so_graph_create(3, 4, 4);
    expect_sticky(g, so_g_loss(g, 0), "loss");
    g = so_graph_create(3, 4, 4);
    expect_sticky(g, so_g_relu(g, 7), "missing node");

    /* A graph without a loss is not an error while building, only at finalize. */
    g = so_graph_create(3, 4, 4);
    assert_true(so_g_dense(g, 0, "fc", 2) > 0);
    assert_int_equal(so_graph_finalize(g), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "loss"));
    assert_int_equal(so_graph_logits(g), -1);
    so_graph_destroy(g);
}

/* conv -> relu (one consumer) folds; conv -> relu plus a second consumer
 * does not; relu after a pool never folds (pools have no fused ReLU). */
static void t_fuse(void **st)
{
    (void)st;
    so_graph *g = so_graph_create(3, 8, 8);
    int a = so_g_conv(g, 0, "a", 4, 3, 1, 1, 0);  /* 1 */
    int ra = so_g_relu(g, a);                       /* 2: folds into a */
    int b = so_g_conv(g, ra, "b", 4, 3, 1, 1, 0);  /* 3 */
    int rb = so_g_relu(g, b);                       /* 4: b also feeds the add */
    int s = so_g_add(g, rb, b);                     /* 5 */
    int p = so_g_maxpool(g, so_g_relu(g, s), 2, 2, 0); /* relu 6 folds into the add */
    int rp = so_g_relu(g, p);                       /* 8: after a pool, stays */
    so_g_loss(g, so_g_dense(g, rp, "fc", 3));
    assert_int_equal(so_graph_size(g), 11);
    assert_int_equal(so_graph_fuse(g), 0);
    assert_int_equal(so_graph_size(g), 9);
    assert_int_equal(so_graph_finalize(g), 0);
    /* 0 in, 1 a+relu, 2 b, 3 relu(b), 4 add+relu, 5 maxpool, 6 relu, 7 fc, 8 loss */
    const so_op want[9] = {SO_OP_INPUT, SO_OP_CONV, SO_OP_CONV, SO_OP_RELU, SO_OP_ADD,
                           SO_OP_MAXPOOL, SO_OP_RELU, SO_OP_DENSE, SO_OP_SOFTMAX_XENT};
    const int relu[9] = {0, 1, 0, 0, 1, 0, 0, 0, 0};
    for (int i = 0; i < 9; i++) {
        assert_int_equal(so_graph_node(g, i)->op, want[i]);
        assert_int_equal(so_graph_node(g, i)->a.relu, relu[i]);
    }
    assert_int_equal(so_graph_node(g, 2)->inputs[0], 1);
    assert_int_equal(so_graph_node(g, 3)->inputs[0], 2);
    assert_int_equal(so_graph_node(g, 4)->inputs[0], 3);
    assert_int_equal(so_graph_node(g, 4)->inputs[1], 2);
    assert_int_equal(so_graph_node(g, 5)->inputs[0], 4);
    assert_int_equal(so_graph_node(g, 6)->inputs[0], 5);
    assert_int_equal(so_graph_node(g, 7)->inputs[0], 6);
    assert_int_equal(so_graph_logits(g), 7);
    so_graph_destroy(g);
}

/* Offsets follow node order; counts are PyTorch's (conv OIHW + bias,
 * dense (out,in) + bias, batchnorm gamma/beta + running mean/var). */
static void t_params(void **st)
{
    (void)st;
    so_graph *g = so_graph_create(3, 8, 8);
    int cv = so_g_conv(g, 0, "conv", 8, 3, 1, 1, 1);
    int bn = so_g_bn(g, cv, "bn");
    int gc = so_g_conv_grouped(g, bn, "gconv", 4, 3, 2, 1, 2, 0); /* (4,4,4) */
    int fc = so_g_dense(g, gc, "fc", 10);
    so_g_loss(g, fc);
    assert_int_equal(so_graph_finalize(g), 0);
    const so_node *n1 = so_graph_node(g, cv), *n2 = so_graph_node(g, bn), *n3 = so_graph_node(g, gc),
                  *n4 = so_graph_node(g, fc);
    assert_int_equal(n1->param_off, 0);
    assert_int_equal(n1->nparam, 8 * 3 * 9 + 8);
    assert_int_equal(n2->param_off, 224);
    assert_int_equal(n2->nparam, 16);
    assert_int_equal(n2->buf_off, 0);
    assert_int_equal(n2->nbuf, 16);
    assert_int_equal(n3->param_off, 240);
    assert_int_equal(n3->nparam, 4 * 4 * 9);
    assert_int_equal(n4->param_off, 384);
    assert_int_equal(n4->nparam, 10 * 64 + 10);
    assert_int_equal(so_graph_nparams(g), 384 + 650);
    assert_int_equal(so_graph_nbufs(g), 16);

    so_tensor_desc t[4];
    assert_int_equal(so_node_tensors(g, cv, t), 2);
    assert_string_equal(t[0].suffix, "weight");
    assert_int_equal(t[0].ndim, 4);
    assert_true(t[0].dims[0] == 8 && t[0].dims[1] == 3 && t[0].dims[2] == 3 && t[0].dims[3] == 3);
    assert_int_equal(t[0].fan_in, 27);
    assert_int_equal(t[1].off, 216);
    assert_int_equal(so_node_tensors(g, bn, t), 4);
    assert_true(t[2].is_buffer && t[3].is_buffer && !t[0].is_buffer);
    assert_string_equal(t[3].suffix, "running_var");
    assert_int_equal(t[1].off, 232);
    assert_int_equal(t[3].off, 8);
    assert_int_equal(so_node_tensors(g, gc, t), 1);
    assert_true(t[0].dims[1] == 4 && t[0].fan_in == 36);
    assert_int_equal(so_node_tensors(g, fc, t), 2);
    assert_true(t[0].dims[0] == 10 && t[0].dims[1] == 64);
    assert_int_equal(t[1].off, 384 + 640);
    assert_int_equal(so_node_tensors(g, so_graph_size(g) - 1, t), 0);
    so_graph_destroy(g);
}

static void t_flops(void **st)
{
    (void)st;
    so_graph *g = so_graph_create(3, 8, 8);
    int cv = so_g_conv(g, 0, "conv", 8, 3, 1, 1, 1);              /* 8x8x8 outputs x 27 MACs */
    int gc = so_g_conv_grouped(g, cv, "g", 4, 1, 1, 0, 2, 0);      /* 4x8x8 outputs x 4 MACs */
    int fc = so_g_dense(g, gc, "fc", 10);                           /* 10 x 256 MACs */
    so_g_loss(g, so_g_relu(g, fc));
    assert_int_equal(so_graph_finalize(g), 0);
    assert_true(so_node_flops(g, cv) == 2.0 * 512 * 27);
    assert_true(so_node_flops(g, gc) == 2.0 * 256 * 4);
    assert_true(so_node_flops(g, fc) == 2.0 * 10 * 256);
    assert_true(so_graph_flops(g) == 2.0 * (512 * 27 + 256 * 4 + 2560));
    so_graph_destroy(g);
}

/* Residual block: the block input feeds conv1 (low index) and the add (high
 * index). Backward runs the add first, so it writes; conv1 accumulates. */
static void t_diff_accumulate(void **st)
{
    (void)st;
    so_graph *g = so_graph_create(3, 8, 8);
    int stem = so_g_conv(g, 0, "stem", 4, 3, 1, 1, 0);                            /* 1 */
    int c1 = so_g_conv(g, stem, "conv1", 4, 3, 1, 1, 0);                          /* 2 */
    int r1 = so_g_relu(g, so_g_bn(g, c1, "bn1"));                                  /* 3, 4 */
    int b2 = so_g_bn(g, so_g_conv(g, r1, "conv2", 4, 3, 1, 1, 0), "bn2");          /* 5, 6 */
    int add = so_g_add(g, b2, stem);                                               /* 7 */
    int twice = so_g_add(g, add, add);                                             /* 8: x + x */
    so_g_loss(g, so_g_dense(g, twice, "fc", 3));
    assert_int_equal(so_graph_finalize(g), 0);
    assert_int_equal(so_graph_diff_accumulate(g, add, 1), 0); /* stem: add writes */
    assert_int_equal(so_graph_diff_accumulate(g, c1, 0), 1);  /* stem: conv1 adds */
    assert_int_equal(so_graph_diff_accumulate(g, add, 0), 0); /* b2: single consumer */
    assert_int_equal(so_graph_diff_accumulate(g, twice, 1), 0);
    assert_int_equal(so_graph_diff_accumulate(g, twice, 0), 1); /* same tensor, higher slot first */
    assert_int_equal(so_graph_diff_accumulate(g, r1, 0), 0);
    assert_int_equal(so_graph_needs_diff(g, stem, 0), 0);     /* the graph input */
    assert_int_equal(so_graph_needs_diff(g, c1, 0), 1);
    assert_int_equal(so_graph_needs_diff(g, add, 1), 1);
    so_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_shapes),  cmocka_unit_test(t_errors),          cmocka_unit_test(t_fuse),
        cmocka_unit_test(t_params),  cmocka_unit_test(t_flops),           cmocka_unit_test(t_diff_accumulate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
