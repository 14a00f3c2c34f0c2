/* libFuzzer target for pipeline partition lists (`--partition 0,conv2,fc1`,
 * src/pipe/partition.c) and the partition file a pipeline's checkpoints keep
 * (DIR/partition, read back by `ckpt export` and `--resume`), on ResNet-20's
 * graph (node names like layer2.0.conv1). Any bytes are refused with
 * SO_EINVAL / SO_EIO or give stage starts in range, and a plan built on them
 * either is refused or covers every node once, in order. The first byte picks
 * the reader: even, the list parser; odd, the file reader. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scaleout/err.h"
#include "scaleout/pipeline.h"
#include "scaleout/zoo.h"

#define MAX_STAGES 64

static so_graph *graph(void)
{
    static so_graph *g;
    if (!g && so_zoo_build("resnet20", 3, 32, 32, 10, &g))
        abort();
    return g;
}

/* A plan on the stage starts: refused, or every node in exactly one stage. */
static void check_plan(const so_graph *g, const int *first, int n)
{
    so_pipe_plan p;
    int rc = so_pipe_plan_init(&p, g, first, n);
    if (rc) {
        if (rc != SO_EINVAL)
            abort();
        return;
    }
    int next = 0;
    for (int s = 0; s < p.nstages; s++) {
        if (p.first[s] != next || p.stages[s].last < p.stages[s].first)
            abort();
        next = p.first[s + 1];
        so_pipe_cut_tensors(&p, s, NULL);
    }
    if (next != so_graph_size(g))
        abort();
    so_pipe_plan_deinit(&p);
}

static int from_file(const uint8_t *data, size_t size, int *first, int *n)
{
    char dir[64], path[96];
    snprintf(dir, sizeof dir, "/tmp/fuzz_partition_%d", (int)getpid());
    snprintf(path, sizeof path, "%s/partition", dir);
    if (so_pipe_partition_save(dir, first, 1)) /* makes the directory */
        abort();
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f))
        abort();
    int rc = so_pipe_partition_load(dir, first, MAX_STAGES, n);
    remove(path);
    rmdir(dir);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    const so_graph *g = graph();
    int first[MAX_STAGES] = {0}, n = 0, rc;
    if (data[0] & 1) {
        rc = from_file(data + 1, size - 1, first, &n);
    } else {
        char *list = malloc(size);
        memcpy(list, data + 1, size - 1);
        list[size - 1] = '\0';
        rc = so_pipe_parse_list(g, list, first, MAX_STAGES, &n);
        free(list);
    }
    if (rc) {
        if (rc != SO_EINVAL && rc != SO_EIO)
            abort();
        return 0;
    }
    if (n < 0 || n > MAX_STAGES)
        abort();
    for (int i = 0; i < n; i++) /* the list parser knows the graph; the file's values are checked by the plan */
        if (first[i] < 0 || (!(data[0] & 1) && first[i] >= so_graph_size(g)))
            abort();
    if (n > 0)
        check_plan(g, first, n);
    return 0;
}
