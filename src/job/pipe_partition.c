/* The agreed partition of a pipelined job (pipe_partition.h): the cuts a
 * resume must reuse (measured time differs from run to run, and a resume
 * must cut where the checkpoints did), --partition's choice otherwise, and
 * rank 0's answer spread to every rank. */
#include "pipe_partition.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_glue.h"
#include "parts.h"
#include "scaleout/err.h"
#include "scaleout/zoo.h"

/* What time_nodes needs: the job's model, backend, optimizer and seed, and the data's shape. */
typedef struct {
    const so_job_config *c;
    const so_dataset *ds;
    int microbatch;
} timing;

/* Forward + backward seconds per node at one micro-batch, on a model of
 * its own built from the zoo again (rank 0 only; the ranks take its cuts). */
static int time_nodes(void *ctx, double *secs, int n)
{
    const timing *tm = ctx;
    const so_job_config *c = tm->c;
    so_graph *g = NULL;
    so_model *m = NULL;
    so_optim *opt = NULL;
    so_optim_kind kind;
    so_optim_config oc;
    int rc = so_zoo_build(c->model, tm->ds->c, tm->ds->h, tm->ds->w, tm->ds->classes, &g);
    if (!rc)
        rc = so_model_create(g, c->backend, tm->microbatch, (uint64_t)c->seed, &m);
    if (!rc && !(rc = so_optim_parse(c->optimizer, &kind))) {
        so_optim_defaults(&oc, kind);
        rc = so_optim_create(&oc, m->nparams, &opt);
    }
    double *t = calloc(2 * (size_t)n, sizeof *t), other;
    if (!rc && !t)
        rc = so_err(SO_ENOMEM, "out of memory measuring %s", c->model);
    if (!rc)
        rc = parts_measure(m, opt, &(so_predict_run){.warmup = 1, .steps = 3}, t, t + n, &other, NULL);
    for (int i = 0; !rc && i < n; i++)
        secs[i] = t[i] + t[n + i];
    free(t);
    so_optim_destroy(opt);
    so_model_destroy(m); /* owns g, also when creation failed (so_model_create destroys it then) */
    return rc;
}

/* The first level of --ckpt-dir, --ckpt-local: where the cuts are recorded. */
static const char *partition_dir(const so_job_config *c)
{
    return c->ckpt.dir ? c->ckpt.dir : c->ckpt.local;
}

/* The cuts recorded in dir for --resume (1 when found; 0 when none). */
static int read_partition(const char *dir, int S, int *first)
{
    int n, rc = so_pipe_partition_load(dir, first, S + 1, &n);
    if (!rc && n && n != S)
        rc = so_err(SO_EINVAL, "--resume: %s/partition holds the cuts of another pipeline than this one's %d stages",
                    dir, S);
    return rc ? rc : n > 0;
}

int pipe_partition_choose(const so_job_config *c, const so_dataset *ds, const so_graph *whole,
                          const so_pipe_cut_request *r, int *first, const char **basis)
{
    int S = r->devices * r->chunks, rc = 0;
    char root[4096];
    const char *recorded = partition_dir(c);
    if (c->ckpt.resume && strcmp(c->ckpt.resume, "auto")) /* --resume PATH: the cuts beside its stages */
        recorded = (rc = ckpt_glue_stage_resume(c->ckpt.resume, 0, root, sizeof root, NULL, 0)) ? NULL : root;
    if (!rc && c->ckpt.resume && recorded)
        rc = read_partition(recorded, S, first);
    if (rc < 0)
        return rc;
    if (rc) {
        *basis = "the checkpoints' partition";
    } else {
        timing tm = {c, ds, r->microbatch};
        so_pipe_cut_request req = *r;
        req.time_nodes = time_nodes;
        req.ctx = &tm;
        if ((rc = so_pipe_choose_cuts(whole, &req, first, basis)))
            return rc;
    }
    if (!c->ckpt.every || !partition_dir(c) || !(rc = so_pipe_partition_save(partition_dir(c), first, S)))
        return 0;
    char why[4400];
    snprintf(why, sizeof why, "%s", so_errmsg());
    return so_err(SO_EIO, "--ckpt-dir: %s", why);
}

int pipe_partition_share(dist_handle *dh, int rank, int *first, int n)
{
    const so_dist *d = dist_get(dh);
    double *v = calloc((size_t)n, sizeof *v);
    if (!v)
        return so_err(SO_ENOMEM, "out of memory");
    for (int s = 0; s < n; s++)
        v[s] = rank == 0 ? first[s] : 0;
    int rc = d->sum(d->ctx, v, n);
    for (int s = 0; s < n; s++)
        first[s] = (int)v[s];
    free(v);
    return rc;
}
