/* `scaleout models`: the zoo with parameter counts and forward GFLOPs per
 * sample, as a table or --json; the table ends with the any-depth forms and
 * GPT-2's counts without llm.c's padded vocabulary (Hugging Face's). */
#include <stdio.h>

#include "cli.h"
#include "scaleout/err.h"
#include "scaleout/gpt2.h"
#include "scaleout/json.h"
#include "scaleout/zoo.h"

/* The parameters of GPT-2 entry `name` with its vocabulary unpadded
 * (Vp = V, Hugging Face's GPT2LMHeadModel), 0 for other models. */
static size_t unpadded_params(const char *name)
{
    so_gpt2_config c;
    if (so_gpt2_parse(name, &c) != 1)
        return 0;
    c.padded_vocab = c.vocab;
    char spec[160];
    so_gpt2_spec(&c, spec, sizeof spec);
    so_graph *g;
    if (so_zoo_build(spec, 1, c.context, 1, c.vocab, &g))
        return 0;
    size_t n = so_graph_nparams(g);
    so_graph_destroy(g);
    return n;
}

int cmd_models(int argc, char **argv)
{
    int json = 0;
    const cli_opt opts[] = {{"json", OPT_FLAG, &json, NULL, "print JSON instead of a table", 0, -1, NULL},
                            {NULL, 0, NULL, NULL, NULL, 0, 0, NULL}};
    int rc = cli_parse("models", "Lists the model zoo.", opts, argc, argv);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    int n;
    const so_zoo_entry *z = so_zoo_list(&n);
    so_json js;
    so_json_init(&js, stdout, 1);
    if (json)
        so_json_arr_begin(&js, NULL);
    else
        printf("%-12s %-12s %8s %14s %10s  %s\n", "model", "input", "classes", "parameters", "GFLOPs", "description");
    for (int i = 0; i < n; i++) {
        so_graph *g;
        if (so_zoo_build(z[i].name, z[i].c, z[i].h, z[i].w, z[i].classes, &g))
            return cli_error("models", CLI_FAIL, "%s: %s", z[i].name, so_errmsg());
        double gf = so_graph_flops(g) * 1e-9;
        if (json) {
            so_json_obj_begin(&js, NULL);
            so_json_str(&js, "name", z[i].name);
            so_json_int(&js, "parameters", (int64_t)so_graph_nparams(g));
            if (unpadded_params(z[i].name))
                so_json_int(&js, "parameters_unpadded", (int64_t)unpadded_params(z[i].name));
            so_json_num(&js, "gflops_per_sample", gf);
            so_json_obj_end(&js);
        } else {
            char shape[32];
            snprintf(shape, sizeof shape, "%dx%dx%d", z[i].c, z[i].h, z[i].w);
            printf("%-12s %-12s %8d %14zu %10.4f  %s\n", z[i].name, shape, z[i].classes, so_graph_nparams(g), gf,
                   z[i].description);
        }
        so_graph_destroy(g);
    }
    if (json) {
        so_json_arr_end(&js);
        return CLI_OK;
    }
    const so_zoo_entry *f = so_zoo_families(&n);
    printf("\nother depths and sizes (a name listed above is that model; see include/scaleout/zoo.h):\n");
    for (int i = 0; i < n; i++)
        printf("%-16s %dx%dx%d, %d classes  %s\n", f[i].name, f[i].c, f[i].h, f[i].w, f[i].classes, f[i].description);
    printf("\nGPT-2 parameters above count llm.c's vocabulary padded to a multiple of 128 (50304);\n"
           "without the padding (Vp=50257, Hugging Face's GPT2LMHeadModel):\n");
    z = so_zoo_list(&n);
    for (int i = 0; i < n; i++)
        if (unpadded_params(z[i].name))
            printf("%-16s %14zu\n", z[i].name, unpadded_params(z[i].name));
    return CLI_OK;
}
