/* libFuzzer target for the IDX parsers: the same bytes go to the images and
 * the labels parser, and gzip input is inflated first (with a small output
 * cap so bombs stay fast), as so_read_file would do for a .gz file. */
#include <stdint.h>
#include <stdlib.h>

#include "data/data_internal.h"
#include "scaleout/data.h"

/* Touches every byte the parser says is valid, so ASan sees any overrun. */
static unsigned sum(const uint8_t *p, size_t len)
{
    unsigned s = 0;
    for (size_t i = 0; i < len; i++)
        s += p[i];
    return s;
}

static void parse_both(const uint8_t *buf, size_t len)
{
    int n, h, w;
    const uint8_t *px, *lb;
    volatile unsigned sink = 0;
    if (so_idx_parse_images(buf, len, "fuzz-images", &n, &h, &w, &px) == 0) {
        if (n < 1 || h < 1 || w < 1 || px < buf || (size_t)(px - buf) + (size_t)n * h * w != len)
            abort(); /* the contract: exactly the promised bytes */
        sink += sum(px, (size_t)n * h * w);
    }
    if (so_idx_parse_labels(buf, len, "fuzz-labels", &n, &lb) == 0) {
        if (n < 1 || lb < buf || (size_t)(lb - buf) + (size_t)n != len)
            abort();
        sink += sum(lb, (size_t)n);
    }
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse_both(data, size);
    if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
        uint8_t *out = NULL;
        size_t outlen = 0;
        if (so_gunzip(data, size, "fuzz.gz", 1 << 20, &out, &outlen) == 0) {
            parse_both(out, outlen);
            free(out);
        }
    }
    return 0;
}
