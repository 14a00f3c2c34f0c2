/* The token loader's speed against what training can eat. Opens a FineWeb-
 * sized shard (100M uint16 tokens, written to DIR/bench_train.bin first if
 * absent), times the start-up checks (header + mapping, the vocabulary
 * scan), then per order (random windows, llm.c's order, llm.c's shuffle)
 * and batch shape the tokens per second so_loader_next delivers, prefetch 0
 * (the whole fill on the caller) and 4 (what the trainer waits for). The
 * ceiling of what GPT-2 training consumes on one core is its FP32 peak over
 * 6 FLOPs per parameter per token (forward + backward, attention left out,
 * so the true demand is lower): printed for GPT-2 124M and a 1M-parameter
 * model beside the loader's figures.
 *
 *   build/tests/token_loader [DIR] [tokens]
 * (DIR default /tmp; tokens default 100000000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "scaleout/cpu.h"
#include "scaleout/data.h"
#include "scaleout/err.h"
#include "scaleout/timer.h"

/* A shard of n pseudo-random GPT-2 ids, written once. */
static int make_shard(const char *path, size_t n)
{
    struct stat st;
    if (stat(path, &st) == 0 && (size_t)st.st_size == SO_TOKENS_HEADER_BYTES + 2 * n)
        return 0;
    uint32_t *ids = malloc(n * sizeof *ids);
    if (!ids)
        return -1;
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = (uint32_t)(x % 50257);
    }
    int rc = so_tokens_write(path, ids, n, 2);
    free(ids);
    return rc;
}

/* Tokens per second of `batches` batches of one configuration. */
static double loader_rate(const so_dataset *d, int order, int B, int prefetch, int batches)
{
    so_loader_config c = {.batch = B, .shuffle = order, .prefetch = prefetch, .seed = 42, .world = 1};
    so_loader *l = NULL;
    if (so_loader_create(d, &c, &l) || so_loader_start_epoch(l, 0))
        return -1;
    const float *x;
    const int32_t *y;
    int n, done = 0;
    double t0 = so_now();
    while (done < batches && so_loader_next(l, &x, &y, &n) == 1)
        done++;
    double secs = so_now() - t0;
    so_loader_destroy(l);
    return (double)done * B * d->w / secs;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    size_t ntok = argc > 2 ? (size_t)atoll(argv[2]) : 100000000;
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_train.bin", dir);
    if (make_shard(path, ntok)) {
        fprintf(stderr, "token_loader: %s\n", so_errmsg());
        return 1;
    }
    so_cpu_init();
    double peak = so_cpu_peak_gflops() * 1e9;
    printf("CPU: %s, FP32 peak %.0f GFLOP/s per core\n", so_isa_label(so_cpu_isa()), peak / 1e9);
    printf("training's ceiling on one core (peak / 6 FLOPs per parameter-token): GPT-2 124M %.0f tokens/s, "
           "1M parameters %.0f tokens/s\n", peak / (6 * 124.4e6), peak / 6e6);
    static const int shapes[][2] = {{4, 64}, {8, 1024}, {64, 1024}};
    static const char *const order_names[] = {"off (llm.c)", "on (random windows)", "llmc (llm.c shuffle)"};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        so_dataset *d = NULL;
        double t0 = so_now();
        if (so_dataset_tokens(dir, 1, shapes[s][1], &d)) {
            fprintf(stderr, "token_loader: %s\n", so_errmsg());
            return 1;
        }
        double t_open = so_now() - t0;
        t0 = so_now();
        int vrc = so_tokens_check_vocab(d->tokens, 50257);
        double t_scan = so_now() - t0;
        if (s == 0)
            printf("open %zu tokens (header, size, map): %.2f ms; vocabulary scan: %.1f ms (%.1f GB/s)%s\n", ntok,
                   t_open * 1e3, t_scan * 1e3, 2.0 * (double)ntok / t_scan / 1e9, vrc ? " FAILED" : "");
        for (int order = 0; order < 3; order++)
            for (int pf = 0; pf <= 4; pf += 4) {
                int batches = (int)(4e7 / (shapes[s][0] * shapes[s][1])) + 8;
                double r = loader_rate(d, order, shapes[s][0], pf, batches);
                printf("B=%-3d T=%-5d %-22s prefetch %d: %8.1f M tokens/s\n", shapes[s][0], shapes[s][1],
                       order_names[order], pf, r / 1e6);
            }
        so_dataset_destroy(d);
    }
    return 0;
}
