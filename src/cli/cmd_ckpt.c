/* `scaleout ckpt list|verify|export DIR`: inspects checkpoints on one
 * process. list prints every checkpoint directory under DIR (levels, node
 * directories) with its step and whether its manifest is intact; verify also
 * checks every shard's CRC32C (partner and shared copies count) and exits 1 if
 * any complete checkpoint cannot be restored; export writes the parameters
 * and running statistics of one checkpoint as safetensors (F32, or BF16
 * with --dtype bf16) with PyTorch's state_dict names, or a GPT-2 as llm.c's
 * model file or Hugging Face's safetensors, gathering a pipeline's stage<s>/
 * checkpoints into one. The loading (cli_ckpt_load) serves `generate --ckpt`
 * too. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "scaleout/ckpt.h"
#include "scaleout/dtype.h"
#include "scaleout/err.h"
#include "scaleout/gpt2.h"
#include "scaleout/pipeline.h"
#include "scaleout/zoo.h"

#define SUMMARY                                                                                                  \
    "Checkpoints: `ckpt list DIR`, `ckpt verify DIR`, `ckpt export DIR -o FILE [--format safetensors|llmc|hf] [--dtype f32|bf16]`."

/* The command named in error lines: "ckpt", or the command loading a
 * checkpoint through cli_ckpt_load ("generate"). */
static const char *err_cmd = "ckpt";

/* What a scan found under one directory (a level, or a pipeline stage's). */
typedef struct {
    int verify, bad, complete;
    long best_step;
    char best[4096];
    long *steps;         /* steps with a restorable checkpoint (intact, or listed without verify) */
    int nsteps, cap;
    int pipeline_stages; /* "pipeline_stages=P" of the manifests' configuration, 0 without */
    int quiet;           /* print nothing */
} scan_state;

/* P of "pipeline_stages=P" in a manifest's configuration text, or 0. */
static int config_stages(const char *cfg)
{
    const char *p = cfg ? strstr(cfg, "pipeline_stages=") : NULL;
    int n = 0;
    return p && sscanf(p, "pipeline_stages=%d", &n) == 1 && n > 0 && n <= 4096 ? n : 0;
}

static void add_step(scan_state *s, long step)
{
    if (s->nsteps == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        long *g = realloc(s->steps, (size_t)cap * sizeof *g);
        if (!g)
            return; /* a step left out only makes the pipeline summary stricter */
        s->steps = g;
        s->cap = cap;
    }
    s->steps[s->nsteps++] = step;
}

/* Records a complete checkpoint: its step (when restorable) and the newest one. */
static void note(scan_state *s, const char *dir, const so_ckpt_manifest *m, so_ckpt_found found)
{
    int stages = config_stages(m->config);
    s->pipeline_stages = stages > s->pipeline_stages ? stages : s->pipeline_stages;
    s->complete++;
    if (found == SO_CKPT_DAMAGED) {
        s->bad++;
        return;
    }
    add_step(s, m->step);
    if (m->step > s->best_step) {
        s->best_step = m->step;
        snprintf(s->best, sizeof s->best, "%s", dir);
    }
}

static void on_ckpt(void *arg, const char *dir, const so_ckpt_manifest *m, so_ckpt_found found, const char *problem)
{
    scan_state *s = arg;
    if (!m) {
        /* unfinished (no MANIFEST) and changed-while-read are no damage; a bad MANIFEST is */
        if (!s->quiet)
            printf("%-60s  %s%s\n", dir, found == SO_CKPT_BAD_MANIFEST ? "DAMAGED: " :
                   found == SO_CKPT_UNFINISHED ? "unfinished, not a complete checkpoint: " : "", problem);
        s->bad += found == SO_CKPT_BAD_MANIFEST;
        return;
    }
    note(s, dir, m, found);
    if (s->quiet)
        return;
    printf("%-60s  step %-8ld epoch %-4d %s  %d shard(s) of %d rank(s)  %.1f MB", dir, m->step, m->epoch, m->model,
           m->nshards, m->world, (double)(m->rep_bytes + m->rank_bytes * (uint64_t)m->world) / 1e6);
    if (s->verify)
        printf("  %s%s", found == SO_CKPT_INTACT ? "OK" : "DAMAGED: ", problem);
    printf("\n");
}

static int scan(const char *dir, int verify, int quiet, scan_state *s)
{
    *s = (scan_state){.verify = verify, .best_step = -1, .quiet = quiet};
    if (so_ckpt_scan(dir, verify, on_ckpt, s))
        return cli_error(err_cmd, CLI_USAGE, "%s", so_errmsg());
    return 0;
}

static void scan_free(scan_state *s) { free(s->steps); }

static int has_step(const scan_state *s, long step)
{
    for (int i = 0; i < s->nsteps; i++)
        if (s->steps[i] == step)
            return 1;
    return 0;
}

/* input=CxHxW and classes=N from the configuration text of the manifest. */
static int shape_from_config(const char *cfg, int *c, int *h, int *w, int *classes)
{
    const char *in = cfg ? strstr(cfg, "input=") : NULL, *cl = cfg ? strstr(cfg, "classes=") : NULL;
    return in && cl && sscanf(in, "input=%dx%dx%d", c, h, w) == 3 && sscanf(cl, "classes=%d", classes) == 1 ? 0 : -1;
}

/* The model of a manifest, on backend for one sample: the manifest's input
 * shape, or one token per sample when decode (generation's key/value cache). */
static int build_model(const so_ckpt_manifest *m, const char *dir, const char *backend, int decode, so_model **out)
{
    int c, h, w, classes;
    so_graph *g = NULL;
    if (shape_from_config(m->config, &c, &h, &w, &classes))
        return cli_error(err_cmd, CLI_USAGE, "%s: the manifest has no input shape", dir);
    so_gpt2_config gc;
    if (decode && so_gpt2_parse(m->model, &gc) != 1)
        return cli_error(err_cmd, CLI_USAGE, "%s: model '%s' is not a GPT-2 (only a token model decodes)", dir,
                         m->model);
    if (decode)
        c = h = w = 1;
    if (so_zoo_build(m->model, c, h, w, classes, &g) || so_model_create(g, backend, 1, 0, out))
        return cli_error(err_cmd, CLI_USAGE, "%s: %s", dir, so_errmsg());
    return CLI_OK;
}

/* The checkpoint's values into the model built for it. */
static void take_values(cli_ckpt *ck, const float *params, const float *bufs)
{
    memcpy(ck->model->params, params, ck->model->nparams * sizeof *params);
    if (ck->model->nbufs)
        memcpy(ck->model->bufs, bufs, ck->model->nbufs * sizeof *bufs);
    so_model_params_changed(ck->model);
}

/* One checkpoint directory (it has a MANIFEST). */
static int load_one(const char *dir, const char *backend, int decode, cli_ckpt *ck)
{
    so_ckpt_manifest m;
    float *params = NULL, *bufs = NULL;
    if (so_ckpt_load_dir(dir, &m, &params, &bufs))
        return cli_error(err_cmd, CLI_USAGE, "%s", so_errmsg());
    int rc = build_model(&m, dir, backend, decode, &ck->model);
    if (!rc && so_ckpt_model_hash(ck->model) != m.model_hash)
        rc = cli_error(err_cmd, CLI_USAGE, "%s: model '%s' of this scaleout does not match the checkpoint's", dir,
                       m.model);
    if (!rc) {
        take_values(ck, params, bufs);
        snprintf(ck->name, sizeof ck->name, "%s", m.model);
        ck->step = m.step;
    }
    so_ckpt_manifest_free(&m);
    free(params);
    free(bufs);
    return rc;
}

/* ---- a pipeline's checkpoints: DIR/stage0, DIR/stage1, ... ---------------------- */

#define MAX_STAGES 4096

/* The stage<s>/ directories of a pipeline's DIR. */
typedef struct {
    int n;                             /* stages the checkpoint has; 0: not a pipeline's */
    unsigned char present[MAX_STAGES]; /* stage<s>/ is there */
    scan_state *stage;                 /* what each present stage holds (n of them, at least 1) */
} stage_layout;

/* "stage<digits>" naming a directory: its index, else -1. */
static int stage_index(const char *dir, const char *name)
{
    char path[4200];
    struct stat st;
    int k = 0, n = 0;
    if (sscanf(name, "stage%d%n", &k, &n) != 1 || name[n] || name[5] < '0' || name[5] > '9' || k >= MAX_STAGES)
        return -1;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? k : -1;
}

/* Finds the stage directories and scans each (verify: every shard's CRC; quiet:
 * nothing printed). The checkpoint has as many stages as its manifests'
 * pipeline_stages say, or one past the highest directory found if more. */
static int layout_read(const char *dir, int verify, int quiet, stage_layout *l)
{
    memset(l, 0, sizeof *l);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        int k = stage_index(dir, e->d_name);
        if (k >= 0) {
            l->present[k] = 1;
            l->n = k + 1 > l->n ? k + 1 : l->n;
        }
    }
    if (d)
        closedir(d);
    int found = l->n, want = found;
    if (!(l->stage = calloc(found > 0 ? (size_t)found : 1, sizeof *l->stage)))
        return cli_error(err_cmd, CLI_FAIL, "out of memory");
    for (int s = 0; s < found; s++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/stage%d", dir, s);
        int rc = l->present[s] ? scan(path, verify, quiet, &l->stage[s]) : 0;
        if (rc)
            return rc;
        want = l->stage[s].pipeline_stages > want ? l->stage[s].pipeline_stages : want;
    }
    if (want > found) { /* the last stages' directories are gone */
        scan_state *g = realloc(l->stage, (size_t)want * sizeof *g);
        if (!g)
            return cli_error(err_cmd, CLI_FAIL, "out of memory");
        memset(g + found, 0, (size_t)(want - found) * sizeof *g);
        l->stage = g;
        l->n = want;
    }
    return 0;
}

static void layout_free(stage_layout *l)
{
    for (int s = 0; l->stage && s < (l->n > 0 ? l->n : 1); s++)
        scan_free(&l->stage[s]);
    free(l->stage);
}

/* The first stage directory missing, or -1. */
static int layout_missing(const stage_layout *l)
{
    for (int s = 0; s < l->n; s++)
        if (!l->present[s])
            return s;
    return -1;
}

/* The first stage without `step` among its restorable checkpoints, or -1. */
static int stage_without(const stage_layout *l, long step)
{
    for (int s = 0; s < l->n; s++)
        if (!l->present[s] || !has_step(&l->stage[s], step))
            return s;
    return -1;
}

/* The newest step every stage can restore, or -1. */
static long common_step(const stage_layout *l)
{
    long best = -1;
    for (int i = 0; l->n > 0 && i < l->stage[0].nsteps; i++) {
        long step = l->stage[0].steps[i];
        if (step > best && stage_without(l, step) < 0)
            best = step;
    }
    return best;
}

/* Appends stage s's parameters and statistics (their slice of the model's, in order). */
static int append_stage(const char *dir, so_ckpt_manifest *first, int s, float **params, size_t *np, float **bufs,
                        size_t *nb)
{
    so_ckpt_manifest m;
    float *p = NULL, *b = NULL;
    if (so_ckpt_load_dir(dir, &m, &p, &b))
        return cli_error(err_cmd, CLI_USAGE, "%s", so_errmsg());
    int rc = CLI_OK;
    if (s > 0 && (strcmp(m.model, first->model) || !m.config || !first->config || strcmp(m.config, first->config)))
        rc = cli_error(err_cmd, CLI_USAGE, "%s: stage %d was trained with another model or configuration", dir, s);
    float *gp = rc ? NULL : realloc(*params, (*np + m.nparams + 1) * sizeof *gp);
    float *gb = gp ? realloc(*bufs, (*nb + m.nbufs + 1) * sizeof *gb) : NULL;
    if (gp)
        *params = gp;
    if (gb)
        *bufs = gb;
    if (!rc && (!gp || !gb))
        rc = cli_error(err_cmd, CLI_FAIL, "out of memory");
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

/* DIR/partition, the cuts the run recorded (*n = 0 without the file); its
 * stages must spread evenly over the pipeline's ranks. 0, or the message. */
static int read_partition(const char *dir, int ranks, int *first, int *n)
{
    if (so_pipe_partition_load(dir, first, MAX_STAGES, n))
        return -1;
    if (*n > 0 && (*n < ranks || *n % ranks)) {
        so_err(SO_EFORMAT, "%s/partition: %d stages cannot be spread over the %d pipeline ranks of the checkpoint "
               "(stage0..stage%d)", dir, *n, ranks, ranks - 1);
        return -1;
    }
    return 0;
}

/* Each stage<d>/ holds rank d's chunks (stages d, d + P, ... of
 * DIR/partition, the cuts the run recorded) and, last, the copy of a table
 * tied to a layer on it from another rank (GPT-2's LM head on the last
 * stage): the copies are dropped, and for interleaved pipelines the ranks'
 * values go back into the model's order. stage_np[d]: the parameters rank
 * d saved; *np shrinks by the copies. Without the file the stages are
 * taken as saved, in rank order. */
static int model_order(const char *dir, const so_graph *g, int ranks, const size_t *stage_np, float *params,
                       size_t *np, float *bufs, size_t nb)
{
    int first[MAX_STAGES], n = 0;
    if (read_partition(dir, ranks, first, &n))
        return cli_error(err_cmd, CLI_USAGE, "%s", so_errmsg());
    if (n == 0)
        return CLI_OK;
    so_pipe_plan plan = {0};
    int rc = so_pipe_plan_init(&plan, g, first, n);
    size_t in = 0, out = 0;
    for (int d = 0; !rc && d < ranks; d++) {
        size_t copy = so_pipe_tied_copy(&plan, ranks, d);
        if (copy > stage_np[d])
            rc = so_err(SO_EFORMAT, "stage%d holds %zu parameters, fewer than the %zu of its tied table's copy", d,
                        stage_np[d], copy);
        else
            memmove(params + out, params + in, (stage_np[d] - copy) * sizeof *params);
        in += stage_np[d];
        out += rc ? 0 : stage_np[d] - copy;
    }
    if (!rc)
        *np = out;
    float *tmp = NULL;
    if (!rc && n > ranks && *np == so_graph_nparams(g)) {
        tmp = malloc(((*np > nb ? *np : nb) + 1) * sizeof *tmp);
        rc = tmp ? so_pipe_model_order(&plan, ranks, 0, params, *np, tmp) : so_err(SO_ENOMEM, "out of memory");
        if (!rc)
            memcpy(params, tmp, *np * sizeof *tmp);
        if (!rc && !(rc = so_pipe_model_order(&plan, ranks, 1, bufs, nb, tmp)))
            memcpy(bufs, tmp, nb * sizeof *tmp);
    }
    so_pipe_plan_deinit(&plan);
    free(tmp);
    return rc ? cli_error(err_cmd, CLI_USAGE, "%s/partition: %s", dir, so_errmsg()) : CLI_OK;
}

/* The intact checkpoint of a step, looked for by so_ckpt_scan. */
typedef struct {
    long step;
    char dir[4096]; /* "" until found */
} step_pick;

static void pick_step(void *arg, const char *dir, const so_ckpt_manifest *m, so_ckpt_found found, const char *problem)
{
    step_pick *p = arg;
    (void)problem;
    if (m && found == SO_CKPT_INTACT && m->step == p->step && !p->dir[0])
        snprintf(p->dir, sizeof p->dir, "%s", dir);
}

/* The directory of stage s's intact checkpoint of step (at any level or node directory under DIR/stage<s>). */
static int stage_dir(const char *dir, int s, long step, char *out, size_t len)
{
    char path[4200];
    step_pick p = {step, ""};
    snprintf(path, sizeof path, "%s/stage%d", dir, s);
    if (so_ckpt_scan(path, 1, pick_step, &p) || !p.dir[0])
        return cli_error(err_cmd, CLI_USAGE, "%s: no intact checkpoint of step %ld", path, step);
    snprintf(out, len, "%s", p.dir);
    return CLI_OK;
}

/* Every stage's slice at the newest step all of them have intact, gathered
 * into the whole model (parameter names, not ranks, identify the tensors). */
static int load_stages(const char *dir, const stage_layout *l, const char *backend, int decode, cli_ckpt *ck)
{
    int stages = l->n, missing = layout_missing(l), rc = CLI_OK;
    long step = common_step(l);
    if (missing >= 0)
        return cli_error(err_cmd, CLI_USAGE, "%s/stage%d: missing (the checkpoint has %d pipeline stages)", dir,
                         missing, stages);
    if (step < 0)
        return cli_error(err_cmd, CLI_USAGE, "%s: no step that every pipeline stage has intact (ckpt verify %s "
                         "says which)", dir, dir);
    so_ckpt_manifest first = {0};
    float *params = NULL, *bufs = NULL;
    size_t np = 0, nb = 0, *stage_np = calloc((size_t)stages, sizeof *stage_np);
    if (!stage_np)
        rc = cli_error(err_cmd, CLI_FAIL, "out of memory");
    for (int s = 0; !rc && s < stages; s++) {
        char path[4096];
        size_t before = np;
        if (!(rc = stage_dir(dir, s, step, path, sizeof path)))
            rc = append_stage(path, &first, s, &params, &np, &bufs, &nb);
        stage_np[s] = np - before;
    }
    if (!rc)
        rc = build_model(&first, dir, backend, decode, &ck->model);
    if (!rc)
        rc = model_order(dir, ck->model->g, stages, stage_np, params, &np, bufs, nb);
    if (!rc && (np != ck->model->nparams || nb != ck->model->nbufs))
        rc = cli_error(err_cmd, CLI_USAGE, "%s: the %d stages hold %zu parameters, model '%s' has %zu", dir, stages,
                       np, first.model, ck->model->nparams);
    free(stage_np);
    if (!rc) {
        take_values(ck, params, bufs);
        snprintf(ck->name, sizeof ck->name, "%s", first.model);
        ck->step = step;
        ck->stages = stages;
    }
    so_ckpt_manifest_free(&first);
    free(params);
    free(bufs);
    return rc;
}

/* After the stages' listings: what a pipeline as a whole can restore. Every
 * step some stage has, newest first, with the first stage lacking it; a
 * missing stage directory, a damaged partition file or no common step is
 * damage. Returns 1 when something is. */
static int pipeline_summary(const char *dir, const stage_layout *l)
{
    int bad = 0, first[MAX_STAGES], n = 0;
    for (int s = 0; s < l->n; s++)
        if (!l->present[s]) {
            printf("%s/stage%d  DAMAGED: missing (the checkpoint has %d pipeline stages)\n", dir, s, l->n);
            bad = 1;
        }
    if (read_partition(dir, l->n, first, &n)) {
        printf("%s/partition  DAMAGED: %s\n", dir, so_errmsg());
        bad = 1;
    }
    long prev = LONG_MAX;
    for (;;) { /* the steps of every stage, newest first, each once */
        long step = -1;
        for (int s = 0; s < l->n; s++)
            for (int i = 0; i < l->stage[s].nsteps; i++)
                if (l->stage[s].steps[i] < prev && l->stage[s].steps[i] > step)
                    step = l->stage[s].steps[i];
        if (step < 0)
            break;
        int lacking = stage_without(l, step);
        if (lacking < 0)
            printf("pipeline of %d stages: step %ld intact in every stage\n", l->n, step);
        else
            printf("pipeline of %d stages: step %ld not in every stage (stage %d has no intact checkpoint of it): "
                   "not restorable\n", l->n, step, lacking);
        prev = step;
    }
    if (common_step(l) < 0) {
        printf("pipeline of %d stages: no step that every stage has intact\n", l->n);
        bad = 1;
    }
    return bad;
}

int cli_ckpt_load(const char *cmd, const char *dir, const char *backend, int decode, cli_ckpt *ck)
{
    char path[4200];
    struct stat st;
    memset(ck, 0, sizeof *ck);
    err_cmd = cmd;
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    if (lstat(path, &st) == 0)
        return load_one(dir, backend, decode, ck);
    stage_layout *l = malloc(sizeof *l);
    int rc = l ? layout_read(dir, 1, 1, l) : cli_error(err_cmd, CLI_FAIL, "out of memory");
    if (!rc && l->n > 0)
        rc = load_stages(dir, l, backend, decode, ck);
    else if (!rc && !(rc = scan(dir, 1, 1, &l->stage[0])))
        rc = l->stage[0].best_step < 0 ? cli_error(err_cmd, CLI_USAGE, "%s: no intact checkpoint", dir)
                                      : load_one(l->stage[0].best, backend, decode, ck);
    if (l)
        layout_free(l);
    free(l);
    if (rc) {
        so_model_destroy(ck->model);
        ck->model = NULL;
    }
    return rc;
}

void cli_ckpt_free(cli_ckpt *ck)
{
    if (ck)
        so_model_destroy(ck->model);
}

/* export in one of three formats: safetensors with PyTorch's state_dict
 * names (any model), llm.c's model file or Hugging Face's GPT-2 (GPT-2 only). */
static int export_as(const char *dir, const char *format, const char *dtype, const char *out)
{
    so_gpt2_config g;
    cli_ckpt ck;
    int rc = cli_ckpt_load("ckpt", dir, "ref", 0, &ck), gpt2 = rc ? 0 : so_gpt2_parse(ck.name, &g) == 1;
    if (!rc && strcmp(format, "safetensors") && !gpt2)
        rc = cli_error(err_cmd, CLI_USAGE, "--format %s: model '%s' of %s is not a GPT-2 (safetensors exports any model)",
                       format, ck.name, dir);
    if (!rc) {
        const so_model *m = ck.model;
        int err = !strcmp(format, "llmc") ? so_gpt2_save_llmc(m->g, m->params, out)
                  : !strcmp(format, "hf") ? so_gpt2_save_hf(m->g, m->params, out)
                                          : so_ckpt_safetensors_save_as(out, m, m->params, m->bufs, ck.step,
                                                                        strcmp(dtype, "bf16") ? SO_DTYPE_F32
                                                                                              : SO_DTYPE_BF16);
        if (err)
            rc = cli_error(err_cmd, cli_exit_code(err), "-o: %s", so_errmsg());
    }
    if (!rc) {
        printf("exported step %ld of %s (%zu parameters)", ck.step, ck.name, ck.model->nparams);
        if (ck.stages)
            printf(" from %d pipeline stages", ck.stages);
        printf(" to %s%s\n", out, !strcmp(format, "llmc") ? " (llm.c's model file)"
                                  : !strcmp(format, "hf") ? " (Hugging Face GPT-2, config.json beside it)"
                                  : !strcmp(dtype, "bf16") ? " (BF16, rounded to nearest even from the FP32 master weights)"
                                                           : "");
    }
    cli_ckpt_free(&ck);
    return rc;
}

/* list / verify: DIR, or each stage<s>/ of a pipeline's DIR and the whole. */
static int list(const char *dir, int verify)
{
    stage_layout *l = malloc(sizeof *l);
    if (!l)
        return cli_error(err_cmd, CLI_FAIL, "out of memory");
    int rc = layout_read(dir, verify, 0, l), bad = 0;
    if (!rc && l->n == 0) {
        rc = scan(dir, verify, 0, &l->stage[0]);
        if (!rc && !l->stage[0].complete)
            printf("no complete checkpoint under %s\n", dir);
        bad = l->stage[0].bad || !l->stage[0].complete;
    }
    for (int s = 0; !rc && s < l->n; s++)
        if (l->present[s] && !l->stage[s].complete)
            printf("no complete checkpoint under %s/stage%d\n", dir, s);
    for (int s = 0; !rc && s < l->n; s++)
        bad |= l->stage[s].bad;
    if (!rc && l->n > 0)
        bad |= pipeline_summary(dir, l);
    layout_free(l);
    free(l);
    return rc ? rc : verify && bad ? CLI_FAIL : CLI_OK;
}

int cmd_ckpt(int argc, char **argv)
{
    const char *out = NULL, *format = "safetensors", *dtype = "f32";
    static const char *const formats[] = {"safetensors", "llmc", "hf", NULL};
    static const char *const dtypes[] = {"f32", "bf16", NULL};
    const cli_opt opts[] = {
        {"output", OPT_STR, &out, "FILE", "export: the file to write", 0, -1, NULL},
        {"format", OPT_CHOICE, &format, "F", "export: safetensors (PyTorch's state_dict names, any model), llmc "
         "(llm.c's model file, GPT-2) or hf (Hugging Face GPT2LMHeadModel safetensors + config.json, GPT-2)", 0, -1,
         formats},
        {"dtype", OPT_CHOICE, &dtype, "T", "export, safetensors: f32 (the master weights as saved) or bf16 (each value "
         "rounded to nearest even; half the file)", 0, -1, dtypes},
        {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    static const char *const aliases[][2] = {{"-o", "--output"}, {NULL, NULL}};
    if (argc >= 1 && (!strcmp(argv[0], "-h") || !strcmp(argv[0], "--help"))) {
        cli_usage(stdout, "ckpt list|verify|export DIR", SUMMARY, opts);
        return CLI_OK;
    }
    if (argc < 2)
        return cli_error(err_cmd, CLI_USAGE, "usage: scaleout ckpt list|verify|export DIR [-o FILE]");
    const char *sub = argv[0], *dir = argv[1];
    cli_short_aliases(argc - 2, argv + 2, aliases);
    int rc = cli_parse("ckpt", SUMMARY, opts, argc - 2, argv + 2);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    if (!strcmp(sub, "list") || !strcmp(sub, "verify"))
        return list(dir, !strcmp(sub, "verify"));
    if (strcmp(sub, "export") != 0)
        return cli_error(err_cmd, CLI_USAGE, "unknown subcommand '%s' (list, verify, export)", sub);
    if (!out)
        return cli_error(err_cmd, CLI_USAGE, "export needs -o FILE");
    if (strcmp(dtype, "f32") && strcmp(format, "safetensors"))
        return cli_error(err_cmd, CLI_USAGE, "--dtype %s: only with --format safetensors", dtype);
    return export_as(dir, format, dtype, out);
}
