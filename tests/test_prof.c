/* Profiler tests on synthetic input: spans and communication events with
 * chosen times (dyadic seconds, so the sums are exact) for two "ranks", one
 * of which sleeps in backward; POP metrics must show that imbalance exactly.
 * Also: statistics by message size, the step window, the trace's nesting,
 * option parsing, per-node spans of a real model (lenet5, resnet20 blocks),
 * and background checkpoint I/O recorded from two threads at once. */
#include <pthread.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scaleout/err.h"
#include "scaleout/prof.h"
#include "scaleout/timer.h"
#include "scaleout/zoo.h"

static so_prof *make(int rank, so_prof_detail detail, long first, long last)
{
    so_prof *p = NULL;
    so_prof_config c = {detail, first, last, rank, 0, 0};
    assert_int_equal(so_prof_create(&c, &p), 0);
    return p;
}

/* One synthetic step starting at t: data 1/16, forward 1/4, backward 1/2 +
 * extra, comm wait w, optimizer 1/16; one gradient bucket of `bytes` that
 * runs for 1/8 s ending at the start of the wait plus w. Returns the end. */
static double step(so_prof *p, long s, double t, double extra, double w, size_t bytes)
{
    double d1 = t + 0.0625, f1 = d1 + 0.25, b1 = f1 + 0.5 + extra, w1 = b1 + w, o1 = w1 + 0.0625;
    so_prof_span(p, SO_SPAN_DATA, s, 0, t, d1);
    so_prof_span(p, SO_SPAN_FORWARD, s, 0, d1, f1);
    so_prof_span(p, SO_SPAN_BACKWARD, s, 0, f1, b1);
    so_prof_comm_event e = {"allreduce", "ring", SO_PROF_USE_GRADIENTS, bytes, 0, w1 - 0.25, w1 - 0.125, w1};
    so_prof_comm(p, &e);
    so_prof_span(p, SO_SPAN_COMM_WAIT, s, 0, b1, w1);
    so_prof_span(p, SO_SPAN_OPTIMIZER, s, 0, w1, o1);
    so_prof_span(p, SO_SPAN_STEP, s + 1, 0, t, o1); /* the trainer reports STEP after counting it */
    return o1;
}

/* Rank 1 "sleeps" 1/4 s in every backward; rank 0 waits for it in comm. */
static void test_pop_imbalance(void **state)
{
    (void)state;
    so_prof *r0 = make(0, SO_PROF_DETAIL_STEP, 0, 2), *r1 = make(1, SO_PROF_DETAIL_STEP, 0, 2);
    double t0 = 0, t1 = 0;
    for (long s = 0; s < 4; s++) {
        t0 = step(r0, s, t0, 0, 0.25, 1024);   /* fast rank waits 1/4 */
        t1 = step(r1, s, t1, 0.25, 0, 1024);   /* slow rank never waits */
    }
    so_prof_totals tt[2];
    so_prof_get_totals(r0, &tt[0]);
    so_prof_get_totals(r1, &tt[1]);
    assert_int_equal(tt[0].steps, 4);
    /* useful = 4 x (1/4 + 1/2 + 1/16) and 4 x (1/4 + 3/4 + 1/16); runtime 4 x 1.125 */
    assert_true(tt[0].useful == 4 * 0.8125 && tt[1].useful == 4 * 1.0625);
    assert_true(tt[0].runtime == 4.5 && tt[1].runtime == 4.5);
    so_prof_pop pop;
    so_prof_pop_compute(tt, 2, &pop);
    double lb = (0.8125 + 1.0625) / 2 / 1.0625, ce = 1.0625 / 1.125;
    assert_true(pop.load_balance == lb);
    assert_true(pop.comm_efficiency == ce);
    assert_true(pop.parallel_efficiency == lb * ce);
    assert_true(pop.load_balance < 0.9);
    /* Overlap: waits sum to 1 s over 8 x 1/8 s of pure communication: 0%. */
    assert_true(pop.overlap_pct == 0);
    /* data wait: 8 x 1/16 over 9 s */
    assert_true(pop.data_wait_share == 0.5 / 9);
    /* Balanced ranks: load balance 1. */
    so_prof_totals same[2] = {tt[1], tt[1]};
    so_prof_pop_compute(same, 2, &pop);
    assert_true(pop.load_balance == 1.0);
    /* pack/unpack round trip */
    double v[SO_PROF_TOTALS_FIELDS + 1];
    so_prof_totals back;
    so_prof_totals_pack(&tt[0], v);
    so_prof_totals_unpack(v, &back);
    assert_true(back.useful == tt[0].useful && back.steps == 4 && back.comm_pure == tt[0].comm_pure);
    so_prof_destroy(r0);
    so_prof_destroy(r1);
}

/* The slow rank alternates: the run's load balance is 1, the per-step one is not. */
static void test_step_balance(void **state)
{
    (void)state;
    so_prof *r[2] = {make(0, SO_PROF_DETAIL_STEP, 0, 0), make(1, SO_PROF_DETAIL_STEP, 0, 0)};
    double t[2] = {0, 0};
    for (long s = 0; s < 4; s++)
        for (int k = 0; k < 2; k++)
            t[k] = step(r[k], s, t[k], (s % 2 == k) ? 0.25 : 0, 0.125, 64);
    so_prof_totals tt[2];
    so_prof_get_totals(r[0], &tt[0]);
    so_prof_get_totals(r[1], &tt[1]);
    so_prof_pop pop;
    so_prof_pop_compute(tt, 2, &pop);
    assert_true(pop.load_balance == 1.0 && pop.step_load_balance == -1);
    double u[8];
    for (int k = 0; k < 2; k++) {
        long n;
        const double *v = so_prof_step_useful(r[k], &n);
        assert_int_equal(n, 4);
        for (int s = 0; s < 4; s++) {
            assert_true(v[s] == ((s % 2 == k) ? 1.0625 : 0.8125));
            u[k * 4 + s] = v[s];
        }
    }
    so_prof_pop_steps(u, 2, 4, &pop);
    assert_true(pop.step_load_balance == 0.9375 / 1.0625);
    so_prof_destroy(r[0]);
    so_prof_destroy(r[1]);
}

static void test_overlap_hidden(void **state)
{
    (void)state;
    so_prof *p = make(0, SO_PROF_DETAIL_STEP, 0, 0);
    double t = 0;
    for (long s = 0; s < 2; s++)
        t = step(p, s, t, 0, 0.03125, 64); /* wait 1/32 of 1/8 communication: 75% hidden */
    so_prof_totals tt;
    so_prof_get_totals(p, &tt);
    so_prof_pop pop;
    so_prof_pop_compute(&tt, 1, &pop);
    assert_true(pop.overlap_pct == 75);
    so_prof_destroy(p);
}

static char *capture(so_prof *p, int trace)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(trace ? so_prof_write_trace(p, f, NULL, 0) : so_prof_write_rank_json(p, f), 0);
    fclose(f);
    return buf;
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *q = s; (q = strstr(q, needle)); q += strlen(needle))
        n++;
    return n;
}

/* Known messages land in their power-of-two bins with count/min/max/avg. */
static void test_size_bins(void **state)
{
    (void)state;
    so_prof *p = make(0, SO_PROF_DETAIL_STEP, 0, 10);
    const size_t bytes[] = {1000, 1024, 1025, 4096, 4096, 0};
    const double lat[] = {0.5, 0.25, 1, 2, 4, 0.125};
    so_prof_span(p, SO_SPAN_DATA, 0, 0, 0, 0);
    for (int i = 0; i < 6; i++) {
        so_prof_comm_event e = {"allreduce", "rd", SO_PROF_USE_GRADIENTS, bytes[i], i, 0, 1, 1 + lat[i]};
        so_prof_comm(p, &e);
    }
    char *js = capture(p, 0);
    assert_non_null(strstr(js, "\"calls\":6,\"bytes\":11241,\"seconds\":7.875"));
    assert_non_null(strstr(js, "{\"max_bytes\":1,\"count\":1,\"avg_s\":0.125"));
    assert_non_null(strstr(js, "{\"max_bytes\":1024,\"count\":2,\"avg_s\":0.375,\"min_s\":0.25,\"max_s\":0.5}"));
    assert_non_null(strstr(js, "{\"max_bytes\":2048,\"count\":1,\"avg_s\":1,"));
    assert_non_null(strstr(js, "{\"max_bytes\":4096,\"count\":2,\"avg_s\":3,\"min_s\":2,\"max_s\":4}"));
    free(js);
    so_prof_destroy(p);
}

/* A blocking reduction inside an EVAL span is tagged evaluation; one outside stays metrics. */
static void test_use_tags(void **state)
{
    (void)state;
    so_prof *p = make(0, SO_PROF_DETAIL_STEP, 0, 10);
    so_prof_comm_event a = {"allreduce", "mpi", SO_PROF_USE_METRICS, 8, -1, 1, 1, 2};
    so_prof_comm_event b = {"allreduce", "mpi", SO_PROF_USE_METRICS, 24, -1, 5, 5, 6};
    so_prof_comm_event c = {"bcast", "mpi", SO_PROF_USE_PARAMS, 4096, -1, 0, 0, 0.5};
    so_prof_comm(p, &c);
    so_prof_comm(p, &a);
    so_prof_comm(p, &b);
    so_prof_span(p, SO_SPAN_EVAL, 3, 0, 4, 7);
    char *js = capture(p, 0);
    assert_int_equal(count(js, "\"use\":\"evaluation\",\"calls\":1,\"bytes\":24"), 1);
    assert_int_equal(count(js, "\"use\":\"metrics\",\"calls\":1,\"bytes\":8"), 1);
    assert_int_equal(count(js, "\"use\":\"params\",\"calls\":1"), 1);
    free(js);
    so_prof_destroy(p);
}

/* The trace maps local times through the clock model t + offset + drift (t -
 * t_ref) minus the origin, onto whole 1/8 us: a rank whose clock is 2 s ahead
 * and runs 1% fast, measured at t_ref = 10, writes local t = 110 at
 * 110 - 2 - 0.01 x 100 = 107 s. */
static void test_clock_map(void **state)
{
    (void)state;
    so_prof_clock c = {-2, -0.01, 10};
    assert_true(so_prof_clock_map(&c, 110) == 107);
    assert_true(so_prof_clock_map(NULL, 110) == 110);
    so_prof *p = make(1, SO_PROF_DETAIL_STEP, 0, 10);
    so_prof_mark(p, "a", 0, 110, 110.25);
    so_prof_mark(p, "b", 0, 110.25, 110.5); /* starts where a ends */
    so_prof_mark(p, "c", 0, 10.0000001, 10.0000002); /* 0.1 us: within a tick */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(so_prof_write_trace(p, f, &c, 0), 0);
    fclose(f);
    /* a: 107 s .. 107.2475 s (the quarter second shrinks by 1%) */
    assert_non_null(strstr(buf, "\"name\":\"a\",\"cat\":\"mark\",\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":107000000.000,"
                                "\"dur\":247500.000"));
    assert_non_null(strstr(buf, "\"name\":\"b\",\"cat\":\"mark\",\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":107247500.000,"));
    /* c: 8000000.099 .. 8000000.198 us, rounded to the 1/8 us grid */
    assert_non_null(strstr(buf, "\"name\":\"c\",\"cat\":\"mark\",\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":8000000.125,"
                                "\"dur\":0.125"));
    free(buf);
    so_prof_destroy(p);
}

/* Steps in [2, 4) are detailed; the others become one summary event per track. */
static void test_window(void **state)
{
    (void)state;
    so_prof *p = make(3, SO_PROF_DETAIL_STEP, 2, 4);
    double t = 0;
    for (long s = 0; s < 6; s++)
        t = step(p, s, t, 0, 0.25, 100);
    char *tr = capture(p, 1);
    assert_int_equal(count(tr, "\"name\":\"step (summary)\""), 4);
    assert_int_equal(count(tr, "\"name\":\"gradient allreduces\""), 4);
    assert_int_equal(count(tr, "\"name\":\"forward\""), 2);
    assert_int_equal(count(tr, "\"name\":\"allreduce\",\"cat\":\"gradients\""), 2);
    assert_int_equal(count(tr, "\"pid\":3"), 4 + 4 + 4 + 2 * 6 + 2); /* metadata, summaries, window */
    assert_int_equal(count(tr, "\"args\":{\"name\":\"compute\"}"), 1);
    assert_non_null(strstr(tr, "\"name\":\"forward\",\"cat\":\"phase\",\"ph\":\"X\",\"pid\":3,\"tid\":0,"
                                "\"ts\":2312500.000,\"dur\":250000.000"));
    free(tr);
    size_t kept, dropped;
    so_prof_event_counts(p, &kept, &dropped);
    assert_int_equal(kept, 4 + 4 + 2 * 6 + 2);
    assert_int_equal(dropped, 0);
    so_prof_destroy(p);
}

/* Events past max_events are counted, not stored. */
static void test_event_cap(void **state)
{
    (void)state;
    so_prof *p = NULL;
    so_prof_config c = {SO_PROF_DETAIL_STEP, 0, -1, 0, 10, 0};
    assert_int_equal(so_prof_create(&c, &p), 0);
    double t = 0;
    for (long s = 0; s < 5; s++)
        t = step(p, s, t, 0, 0, 8);
    size_t kept, dropped;
    so_prof_event_counts(p, &kept, &dropped);
    assert_int_equal(kept, 10);
    assert_int_equal(dropped, 5 * 7 - 10);
    so_prof_destroy(p);
}

/* skip_steps: the first step is in the timeline but not in the statistics. */
static void test_skip(void **state)
{
    (void)state;
    so_prof *p = NULL;
    so_prof_config c = {SO_PROF_DETAIL_STEP, 0, -1, 0, 0, 1};
    assert_int_equal(so_prof_create(&c, &p), 0);
    double t = 0;
    for (long s = 0; s < 3; s++)
        t = step(p, s, t, s == 0 ? 8.0 : 0.0, 0.25, 512); /* a slow first step */
    so_prof_totals tt;
    so_prof_get_totals(p, &tt);
    assert_int_equal(tt.steps, 2);
    assert_true(tt.runtime == 2 * 1.125 && tt.backward == 2 * 0.5 && tt.comm_pure == 2 * 0.125);
    char *tr = capture(p, 1), *js = capture(p, 0);
    assert_int_equal(count(tr, "\"name\":\"step\""), 3);
    assert_non_null(strstr(js, "\"calls\":2,"));
    free(tr);
    free(js);
    so_prof_destroy(p);
}

static void test_parse(void **state)
{
    (void)state;
    long a, b;
    so_prof_detail d;
    assert_int_equal(so_prof_window_parse("3:7", &a, &b), 0);
    assert_true(a == 3 && b == 7);
    assert_int_equal(so_prof_window_parse("all", &a, &b), 0);
    assert_true(a == 0 && b == -1);
    const char *bad[] = {"", "3", "7:3", "3:3", "-1:2", "a:b", "1:2x", ":4"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(so_prof_window_parse(bad[i], &a, &b), SO_EINVAL);
    assert_int_equal(so_prof_detail_parse("block", &d), 0);
    assert_int_equal(d, SO_PROF_DETAIL_BLOCK);
    assert_int_equal(so_prof_detail_parse("layers", &d), SO_EINVAL);
}

/* A real model: per-node spans in layer detail, grouped in block detail,
 * and dropped for evaluation forwards (no FORWARD span follows them). */
static int run_model(const char *model, so_prof_detail detail, char **trace, char **stats)
{
    so_graph *g = NULL;
    so_model *m = NULL;
    int c = strcmp(model, "lenet5") ? 3 : 1, hw = strcmp(model, "lenet5") ? 32 : 28;
    assert_int_equal(so_zoo_build(model, c, hw, hw, 10, &g), 0);
    assert_int_equal(so_model_create(g, "ref", 2, 1, &m), 0);
    so_prof *p = make(0, detail, 0, 10);
    assert_int_equal(so_prof_attach_model(p, m), 0);
    size_t n = (size_t)2 * c * hw * hw;
    float *x = calloc(n, sizeof *x);
    int32_t y[2] = {1, 2};
    assert_non_null(x);
    so_model_forward(m, x, NULL, 2, 0); /* an evaluation forward: must not count */
    so_prof_span(p, SO_SPAN_EVAL, 0, 0, 0, 1e9);
    so_prof_span(p, SO_SPAN_DATA, 0, 0, 0, 0);
    double t0 = so_now();
    assert_int_equal(so_model_forward(m, x, y, 2, 1), 0);
    double t1 = so_now();
    so_prof_span(p, SO_SPAN_FORWARD, 0, 0, t0, t1);
    assert_int_equal(so_model_backward(m), 0);
    double t2 = so_now();
    so_prof_span(p, SO_SPAN_BACKWARD, 0, 0, t1, t2);
    so_prof_span(p, SO_SPAN_STEP, 1, 0, t0, t2);
    *trace = capture(p, 1);
    *stats = capture(p, 0);
    so_prof_detach_model(p, m);
    assert_null(m->on_node);
    so_prof_destroy(p);
    int nodes = so_graph_size(m->g);
    so_model_destroy(m);
    free(x);
    return nodes;
}

static void test_model_layers(void **state)
{
    (void)state;
    char *tr, *st;
    int nodes = run_model("lenet5", SO_PROF_DETAIL_LAYER, &tr, &st);
    /* nodes 1 .. nodes-1 run forward and backward once each (node 0 is the input) */
    assert_int_equal(count(tr, "\"cat\":\"forward\""), nodes - 1);
    assert_int_equal(count(tr, "\"cat\":\"backward\""), nodes - 1);
    assert_non_null(strstr(tr, "\"name\":\"conv1\",\"cat\":\"forward\""));
    assert_non_null(strstr(st, "{\"name\":\"conv1\",\"block\":\"conv1\",\"node\":1,\"forward_s\":"));
    free(tr);
    free(st);
    /* Block detail on resnet20: one event per block and direction. */
    nodes = run_model("resnet20", SO_PROF_DETAIL_BLOCK, &tr, &st);
    assert_true(nodes > 40);
    assert_int_equal(count(tr, "\"name\":\"layer1.0\",\"cat\":\"forward\""), 1);
    assert_int_equal(count(tr, "\"name\":\"layer3.2\",\"cat\":\"backward\""), 1);
    assert_int_equal(count(tr, "\"name\":\"layer1.0.conv1\""), 0);
    assert_non_null(strstr(st, "{\"name\":\"layer1.0.conv1\",\"block\":\"layer1.0\""));
    int fwd = count(tr, "\"cat\":\"forward\"");
    assert_true(fwd >= 10 && fwd < nodes / 2);
    free(tr);
    free(st);
    /* Step detail: no per-node hook at all. */
    nodes = run_model("lenet5", SO_PROF_DETAIL_STEP, &tr, &st);
    assert_int_equal(count(tr, "\"cat\":\"forward\""), 0);
    assert_non_null(strstr(st, "\"layers\":[]"));
    free(tr);
    free(st);
}

/* The reader: what the writer wrote reads back; malformed text is rejected
 * with a line number; escapes decode to UTF-8. */
static void test_json_reader(void **state)
{
    (void)state;
    so_prof *p = make(0, SO_PROF_DETAIL_STEP, 0, 10);
    double t = 0;
    for (long s = 0; s < 3; s++)
        t = step(p, s, t, 0, 0.25, 3000);
    char *js = capture(p, 0);
    so_prof_jv *v = NULL;
    assert_int_equal(so_prof_json_parse(js, strlen(js), &v), 0);
    const so_prof_jv *tot = so_prof_jv_get(v, "totals");
    assert_true(so_prof_jv_num(so_prof_jv_get(tot, "runtime_s"), -1) == 3 * 1.125);
    const so_prof_jv *c0 = so_prof_jv_at(so_prof_jv_get(v, "comm"), 0);
    assert_string_equal(so_prof_jv_str(so_prof_jv_get(c0, "algorithm"), ""), "ring");
    assert_int_equal(so_prof_jv_num(so_prof_jv_get(so_prof_jv_at(so_prof_jv_get(c0, "sizes"), 0), "max_bytes"), 0),
                     4096);
    assert_null(so_prof_jv_get(v, "missing"));
    assert_true(so_prof_jv_num(NULL, 7) == 7);
    so_prof_json_free(v);
    free(js);
    const char *good = "{\"a\": [1, -2.5e3, true, false, null, \"x\\u00e9\\ud83d\\ude00\\n\"]}";
    assert_int_equal(so_prof_json_parse(good, strlen(good), &v), 0);
    const so_prof_jv *a = so_prof_jv_get(v, "a");
    assert_int_equal(so_prof_jv_len(a), 6);
    assert_true(so_prof_jv_num(so_prof_jv_at(a, 1), 0) == -2500);
    assert_int_equal(so_prof_jv_type(so_prof_jv_at(a, 2)), SO_PROF_JTRUE);
    assert_string_equal(so_prof_jv_str(so_prof_jv_at(a, 5), ""), "x\xc3\xa9\xf0\x9f\x98\x80\n");
    so_prof_json_free(v);
    const char *bad[] = {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", "\"\\x\"", "\"abc", "[1] 2", "nul",
                         "\"\\ud800\"", "{\"a\":1,}", "-", "1e", "\"\\u12\""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (so_prof_json_parse(bad[i], strlen(bad[i]), &v) != SO_EFORMAT)
            fail_msg("accepted bad JSON '%s'", bad[i]);
        assert_null(v);
        assert_non_null(strstr(so_errmsg(), "line 1:"));
    }
    assert_int_equal(so_prof_json_parse("[\n\n1,\n]", 7, &v), SO_EFORMAT);
    assert_non_null(strstr(so_errmsg(), "line 4:"));
    char deep[200];
    memset(deep, '[', sizeof deep);
    assert_int_equal(so_prof_json_parse(deep, sizeof deep, &v), SO_EFORMAT);
    assert_non_null(strstr(so_errmsg(), "too deep"));
    so_prof_destroy(p);
}

/* ---- background I/O from other threads ------------------------------------ */

#define IO_EVENTS 20000 /* per thread: 100 in the window (steps 2, 3), the rest outside (10 per step from 10) */
#define IO_SUMMARIES ((IO_EVENTS - 100) / 10)
#define IO_BYTES 4096

typedef struct {
    so_prof *p;
    int track;
    pthread_barrier_t *go;
} io_arg;

/* A writer or flush thread: back-to-back events 1/2 s long, 1 s apart. */
static void *io_thread(void *arg)
{
    const io_arg *a = arg;
    int flush = a->track == SO_PROF_TRACK_CKPT_FLUSH;
    pthread_barrier_wait(a->go); /* both threads and the training thread start together */
    for (int i = 0; i < IO_EVENTS; i++) {
        long step = i < 100 ? 2 + i / 50 : 10 + (i - 100) / 10;
        so_prof_io_event e = {flush ? "flush" : i % 2 ? "shard write" : "snapshot", a->track, step, IO_BYTES,
                              i, i + 0.5, 0};
        so_prof_io(a->p, &e);
    }
    return NULL;
}

/* Checks one I/O track of a parsed trace: its name, 100 events + the
 * summaries in time order without overlap, bytes and MB/s in args. */
static void check_io_track(const so_prof_jv *ev, int tid, const char *thread)
{
    int named = 0, detail = 0, summaries = 0;
    double end = -1;
    for (int i = 0; i < so_prof_jv_len(ev); i++) {
        const so_prof_jv *e = so_prof_jv_at(ev, i), *args = so_prof_jv_get(e, "args");
        if (so_prof_jv_num(so_prof_jv_get(e, "tid"), -1) != tid)
            continue;
        const char *ph = so_prof_jv_str(so_prof_jv_get(e, "ph"), "");
        if (!strcmp(ph, "M")) {
            assert_string_equal(so_prof_jv_str(so_prof_jv_get(args, "name"), ""), thread);
            named++;
            continue;
        }
        assert_string_equal(ph, "X");
        double ts = so_prof_jv_num(so_prof_jv_get(e, "ts"), -1), dur = so_prof_jv_num(so_prof_jv_get(e, "dur"), -1);
        assert_true(ts >= end && dur > 0); /* ordered, no overlap on the track */
        end = ts + dur;
        double bytes = so_prof_jv_num(so_prof_jv_get(args, "bytes"), -1);
        long step = (long)so_prof_jv_num(so_prof_jv_get(args, "step"), -1);
        assert_true(fabs(so_prof_jv_num(so_prof_jv_get(args, "MB/s"), -1) - bytes / dur) < 1e-3);
        if (strstr(so_prof_jv_str(so_prof_jv_get(e, "name"), ""), "(summary)")) {
            /* a checkpoint outside the window: its 10 events merged, first start to last end */
            assert_true(step >= 10 && step < 10 + IO_SUMMARIES);
            assert_true(bytes == 10 * IO_BYTES && dur == 9.5e6);
            assert_true(so_prof_jv_num(so_prof_jv_get(args, "events"), -1) == 10);
            summaries++;
        } else {
            assert_true((step == 2 || step == 3) && bytes == IO_BYTES && dur == 0.5e6);
            detail++;
        }
    }
    assert_int_equal(named, 1);
    assert_int_equal(detail, 100);
    assert_int_equal(summaries, IO_SUMMARIES);
}

static void test_ckpt_io_threads(void **state)
{
    (void)state;
    so_prof *p = make(0, SO_PROF_DETAIL_STEP, 2, 4);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 3);
    io_arg a[2] = {{p, SO_PROF_TRACK_CKPT_IO, &go}, {p, SO_PROF_TRACK_CKPT_FLUSH, &go}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, io_thread, &a[i]), 0);
    pthread_barrier_wait(&go);
    double t = 0;
    for (long s = 0; s < 200; s++) /* the training thread records meanwhile */
        t = step(p, s, t, 0, 0.25, 100);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
    so_prof_io_total tot[SO_PROF_IO_KINDS];
    int n = so_prof_io_totals(p, tot, SO_PROF_IO_KINDS);
    assert_int_equal(n, 3);
    for (int i = 0; i < n; i++) { /* the totals count every event, window or not */
        long want = strcmp(tot[i].kind, "flush") ? IO_EVENTS / 2 : IO_EVENTS;
        assert_int_equal(tot[i].count, want);
        assert_int_equal(tot[i].bytes, (uint64_t)want * IO_BYTES);
        assert_true(tot[i].seconds == 0.5 * want);
    }
    char *tr = capture(p, 1), *js = capture(p, 0);
    size_t len = strlen(tr);
    char *doc = malloc(len + 3);
    assert_non_null(doc);
    snprintf(doc, len + 3, "[%s]", tr);
    so_prof_jv *ev = NULL;
    assert_int_equal(so_prof_json_parse(doc, len + 2, &ev), 0);
    check_io_track(ev, SO_PROF_TRACK_CKPT_IO, "checkpoint I/O");
    check_io_track(ev, SO_PROF_TRACK_CKPT_FLUSH, "checkpoint flush");
    so_prof_json_free(ev);
    /* profile.json: per kind count, bytes, seconds and MB/s */
    assert_non_null(strstr(js, "\"checkpoint_io\":[{\"kind\":")); /* kinds in order of first appearance */
    assert_non_null(strstr(js, "{\"kind\":\"snapshot\",\"count\":10000,\"bytes\":40960000,"
                               "\"seconds\":5000,\"mb_per_s\":0.008192}"));
    assert_non_null(strstr(js, "{\"kind\":\"flush\",\"count\":20000,\"bytes\":81920000"));
    free(doc);
    free(tr);
    free(js);
    so_prof_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pop_imbalance), cmocka_unit_test(test_overlap_hidden),
        cmocka_unit_test(test_step_balance),
        cmocka_unit_test(test_size_bins),     cmocka_unit_test(test_use_tags),
        cmocka_unit_test(test_window),        cmocka_unit_test(test_event_cap),
        cmocka_unit_test(test_parse),         cmocka_unit_test(test_model_layers),
        cmocka_unit_test(test_json_reader), cmocka_unit_test(test_skip),
        cmocka_unit_test(test_clock_map),     cmocka_unit_test(test_ckpt_io_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
