/* `scaleout ckpt list|verify|export DIR`: inspects checkpoints on one
 * process. list prints every checkpoint directory under DIR (levels, node
 * directories) with its step and whether its manifest is intact; verify also
 * checks every shard's CRC32C (partner and shared copies count) and exits 1 if
 * any complete checkpoint cannot be restored; export writes the parameters
 * and running statistics of one checkpoint as safetensors with PyTorch's
 * state_dict names, gathering a pipeline's stage<s>/ checkpoints into one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "scaleout/ckpt.h"
#include "scaleout/err.h"
#include "scaleout/pipeline.h"
#include "scaleout/zoo.h"

#define SUMMARY "Checkpoints: `ckpt list DIR`, `ckpt verify DIR`, `ckpt export DIR -o FILE.safetensors`."

typedef struct {
    int verify, bad, complete;
    long best_step;
    char best[4096];
} scan_state;

static void on_ckpt(void *arg, const char *dir, const so_ckpt_manifest *m, int verified, const char *problem)
{
    scan_state *s = arg;
    if (!m) {
        printf("%-60s  not a complete checkpoint: %s\n", dir, problem);
        return;
    }
    s->complete++;
    printf("%-60s  step %-8ld epoch %-4d %s  %d shard(s) of %d rank(s)  %.1f MB", dir, m->step, m->epoch, m->model,
           m->nshards, m->world, (double)(m->rep_bytes + m->rank_bytes * (uint64_t)m->world) / 1e6);
    if (s->verify)
        printf("  %s%s", verified ? "OK" : "DAMAGED: ", verified ? "" : problem);
    printf("\n");
    if (s->verify && !verified)
        s->bad++;
    if ((!s->verify || verified) && m->step > s->best_step) {
        s->best_step = m->step;
        snprintf(s->best, sizeof s->best, "%s", dir);
    }
}

static int scan(const char *dir, int verify, scan_state *s)
{
    *s = (scan_state){.verify = verify, .best_step = -1};
    if (so_ckpt_scan(dir, verify, on_ckpt, s))
        return cli_error("ckpt", CLI_USAGE, "%s", so_errmsg());
    return 0;
}

/* input=CxHxW and classes=N from the configuration text of the manifest. */
static int shape_from_config(const char *cfg, int *c, int *h, int *w, int *classes)
{
    const char *in = cfg ? strstr(cfg, "input=") : NULL, *cl = cfg ? strstr(cfg, "classes=") : NULL;
    return in && cl && sscanf(in, "input=%dx%dx%d", c, h, w) == 3 && sscanf(cl, "classes=%d", classes) == 1 ? 0 : -1;
}

static int export(const char *dir, const char *out)
{
    so_ckpt_manifest m;
    float *params = NULL, *bufs = NULL;
    if (so_ckpt_load_dir(dir, &m, &params, &bufs))
        return cli_error("ckpt", CLI_USAGE, "%s", so_errmsg());
    int c, h, w, classes, rc = CLI_OK;
    so_graph *g = NULL;
    so_model *model = NULL;
    if (shape_from_config(m.config, &c, &h, &w, &classes))
        rc = cli_error("ckpt", CLI_USAGE, "%s: the manifest has no input shape", dir);
    else if (so_zoo_build(m.model, c, h, w, classes, &g) || so_model_create(g, "ref", 1, 0, &model))
        rc = cli_error("ckpt", CLI_USAGE, "%s: %s", dir, so_errmsg());
    else if (so_ckpt_model_hash(model) != m.model_hash)
        rc = cli_error("ckpt", CLI_USAGE, "%s: model '%s' of this scaleout does not match the checkpoint's", dir,
                       m.model);
    else if (so_ckpt_safetensors_save(out, model, params, bufs, m.step))
        rc = cli_error("ckpt", CLI_USAGE, "-o: %s", so_errmsg());
    else
        printf("exported step %ld of %s (%llu parameters) to %s\n", m.step, m.model,
               (unsigned long long)m.nparams, out);
    so_model_destroy(model);
    so_ckpt_manifest_free(&m);
    free(params);
    free(bufs);
    return rc;
}

/* ---- a pipeline's checkpoints: DIR/stage0, DIR/stage1, ... ---------------------- */

#define MAX_STAGES 4096

typedef struct {
    long want;                   /* the step looked for (-1: the newest intact one) */
    long step;
    char dir[4096];
} stage_pick;

static void pick_step(void *arg, const char *dir, const so_ckpt_manifest *m, int verified, const char *problem)
{
    stage_pick *p = arg;
    (void)problem;
    if (m && verified && (p->want < 0 ? m->step > p->step : m->step == p->want)) {
        p->step = m->step;
        snprintf(p->dir, sizeof p->dir, "%s", dir);
    }
}

static int stage_count(const char *dir)
{
    int n = 0;
    char path[4200];
    for (; n < MAX_STAGES; n++) {
        snprintf(path, sizeof path, "%s/stage%d", dir, n);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        fclose(f);
    }
    return n;
}

/* The checkpoint of stage s at step `want` (-1: its newest intact one). */
static int stage_checkpoint(const char *dir, int s, long want, stage_pick *p)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/stage%d", dir, s);
    *p = (stage_pick){.want = want, .step = -1};
    if (so_ckpt_scan(path, 1, pick_step, p))
        return cli_error("ckpt", CLI_USAGE, "%s", so_errmsg());
    if (p->step < 0)
        return cli_error("ckpt", CLI_USAGE, want < 0 ? "%s: no intact checkpoint" : "%s: no intact checkpoint of "
                         "step %ld, the newest every stage has", path, want);
    return CLI_OK;
}

/* Appends stage s's parameters and statistics (their slice of the model's, in order). */
static int append_stage(const char *dir, so_ckpt_manifest *first, int s, float **params, size_t *np, float **bufs,
                        size_t *nb)
{
    so_ckpt_manifest m;
    float *p = NULL, *b = NULL;
    if (so_ckpt_load_dir(dir, &m, &p, &b))
        return cli_error("ckpt", CLI_USAGE, "%s", so_errmsg());
    int rc = CLI_OK;
    if (s > 0 && (strcmp(m.model, first->model) || !m.config || !first->config || strcmp(m.config, first->config)))
        rc = cli_error("ckpt", CLI_USAGE, "%s: stage %d was trained with another model or configuration", dir, s);
    float *gp = rc ? NULL : realloc(*params, (*np + m.nparams + 1) * sizeof *gp);
    float *gb = gp ? realloc(*bufs, (*nb + m.nbufs + 1) * sizeof *gb) : NULL;
    if (gp)
        *params = gp;
    if (gb)
        *bufs = gb;
    if (!rc && (!gp || !gb))
        rc = cli_error("ckpt", CLI_FAIL, "out of memory");
    if (!rc) {
        memcpy(*params + *np, p, m.nparams * sizeof *p);
        memcpy(*bufs + *nb, b, m.nbufs * sizeof *b);
        *np += m.nparams;
        *nb += m.nbufs;
    }
    if (s == 0 && !rc)
        *first = m;
    else
        so_ckpt_manifest_free(&m);
    free(p);
    free(b);
    return rc;
}

/* Interleaved pipelines: each stage<d>/ holds rank d's chunks (stages d,
 * d + P, ... of DIR/partition, the cuts the run recorded), so the ranks'
 * values concatenated go back into the model's order. Nothing to do when
 * the partition has one stage per rank. */
static int model_order(const char *dir, const so_graph *g, int ranks, float *params, size_t np, float *bufs,
                       size_t nb)
{
    int first[MAX_STAGES], n = 0, rc = so_pipe_partition_load(dir, first, MAX_STAGES, &n);
    if (rc)
        return cli_error("ckpt", CLI_USAGE, "%s", so_errmsg());
    if (n <= ranks)
        return CLI_OK;
    so_pipe_plan plan = {0};
    float *tmp = malloc(((np > nb ? np : nb) + 1) * sizeof *tmp);
    rc = tmp ? so_pipe_plan_init(&plan, g, first, n) : so_err(SO_ENOMEM, "out of memory");
    if (!rc && !(rc = so_pipe_model_order(&plan, ranks, 0, params, np, tmp)))
        memcpy(params, tmp, np * sizeof *tmp);
    if (!rc && !(rc = so_pipe_model_order(&plan, ranks, 1, bufs, nb, tmp)))
        memcpy(bufs, tmp, nb * sizeof *tmp);
    so_pipe_plan_deinit(&plan);
    free(tmp);
    return rc ? cli_error("ckpt", CLI_USAGE, "%s/partition: %s", dir, so_errmsg()) : CLI_OK;
}

/* Every stage's newest common step, gathered into one safetensors file of
 * the whole model (parameter names, not ranks, identify the tensors). */
static int export_stages(const char *dir, int stages, const char *out)
{
    stage_pick pick;
    long step = -1;
    int rc = CLI_OK;
    for (int s = 0; !rc && s < stages; s++)
        if (!(rc = stage_checkpoint(dir, s, -1, &pick)))
            step = step < 0 || pick.step < step ? pick.step : step;
    so_ckpt_manifest first = {0};
    float *params = NULL, *bufs = NULL;
    size_t np = 0, nb = 0;
    for (int s = 0; !rc && s < stages; s++)
        if (!(rc = stage_checkpoint(dir, s, step, &pick)))
            rc = append_stage(pick.dir, &first, s, &params, &np, &bufs, &nb);
    int c, h, w, classes;
    so_graph *g = NULL;
    so_model *model = NULL;
    if (!rc && shape_from_config(first.config, &c, &h, &w, &classes))
        rc = cli_error("ckpt", CLI_USAGE, "%s: the manifest has no input shape", dir);
    else if (!rc && (so_zoo_build(first.model, c, h, w, classes, &g) || so_model_create(g, "ref", 1, 0, &model)))
        rc = cli_error("ckpt", CLI_USAGE, "%s: %s", dir, so_errmsg());
    else if (!rc && (np != model->nparams || nb != model->nbufs))
        rc = cli_error("ckpt", CLI_USAGE, "%s: the %d stages hold %zu parameters, model '%s' has %zu", dir, stages, np,
                       first.model, model->nparams);
    else if (!rc && (rc = model_order(dir, model->g, stages, params, np, bufs, nb)))
        ;
    else if (!rc && so_ckpt_safetensors_save(out, model, params, bufs, step))
        rc = cli_error("ckpt", CLI_USAGE, "-o: %s", so_errmsg());
    else if (!rc)
        printf("exported step %ld of %s (%zu parameters) from %d pipeline stages to %s\n", step, first.model, np,
               stages, out);
    so_model_destroy(model);
    so_ckpt_manifest_free(&first);
    free(params);
    free(bufs);
    return rc;
}

/* list / verify: DIR, or each stage<s>/ of a pipeline's DIR. */
static int list(const char *dir, int verify)
{
    int stages = stage_count(dir), bad = 0, rc;
    for (int st = 0; st < (stages ? stages : 1); st++) {
        char path[4200];
        snprintf(path, sizeof path, stages ? "%s/stage%d" : "%s", dir, st);
        scan_state s;
        if ((rc = scan(path, verify, &s)))
            return rc;
        if (s.complete == 0)
            printf("no complete checkpoint under %s\n", path);
        bad |= s.bad || !s.complete;
    }
    return verify && bad ? CLI_FAIL : CLI_OK;
}

int cmd_ckpt(int argc, char **argv)
{
    const char *out = NULL;
    const cli_opt opts[] = {{"output", OPT_STR, &out, "FILE", "export: the .safetensors file to write", 0, -1, NULL},
                            {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    static const char *const aliases[][2] = {{"-o", "--output"}, {NULL, NULL}};
    if (argc >= 1 && (!strcmp(argv[0], "-h") || !strcmp(argv[0], "--help"))) {
        cli_usage(stdout, "ckpt list|verify|export DIR", SUMMARY, opts);
        return CLI_OK;
    }
    if (argc < 2)
        return cli_error("ckpt", CLI_USAGE, "usage: scaleout ckpt list|verify|export DIR [-o FILE]");
    const char *sub = argv[0], *dir = argv[1];
    cli_short_aliases(argc - 2, argv + 2, aliases);
    int rc = cli_parse("ckpt", SUMMARY, opts, argc - 2, argv + 2);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    scan_state s;
    if (!strcmp(sub, "list") || !strcmp(sub, "verify"))
        return list(dir, !strcmp(sub, "verify"));
    if (strcmp(sub, "export") != 0)
        return cli_error("ckpt", CLI_USAGE, "unknown subcommand '%s' (list, verify, export)", sub);
    if (!out)
        return cli_error("ckpt", CLI_USAGE, "export needs -o FILE.safetensors");
    char path[4200];
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        fclose(f);
        return export(dir, out);
    }
    int stages = stage_count(dir);
    if (stages > 0)
        return export_stages(dir, stages, out);
    if ((rc = scan(dir, 1, &s)))
        return rc;
    if (s.best_step < 0)
        return cli_error("ckpt", CLI_USAGE, "%s: no intact checkpoint to export", dir);
    return export(s.best, out);
}
