/* libFuzzer target for the safetensors header parser (--init-from): any bytes
 * either fail with SO_EFORMAT or give tensors whose data lies inside the file
 * (every byte of every tensor is read, so ASan sees an overrun). */
#include <stdint.h>
#include <stdlib.h>

#include "scaleout/ckpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    so_st_tensor *t;
    int n;
    const uint8_t *d;
    size_t dl;
    if (so_ckpt_safetensors_parse(data, size, "fuzz", &t, &n, &d, &dl) != 0)
        return 0;
    volatile unsigned sink = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].begin > t[i].end || t[i].end > dl)
            abort();
        for (uint64_t b = t[i].begin; b < t[i].end; b++)
            sink += d[b];
    }
    (void)sink;
    free(t);
    return 0;
}
