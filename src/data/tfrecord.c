/* TFRecord framing and the two fields of tf.train.Example scaleout needs.
 * A record is: uint64 length, uint32 masked CRC32C of those 8 bytes, the
 * data, uint32 masked CRC32C of the data (little-endian). The Example is
 * protobuf: Example{features=1: Features{feature=1: map<string, Feature>}},
 * Feature{bytes_list=1 | float_list=2 | int64_list=3}, each list a repeated
 * field 1 (int64 packed or not). A decoder of just that much protobuf, for
 * bytes we do not trust: every length is checked against the end. */
#include <string.h>

#include "scaleout/crc32c.h"
#include "scaleout/data.h"
#include "scaleout/err.h"

uint32_t so_tfrecord_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int so_tfrecord_next(const uint8_t *buf, size_t len, const char *what, size_t *payload_off, size_t *plen,
                     size_t *next)
{
    if (len < 12)
        return so_err(SO_EFORMAT, "%s: truncated TFRecord header (%zu bytes)", what, len);
    if (so_tfrecord_mask(so_crc32c(0, buf, 8)) != le32(buf + 8))
        return so_err(SO_EFORMAT, "%s: TFRecord length CRC mismatch", what);
    uint64_t n = le64(buf);
    if (n > len - 12 || len - 12 - n < 4)
        return so_err(SO_EFORMAT, "%s: TFRecord of %llu bytes runs past the end (%zu left)", what,
                      (unsigned long long)n, len - 12);
    if (so_tfrecord_mask(so_crc32c(0, buf + 12, (size_t)n)) != le32(buf + 12 + n))
        return so_err(SO_EFORMAT, "%s: TFRecord data CRC mismatch", what);
    *payload_off = 12;
    *plen = (size_t)n;
    *next = 16 + (size_t)n;
    return 0;
}

/* ---- protobuf ---------------------------------------------------------------- */

typedef struct {
    const uint8_t *p, *end;
} pb;

typedef struct {
    uint32_t field;
    int wire;             /* 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
    uint64_t v;           /* varint value */
    const uint8_t *data;  /* wire 2: the bytes; 1/5: the fixed bytes */
    size_t len;
} pb_field;

static int pb_varint(pb *b, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end)
            return -1;
        uint8_t c = *b->p++;
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1; /* more than 10 bytes */
}

/* The next field of b; 1 with a field, 0 at the end, -1 malformed. */
static int pb_next(pb *b, pb_field *f)
{
    uint64_t key, n;
    f->data = NULL;
    f->len = 0;
    if (b->p >= b->end)
        return 0;
    if (pb_varint(b, &key) || (key >> 3) == 0 || (key >> 3) > UINT32_MAX)
        return -1;
    f->field = (uint32_t)(key >> 3);
    f->wire = (int)(key & 7);
    size_t left;
    switch (f->wire) {
    case 0:
        return pb_varint(b, &f->v) ? -1 : 1;
    case 1:
    case 5:
        n = f->wire == 1 ? 8 : 4;
        break;
    case 2:
        if (pb_varint(b, &n))
            return -1;
        break;
    default: /* groups (3, 4) and reserved types: not in tf.train.Example */
        return -1;
    }
    left = (size_t)(b->end - b->p);
    if (n > left)
        return -1;
    f->data = b->p;
    f->len = (size_t)n;
    b->p += n;
    return 1;
}

/* The first element of a BytesList / Int64List (Feature field `kind`). */
static int feature_first(const uint8_t *data, size_t len, uint32_t kind, pb_field *out)
{
    if (!data) /* a map entry without a value: an empty Feature */
        return 0;
    pb b = {data, data + len}, l;
    pb_field f, e;
    int rc, found = 0;
    while ((rc = pb_next(&b, &f)) > 0) {
        if (f.field != kind || f.wire != 2)
            continue;
        l = (pb){f.data, f.data + f.len};
        while (!found && (rc = pb_next(&l, &e)) > 0) {
            if (e.field != 1)
                continue;
            if (kind == 3 && e.wire == 2) { /* packed int64s: the first varint */
                pb packed = {e.data, e.data + e.len};
                if (e.len == 0 || pb_varint(&packed, &e.v))
                    return -1;
                e.wire = 0;
            }
            if ((kind == 1 && e.wire == 2) || (kind == 3 && e.wire == 0)) {
                *out = e;
                found = 1;
            }
        }
        if (rc < 0)
            return -1;
    }
    return rc < 0 ? -1 : found;
}

int so_example_parse(const uint8_t *buf, size_t len, const char *what, const uint8_t **image, size_t *image_len,
                     int64_t *label)
{
    pb ex = {buf, buf + len}, feats, entry;
    pb_field f, g, h;
    int rc, have_image = 0, have_label = 0;
    while ((rc = pb_next(&ex, &f)) > 0) {
        if (f.field != 1 || f.wire != 2)
            continue;
        feats = (pb){f.data, f.data + f.len};
        while ((rc = pb_next(&feats, &g)) > 0) {
            if (g.field != 1 || g.wire != 2)
                continue;
            const uint8_t *key = NULL, *val = NULL;
            size_t klen = 0, vlen = 0;
            entry = (pb){g.data, g.data + g.len};
            while ((rc = pb_next(&entry, &h)) > 0)
                if (h.wire == 2 && h.field == 1)
                    key = h.data, klen = h.len;
                else if (h.wire == 2 && h.field == 2)
                    val = h.data, vlen = h.len;
            if (rc < 0)
                break;
            pb_field v;
            int got;
            if (key && klen == 13 && !memcmp(key, "image/encoded", 13)) {
                if ((got = feature_first(val, vlen, 1, &v)) < 0)
                    return so_err(SO_EFORMAT, "%s: malformed image/encoded feature", what);
                if (got) {
                    *image = v.data;
                    *image_len = v.len;
                    have_image = 1;
                }
            } else if (key && klen == 17 && !memcmp(key, "image/class/label", 17)) {
                if ((got = feature_first(val, vlen, 3, &v)) < 0)
                    return so_err(SO_EFORMAT, "%s: malformed image/class/label feature", what);
                if (got) {
                    *label = (int64_t)v.v;
                    have_label = 1;
                }
            }
        }
        if (rc < 0)
            break;
    }
    if (rc < 0)
        return so_err(SO_EFORMAT, "%s: malformed tf.train.Example (protobuf)", what);
    if (!have_image || !have_label)
        return so_err(SO_EFORMAT, "%s: tf.train.Example without %s", what,
                      !have_image && !have_label ? "image/encoded and image/class/label"
                      : !have_image              ? "image/encoded"
                                                 : "image/class/label");
    return 0;
}
