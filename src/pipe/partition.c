/* A pipeline partition of a model graph: validation of the stage starts, and
 * the accounting the plan and later the pipeline strategy need -- what each
 * stage owns, and every tensor that must travel forward across a cut
 * (residual connections make that more than one tensor per cut). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "scaleout/err.h"
#include "scaleout/file.h"
#include "scaleout/pipeline.h"

static size_t node_bytes(const so_node *n)
{
    return (size_t)n->out.c * n->out.h * n->out.w * sizeof(float);
}

/* The checks of so_pipe_plan_init, each with a message naming the stage. */
static int validate(const so_graph *g, const int *first, int nstages)
{
    int n = so_graph_size(g);
    if (nstages < 1)
        return so_err(SO_EINVAL, "%d stages: need at least one", nstages);
    if (nstages > n - 1)
        return so_err(SO_EINVAL, "%d stages: the model has %d layers", nstages, n - 1);
    if (first[0] != 0)
        return so_err(SO_EINVAL, "stage 0 starts at node %d, not at the input (node 0)", first[0]);
    for (int s = 1; s < nstages; s++) {
        if (first[s] < 1 || first[s] >= n)
            return so_err(SO_EINVAL, "stage %d starts at node %d, outside the model's nodes 1..%d", s, first[s],
                          n - 1);
        if (first[s] <= first[s - 1])
            return so_err(SO_EINVAL, "stage %d starts at node %d, not after stage %d's start %d", s, first[s],
                          s - 1, first[s - 1]);
    }
    if (nstages > 1 && first[1] == 1)
        return so_err(SO_EINVAL, "stage 0 holds only the input: stage 1 must start at node 2 or later");
    return 0;
}

/* Nodes, parameters, FLOPs and activations of every stage. */
static void account_stages(so_pipe_plan *p)
{
    for (int s = 0; s < p->nstages; s++) {
        so_pipe_stage *st = &p->stages[s];
        st->first = p->first[s];
        st->last = p->first[s + 1] - 1;
        for (int i = st->first; i <= st->last; i++) {
            const so_node *nd = so_graph_node(p->g, i);
            st->params += nd->nparam;
            st->flops += so_node_flops(p->g, i);
            st->act_bytes += node_bytes(nd);
        }
    }
}

/* Every producer read by a later stage, and per stage the bytes it receives
 * (each producer once per stage). stage_of, lo, hi, seen: scratch of n ints. */
static int account_tensors(so_pipe_plan *p, const int *stage_of, int *lo, int *hi, int *seen)
{
    int n = so_graph_size(p->g);
    for (int k = 0; k < n; k++)
        lo[k] = hi[k] = seen[k] = -1;
    for (int i = 1; i < n; i++) {
        const so_node *nd = so_graph_node(p->g, i);
        for (int j = 0; j < nd->ninputs; j++) {
            int k = nd->inputs[j], si = stage_of[i];
            if (stage_of[k] == si)
                continue;
            lo[k] = lo[k] < 0 || si < lo[k] ? si : lo[k];
            hi[k] = si > hi[k] ? si : hi[k];
            if (seen[k] != si) {
                seen[k] = si;
                p->stages[si].recv_bytes += node_bytes(so_graph_node(p->g, k));
            }
        }
    }
    for (int k = 0; k < n; k++)
        p->ntensors += hi[k] >= 0;
    p->tensors = calloc(p->ntensors ? (size_t)p->ntensors : 1, sizeof *p->tensors);
    if (!p->tensors)
        return so_err(SO_ENOMEM, "out of memory for the crossing tensors");
    for (int k = 0, t = 0; k < n; k++)
        if (hi[k] >= 0)
            p->tensors[t++] = (so_pipe_tensor){k, stage_of[k], lo[k], hi[k], node_bytes(so_graph_node(p->g, k))};
    return 0;
}

int so_pipe_plan_init(so_pipe_plan *p, const so_graph *g, const int *first, int nstages)
{
    memset(p, 0, sizeof *p);
    int rc = validate(g, first, nstages);
    if (rc)
        return rc;
    int n = so_graph_size(g);
    p->g = g;
    p->nstages = nstages;
    p->first = malloc(((size_t)nstages + 1) * sizeof *p->first);
    p->stages = calloc((size_t)nstages, sizeof *p->stages);
    int *scratch = malloc(4 * (size_t)n * sizeof *scratch);
    if (!p->first || !p->stages || !scratch) {
        rc = so_err(SO_ENOMEM, "out of memory for a %d-stage plan", nstages);
        goto out;
    }
    memcpy(p->first, first, (size_t)nstages * sizeof *first);
    p->first[nstages] = n;
    for (int s = 0; s < nstages; s++)
        for (int i = p->first[s]; i < p->first[s + 1]; i++)
            scratch[i] = s;
    account_stages(p);
    rc = account_tensors(p, scratch, scratch + n, scratch + 2 * n, scratch + 3 * n);
out:
    free(scratch);
    if (rc)
        so_pipe_plan_deinit(p);
    return rc;
}

void so_pipe_plan_deinit(so_pipe_plan *p)
{
    if (!p)
        return;
    free(p->first);
    free(p->stages);
    free(p->tensors);
    memset(p, 0, sizeof *p);
}

void so_pipe_plan_set_costs(so_pipe_plan *p, const double *seconds)
{
    for (int s = 0; s < p->nstages; s++) {
        p->stages[s].seconds = 0;
        for (int i = p->stages[s].first; i <= p->stages[s].last; i++)
            p->stages[s].seconds += seconds[i];
    }
}

int so_pipe_tensor_crosses(const so_pipe_tensor *t, int cut)
{
    return t->stage <= cut && cut < t->to_last;
}

int so_pipe_cut_tensors(const so_pipe_plan *p, int cut, size_t *bytes)
{
    int count = 0;
    size_t sum = 0;
    for (int t = 0; t < p->ntensors; t++)
        if (so_pipe_tensor_crosses(&p->tensors[t], cut)) {
            count++;
            sum += p->tensors[t].bytes;
        }
    if (bytes)
        *bytes = sum;
    return count;
}

/* One entry of a stage list: a node index, or a node's name. */
static int find_node(const so_graph *g, const char *s, size_t len)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (len && (size_t)(end - s) == len)
        return v >= 0 && v < so_graph_size(g) ? (int)v : -1;
    for (int i = 0; i < so_graph_size(g); i++) {
        const char *name = so_graph_node(g, i)->name;
        if (strlen(name) == len && !strncmp(name, s, len))
            return i;
    }
    return -1;
}

int so_pipe_parse_list(const so_graph *g, const char *list, int *first, int max, int *n)
{
    *n = 0;
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        if (*n == max)
            return so_err(SO_EINVAL, "more than %d stages", max);
        int node = find_node(g, p, len);
        if (node < 0)
            return so_err(SO_EINVAL, "'%.*s' is neither a node index (0..%d) nor a node name of the model", (int)len,
                          p, so_graph_size(g) - 1);
        first[*n] = node == 1 && *n == 0 ? 0 : node; /* stage 0 named by its first layer */
        (*n)++;
        p += len;
        if (!*p)
            return 0;
    }
}

int so_pipe_partition_save(const char *dir, const int *first, int n)
{
    char path[4200];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) /* mkdir -p */
        if (*p == '/') {
            *p = 0;
            mkdir(path, 0755);
            *p = '/';
        }
    mkdir(path, 0755);
    snprintf(path + strlen(path), sizeof path - strlen(path), "/partition");
    FILE *f = fopen(path, "w");
    for (int s = 0; f && s < n; s++)
        fprintf(f, s ? ",%d" : "%d", first[s]);
    if (!f || (fputc('\n', f), fclose(f)))
        return so_err(SO_EIO, "cannot write the pipeline's cuts to %s", path);
    return 0;
}

/* "0,7,19\n": decimal node indices (below 10^9) separated by commas; the
 * plan checks them against the graph. Anything else is refused whole. */
static int parse_cuts(const char *text, size_t len, int *first, int max, int *n)
{
    if (len && text[len - 1] == '\n')
        len--;
    for (size_t i = 0; i < len;) {
        long v = 0;
        size_t digits = 0;
        for (; i < len && text[i] >= '0' && text[i] <= '9' && digits < 9; i++, digits++)
            v = v * 10 + (text[i] - '0');
        if (!digits || *n == max || (i < len && text[i] != ',') || (i + 1 == len && text[i] == ','))
            return -1;
        first[(*n)++] = (int)v;
        i += i < len; /* the comma */
    }
    return 0;
}

int so_pipe_partition_load(const char *dir, int *first, int max, int *n)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/partition", dir);
    *n = 0;
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT)
        return 0; /* no file: one stage per rank */
    void *text;
    size_t len;
    int rc = so_file_read_all(path, 1 << 16, &text, &len);
    if (rc)
        return rc == SO_EFORMAT ? so_err(SO_EINVAL, "%s: not a list of at most %d stage starts", path, max) : rc;
    if (parse_cuts(text, len, first, max, n)) {
        *n = 0;
        rc = so_err(SO_EINVAL, "%s: not a list of at most %d stage starts", path, max);
    }
    free(text);
    return rc;
}
