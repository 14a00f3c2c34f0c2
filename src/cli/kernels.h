/* What the convolutions of a built model run (kernels.c), and the choices of
 * the --backend and --conv-algo flags for the commands' option tables. */
#ifndef SCALEOUT_CLI_KERNELS_H
#define SCALEOUT_CLI_KERNELS_H
#include <stddef.h>

#include "scaleout/json.h"
#include "scaleout/model.h"

extern const char *const cli_backends[];
extern const char *const cli_conv_algos[];
/* --precision's values (so_precision_resolve). */
extern const char *const cli_precisions[];

/* For the banner: "forward: winograd 12, direct 7 | backward data: ... |
 * backward weights: ..." ("" for a model without convolutions). */
void kernels_conv_summary(so_model *m, char *buf, size_t len);
/* The same as "conv_algo_used" in --json: counts per propagation, the ISA
 * the kernels run, and every layer's algorithm and implementation. */
void kernels_conv_json(so_json *js, so_model *m, const char *requested);

#endif
