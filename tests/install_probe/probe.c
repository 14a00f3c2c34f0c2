/* tests/install.sh builds this against the INSTALLED scaleout (pkg-config,
 * then the CMake package): the engine's public API that exists without MPI.
 * Builds LeNet-5 from the zoo, creates the model on the onednn backend and
 * prints "lenet5 parameters N", which the test compares with the installed
 * `scaleout models`. */
#include <stdio.h>

#include "scaleout/err.h"
#include "scaleout/model.h"
#include "scaleout/zoo.h"

int main(void)
{
    const so_zoo_entry *z = so_zoo_find("lenet5");
    if (!z) {
        fprintf(stderr, "probe: lenet5 not in the zoo\n");
        return 1;
    }
    so_graph *g = NULL;
    so_model *m = NULL;
    int rc = so_zoo_build(z->name, z->c, z->h, z->w, z->classes, &g);
    if (!rc)
        rc = so_model_create(g, "onednn", 8, 42, &m); /* owns g from here, even on failure */
    if (rc) {
        fprintf(stderr, "probe: %s: %s\n", so_strerror(rc), so_errmsg());
        return 1;
    }
    printf("lenet5 parameters %zu\n", m->nparams);
    so_model_destroy(m);
    return 0;
}
