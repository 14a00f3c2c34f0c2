/* `scaleout models`: the zoo with parameter counts and forward GFLOPs per
 * sample, as a table or --json; the table ends with the any-depth ResNet forms. */
#include <stdio.h>

#include "cli.h"
#include "scaleout/err.h"
#include "scaleout/json.h"
#include "scaleout/zoo.h"

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
        printf("%-10s %-12s %8s %14s %10s  %s\n", "model", "input", "classes", "parameters", "GFLOPs", "description");
    for (int i = 0; i < n; i++) {
        so_graph *g;
        if (so_zoo_build(z[i].name, z[i].c, z[i].h, z[i].w, z[i].classes, &g))
            return cli_error("models", CLI_FAIL, "%s: %s", z[i].name, so_errmsg());
        double gf = so_graph_flops(g) * 1e-9;
        if (json) {
            so_json_obj_begin(&js, NULL);
            so_json_str(&js, "name", z[i].name);
            so_json_int(&js, "parameters", (int64_t)so_graph_nparams(g));
            so_json_num(&js, "gflops_per_sample", gf);
            so_json_obj_end(&js);
        } else {
            char shape[32];
            snprintf(shape, sizeof shape, "%dx%dx%d", z[i].c, z[i].h, z[i].w);
            printf("%-10s %-12s %8d %14zu %10.4f  %s\n", z[i].name, shape, z[i].classes, so_graph_nparams(g), gf,
                   z[i].description);
        }
        so_graph_destroy(g);
    }
    if (json) {
        so_json_arr_end(&js);
        return CLI_OK;
    }
    const so_zoo_entry *f = so_zoo_families(&n);
    printf("\nother depths (a name listed above is that model; see include/scaleout/zoo.h):\n");
    for (int i = 0; i < n; i++)
        printf("%-16s %dx%dx%d, %d classes  %s\n", f[i].name, f[i].c, f[i].h, f[i].w, f[i].classes, f[i].description);
    return CLI_OK;
}
