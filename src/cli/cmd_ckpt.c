/* `scaleout ckpt list|verify|export DIR`: inspects checkpoints on one
 * process. list prints every checkpoint directory under DIR (levels, node
 * directories) with its step and whether its manifest is intact; verify also
 * checks every shard's CRC32C (partner and shared copies count) and exits 1 if
 * any complete checkpoint cannot be restored; export writes the parameters
 * and running statistics of one checkpoint as safetensors with PyTorch's
 * state_dict names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "scaleout/ckpt.h"
#include "scaleout/err.h"
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
    if (!strcmp(sub, "list") || !strcmp(sub, "verify")) {
        int verify = !strcmp(sub, "verify");
        if ((rc = scan(dir, verify, &s)))
            return rc;
        if (s.complete == 0)
            printf("no complete checkpoint under %s\n", dir);
        return verify && (s.bad || !s.complete) ? CLI_FAIL : CLI_OK;
    }
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
    if ((rc = scan(dir, 1, &s)))
        return rc;
    if (s.best_step < 0)
        return cli_error("ckpt", CLI_USAGE, "%s: no intact checkpoint to export", dir);
    return export(s.best, out);
}
