/* CIFAR-10 binary batches: fixed 3073-byte records (label byte, then the
 * 32x32 R, G and B planes), no header. Validation is therefore the length
 * (a whole number of records) and the label range. */
#include <stdint.h>

#include "scaleout/data.h"
#include "scaleout/err.h"

#define CIFAR_RECORD 3073
#define CIFAR_CLASSES 10

int so_cifar_parse(const uint8_t *buf, size_t len, const char *what, int *n)
{
    if (len == 0)
        return so_err(SO_EFORMAT, "%s: empty file, expected %d-byte CIFAR-10 records", what, CIFAR_RECORD);
    if (len % CIFAR_RECORD != 0)
        return so_err(SO_EFORMAT, "%s: size %zu is not a whole number of %d-byte CIFAR-10 records (%zu extra bytes)",
                      what, len, CIFAR_RECORD, len % CIFAR_RECORD);
    size_t count = len / CIFAR_RECORD;
    if (count > 0x7fffffff)
        return so_err(SO_EFORMAT, "%s: %zu records is too many", what, count);
    for (size_t i = 0; i < count; i++)
        if (buf[i * CIFAR_RECORD] >= CIFAR_CLASSES)
            return so_err(SO_EFORMAT, "%s: record %zu has label %u, not below %d classes", what, i,
                          buf[i * CIFAR_RECORD], CIFAR_CLASSES);
    *n = (int)count;
    return 0;
}
