/* libFuzzer target for the JPEG path: decode (TurboJPEG, DCT scaling) and
 * both transforms of arbitrary bytes. Undecodable input must come back as an
 * error, never a crash; decoded output must be finite. The first input byte
 * picks the transform, the crop's seed and the output size. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static img_ctx ctx;
    static int ready;
    static float lut[3][256], out[3 * 64 * 64];
    if (!ready) {
        const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
        if (img_ctx_init(&ctx))
            abort();
        img_build_lut(mean, std, lut);
        ready = 1;
    }
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    so_image_source s;
    memset(&s, 0, sizeof s);
    s.image_size = 8 + (mode >> 2) % 57; /* 8..64 */
    s.scale_min = 0.08f, s.scale_max = 1.0f, s.ratio_min = 0.75f, s.ratio_max = 4.0f / 3.0f;
    int train = mode & 1, dct = (mode >> 1) & 1 ? SO_DCT_ALL : SO_DCT_OFF;
    if (img_transform(&ctx, &s, data + 1, size - 1, "fuzz-jpeg", train, mode, 0, 0, dct,
                      (const float(*)[256])lut, out) != 0)
        return 0;
    for (int i = 0; i < 3 * s.image_size * s.image_size; i++)
        if (!isfinite(out[i]) || fabsf(out[i]) > 3.0f)
            abort();
    return 0;
}
