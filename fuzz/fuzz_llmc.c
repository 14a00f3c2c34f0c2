/* libFuzzer target for llm.c's GPT-2 model file: so_llmc_parse on the
 * bytes, and for a valid file the first and last float of every tensor's
 * every layer slice read, so ASan sees any offset past the body. */
#include <stdint.h>
#include <stdlib.h>

#include "scaleout/llmc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* floats at 4-byte alignment, as a file mapping gives them */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    for (size_t i = 0; i < size; i++)
        buf[i] = data[i];
    so_llmc_model m;
    volatile float sink = 0;
    if (so_llmc_parse(buf, size, "fuzz.bin", &m) == 0) {
        if (SO_LLMC_HEADER_BYTES + m.nparams * sizeof(float) != size)
            abort();
        for (int k = 0; k < SO_LLMC_NTENSORS; k++)
            for (int l = 0; l < (m.t[k].per_layer ? m.cfg.num_layers : 1); l++) {
                size_t n;
                const float *v = so_llmc_slice(&m, k, l, &n);
                if (n == 0)
                    abort();
                sink += v[0] + v[n - 1];
            }
    }
    (void)sink;
    free(buf);
    return 0;
}
