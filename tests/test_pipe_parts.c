/* The pipeline module's pieces a pipelined job is assembled from (src/pipe:
 * layout.c, cuts.c, compose.c, tensor_layouts.c, metrics.c), without MPI:
 * every rank has one (stage, replica) under both placements and rank 0 is
 * the last stage; the cuts of each --partition kind are the balancer's and
 * say how they were chosen; a device starts from its slices of the whole
 * model's initial values and the devices' parameters come back in model
 * order; tensor layouts pass between two devices over an in-process link,
 * failure marks included; the measured bubble matches the formula for
 * equal devices. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scaleout/err.h"
#include "scaleout/model.h"
#include "scaleout/pipeline.h"
#include "scaleout/zoo.h"

static so_graph *build(const char *name)
{
    const so_zoo_entry *z = so_zoo_find(name);
    so_graph *g = NULL;
    assert_non_null(z);
    assert_int_equal(so_zoo_build(name, z->c, z->h, z->w, z->classes, &g), 0);
    return g;
}

/* ---- ranks ---------------------------------------------------------------------- */

static void test_ranks(void **state)
{
    (void)state;
    for (int pl = SO_PIPE_STAGE_MAJOR; pl <= SO_PIPE_REPLICA_MAJOR; pl++)
        for (int P = 2; P <= 4; P++)
            for (int D = 1; D <= 3; D++) {
                int seen[12] = {0};
                for (int r = 0; r < P * D; r++) {
                    so_pipe_ranks at;
                    so_pipe_ranks_of(r, P * D, P, (so_pipe_placement)pl, &at);
                    assert_int_equal(at.stages, P);
                    assert_int_equal(at.replicas, D);
                    assert_int_equal(so_pipe_world_rank(&at, (so_pipe_placement)pl, at.stage, at.replica), r);
                    assert_int_equal(seen[at.stage * D + at.replica]++, 0);
                    if (r == 0)
                        assert_true(at.stage == P - 1 && at.replica == 0);
                    /* stage-major: a replica's stages are neighbours; replica-major: a stage's replicas */
                    if (pl == SO_PIPE_STAGE_MAJOR)
                        assert_int_equal(r / P, at.replica);
                    else
                        assert_int_equal(r / D, P - 1 - at.stage);
                }
            }
    assert_int_equal(so_pipe_placement_parse(NULL), SO_PIPE_STAGE_MAJOR);
    assert_int_equal(so_pipe_placement_parse("replica-major"), SO_PIPE_REPLICA_MAJOR);
    assert_int_equal(so_pipe_placement_parse("diagonal"), -1);
}

static void test_options(void **state)
{
    (void)state;
    so_pipe_options o = {.stages = 2, .microbatches = 4, .batch = 32};
    assert_int_equal(so_pipe_options_check(&o, 4), 0);
    assert_int_equal(so_pipe_options_check(&o, 3), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "3 ranks do not split into 2 stages"));
    o.batch = 30;
    assert_int_equal(so_pipe_options_check(&o, 4), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "--microbatches 4 does not divide --batch-size 30"));
    o = (so_pipe_options){.stages = 1, .virtual_stages = 2, .schedule = "interleaved"};
    assert_int_equal(so_pipe_options_check(&o, 1), SO_EINVAL);
    o = (so_pipe_options){.stages = 2, .batch = 8, .placement = "diagonal"};
    assert_int_equal(so_pipe_options_check(&o, 2), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "--placement: unknown placement 'diagonal'"));
}

/* ---- cuts ------------------------------------------------------------------------ */

typedef struct {
    int calls;
} timer_state;

/* 1 ms per node with parameters, else 0.1 ms. */
static int fake_times(void *ctx, double *secs, int n)
{
    ((timer_state *)ctx)->calls++;
    secs[0] = 0;
    for (int i = 1; i < n; i++)
        secs[i] = 1e-4;
    return 0;
}

static void test_cuts(void **state)
{
    (void)state;
    so_graph *g = build("lenet5");
    timer_state ts = {0};
    int first[4], want[4];
    const char *basis;
    so_pipe_cut_request r = {.partition = "0,conv2,fc1", .devices = 3, .chunks = 1, .microbatch = 8,
                             .microbatches = 4, .schedule = SO_PIPE_1F1B, .time_nodes = fake_times, .ctx = &ts};
    assert_int_equal(so_pipe_choose_cuts(g, &r, first, &basis), 0);
    assert_string_equal(basis, "--partition's list");
    assert_int_equal(first[0], 0);
    r.devices = 2;
    assert_int_equal(so_pipe_choose_cuts(g, &r, first, &basis), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "--partition: more than 2 stages"));
    r.partition = "0,conv2";
    r.devices = 3;
    assert_int_equal(so_pipe_choose_cuts(g, &r, first, &basis), SO_EINVAL);
    assert_non_null(strstr(so_errmsg(), "--partition: 2 stage starts for --pipeline-stages 3 (3 stages)"));
    r.devices = 2;
    /* memory: the balancer's split, nothing timed */
    so_pipe_costs c = {.microbatch = 8, .microbatches = 4, .schedule = SO_PIPE_1F1B, .devices = 2, .optim_slots = 1};
    r.partition = "memory";
    assert_int_equal(so_pipe_choose_cuts(g, &r, first, &basis), 0);
    assert_int_equal(so_pipe_balance(g, 2, SO_PIPE_BY_MEMORY, &c, want), 0);
    assert_memory_equal(first, want, 2 * sizeof *first);
    assert_string_equal(basis, "memory");
    assert_int_equal(ts.calls, 0);
    /* time: the caller's times balanced */
    r.partition = "time";
    assert_int_equal(so_pipe_choose_cuts(g, &r, first, &basis), 0);
    assert_int_equal(ts.calls, 1);
    assert_string_equal(basis, "measured time");
    double secs[64];
    fake_times(&ts, secs, so_graph_size(g));
    c.seconds = secs;
    assert_int_equal(so_pipe_balance(g, 2, SO_PIPE_BY_TIME, &c, want), 0);
    assert_memory_equal(first, want, 2 * sizeof *first);
    /* auto under a cap the whole model at one micro-batch exceeds: FLOPs, nothing timed */
    r.partition = NULL;
    r.max_bytes = 1;
    ts.calls = 0;
    so_pipe_choose_cuts(g, &r, first, &basis); /* no split fits 1 byte: an error, after choosing the costs */
    assert_non_null(strstr(so_errmsg(), "--max-memory"));
    assert_int_equal(ts.calls, 0);
    assert_non_null(strstr(basis, "FLOPs within --max-memory"));
    so_graph_destroy(g);
}

/* ---- composing a device ------------------------------------------------------------ */

static void test_compose(void **state)
{
    (void)state;
    so_graph *g = build("lenet5");
    so_pipe_plan plan;
    int first[2] = {0, 4};
    assert_int_equal(so_pipe_plan_init(&plan, g, first, 2), 0);
    size_t np = so_graph_nparams(g);
    float *params = malloc(np * sizeof *params), *bufs = malloc((so_graph_nbufs(g) + 1) * sizeof *bufs);
    so_graph_init_params(g, 7, params, bufs);
    /* Each device starts from its slice of the whole model's initial values. */
    size_t lo[2], hi[2];
    for (int d = 0; d < 2; d++) {
        so_graph *dg = NULL;
        so_pipe_stage_edges e;
        so_model *m = NULL;
        assert_int_equal(so_pipe_stage_graph(&plan, 2, d, &dg, &e), 0);
        assert_int_equal(so_model_create(dg, "ref", 2, 99, &m), 0);
        assert_int_equal(so_pipe_init_params(g, &e, 7, m), 0);
        lo[d] = e.chunks[0].param_lo;
        hi[d] = e.chunks[0].param_hi;
        assert_int_equal(m->nparams, hi[d] - lo[d]);
        assert_memory_equal(m->params, params + lo[d], m->nparams * sizeof *params);
        double fp32_wire = so_pipe_message_bytes(&e, 4, m, 0), bf16_wire = so_pipe_message_bytes(&e, 4, m, 1);
        assert_true(fp32_wire > 0);
        /* a BF16 wire adds half-size staging of each activation sent: device 0 sends, device 1 does not */
        if (d == 0)
            assert_true(bf16_wire > fp32_wire);
        else
            assert_true(bf16_wire == fp32_wire);
        so_model_destroy(m);
        so_pipe_stage_edges_free(&e);
    }
    assert_true(lo[0] == 0 && hi[0] == lo[1] && hi[1] == np);
    /* Gathered over the pipeline group: group rank 0 is device 1, then device 0. */
    float *gathered = malloc(np * sizeof *gathered), *whole;
    size_t sizes[2] = {(hi[1] - lo[1]) * sizeof(float), (hi[0] - lo[0]) * sizeof(float)}, n;
    for (size_t i = 0; i < np; i++)
        gathered[i] = (float)(i < hi[1] - lo[1] ? lo[1] + i : i - (hi[1] - lo[1]));
    assert_int_equal(so_pipe_model_from_group(&plan, 2, gathered, sizes, &whole, &n), 0);
    assert_int_equal(n, np);
    for (size_t i = 0; i < np; i++)
        assert_true(whole[i] == (float)i);
    free(whole);
    sizes[0] -= sizeof(float);
    assert_int_equal(so_pipe_model_from_group(&plan, 2, gathered, sizes, &whole, &n), SO_EINVAL);
    assert_null(whole);
    free(gathered);
    free(params);
    free(bufs);
    so_pipe_plan_deinit(&plan);
    so_graph_destroy(g);
}

/* ---- tensor layouts over an in-process link -------------------------------------- */

/* Messages in flight between the devices of one process, matched in order per (from, to, tag). */
#define MAX_MSGS 64
typedef struct {
    int from, to, tag, taken;
    size_t bytes;
    char *data;
} mail;
static mail box[MAX_MSGS];
static int nbox;

typedef struct {
    int recv; /* 0: a send (already delivered) */
    void *buf;
    size_t bytes;
    int from, to, tag;
} mail_req;

static int mail_isend(void *ctx, const void *buf, size_t bytes, int stage, int tag, void **req)
{
    assert_true(nbox < MAX_MSGS);
    mail *m = &box[nbox++];
    *m = (mail){*(int *)ctx, stage, tag, 0, bytes, malloc(bytes)};
    memcpy(m->data, buf, bytes);
    mail_req *r = calloc(1, sizeof *r);
    *req = r;
    return 0;
}

static int mail_irecv(void *ctx, void *buf, size_t bytes, int stage, int tag, void **req)
{
    mail_req *r = calloc(1, sizeof *r);
    *r = (mail_req){1, buf, bytes, stage, *(int *)ctx, tag};
    *req = r;
    return 0;
}

static int mail_wait(void *ctx, void *req)
{
    (void)ctx;
    mail_req *r = req;
    int rc = r->recv ? SO_ECOMM : 0;
    for (int i = 0; r->recv && i < nbox; i++)
        if (!box[i].taken && box[i].from == r->from && box[i].to == r->to && box[i].tag == r->tag &&
            box[i].bytes == r->bytes) {
            memcpy(r->buf, box[i].data, r->bytes);
            box[i].taken = 1;
            rc = 0;
            break;
        }
    free(r);
    return rc;
}

static void mail_clear(void)
{
    for (int i = 0; i < nbox; i++)
        free(box[i].data);
    nbox = 0;
}

/* Device d of a LeNet-5 cut in two on the onednn backend (blocked layouts
 * cross the cut), its recv nodes built in the layouts received. */
static void layouts_between(int fail_first)
{
    so_graph *g = build("lenet5");
    so_pipe_plan plan;
    int first[2] = {0, 4}, dev[2] = {0, 1};
    assert_int_equal(so_pipe_plan_init(&plan, g, first, 2), 0);
    so_pipe_stage_edges e[2];
    so_pipe_layouts *l[2];
    so_model *m[2] = {NULL, NULL};
    for (int d = 0; d < 2; d++) {
        so_graph *dg = NULL;
        so_pipe_link link = {&dev[d], mail_isend, mail_irecv, mail_wait, NULL, NULL, NULL};
        assert_int_equal(so_pipe_stage_graph(&plan, 2, d, &dg, &e[d]), 0);
        assert_int_equal(so_pipe_layouts_create(&e[d], &l[d]), 0);
        int rc = so_pipe_layouts_receive(l[d], &link);
        if (d == 1 && fail_first) {
            assert_int_equal(rc, SO_ECOMM);
            assert_non_null(strstr(so_errmsg(), "stage 0 could not build its model"));
            so_graph_destroy(dg);
            break;
        }
        assert_int_equal(rc, 0);
        so_model_opts mo = {.backend = "onednn", .batch = 2, .seed = 1, .recv_layout = so_pipe_layouts_of,
                            .recv_layout_ctx = l[d]};
        assert_int_equal(so_model_create_opts(dg, &mo, &m[d]), 0);
        assert_int_equal(so_pipe_layouts_send(&e[d], &link, d == 0 && fail_first ? NULL : m[d]), 0);
    }
    if (!fail_first) { /* what device 1 received is what device 0's send nodes produce */
        assert_true(e[1].nrecv > 0 && e[1].nrecv == e[0].nsend);
        for (int i = 0; i < e[1].nrecv; i++) {
            char want[2048];
            const void *got;
            size_t len = so_model_edge_layout(m[0], e[0].send[i].node, want, sizeof want), got_len = 99;
            assert_int_equal(so_pipe_layouts_of(l[1], e[1].recv[i].node, &got, &got_len), 0);
            assert_int_equal(got_len, len);
            assert_memory_equal(got, want, len);
        }
    }
    for (int d = 0; d < 2; d++) {
        so_model_destroy(m[d]);
        so_pipe_layouts_destroy(l[d]);
        so_pipe_stage_edges_free(&e[d]);
    }
    mail_clear();
    so_pipe_plan_deinit(&plan);
    so_graph_destroy(g);
}

static void test_layouts_pass(void **state)
{
    (void)state;
    layouts_between(0);
}

static void test_layouts_failure_mark(void **state)
{
    (void)state;
    layouts_between(1);
}

/* ---- metrics ------------------------------------------------------------------------ */

static void test_metrics(void **state)
{
    (void)state;
    double equal[3] = {4, 4, 4}, uneven[2] = {2, 4};
    /* Equal devices: (M + P - 1) micro-batch times, the schedule's bubble. */
    assert_true(so_pipe_step_of_devices(equal, 3, 4) == 6 * 1.0);
    assert_true(fabs(so_pipe_bubble_of_devices(equal, 3, 4) - so_pipe_bubble(SO_PIPE_1F1B, 3, 4, 1)) < 1e-12);
    /* 0.5 + 1 to fill, then 3 more at the slower device's 1 per micro-batch */
    assert_true(so_pipe_step_of_devices(uneven, 2, 4) == 4.5);
    assert_true(fabs(so_pipe_bubble_of_devices(uneven, 2, 4) - (1 - 6 / 9.0)) < 1e-12);
    double idle[2] = {0, 0};
    assert_true(so_pipe_bubble_of_devices(idle, 2, 4) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranks),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_cuts),
        cmocka_unit_test(test_compose),
        cmocka_unit_test(test_layouts_pass),
        cmocka_unit_test(test_layouts_failure_mark),
        cmocka_unit_test(test_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
