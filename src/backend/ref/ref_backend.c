/* Placeholder: the reference backend is being written. */
#include "scaleout/backend.h"
#include "scaleout/err.h"
static int create(so_model *m, void **st) { (void)m; (void)st; return so_err(SO_EUNSUP, "ref backend not built yet"); }
const so_backend_ops so_backend_ref = {.name = "ref", .create = create};
