/* Pipeline partitions (src/pipe): the balancer's split is optimal against
 * brute force, bad stage lists fail with messages naming the stage, the
 * tensors crossing cuts are exactly the right ones on ResNet-20 (residual
 * connections) and LeNet-5 (a chain), stage lists by node name, the memory
 * cap, and the schedules' formulas. */
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
#include "scaleout/pipeline.h"
#include "scaleout/zoo.h"

#define MAXN 10

static so_graph *build(const char *name)
{
    const so_zoo_entry *z = so_zoo_find(name);
    so_graph *g = NULL;
    assert_non_null(z);
    assert_int_equal(so_zoo_build(name, z->c, z->h, z->w, z->classes, &g), 0);
    return g;
}

static void expect_msg(int rc, const char *needle)
{
    assert_int_equal(rc, SO_EINVAL);
    if (!strstr(so_errmsg(), needle))
        fail_msg("message '%s' does not contain '%s'", so_errmsg(), needle);
}

/* Largest stage sum of a split of cost[0..n) at starts first[0..P). */
static double max_stage(const double *cost, int n, const int *first, int P)
{
    double worst = 0;
    for (int s = 0; s < P; s++) {
        double sum = 0;
        for (int i = first[s]; i < (s + 1 < P ? first[s + 1] : n); i++)
            sum += cost[i];
        worst = sum > worst ? sum : worst;
    }
    return worst;
}

/* Every split of n items into P stages (stage 0 holds item 0 and one more):
 * the smallest largest stage, by enumeration. */
static double brute_force(const double *cost, int n, int P, int *first, int s)
{
    if (s == P)
        return max_stage(cost, n, first, P);
    double best = INFINITY;
    int lo = s == 1 ? 2 : first[s - 1] + 1;
    for (int a = lo; a <= n - (P - s); a++) {
        first[s] = a;
        double v = brute_force(cost, n, P, first, s + 1);
        best = v < best ? v : best;
    }
    return best;
}

static void test_dp_matches_brute_force(void **state)
{
    (void)state;
    srand(12345);
    for (int trial = 0; trial < 200; trial++) {
        int n = 2 + rand() % (MAXN - 1);
        double cost[MAXN];
        for (int i = 0; i < n; i++)
            cost[i] = (double)(rand() % 20); /* integers: exact sums, zero costs included */
        for (int P = 1; P <= n - 1; P++) {
            int dp_first[MAXN], bf_first[MAXN] = {0};
            assert_int_equal(so_pipe_balance_vector(cost, n, P, dp_first), 0);
            assert_int_equal(dp_first[0], 0);
            for (int s = 1; s < P; s++)
                assert_true(dp_first[s] > dp_first[s - 1] && dp_first[s] >= 2 && dp_first[s] < n);
            double want = brute_force(cost, n, P, bf_first, 1);
            if (max_stage(cost, n, dp_first, P) != want)
                fail_msg("n %d P %d: DP reaches %g, brute force %g", n, P, max_stage(cost, n, dp_first, P), want);
        }
        int first[MAXN];
        expect_msg(so_pipe_balance_vector(cost, n, n, first), "layers");
    }
}

static void test_validation(void **state)
{
    (void)state;
    so_graph *g = build("lenet5"); /* 9 nodes: input + 8 layers */
    so_pipe_plan p;
    expect_msg(so_pipe_plan_init(&p, g, (int[]){0, 2, 9, 7}, 4), "outside");
    expect_msg(so_pipe_plan_init(&p, g, (int[]){0, 5, 3}, 3), "stage 2 starts at node 3, not after stage 1's start 5");
    expect_msg(so_pipe_plan_init(&p, g, (int[]){0, 4, 4}, 3), "stage 2 starts at node 4, not after stage 1's start 4");
    expect_msg(so_pipe_plan_init(&p, g, (int[]){0, 1, 3}, 3), "stage 0 holds only the input");
    expect_msg(so_pipe_plan_init(&p, g, (int[]){2, 4}, 2), "stage 0 starts at node 2");
    int nine[9] = {0, 2, 3, 4, 5, 6, 7, 8, 8};
    expect_msg(so_pipe_plan_init(&p, g, nine, 9), "9 stages: the model has 8 layers");
    expect_msg(so_pipe_plan_init(&p, g, nine, 0), "0 stages");
    assert_int_equal(so_pipe_plan_init(&p, g, nine, 8), 0); /* one layer per stage is allowed */
    assert_int_equal(p.stages[7].first, 8);
    assert_int_equal(p.stages[7].last, 8);
    so_pipe_plan_deinit(&p);
    so_pipe_plan_deinit(&p); /* twice is harmless */
    so_graph_destroy(g);
}

/* Stage sums equal the model's totals for every contiguous 3-stage split. */
static void test_sums(void **state)
{
    (void)state;
    so_graph *g = build("resnet20");
    int n = so_graph_size(g);
    size_t act = 0;
    for (int i = 0; i < n; i++) {
        const so_node *nd = so_graph_node(g, i);
        act += (size_t)nd->out.c * nd->out.h * nd->out.w * 4;
    }
    for (int a = 2; a < n - 1; a += 5)
        for (int b = a + 1; b < n; b += 7) {
            so_pipe_plan p;
            assert_int_equal(so_pipe_plan_init(&p, g, (int[]){0, a, b}, 3), 0);
            size_t params = 0, bytes = 0;
            double flops = 0;
            for (int s = 0; s < 3; s++) {
                params += p.stages[s].params;
                bytes += p.stages[s].act_bytes;
                flops += p.stages[s].flops;
            }
            assert_int_equal(params, so_graph_nparams(g));
            assert_int_equal(bytes, act);
            assert_true(fabs(flops - so_graph_flops(g)) <= 1e-9 * so_graph_flops(g));
            so_pipe_plan_deinit(&p);
        }
    so_graph_destroy(g);
}

static int find(const so_graph *g, const char *name)
{
    for (int i = 0; i < so_graph_size(g); i++)
        if (!strcmp(so_graph_node(g, i)->name, name))
            return i;
    fail_msg("no node %s", name);
    return -1;
}

/* Producer names crossing `cut`, comma-separated in node order. */
static void crossing_names(const so_pipe_plan *p, int cut, char *out, size_t len)
{
    out[0] = 0;
    for (int t = 0; t < p->ntensors; t++)
        if (so_pipe_tensor_crosses(&p->tensors[t], cut))
            snprintf(out + strlen(out), len - strlen(out), "%s%s", out[0] ? "," : "",
                     so_graph_node(p->g, p->tensors[t].node)->name);
}

static void test_resnet20_crossings(void **state)
{
    (void)state;
    so_graph *g = build("resnet20");
    so_pipe_plan p;
    char names[256];
    /* Inside block layer1.0: its input (bn1's output) waits for the add. */
    assert_int_equal(so_pipe_plan_init(&p, g, (int[]){0, find(g, "layer1.0.conv2")}, 2), 0);
    crossing_names(&p, 0, names, sizeof names);
    assert_string_equal(names, "bn1,layer1.0.bn1");
    size_t bytes = 0;
    assert_int_equal(so_pipe_cut_tensors(&p, 0, &bytes), 2);
    assert_int_equal(bytes, 2 * 16 * 32 * 32 * 4);
    assert_int_equal(p.stages[1].recv_bytes, bytes);
    so_pipe_plan_deinit(&p);
    /* At block boundaries: the block output alone, even where two nodes of the next stage read it. */
    const char *boundaries[] = {"layer1.1.conv1", "layer2.0.conv1", "layer3.0.conv1", "fc"};
    for (int i = 0; i < 4; i++) {
        int at = find(g, boundaries[i]);
        const char *want = so_graph_node(g, at - 1)->name; /* the previous block's add, or the pooling */
        assert_int_equal(so_pipe_plan_init(&p, g, (int[]){0, at}, 2), 0);
        crossing_names(&p, 0, names, sizeof names);
        if (strcmp(names, want))
            fail_msg("cut before %s: crossing '%s', want the one tensor %s", boundaries[i], names, want);
        assert_int_equal(p.stages[1].recv_bytes, p.tensors[0].bytes); /* once, however many readers */
        so_pipe_plan_deinit(&p);
    }
    /* A residual over two cuts: bn1's output goes from stage 0 to stage 2 through cut 1 too. */
    int first[] = {0, find(g, "layer1.0.conv2"), find(g, "layer1.0.bn2")};
    assert_int_equal(so_pipe_plan_init(&p, g, first, 3), 0);
    crossing_names(&p, 1, names, sizeof names);
    assert_string_equal(names, "bn1,layer1.0.conv2");
    assert_int_equal(p.tensors[0].node, find(g, "bn1"));
    assert_int_equal(p.tensors[0].to_first, 2);
    assert_int_equal(p.tensors[0].to_last, 2);
    so_pipe_plan_deinit(&p);
    /* A block input read by two stages: stage 1 (conv1) and stage 2 (the downsample). */
    int split[] = {0, find(g, "layer2.0.conv1"), find(g, "layer2.0.conv2")};
    assert_int_equal(so_pipe_plan_init(&p, g, split, 3), 0);
    assert_int_equal(p.tensors[0].node, split[1] - 1);
    assert_int_equal(p.tensors[0].to_first, 1);
    assert_int_equal(p.tensors[0].to_last, 2);
    crossing_names(&p, 1, names, sizeof names);
    assert_string_equal(names, "add23,layer2.0.bn1");
    so_pipe_plan_deinit(&p);
    so_graph_destroy(g);
}

static void test_lenet5_one_tensor_per_cut(void **state)
{
    (void)state;
    so_graph *g = build("lenet5");
    int n = so_graph_size(g);
    for (int P = 2; P <= 4; P++) {
        int first[4];
        assert_int_equal(so_pipe_balance_vector((double[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, n, P, first), 0);
        so_pipe_plan p;
        assert_int_equal(so_pipe_plan_init(&p, g, first, P), 0);
        for (int c = 0; c < P - 1; c++) {
            size_t bytes;
            assert_int_equal(so_pipe_cut_tensors(&p, c, &bytes), 1);
            const so_node *last = so_graph_node(g, first[c + 1] - 1);
            assert_int_equal(bytes, (size_t)last->out.c * last->out.h * last->out.w * 4);
        }
        so_pipe_plan_deinit(&p);
    }
    so_graph_destroy(g);
}

static void test_list_by_names(void **state)
{
    (void)state;
    so_graph *g = build("resnet20");
    int first[8], n;
    assert_int_equal(so_pipe_parse_list(g, "0,layer1.1.conv1,layer2.0.conv1", first, 8, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(first[1], find(g, "layer1.1.conv1"));
    assert_int_equal(first[2], find(g, "layer2.0.conv1"));
    assert_int_equal(so_pipe_parse_list(g, "conv1,12", first, 8, &n), 0); /* stage 0 by its first layer */
    assert_int_equal(first[0], 0);
    assert_int_equal(first[1], 12);
    expect_msg(so_pipe_parse_list(g, "0,layer9.conv1", first, 8, &n), "'layer9.conv1' is neither");
    expect_msg(so_pipe_parse_list(g, "0,,5", first, 8, &n), "'' is neither");
    expect_msg(so_pipe_parse_list(g, "0,5000", first, 8, &n), "'5000'");
    expect_msg(so_pipe_parse_list(g, "0,1,2", first, 2, &n), "more than 2");
    so_graph_destroy(g);
}

static double largest_memory(const so_pipe_plan *p, const so_pipe_costs *c)
{
    double worst = 0;
    for (int s = 0; s < p->nstages; s++) {
        double m = so_pipe_stage_memory(&p->stages[s], s, p->nstages, c);
        worst = m > worst ? m : worst;
    }
    return worst;
}

/* Every split of g into P stages from stage s on: the smallest largest stage memory. */
static void memory_brute_force(const so_graph *g, int P, const so_pipe_costs *c, int *first, int s, double *best)
{
    if (s == P) {
        so_pipe_plan p;
        assert_int_equal(so_pipe_plan_init(&p, g, first, P), 0);
        double m = largest_memory(&p, c);
        *best = m < *best ? m : *best;
        so_pipe_plan_deinit(&p);
        return;
    }
    for (first[s] = s == 1 ? 2 : first[s - 1] + 1; first[s] <= so_graph_size(g) - (P - s); first[s]++)
        memory_brute_force(g, P, c, first, s + 1, best);
}

/* The memory balance is optimal (brute force over LeNet-5's splits), respects
 * a cap, and auto trades time for the cap. */
static void test_memory(void **state)
{
    (void)state;
    so_graph *g = build("lenet5");
    so_pipe_costs c = {.microbatch = 8, .microbatches = 4, .schedule = SO_PIPE_1F1B, .optim_slots = 1};
    for (int P = 2; P <= 4; P++) {
        int first[4], bf[4] = {0};
        c.devices = P;
        assert_int_equal(so_pipe_balance(g, P, SO_PIPE_BY_MEMORY, &c, first), 0);
        so_pipe_plan p;
        assert_int_equal(so_pipe_plan_init(&p, g, first, P), 0);
        double got = largest_memory(&p, &c);
        so_pipe_plan_deinit(&p);
        double best = INFINITY;
        memory_brute_force(g, P, &c, bf, 1, &best);
        if (got != best)
            fail_msg("P %d: memory balance %g, brute force %g", P, got, best);
        c.max_bytes = (size_t)best;
        assert_int_equal(so_pipe_balance(g, P, SO_PIPE_BY_MEMORY, &c, first), 0);
        c.max_bytes = (size_t)best - 1;
        expect_msg(so_pipe_balance(g, P, SO_PIPE_BY_MEMORY, &c, first), "no split into");
        c.max_bytes = 0;
    }
    /* auto: these times put conv2, fc1 and fc2 (most parameters) in one stage; the cap forbids it. */
    double secs[9] = {0, 5, 5, 5, 5, 1, 1, 1, 1};
    int tfirst[2], afirst[2];
    c.seconds = secs;
    c.devices = 2;
    assert_int_equal(so_pipe_balance(g, 2, SO_PIPE_BY_TIME, &c, tfirst), 0);
    so_pipe_plan p;
    assert_int_equal(so_pipe_plan_init(&p, g, tfirst, 2), 0);
    double time_mem = largest_memory(&p, &c);
    so_pipe_plan_deinit(&p);
    assert_int_equal(so_pipe_balance(g, 2, SO_PIPE_BY_MEMORY, &c, afirst), 0);
    assert_int_equal(so_pipe_plan_init(&p, g, afirst, 2), 0);
    double mem_best = largest_memory(&p, &c);
    so_pipe_plan_deinit(&p);
    assert_true(mem_best < time_mem);
    c.max_bytes = (size_t)mem_best;
    assert_int_equal(so_pipe_balance(g, 2, SO_PIPE_BY_AUTO, &c, afirst), 0);
    assert_int_equal(so_pipe_plan_init(&p, g, afirst, 2), 0);
    assert_true(largest_memory(&p, &c) <= (double)c.max_bytes);
    so_pipe_plan_deinit(&p);
    c.max_bytes = (size_t)mem_best - 1;
    expect_msg(so_pipe_balance(g, 2, SO_PIPE_BY_AUTO, &c, afirst), "no split into 2 stages");
    c.seconds = NULL;
    expect_msg(so_pipe_balance(g, 2, SO_PIPE_BY_TIME, &c, afirst), "per-node times");
    so_graph_destroy(g);
}

static void test_schedule_formulas(void **state)
{
    (void)state;
    assert_true(fabs(so_pipe_bubble(SO_PIPE_GPIPE, 4, 4, 1) - 3.0 / 7) < 1e-12);
    assert_true(fabs(so_pipe_bubble(SO_PIPE_1F1B, 4, 16, 1) - 3.0 / 19) < 1e-12);
    assert_true(fabs(so_pipe_bubble(SO_PIPE_INTERLEAVED, 4, 4, 2) - 3.0 / 11) < 1e-12); /* (P - 1) / (v M + P - 1) */
    assert_true(so_pipe_bubble(SO_PIPE_GPIPE, 1, 8, 1) == 0);
    so_pipe_costs c = {.microbatches = 8, .schedule = SO_PIPE_1F1B, .devices = 4};
    int want_1f1b[] = {4, 3, 2, 1};
    for (int s = 0; s < 4; s++)
        assert_int_equal(so_pipe_in_flight(&c, s, 4), want_1f1b[s]);
    c.microbatches = 2;
    assert_int_equal(so_pipe_in_flight(&c, 0, 4), 2);
    assert_int_equal(so_pipe_in_flight(&c, 3, 4), 1);
    c.schedule = SO_PIPE_GPIPE;
    assert_int_equal(so_pipe_in_flight(&c, 3, 4), 2);
    /* Interleaved, P = 2, v = 2, M = 4: device 0 warms up 2 + 2 = 4 passes (0, 1 on chunk 0, 0, 1
     * on chunk 1), then forwards 2 and 3 on chunk 0 before its first backward there: 4 in flight;
     * device 1 (warm-up 2) holds 3 on chunk 0. */
    c = (so_pipe_costs){.microbatches = 4, .schedule = SO_PIPE_INTERLEAVED, .devices = 2};
    assert_int_equal(so_pipe_in_flight(&c, 0, 4), 4);
    assert_int_equal(so_pipe_in_flight(&c, 2, 4), 4);
    assert_int_equal(so_pipe_in_flight(&c, 1, 4), 3);
    /* Weights, gradients and one momentum slot of 10 parameters, 2 micro-batches of 8 x 100 bytes. */
    so_pipe_stage st = {.params = 10, .act_bytes = 100};
    c = (so_pipe_costs){.microbatch = 8, .microbatches = 4, .schedule = SO_PIPE_1F1B, .devices = 2, .optim_slots = 1};
    assert_true(so_pipe_stage_memory(&st, 0, 2, &c) == 10 * 4 * 3 + 100 * 8 * 2);
    assert_int_equal(so_pipe_schedule_parse("1f1b"), SO_PIPE_1F1B);
    assert_int_equal(so_pipe_schedule_parse("pipedream"), -1);
    assert_string_equal(so_pipe_schedule_name(SO_PIPE_INTERLEAVED), "interleaved");
}

/* Every (chunk, micro-batch) forward and backward exactly once, forward
 * first, each chunk's backwards in micro-batch order, never more in flight
 * on a chunk than the slots, and the slot k % slots free when micro-batch
 * k starts there. */
static void check_schedule(so_pipe_schedule sc, int d, int P, int M, int v)
{
    enum { MAXP = 256 };
    int ops[2 * MAXP], fwd[MAXP] = {0}, bwd[MAXP] = {0}, live[8] = {0}, next_b[8] = {0}, owner[8][MAXP];
    int slots = so_pipe_slots(sc, d, P, M, v), most = 0;
    assert_true(M * v <= MAXP && v <= 8);
    for (int c = 0; c < v; c++)
        for (int i = 0; i < MAXP; i++)
            owner[c][i] = -1;
    assert_int_equal(so_pipe_schedule_ops(sc, d, P, M, v, ops), 0);
    for (int i = 0; i < 2 * M * v; i++) {
        int pass = ops[i] >= 0 ? ops[i] : -ops[i] - 1, c = pass / M, k = pass % M;
        assert_true(c >= 0 && c < v);
        if (ops[i] >= 0) {
            assert_int_equal(fwd[pass]++, 0);
            assert_int_equal(owner[c][k % slots], -1);
            owner[c][k % slots] = k;
            most = ++live[c] > most ? live[c] : most;
        } else {
            assert_int_equal(fwd[pass], 1);
            assert_int_equal(bwd[pass]++, 0);
            assert_int_equal(k, next_b[c]++);
            owner[c][k % slots] = -1;
            live[c]--;
        }
    }
    assert_int_equal(most, slots);
}

/* Every device runs its passes in order, each waiting only for what it
 * receives (the forward of the previous stage, the backward of the next):
 * the whole pipeline must finish, whatever the schedule, P, M and v. */
static void check_no_deadlock(so_pipe_schedule sc, int P, int M, int v)
{
    int S = P * v, n = 2 * M * v;
    int *ops = malloc((size_t)P * n * sizeof *ops), *at = calloc((size_t)P, sizeof *at);
    char *fdone = calloc((size_t)S * M, 1), *bdone = calloc((size_t)S * M, 1);
    assert_non_null(ops);
    for (int d = 0; d < P; d++)
        assert_int_equal(so_pipe_schedule_ops(sc, d, P, M, v, ops + d * n), 0);
    for (int moved = 1, left = P * n; left > 0; ) {
        assert_true(moved); /* no device could go on: a deadlock */
        moved = 0;
        for (int d = 0; d < P; d++) {
            if (at[d] == n)
                continue;
            int op = ops[d * n + at[d]], pass = op >= 0 ? op : -op - 1, k = pass % M, st = pass / M * P + d;
            int ready = op >= 0 ? st == 0 || fdone[(st - 1) * M + k]
                                : fdone[st * M + k] && (st == S - 1 || bdone[(st + 1) * M + k]);
            if (!ready)
                continue;
            (op >= 0 ? fdone : bdone)[st * M + k] = 1;
            at[d]++;
            left--;
            moved = 1;
        }
    }
    free(ops);
    free(at);
    free(fdone);
    free(bdone);
}

static void test_schedule_order(void **state)
{
    (void)state;
    for (int P = 1; P <= 6; P++)
        for (int M = 1; M <= 16; M++) {
            for (int d = 0; d < P; d++) {
                check_schedule(SO_PIPE_GPIPE, d, P, M, 1);
                check_schedule(SO_PIPE_1F1B, d, P, M, 1);
                for (int v = 1; v <= 4; v++)
                    check_schedule(SO_PIPE_INTERLEAVED, d, P, M, v);
            }
            check_no_deadlock(SO_PIPE_GPIPE, P, M, 1);
            check_no_deadlock(SO_PIPE_1F1B, P, M, 1);
            for (int v = 1; v <= 4; v++)
                check_no_deadlock(SO_PIPE_INTERLEAVED, P, M, v);
        }
    int ops[16];
    /* The last stage of 1f1b alternates from the start; gpipe runs every forward first. */
    assert_int_equal(so_pipe_schedule_ops(SO_PIPE_1F1B, 2, 3, 4, 1, ops), 0);
    int want[8] = {0, -1, 1, -2, 2, -3, 3, -4};
    assert_memory_equal(ops, want, sizeof want);
    assert_int_equal(so_pipe_schedule_ops(SO_PIPE_GPIPE, 2, 3, 4, 1, ops), 0);
    int gp[8] = {0, 1, 2, 3, -1, -2, -3, -4};
    assert_memory_equal(ops, gp, sizeof gp);
    /* Interleaved, P = 2, v = 2, M = 4, device 1 (warm-up (v - 1) P = 2): micro-batches 0, 1 on
     * chunk 0, then 0, 1 on chunk 1 alternating with backwards of chunk 1 (passes 4 + k), ... */
    assert_int_equal(so_pipe_schedule_ops(SO_PIPE_INTERLEAVED, 1, 2, 4, 2, ops), 0);
    int il[16] = {0, 1, 4, -5, 5, -6, 2, -1, 3, -2, 6, -7, 7, -8, -3, -4};
    assert_memory_equal(ops, il, sizeof il);
    assert_int_equal(so_pipe_slots(SO_PIPE_1F1B, 0, 4, 16, 1), 4);
    assert_int_equal(so_pipe_slots(SO_PIPE_GPIPE, 0, 4, 16, 1), 16);
    expect_msg(so_pipe_schedule_ops(SO_PIPE_1F1B, 0, 2, 4, 2, ops), "only the interleaved schedule");
}

static int count_op(const so_graph *g, so_op op)
{
    int n = 0;
    for (int i = 0; i < so_graph_size(g); i++)
        n += so_graph_node(g, i)->op == op;
    return n;
}

/* Device graphs of a split of S stages over P devices (round robin):
 * the chunks' parameter slices tile the model, each device's graph holds
 * exactly its slices (so_pipe_model_order puts them back in the model's
 * order), and every edge has a partner with the same tag on the peer
 * device. Returns the edges' count. */
static int check_devices(const so_graph *g, const int *first, int S, int P, so_pipe_stage_edges *e, so_graph **sg)
{
    so_pipe_plan p;
    assert_int_equal(so_pipe_plan_init(&p, g, first, S), 0);
    size_t np = so_graph_nparams(g), at = 0;
    float *by_device = malloc((np + 1) * sizeof *by_device), *model = malloc((np + 1) * sizeof *model);
    int edges = 0;
    for (int d = 0; d < P; d++) {
        assert_int_equal(so_pipe_stage_graph(&p, P, d, &sg[d], &e[d]), 0);
        assert_int_equal(e[d].nchunks, S / P);
        size_t mine = 0;
        for (int c = 0; c < e[d].nchunks; c++) {
            const so_pipe_chunk *ch = &e[d].chunks[c];
            assert_int_equal(ch->stage, c * P + d);
            assert_true(ch->param_lo == so_graph_node(g, first[ch->stage])->param_off);
            for (size_t i = ch->param_lo; i < ch->param_hi; i++) /* each value names its place in the model */
                by_device[at + mine++] = (float)i;
        }
        at += mine;
        assert_true(so_graph_nparams(sg[d]) == mine);
        assert_int_equal(count_op(sg[d], SO_OP_RECV), e[d].nrecv);
        assert_int_equal(count_op(sg[d], SO_OP_SEND), e[d].nsend);
        assert_int_equal(so_graph_logits(sg[d]) >= 0, d == (S - 1) % P);
        edges += e[d].nsend;
    }
    assert_true(at == np);
    assert_int_equal(so_pipe_model_order(&p, P, 0, by_device, np, model), 0);
    for (size_t i = 0; i < np; i++)
        assert_true(model[i] == (float)i);
    expect_msg(so_pipe_model_order(&p, P, 0, by_device, np - 1, model), "the model has");
    for (int d = 0; d < P; d++)
        for (int i = 0; i < e[d].nsend; i++) {
            const so_pipe_edge *x = &e[d].send[i];
            int found = 0;
            assert_true(x->peer != d);
            for (int j = 0; j < e[x->peer].nrecv; j++)
                found += e[x->peer].recv[j].peer == d && e[x->peer].recv[j].tag == x->tag &&
                         e[x->peer].recv[j].bytes == x->bytes;
            assert_int_equal(found, 1);
        }
    free(by_device);
    free(model);
    so_pipe_plan_deinit(&p);
    return edges;
}

static int check_stages(const so_graph *g, const int *first, int P, so_pipe_stage_edges *e, so_graph **sg)
{
    return check_devices(g, first, P, P, e, sg);
}

static void free_stages(so_pipe_stage_edges *e, so_graph **sg, int P)
{
    for (int s = 0; s < P; s++) {
        so_pipe_stage_edges_free(&e[s]);
        so_graph_destroy(sg[s]);
    }
}

static void test_stage_graphs(void **state)
{
    (void)state;
    so_pipe_stage_edges e[4];
    so_graph *sg[4];
    so_graph *g = build("resnet20");
    /* Inside the first block: the block's input (for its add) and conv1's output cross. */
    int first[2] = {0, find(g, "layer1.0.conv2")};
    assert_int_equal(check_stages(g, first, 2, e, sg), 2);
    assert_int_equal(e[1].nrecv, 2);
    assert_true(strstr(so_graph_node(sg[1], e[1].nrecv + 1)->name, "layer1.0.conv2") != NULL);
    free_stages(e, sg, 2);
    int four[4] = {0, find(g, "layer1.2.conv1"), find(g, "layer2.1.conv1"), find(g, "layer3.0.conv1")};
    assert_int_equal(check_stages(g, four, 4, e, sg), 3); /* block boundaries: one tensor per cut */
    free_stages(e, sg, 4);
    so_graph_destroy(g);
    /* A tensor read two stages later goes there directly, not through the stage between. */
    g = so_graph_create(1, 4, 4);
    int a = so_g_conv(g, 0, "a", 2, 3, 1, 1, 0), b = so_g_conv(g, a, "b", 2, 3, 1, 1, 0);
    int c = so_g_conv(g, b, "c", 2, 3, 1, 1, 0), d = so_g_add(g, c, a);
    so_g_loss(g, so_g_dense(g, so_g_flatten(g, d), "fc", 3));
    assert_int_equal(so_graph_finalize(g), 0);
    int three[3] = {0, b, c};
    assert_int_equal(check_stages(g, three, 3, e, sg), 3);
    assert_int_equal(e[0].nsend, 2);
    assert_int_equal(e[2].nrecv, 2);
    assert_int_equal(e[2].recv[0].peer, 0); /* a, from stage 0 */
    assert_int_equal(e[2].recv[1].peer, 1); /* c's input b came to stage 1; c goes on to stage 2 */
    free_stages(e, sg, 3);
    so_graph_destroy(g);
}

/* Interleaved: 4 stages on 2 devices. A tensor goes to another device once
 * however many of its chunks read it, and a chunk reads one of its own
 * device's earlier chunks directly. */
static void test_device_graphs(void **state)
{
    (void)state;
    so_pipe_stage_edges e[4];
    so_graph *sg[4];
    so_graph *g = so_graph_create(1, 4, 4);
    int a = so_g_conv(g, 0, "a", 2, 3, 1, 1, 0), b = so_g_conv(g, a, "b", 2, 3, 1, 1, 0);
    int c = so_g_add(g, b, a), d = so_g_conv(g, c, "d", 2, 3, 1, 1, 0), f = so_g_add(g, d, a);
    so_g_loss(g, so_g_dense(g, so_g_flatten(g, f), "fc", 3));
    assert_int_equal(so_graph_finalize(g), 0);
    /* stages: {a} {b} {c} {d, f, ...}: devices 0 = {a}, {c}; 1 = {b}, {d, f, ...} */
    int four[4] = {0, b, c, d};
    assert_int_equal(check_devices(g, four, 4, 2, e, sg), 3);
    assert_int_equal(e[0].nsend, 2); /* a and c to device 1 */
    assert_int_equal(e[0].nrecv, 1); /* b */
    assert_int_equal(e[1].nrecv, 2); /* a (read by b and f) once, and c */
    assert_int_equal(e[1].nsend, 1);
    assert_int_equal(e[1].chunks[0].recv_hi - e[1].chunks[0].recv_lo, 1);
    /* device 0's add reads chunk 0's conv a directly */
    int add = -1, conv_a = -1;
    for (int i = 0; i < so_graph_size(sg[0]); i++) {
        const so_node *nd = so_graph_node(sg[0], i);
        if (nd->op == SO_OP_ADD)
            add = i;
        if (!strcmp(nd->name, "a"))
            conv_a = i;
    }
    assert_true(add > 0 && conv_a > 0);
    assert_true(so_graph_node(sg[0], add)->inputs[0] == conv_a || so_graph_node(sg[0], add)->inputs[1] == conv_a);
    assert_true(add >= e[0].chunks[1].node_lo && conv_a < e[0].chunks[0].node_hi);
    free_stages(e, sg, 2);
    so_graph *r = build("resnet20");
    int eight[8];
    for (int s = 0; s < 8; s++)
        eight[s] = s * (so_graph_size(r) - 1) / 8;
    eight[0] = 0;
    check_devices(r, eight, 8, 2, e, sg);
    free_stages(e, sg, 2);
    check_devices(r, eight, 8, 4, e, sg);
    free_stages(e, sg, 4);
    so_graph_destroy(r);
    so_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dp_matches_brute_force),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_sums),
        cmocka_unit_test(test_resnet20_crossings),
        cmocka_unit_test(test_lenet5_one_tensor_per_cut),
        cmocka_unit_test(test_list_by_names),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_schedule_formulas),
        cmocka_unit_test(test_schedule_order),
        cmocka_unit_test(test_stage_graphs),
        cmocka_unit_test(test_device_graphs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
