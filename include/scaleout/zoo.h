/* The model zoo: builders for the standard CNNs, with PyTorch/torchvision
 * module names so parameters export under the names PyTorch uses. */
#ifndef SCALEOUT_ZOO_H
#define SCALEOUT_ZOO_H
#include "scaleout/graph.h"

typedef struct {
    const char *name;
    const char *description;
    int c, h, w;       /* default input shape */
    int classes;       /* default number of classes */
} so_zoo_entry;

/* All models, in display order; *n receives the count. */
const so_zoo_entry *so_zoo_list(int *n);
const so_zoo_entry *so_zoo_find(const char *name);

/* Builds, fuses (ReLU into producers) and finalizes model `name` for input
 * (c,h,w) and `classes` outputs. Errors name the model and the problem (e.g.
 * an input too small for its pooling). */
int so_zoo_build(const char *name, int c, int h, int w, int classes, so_graph **out);

#endif
