/* libFuzzer target for the CIFAR-10 batch parser: any accepted input must be
 * a whole number of 3073-byte records with labels below 10. */
#include <stdint.h>
#include <stdlib.h>

#include "scaleout/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int n = 0;
    if (so_cifar_parse(data, size, "fuzz-cifar", &n) != 0)
        return 0;
    if (n < 1 || (size_t)n * 3073 != size)
        abort();
    for (int i = 0; i < n; i++)
        if (data[(size_t)i * 3073] >= 10)
            abort();
    return 0;
}
