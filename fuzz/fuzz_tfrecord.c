/* libFuzzer target for the TFRecord framer: walks the input record by record
 * as a shard scan does; every accepted record must lie inside the input and
 * its two masked CRC32Cs must hold. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scaleout/crc32c.h"
#include "scaleout/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (size_t at = 0; at < size;) {
        size_t off, len, next;
        if (so_tfrecord_next(data + at, size - at, "fuzz-tfrecord", &off, &len, &next) != 0)
            return 0;
        if (off != 12 || next != len + 16 || next > size - at)
            abort();
        uint32_t c;
        memcpy(&c, data + at + 12 + len, 4);
        if (so_tfrecord_mask(so_crc32c(0, data + at + 12, len)) != c)
            abort();
        at += next;
    }
    return 0;
}
