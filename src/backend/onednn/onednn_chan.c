/* Per-channel loops over a 4-D activation in whatever layout oneDNN chose
 * (plain NCHW/NHWC or channel-blocked nChw8c/nChw16c): the statistics and the
 * correction term of synchronised batchnorm, which oneDNN has no primitive for. */
#include "backend/onednn/onednn_internal.h"
#include "scaleout/err.h"

typedef struct {
    int64_t st[4];  /* outer strides of n, c-block, h, w (elements) */
    int blk;        /* channels per inner block (1 = no blocking) */
    int64_t c, h, w;
} chan_layout;

static int layout_of(const dnnl_memory_desc_t *md, chan_layout *l)
{
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    if (md->ndims != 4 || md->format_kind != dnnl_blocked || b->inner_nblks > 1 ||
        (b->inner_nblks == 1 && (b->inner_idxs[0] != 1 || b->inner_blks[0] > 16)))
        return so_err(SO_EUNSUP, "synchronised batchnorm: unsupported activation layout");
    for (int i = 0; i < 4; i++)
        l->st[i] = b->strides[i];
    l->blk = b->inner_nblks ? (int)b->inner_blks[0] : 1;
    l->c = md->dims[1];
    l->h = md->dims[2];
    l->w = md->dims[3];
    return 0;
}

/* Sums of (x - shift[c]) into s1[c] and of its square into s2[c] (unless s2
 * is NULL) over rows [0, n). Channel blocks are independent, so threads split them. */
int od_chan_sums(const dnnl_memory_desc_t *md, const float *x, int n, const float *shift, double *s1, double *s2)
{
    chan_layout l;
    int rc = layout_of(md, &l);
    if (rc)
        return rc;
    int64_t nblk = (l.c + l.blk - 1) / l.blk;
#pragma omp parallel for schedule(static)
    for (int64_t cb = 0; cb < nblk; cb++) {
        int w = (int)(l.c - cb * l.blk < l.blk ? l.c - cb * l.blk : l.blk);
        /* blk <= 16 in every layout oneDNN picks for activations */
        double a[16] = {0}, q[16] = {0};
        for (int s = 0; s < n; s++)
            for (int64_t h = 0; h < l.h; h++)
                for (int64_t ww = 0; ww < l.w; ww++) {
                    const float *p = x + s * l.st[0] + cb * l.st[1] + h * l.st[2] + ww * l.st[3];
                    for (int j = 0; j < w; j++) {
                        double d = (double)p[j] - shift[cb * l.blk + j];
                        a[j] += d;
                        q[j] += d * d;
                    }
                }
        for (int j = 0; j < w; j++) {
            s1[cb * l.blk + j] = a[j];
            if (s2)
                s2[cb * l.blk + j] = q[j];
        }
    }
    return 0;
}

/* y += a[c] + b[c] * x over rows [0, n); x and y share the layout md. */
int od_chan_axpb(const dnnl_memory_desc_t *md, const float *x, float *y, int n, const float *a, const float *b)
{
    chan_layout l;
    int rc = layout_of(md, &l);
    if (rc)
        return rc;
    int64_t nblk = (l.c + l.blk - 1) / l.blk;
#pragma omp parallel for schedule(static)
    for (int64_t cb = 0; cb < nblk; cb++) {
        int w = (int)(l.c - cb * l.blk < l.blk ? l.c - cb * l.blk : l.blk);
        const float *ac = a + cb * l.blk, *bc = b + cb * l.blk;
        for (int s = 0; s < n; s++)
            for (int64_t h = 0; h < l.h; h++)
                for (int64_t ww = 0; ww < l.w; ww++) {
                    int64_t off = s * l.st[0] + cb * l.st[1] + h * l.st[2] + ww * l.st[3];
                    for (int j = 0; j < w; j++)
                        y[off + j] += ac[j] + bc[j] * x[off + j];
                }
    }
    return 0;
}
