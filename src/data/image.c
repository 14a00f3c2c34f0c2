/* One image sample from encoded bytes to the network's input: JPEG decoded
 * by libjpeg-turbo (TurboJPEG API), scaled in the DCT domain when the crop
 * still has at least the output's pixels; torchvision's transforms on it:
 * train = RandomResizedCrop (its exact sampling procedure, seeded per
 * (seed, epoch, sample)) + horizontal flip, eval = Resize (shorter side) +
 * CenterCrop; both then ToTensor + Normalize. The resampling is Pillow's
 * (torchvision 0.14 resizes PIL images with PIL): a separable bilinear
 * filter widened by the scale factor (antialias), fixed-point coefficients
 * of 22 bits, horizontal pass first, 8-bit rounding between the passes, so
 * the same decoded pixels give the same bytes as PIL. Pixels are RGBX
 * (4 bytes) from the decoder on, so one pixel is one vector. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"
#include "image.h"
#include "scaleout/err.h"
#include "scaleout/rng.h"

#if defined(__x86_64__)
#include <smmintrin.h>
#endif

#ifdef SCALEOUT_HAVE_TURBOJPEG
#include <turbojpeg.h>
#endif

#define STREAM_CROP 0x43524f50ULL /* "CROP" */
#define PRECISION_BITS (32 - 8 - 2)

int so_image_have_jpeg(void)
{
#ifdef SCALEOUT_HAVE_TURBOJPEG
    return 1;
#else
    return 0;
#endif
}

int so_image_have_png(void) { return 0; }

/* ---- per-thread context -------------------------------------------------------- */

int img_ctx_init(img_ctx *c)
{
    memset(c, 0, sizeof *c);
#ifdef SCALEOUT_HAVE_TURBOJPEG
    if (!(c->tj = tjInitDecompress()))
        return so_err(SO_ENOMEM, "cannot create a TurboJPEG decompressor");
#endif
    return 0;
}

void img_ctx_deinit(img_ctx *c)
{
    if (!c)
        return;
#ifdef SCALEOUT_HAVE_TURBOJPEG
    if (c->tj)
        tjDestroy(c->tj);
#endif
    free(c->rgb);
    free(c->tmp);
    free(c->out);
    for (int a = 0; a < 2; a++) {
        free(c->axis_k[a]);
        free(c->axis_b[a]);
    }
    free(c->dk);
    memset(c, 0, sizeof *c);
}

static int grow(void **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    void *q = realloc(*p, need);
    if (!q)
        return so_err(SO_ENOMEM, "out of memory for a %zu-byte image buffer", need);
    *p = q;
    *cap = need;
    return 0;
}

size_t img_ctx_bytes(const img_ctx *c)
{
    return c->rgb_cap + c->tmp_cap + c->out_cap + c->dk_cap + c->axis_k_cap[0] + c->axis_k_cap[1] +
           c->axis_b_cap[0] + c->axis_b_cap[1];
}

/* ---- torchvision's crop parameters ------------------------------------------------ */

/* Python's round(): half to even (rint under the default rounding mode). */
static int pyround(double x) { return (int)rint(x); }

/* A float32 uniform in [lo, hi) as torch.empty(1).uniform_(lo, hi). */
static float uniform_f32(so_rng *r, float lo, float hi) { return lo + (hi - lo) * so_rng_uniform(r); }

void img_train_crop(const so_image_source *s, uint64_t seed, int epoch, int sample, int width, int height,
                    int box[4], int *flip)
{
    so_rng r;
    so_rng_seed(&r, so_rng_derive(so_rng_derive(so_rng_derive(seed, STREAM_CROP), (uint64_t)epoch), (uint64_t)sample));
    double area = (double)height * width;
    float log_lo = logf(s->ratio_min), log_hi = logf(s->ratio_max);
    int done = 0;
    for (int attempt = 0; attempt < 10 && !done; attempt++) {
        double target = area * (double)uniform_f32(&r, s->scale_min, s->scale_max);
        double aspect = (double)expf(uniform_f32(&r, log_lo, log_hi));
        int w = pyround(sqrt(target * aspect)), h = pyround(sqrt(target / aspect));
        if (0 < w && w <= width && 0 < h && h <= height) {
            box[0] = (int)so_rng_below(&r, (uint64_t)(height - h + 1));
            box[1] = (int)so_rng_below(&r, (uint64_t)(width - w + 1));
            box[2] = h;
            box[3] = w;
            done = 1;
        }
    }
    if (!done) { /* the fallback: a centre crop of the ratio range */
        double in_ratio = (double)width / height;
        int w = width, h = height;
        if (in_ratio < s->ratio_min)
            h = pyround(w / (double)s->ratio_min);
        else if (in_ratio > s->ratio_max)
            w = pyround(h * (double)s->ratio_max);
        box[0] = (height - h) / 2;
        box[1] = (width - w) / 2;
        box[2] = h;
        box[3] = w;
    }
    *flip = so_rng_uniform(&r) < 0.5f;
}

void so_image_train_crop(const so_dataset *d, uint64_t seed, int epoch, int i, int w, int h, int box[4], int *flip)
{
    img_train_crop(d->images, seed, epoch, i, w, h, box, flip);
}

/* ---- Pillow's resampling ----------------------------------------------------------- */

static double bilinear(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Pillow's precompute_coeffs + normalize_coeffs_8bpc for one axis: output
 * pixels [o0, o0 + n) of a resize of in[in0, in1) (clamped to [0, in_size))
 * to out_size pixels. bounds gets (first tap, taps) per output pixel, kk the
 * fixed-point weights (ksize per pixel). Returns ksize, or < 0 on ENOMEM. */
static int coeffs(img_ctx *c, int axis, int in_size, double in0, double in1, int out_size, int o0, int n)
{
    double scale = (in1 - in0) / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    size_t nk = (size_t)n * ksize;
    int32_t **kk = &c->axis_k[axis];
    int **bounds = &c->axis_b[axis];
    if (grow((void **)&c->dk, &c->dk_cap, nk * sizeof(double)) ||
        grow((void **)kk, &c->axis_k_cap[axis], nk * sizeof(int32_t)) ||
        grow((void **)bounds, &c->axis_b_cap[axis], 2 * (size_t)n * sizeof(int)))
        return -1;
    for (int xx = 0; xx < n; xx++) {
        double center = in0 + (o0 + xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
        xmin = xmin < 0 ? 0 : xmin;
        xmax = (xmax > in_size ? in_size : xmax) - xmin;
        double *k = c->dk + (size_t)xx * ksize;
        for (int x = 0; x < ksize; x++) {
            k[x] = x < xmax ? bilinear((x + xmin - center + 0.5) * ss) : 0.0;
            ww += k[x];
        }
        for (int x = 0; x < ksize; x++) {
            double v = ww != 0.0 ? k[x] / ww : k[x];
            (*kk)[(size_t)xx * ksize + x] = v < 0 ? (int32_t)(-0.5 + v * (1 << PRECISION_BITS))
                                                  : (int32_t)(0.5 + v * (1 << PRECISION_BITS));
        }
        (*bounds)[2 * xx] = xmin;
        (*bounds)[2 * xx + 1] = xmax;
    }
    return ksize;
}

static inline uint8_t clip8(int32_t v)
{
    v >>= PRECISION_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Horizontal pass: rows [y0, y1) of src (RGBX, stride bytes) -> tmp (n RGBX
 * pixels a row). The x86 version holds one pixel's four channels in one
 * SSE4.1 vector of int32, one multiply-add per tap (as Pillow-SIMD does);
 * SSE4.1 is in the Release build's x86-64-v2 baseline, and other builds
 * check the CPU. Both versions give the same bytes. */
static void pass_h_scalar(const uint8_t *src, size_t stride, int y0, int y1, int n, int ksize, const int *bounds,
                          const int32_t *kk, uint8_t *tmp)
{
    for (int y = y0; y < y1; y++) {
        const uint8_t *row = src + (size_t)y * stride;
        uint8_t *out = tmp + (size_t)(y - y0) * n * 4;
        for (int xx = 0; xx < n; xx++) {
            const int32_t *k = kk + (size_t)xx * ksize;
            const uint8_t *p = row + (size_t)bounds[2 * xx] * 4;
            int32_t acc[4] = {1 << (PRECISION_BITS - 1), 1 << (PRECISION_BITS - 1), 1 << (PRECISION_BITS - 1),
                              1 << (PRECISION_BITS - 1)};
            for (int x = 0; x < bounds[2 * xx + 1]; x++, p += 4)
                for (int ch = 0; ch < 4; ch++)
                    acc[ch] += p[ch] * k[x];
            for (int ch = 0; ch < 4; ch++)
                out[4 * (size_t)xx + ch] = clip8(acc[ch]);
        }
    }
}

#if defined(__x86_64__)
__attribute__((target("sse4.1"))) static void pass_h_sse41(const uint8_t *src, size_t stride, int y0, int y1, int n,
                                                           int ksize, const int *bounds, const int32_t *kk,
                                                           uint8_t *tmp)
{
    const __m128i half = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
    for (int y = y0; y < y1; y++) {
        const uint8_t *row = src + (size_t)y * stride;
        uint8_t *out = tmp + (size_t)(y - y0) * n * 4;
        for (int xx = 0; xx < n; xx++) {
            const int32_t *k = kk + (size_t)xx * ksize;
            const uint8_t *p = row + (size_t)bounds[2 * xx] * 4;
            __m128i acc = half;
            for (int x = 0; x < bounds[2 * xx + 1]; x++, p += 4) {
                int32_t v;
                memcpy(&v, p, 4);
                __m128i px = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(v));
                acc = _mm_add_epi32(acc, _mm_mullo_epi32(px, _mm_set1_epi32(k[x])));
            }
            /* >> 22, then saturate to 0..255 as clip8 */
            acc = _mm_srai_epi32(acc, PRECISION_BITS);
            __m128i w = _mm_packs_epi32(acc, acc);
            int32_t packed = _mm_cvtsi128_si32(_mm_packus_epi16(w, w));
            memcpy(out + 4 * (size_t)xx, &packed, 4);
        }
    }
}
#endif

static void pass_h(const uint8_t *src, size_t stride, int y0, int y1, int n, int ksize, const int *bounds,
                   const int32_t *kk, uint8_t *tmp)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.1")) {
        pass_h_sse41(src, stride, y0, y1, n, ksize, bounds, kk, tmp);
        return;
    }
#endif
    pass_h_scalar(src, stride, y0, y1, n, ksize, bounds, kk, tmp);
}

/* Vertical pass: rows of tmp (width bytes each, first row = source row y0) -> out (n rows). */
static void pass_v(const uint8_t *tmp, int y0, size_t width, int n, int ksize, const int *bounds, const int32_t *kk,
                   uint8_t *out, int32_t *acc)
{
    for (int yy = 0; yy < n; yy++) {
        const int32_t *k = kk + (size_t)yy * ksize;
        const uint8_t *base = tmp + (size_t)(bounds[2 * yy] - y0) * width;
        for (size_t x = 0; x < width; x++)
            acc[x] = 1 << (PRECISION_BITS - 1);
        for (int y = 0; y < bounds[2 * yy + 1]; y++) {
            const uint8_t *row = base + (size_t)y * width;
            int32_t w = k[y];
            for (size_t x = 0; x < width; x++)
                acc[x] += row[x] * w;
        }
        uint8_t *o = out + (size_t)yy * width;
        for (size_t x = 0; x < width; x++)
            o[x] = clip8(acc[x]);
    }
}

/* out (S x S RGBX) = window [ox, ox + S) x [oy, oy + S) of the resize of the
 * region [rx, rx + rw) x [ry, ry + rh) of src (RGBX; taken as an image of its own:
 * taps clamp at its edges, as Pillow's crop-then-resize) from its box
 * (bx0, by0, bx1, by1) to an out_w x out_h image. */
typedef struct {
    int rx, ry, rw, rh;
    double bx0, by0, bx1, by1;
    int out_w, out_h, ox, oy;
} resample_job;

static int resample(img_ctx *c, const uint8_t *src, size_t stride, const resample_job *j, int S, uint8_t *out)
{
    int kh = coeffs(c, 0, j->rw, j->bx0, j->bx1, j->out_w, j->ox, S);
    int kv = kh < 0 ? -1 : coeffs(c, 1, j->rh, j->by0, j->by1, j->out_h, j->oy, S);
    if (kv < 0)
        return so_err(SO_ENOMEM, "out of memory for resampling coefficients");
    const int *bv = c->axis_b[1];
    int y0 = bv[0], y1 = bv[2 * (S - 1)] + bv[2 * (S - 1) + 1];
    size_t row = (size_t)S * 4, rows = (size_t)(y1 - y0) * row;
    if (grow((void **)&c->tmp, &c->tmp_cap, rows + 64 + row * sizeof(int32_t)))
        return -1;
    const uint8_t *origin = src + (size_t)j->ry * stride + (size_t)j->rx * 4;
    pass_h(origin, stride, y0, y1, S, kh, c->axis_b[0], c->axis_k[0], c->tmp);
    int32_t *acc = (int32_t *)(void *)(c->tmp + ((rows + 63) & ~(size_t)63));
    pass_v(c->tmp, y0, row, S, kv, bv, c->axis_k[1], out, acc);
    return 0;
}

/* ---- decoding ----------------------------------------------------------------------- */

static int is_jpeg(const uint8_t *b, size_t n) { return n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff; }
static int is_png(const uint8_t *b, size_t n) { return n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8); }

/* What the transform needs from the full-size image: the region to decode
 * (in full-size pixels), and how it maps to the output. */
typedef struct {
    int train, flip;
    int crop[4];          /* train: top, left, height, width */
    int new_w, new_h;     /* eval: size after Resize */
} plan;

static void plan_sample(const so_image_source *s, int train, uint64_t seed, int epoch, int sample, int w, int h,
                        plan *p)
{
    memset(p, 0, sizeof *p);
    p->train = train;
    int S = s->image_size;
    if (train) {
        img_train_crop(s, seed, epoch, sample, w, h, p->crop, &p->flip);
        return;
    }
    int R = s->resize > 0 ? s->resize : (int)lround(S * 256.0 / 224.0);
    if (w <= h) { /* torchvision: new_short = R, new_long = int(R * long / short) */
        p->new_w = R;
        p->new_h = (int)((double)R * h / w);
    } else {
        p->new_h = R;
        p->new_w = (int)((double)R * w / h);
    }
}

/* The smallest TurboJPEG scaling factor that keeps the crop (cw x ch pixels
 * of the full image, resized to ow x oh) at least ow x oh. */
static void pick_scale(int cw, int ch, int ow, int oh, int *num, int *den)
{
    static const int f[][2] = {{1, 8}, {1, 4}, {3, 8}, {1, 2}, {5, 8}, {3, 4}, {7, 8}};
    *num = *den = 1;
    for (int i = 0; i < 7; i++)
        if ((long)cw * f[i][0] >= (long)ow * f[i][1] && (long)ch * f[i][0] >= (long)oh * f[i][1]) {
            *num = f[i][0];
            *den = f[i][1];
            return;
        }
}

#ifdef SCALEOUT_HAVE_TURBOJPEG
/* After a failed call the decompressor is replaced: libjpeg-turbo 2.1's
 * handle can come out of an aborted decode (a truncated file) reporting the
 * next header as 0x0. Failures are rare, a new handle is cheap. */
static int jpeg_failed(img_ctx *c, const char *what, const char *stage)
{
    int rc = so_err(SO_EFORMAT, "%s: corrupt JPEG%s (%s)", what, stage, tjGetErrorStr2(c->tj));
    tjDestroy(c->tj);
    c->tj = tjInitDecompress();
    return c->tj ? rc : so_err(SO_ENOMEM, "cannot create a TurboJPEG decompressor");
}

/* The JPEG's size; CMYK and oversized images are refused. */
static int jpeg_header(img_ctx *c, const uint8_t *buf, size_t len, const char *what, int *w, int *h)
{
    int subsamp, cs;
    if (len > 0xffffffffu || tjDecompressHeader3(c->tj, buf, (unsigned long)len, w, h, &subsamp, &cs) != 0)
        return jpeg_failed(c, what, " header");
    if (*w < 1 || *h < 1)
        return so_err(SO_EFORMAT, "%s: corrupt JPEG header (%dx%d)", what, *w, *h);
    if ((uint64_t)*w * *h > SO_IMAGE_MAX_PIXELS)
        return so_err(SO_EFORMAT, "%s: %dx%d JPEG is larger than the %llu-pixel limit", what, *w, *h,
                      (unsigned long long)SO_IMAGE_MAX_PIXELS);
    if (cs == TJCS_CMYK || cs == TJCS_YCCK)
        return so_err(SO_EFORMAT, "%s: CMYK JPEG (not supported)", what);
    return 0;
}

/* Decodes at scaled_w x scaled_h (a TurboJPEG scaling factor) into c->rgb, RGBX. */
static int jpeg_decode(img_ctx *c, const uint8_t *buf, size_t len, const char *what, int scaled_w, int scaled_h)
{
    size_t need = (size_t)scaled_w * scaled_h * 4;
    if (grow((void **)&c->rgb, &c->rgb_cap, need ? need : 1))
        return -1;
    /* LIMITSCANS: a progressive JPEG of thousands of scans is an attack, not an image.
     * STOPONWARNING: a truncated file is a warning to libjpeg, an unreadable sample to us. */
    if (tjDecompress2(c->tj, buf, (unsigned long)len, c->rgb, scaled_w, 0, scaled_h, TJPF_RGBX,
                      TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS) != 0)
        return jpeg_failed(c, what, "");
    return 0;
}
#else
static int jpeg_header(img_ctx *c, const uint8_t *buf, size_t len, const char *what, int *w, int *h)
{
    (void)c, (void)buf, (void)len, (void)w, (void)h;
    return so_err(SO_EUNSUP, "%s: this scaleout was built without libturbojpeg (install libturbojpeg0-dev and "
                             "rebuild)", what);
}

static int jpeg_decode(img_ctx *c, const uint8_t *buf, size_t len, const char *what, int scaled_w, int scaled_h)
{
    return jpeg_header(c, buf, len, what, &scaled_w, &scaled_h);
}
#endif

/* The train crop in the decoded (scaled by num/den) image: the region
 * around it and the fractional box inside, resized to S x S. */
static void crop_job(const plan *p, int num, int den, int sw, int sh, int S, resample_job *j)
{
    double f = (double)num / den, x0 = p->crop[1] * f, y0 = p->crop[0] * f;
    double x1 = (p->crop[1] + p->crop[3]) * f, y1 = (p->crop[0] + p->crop[2]) * f;
    int rx = (int)floor(x0), ry = (int)floor(y0);
    int rw = (int)ceil(x1) - rx, rh = (int)ceil(y1) - ry;
    rw = rx + rw > sw ? sw - rx : rw;
    rh = ry + rh > sh ? sh - ry : rh;
    *j = (resample_job){rx, ry, rw, rh, x0 - rx, y0 - ry, x1 - rx, y1 - ry, S, S, 0, 0};
}

/* ToTensor + Normalize (through lut) of S x S RGBX pixels, flipped or not, into CHW floats. */
static void to_tensor(const uint8_t *px, int S, int flip, const float (*lut)[256], float *out)
{
    size_t plane = (size_t)S * S;
    for (int y = 0; y < S; y++) {
        const uint8_t *row = px + (size_t)y * S * 4;
        float *o0 = out + (size_t)y * S, *o1 = o0 + plane, *o2 = o1 + plane;
        for (int x = 0; x < S; x++) {
            const uint8_t *q = row + 4 * (flip ? S - 1 - x : x);
            o0[x] = lut[0][q[0]];
            o1[x] = lut[1][q[1]];
            o2[x] = lut[2][q[2]];
        }
    }
}

/* Decodes and transforms one image into out (3 x S x S floats, normalised by lut). */
int img_transform(img_ctx *c, const so_image_source *s, const uint8_t *buf, size_t len, const char *what,
                  int train, uint64_t seed, int epoch, int sample, int dct, const float (*lut)[256], float *out)
{
    int S = s->image_size, w = 0, h = 0, rc;
    if (is_png(buf, len))
        return so_err(SO_EFORMAT, "%s: PNG images are not supported by this build", what);
    if (!is_jpeg(buf, len))
        return so_err(SO_EFORMAT, "%s: not a JPEG image (%s)", what, len < 3 ? "too short" : "bad magic");
    if ((rc = jpeg_header(c, buf, len, what, &w, &h)))
        return rc;
    plan p;
    plan_sample(s, train, seed, epoch, sample, w, h, &p);
    /* The region of the full image the output needs and what it becomes. */
    int cw = train ? p.crop[3] : w, ch = train ? p.crop[2] : h;
    int ow = train ? S : p.new_w, oh = train ? S : p.new_h;
    int num = 1, den = 1;
    if (dct == SO_DCT_ALL || (dct == SO_DCT_TRAIN && train))
        pick_scale(cw, ch, ow, oh, &num, &den);
    int sw = (w * num + den - 1) / den, sh = (h * num + den - 1) / den;
    if ((rc = jpeg_decode(c, buf, len, what, sw, sh)))
        return rc;
    resample_job j;
    if (train) {
        crop_job(&p, num, den, sw, sh, S, &j);
    } else { /* CenterCrop: offsets int(round((new - S) / 2)) */
        int ox = pyround((p.new_w - S) / 2.0), oy = pyround((p.new_h - S) / 2.0);
        j = (resample_job){0, 0, sw, sh, 0, 0, sw, sh, p.new_w, p.new_h, ox, oy};
        if (ox < 0 || oy < 0)
            return so_err(SO_EINVAL, "%s: resize %d is smaller than the %d-pixel crop", what, s->resize, S);
    }
    if (grow((void **)&c->out, &c->out_cap, (size_t)S * S * 4) || resample(c, c->rgb, (size_t)sw * 4, &j, S, c->out))
        return so_err(SO_ENOMEM, "%s: out of memory resampling", what);
    to_tensor(c->out, S, p.flip, lut, out);
    return 0;
}

void img_build_lut(const float mean[3], const float std[3], float lut[3][256])
{
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++)
            lut[c][v] = ((float)v / 255.0f - mean[c]) / std[c];
}
