/* libFuzzer target for the tf.train.Example decoder: on success the image
 * bytes must lie inside the input (ASan checks every access on the way). */
#include <stdint.h>
#include <stdlib.h>

#include "scaleout/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *img = NULL;
    size_t len = 0;
    int64_t label = 0;
    if (so_example_parse(data, size, "fuzz-example", &img, &len, &label) != 0)
        return 0;
    if (!img || img < data || len > size || img + len > data + size)
        abort();
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < len; i++) /* touch the whole span */
        sink ^= img[i];
    (void)sink;
    return 0;
}
