/* IDX parsers (the MNIST / Fashion-MNIST format): a big-endian header of a
 * magic (0x0803 images, 0x0801 labels) and dimensions, then raw uint8 data.
 * Input is untrusted (fuzzed): every size is checked in 64-bit arithmetic
 * before any pointer is formed. Trailing bytes are rejected, because the files
 * as distributed are exact and extra bytes mean a wrong or damaged file. */
#include <stdint.h>
#include <stdio.h>

#include "data_internal.h"
#include "scaleout/data.h"
#include "scaleout/err.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_MAX_COUNT 0x7fffffffu /* counts become int */
#define IDX_MAX_SIDE 65535u       /* far beyond any image dataset; keeps n*h*w < 2^63 */

static int check_magic(const uint8_t *buf, size_t len, size_t hdr, uint32_t want, const char *what,
                       const char *kind)
{
    if (len < hdr)
        return so_err(SO_EFORMAT, "%s: %zu bytes is too short for an IDX %s header (%zu bytes)", what, len, kind,
                      hdr);
    uint32_t magic = so_be32(buf);
    if (magic != want)
        return so_err(SO_EFORMAT, "%s: bad magic 0x%08x, expected 0x%08x (IDX %s)", what, magic, want, kind);
    return 0;
}

static int check_dim(uint32_t v, uint32_t max, const char *what, const char *name)
{
    if (v == 0 || v > max)
        return so_err(SO_EFORMAT, "%s: %s %u is not in 1..%u", what, name, v, max);
    return 0;
}

/* Payload must be exactly `want` bytes after the header. */
static int check_size(size_t len, size_t hdr, uint64_t want, const char *what, const char *desc)
{
    uint64_t have = len - hdr;
    if (have < want)
        return so_err(SO_EFORMAT, "%s: truncated: header promises %s (%llu bytes) but only %llu bytes follow", what,
                      desc, (unsigned long long)want, (unsigned long long)have);
    if (have > want)
        return so_err(SO_EFORMAT, "%s: %llu trailing bytes after %s", what, (unsigned long long)(have - want), desc);
    return 0;
}

int so_idx_parse_images(const uint8_t *buf, size_t len, const char *what, int *n, int *h, int *w,
                        const uint8_t **pixels)
{
    int rc = check_magic(buf, len, 16, IDX_MAGIC_IMAGES, what, "images");
    if (rc)
        return rc;
    uint32_t cn = so_be32(buf + 4), ch = so_be32(buf + 8), cw = so_be32(buf + 12);
    if ((rc = check_dim(cn, IDX_MAX_COUNT, what, "image count")) || (rc = check_dim(ch, IDX_MAX_SIDE, what, "rows")) ||
        (rc = check_dim(cw, IDX_MAX_SIDE, what, "columns")))
        return rc;
    char desc[96];
    snprintf(desc, sizeof desc, "%u images of %ux%u", cn, ch, cw);
    if ((rc = check_size(len, 16, (uint64_t)cn * ch * cw, what, desc)))
        return rc;
    *n = (int)cn;
    *h = (int)ch;
    *w = (int)cw;
    *pixels = buf + 16;
    return 0;
}

int so_idx_parse_labels(const uint8_t *buf, size_t len, const char *what, int *n, const uint8_t **labels)
{
    int rc = check_magic(buf, len, 8, IDX_MAGIC_LABELS, what, "labels");
    if (rc)
        return rc;
    uint32_t cn = so_be32(buf + 4);
    if ((rc = check_dim(cn, IDX_MAX_COUNT, what, "label count")))
        return rc;
    char desc[64];
    snprintf(desc, sizeof desc, "%u labels", cn);
    if ((rc = check_size(len, 8, cn, what, desc)))
        return rc;
    *n = (int)cn;
    *labels = buf + 8;
    return 0;
}
