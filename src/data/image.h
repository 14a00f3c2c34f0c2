/* Private to src/data: one image sample's decode and transform (image.c),
 * used by the streaming loader's threads (stream.c) and so_image_sample. */
#ifndef SCALEOUT_DATA_IMAGE_H
#define SCALEOUT_DATA_IMAGE_H
#include <stddef.h>
#include <stdint.h>

#include "data_internal.h"

/* What one decoding thread owns: the decompressor and scratch buffers that
 * grow to the largest image seen (bounded by SO_IMAGE_MAX_PIXELS). */
typedef struct {
    void *tj;             /* tjhandle */
    uint8_t *rgb, *tmp, *out;
    size_t rgb_cap, tmp_cap, out_cap;
    double *dk;           /* coefficients before fixed point */
    size_t dk_cap;
    /* per axis (horizontal, vertical), each its own buffer: the vertical
     * axis' coefficients are computed while the horizontal ones are still
     * to be used, and the two axes' filter sizes differ */
    int32_t *axis_k[2];   /* fixed-point coefficients, output pixels x taps */
    int *axis_b[2];       /* per output pixel: first input pixel, taps */
    size_t axis_k_cap[2], axis_b_cap[2];
} img_ctx;

int img_ctx_init(img_ctx *c);
void img_ctx_deinit(img_ctx *c); /* accepts a zeroed or deinitialised context */
/* Bytes of scratch the context holds now. */
size_t img_ctx_bytes(const img_ctx *c);

/* Decodes the encoded image buf[0..len) and writes the train (seeded by
 * (seed, epoch, sample)) or eval transform of it, normalised through lut,
 * into out (3 x S x S, S = s->image_size). SO_EFORMAT names `what` for
 * anything undecodable. */
int img_transform(img_ctx *c, const so_image_source *s, const uint8_t *buf, size_t len, const char *what,
                  int train, uint64_t seed, int epoch, int sample, int dct, const float (*lut)[256], float *out);
void img_train_crop(const so_image_source *s, uint64_t seed, int epoch, int sample, int width, int height,
                    int box[4], int *flip);
void img_build_lut(const float mean[3], const float std[3], float lut[3][256]);

/* Reads sample i's encoded image into *buf (capacity *cap, grown as needed):
 * *img points into it, *ilen its length; *what names the sample for messages
 * (a buffer of PATH_MAX + 64). tfrecord: the record's two CRCs and the
 * Example are checked. *nread = bytes read from storage. */
int img_read_sample(const so_image_source *s, int i, uint8_t **buf, size_t *cap, const uint8_t **img, size_t *ilen,
                    char *what, size_t what_size, size_t *nread);

#endif
