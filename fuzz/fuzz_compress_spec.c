/* libFuzzer target for the --compress parser (src/compress/spec.c): any
 * bytes either fail with SO_EINVAL and a one-line message naming --compress,
 * or give a spec within its ranges (ratio in (0, 1], 1..16 bits, a block and
 * a rank >= 1, a start step >= 0) that formats to text parsing back to the
 * same spec. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/compress.h"
#include "scaleout/err.h"

static void check_ranges(const so_compress_spec *s)
{
    if ((unsigned)s->method >= SO_COMPRESS_METHODS)
        abort();
    if ((s->method == SO_COMPRESS_TOPK || s->method == SO_COMPRESS_RANDK) && !(s->ratio > 0 && s->ratio <= 1))
        abort();
    if (s->method == SO_COMPRESS_QSGD && (s->bits < 1 || s->bits > 16 || s->block < 1))
        abort();
    if (s->method == SO_COMPRESS_POWERSGD && (s->rank < 1 || s->start_step < 0))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    so_compress_spec s, again;
    int rc = so_compress_parse(text, &s);
    if (rc == 0) {
        check_ranges(&s);
        char buf[128];
        so_compress_format(&s, buf, sizeof buf);
        if (so_compress_parse(buf, &again) != 0 || again.method != s.method || again.ratio != s.ratio ||
            again.bits != s.bits || again.block != s.block || again.rank != s.rank || again.start_step != s.start_step)
            abort();
    } else if (rc != SO_EINVAL || !strstr(so_errmsg(), "--compress") || strchr(so_errmsg(), '\n')) {
        abort();
    }
    free(text);
    return 0;
}
