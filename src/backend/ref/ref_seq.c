/* Reference kernels of the sequence ops (GPT-2): token + position embedding,
 * LayerNorm, Linear on the last dimension (weight tying included), causal
 * multi-head self-attention, GELU (tanh form) and the per-token softmax
 * cross-entropy. A sequence is (1, T, C) per sample, so every buffer here is
 * (batch, T, C) row-major. Plain loops with double accumulators: the
 * ground truth the oneDNN backend's fused kernels are tested against. */
#include <math.h>

#include "ref_internal.h"
#include "scaleout/err.h"
#include "scaleout/mem.h"

/* Rows of node i's input: every position of every sample, (batch * c * h). */
static size_t in_rows(const ref_state *s, int i)
{
    so_shape in = ref_in_shape(s, i, 0);
    return (size_t)s->batch * (size_t)in.c * (size_t)in.h;
}

/* ---- embedding: out[b,t,:] = wte[token[b,t]] + wpe[t] ---- */

int ref_embed_forward(ref_state *s, int i, int training)
{
    (void)training;
    const so_node *nd = ref_node(s, i);
    int T = nd->out.h, C = nd->out.w;
    size_t pos0 = s->m->decode_pos > 0 ? (size_t)s->m->decode_pos : 0; /* so_model_decode's position */
    const float *tok = ref_in(s, i, 0), *wte = ref_params(s, i), *wpe = wte + (size_t)nd->a.vocab * C;
    for (size_t r = 0; r < (size_t)s->batch * T; r++) {
        const float *e = wte + (size_t)tok[r] * C, *p = wpe + (pos0 + r % (size_t)T) * C;
        float *y = s->act[i] + r * C;
        for (int c = 0; c < C; c++)
            y[c] = e[c] + p[c];
    }
    return 0;
}

/* dwte[token] += dy, dwpe[t] += dy over the valid samples (padded samples
 * hold token 0 and a zero diff). The token table's gradient already holds
 * the tied LM head's part when one exists, so it is only ever added to. */
int ref_embed_backward(ref_state *s, int i)
{
    const so_node *nd = ref_node(s, i);
    int T = nd->out.h, C = nd->out.w;
    size_t ntab = (size_t)nd->a.vocab * C;
    float *dwte = so_model_grads_at(s->m, nd->param_off), *dwpe = dwte + ntab;
    if (!s->m->accumulate_grads) {
        memset(dwpe, 0, (size_t)nd->a.ctx * C * sizeof *dwpe);
        if (!so_graph_tied_by(s->g, i))
            memset(dwte, 0, ntab * sizeof *dwte);
    }
    const float *tok = ref_in(s, i, 0), *dy = s->diff[i];
    for (size_t r = 0; r < (size_t)s->n * T; r++) {
        float *e = dwte + (size_t)tok[r] * C, *p = dwpe + (r % (size_t)T) * C;
        for (int c = 0; c < C; c++) {
            e[c] += dy[r * C + c];
            p[c] += dy[r * C + c];
        }
    }
    return 0;
}

/* ---- LayerNorm over the last dimension; aux keeps (mean, rstd) per row ---- */

int ref_layernorm_forward(ref_state *s, int i, int training)
{
    (void)training;
    int C = ref_node(s, i)->out.w;
    size_t rows = in_rows(s, i);
    const float *x = ref_in(s, i, 0), *w = ref_params(s, i), *b = w + C;
    float *stats = s->aux[i];
#pragma omp parallel for schedule(static) if ((double)rows * C > REF_PAR_WORK)
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        double sum = 0, sq = 0;
        for (int c = 0; c < C; c++)
            sum += xr[c];
        double mean = sum / C;
        for (int c = 0; c < C; c++)
            sq += (xr[c] - mean) * (xr[c] - mean);
        double rstd = 1.0 / sqrt(sq / C + ref_node(s, i)->a.eps);
        for (int c = 0; c < C; c++)
            s->act[i][r * C + c] = (float)((xr[c] - mean) * rstd * w[c] + b[c]);
        stats[2 * r] = (float)mean;
        stats[2 * r + 1] = (float)rstd;
    }
    return 0;
}

/* With n = (x - mean) rstd and g = dy * w: dx = rstd (g - mean(g) - n mean(g n)),
 * dw += dy n, db += dy. */
int ref_layernorm_backward(ref_state *s, int i)
{
    int C = ref_node(s, i)->out.w;
    size_t rows = in_rows(s, i);
    const float *x = ref_in(s, i, 0), *w = ref_params(s, i), *dy = s->diff[i], *stats = s->aux[i];
    float *dw = ref_dw(s, i), *db = dw + C, *dx = ref_dx(s, i, 0);
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * C, *dyr = dy + r * C;
        double mean = stats[2 * r], rstd = stats[2 * r + 1], gm = 0, gnm = 0;
        for (int c = 0; c < C; c++) {
            double n = (xr[c] - mean) * rstd, g = (double)dyr[c] * w[c];
            gm += g;
            gnm += g * n;
            dw[c] += (float)(dyr[c] * n);
            db[c] += dyr[c];
        }
        gm /= C;
        gnm /= C;
        for (int c = 0; dx && c < C; c++) {
            double n = (xr[c] - mean) * rstd, g = (double)dyr[c] * w[c];
            dx[r * C + c] += (float)(rstd * (g - gm - n * gnm));
        }
    }
    return 0;
}

/* ---- Linear on the last dimension: y = x W^T + b, W (out, in) ---- */

/* The weight: the node's own, or the tied embedding's token table. */
static size_t linear_weight_off(const ref_state *s, int i)
{
    const so_node *nd = ref_node(s, i);
    return nd->a.tie ? ref_node(s, nd->a.tie)->param_off : nd->param_off;
}

int ref_linear_forward(ref_state *s, int i, int training)
{
    (void)training;
    const so_node *nd = ref_node(s, i);
    int in = ref_in_shape(s, i, 0).w, out = nd->a.out;
    size_t rows = in_rows(s, i);
    const float *x = ref_in(s, i, 0), *w = so_model_params_at(s->m, linear_weight_off(s, i));
    const float *b = nd->a.bias ? so_model_params_at(s->m, nd->param_off) + (nd->a.tie ? 0 : (size_t)out * in) : NULL;
#pragma omp parallel for schedule(static) if ((double)rows * out * in > REF_PAR_WORK)
    for (size_t r = 0; r < rows; r++)
        for (int o = 0; o < out; o++) {
            double sum = b ? b[o] : 0.0;
            for (int k = 0; k < in; k++)
                sum += (double)x[r * in + k] * w[(size_t)o * in + k];
            s->act[i][r * out + o] = (float)sum;
        }
    return 0;
}

/* dx += dy W; dW += dy^T x (into the tied table when tied: the LM head runs
 * before the embedding in backward, so it writes first); db += sum dy. */
int ref_linear_backward(ref_state *s, int i)
{
    const so_node *nd = ref_node(s, i);
    int in = ref_in_shape(s, i, 0).w, out = nd->a.out;
    size_t rows = in_rows(s, i), woff = linear_weight_off(s, i);
    const float *x = ref_in(s, i, 0), *dy = s->diff[i], *w = so_model_params_at(s->m, woff);
    float *own = ref_dw(s, i), *dw = so_model_grads_at(s->m, woff);
    float *db = nd->a.bias ? own + (nd->a.tie ? 0 : (size_t)out * in) : NULL;
    if (nd->a.tie && !s->m->accumulate_grads)
        memset(dw, 0, (size_t)out * in * sizeof *dw);
#pragma omp parallel for schedule(static) if ((double)rows * out * in > REF_PAR_WORK)
    for (int o = 0; o < out; o++) {
        double bsum = 0;
        for (int k = 0; k < in; k++) {
            double sum = 0;
            for (size_t r = 0; r < rows; r++)
                sum += (double)dy[r * out + o] * x[r * in + k];
            dw[(size_t)o * in + k] += (float)sum;
        }
        for (size_t r = 0; r < rows; r++)
            bsum += dy[r * out + o];
        if (db)
            db[o] += (float)bsum;
    }
    float *dx = ref_dx(s, i, 0);
#pragma omp parallel for schedule(static) if (dx && (double)rows * out * in > REF_PAR_WORK)
    for (size_t r = 0; r < (dx ? rows : 0); r++)
        for (int k = 0; k < in; k++) {
            double sum = 0;
            for (int o = 0; o < out; o++)
                sum += (double)dy[r * out + o] * w[(size_t)o * in + k];
            dx[r * in + k] += (float)sum;
        }
    return 0;
}

/* ---- causal self-attention ----
 * qkv is (batch, T, 3C): q, k, v side by side, head h in columns
 * [h hs, (h+1) hs) of each. out[b,t] for head h = sum_{j<=t} p_j v_j with
 * p = softmax_j(q_t . k_j / sqrt(hs)). aux holds per (b, h): the row's
 * log-sum-exp for each t (T floats), then a row of scores (T floats). */

typedef struct {
    int T, C, H, hs;
    double scale;
} att_geom;

static att_geom att_geometry(const ref_state *s, int i)
{
    const so_node *nd = ref_node(s, i);
    att_geom a = {nd->out.h, nd->out.w, nd->a.heads, nd->out.w / nd->a.heads, 0};
    a.scale = 1.0 / sqrt((double)a.hs);
    return a;
}

/* Scores of query t against keys 0..t into p (as probabilities), their log-sum-exp returned. */
static double att_row(const att_geom *a, const float *qkv, int h, int t, float *p)
{
    const float *q = qkv + (size_t)t * 3 * a->C + (size_t)h * a->hs;
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j <= t; j++) {
        const float *k = qkv + (size_t)j * 3 * a->C + a->C + (size_t)h * a->hs;
        double d = 0;
        for (int e = 0; e < a->hs; e++)
            d += (double)q[e] * k[e];
        p[j] = (float)(d * a->scale);
        mx = p[j] > mx ? p[j] : mx;
    }
    for (int j = 0; j <= t; j++)
        sum += exp(p[j] - mx);
    double lse = mx + log(sum);
    for (int j = 0; j <= t; j++)
        p[j] = (float)exp(p[j] - lse);
    return lse;
}

/* Decoding (so_model_decode, T = 1): this position's keys and values join
 * the cache, then the query attends over positions 0..pos. */
static int attention_decode(ref_state *s, int i)
{
    att_geom a = att_geometry(s, i);
    int ctx = so_graph_context(s->g), pos = s->m->decode_pos;
    size_t row = 2 * (size_t)a.C, cached = (size_t)s->batch * ctx * row; /* then ctx doubles of scores */
    if (!s->kv[i] && !(s->kv[i] = so_alloc(cached * sizeof(float) + (size_t)ctx * sizeof(double))))
        return so_err(SO_ENOMEM, "ref backend: out of memory for the key/value cache of %s", ref_node(s, i)->name);
    const float *qkv = ref_in(s, i, 0);
    double *sc = (double *)(s->kv[i] + cached);
    for (int b = 0; b < s->batch; b++) {
        float *cache = s->kv[i] + (size_t)b * ctx * row;
        memcpy(cache + (size_t)pos * row, qkv + (size_t)b * 3 * a.C + a.C, row * sizeof(float));
        for (int h = 0; h < a.H; h++) {
            const float *q = qkv + (size_t)b * 3 * a.C + (size_t)h * a.hs;
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j <= pos; j++) {
                double d = 0;
                for (int e = 0; e < a.hs; e++)
                    d += (double)q[e] * cache[(size_t)j * row + (size_t)h * a.hs + e];
                sc[j] = d * a.scale;
                mx = sc[j] > mx ? sc[j] : mx;
            }
            for (int j = 0; j <= pos; j++)
                sum += (sc[j] = exp(sc[j] - mx));
            float *y = s->act[i] + (size_t)b * a.C + (size_t)h * a.hs;
            for (int e = 0; e < a.hs; e++) {
                double v = 0;
                for (int j = 0; j <= pos; j++)
                    v += sc[j] / sum * cache[(size_t)j * row + a.C + (size_t)h * a.hs + e];
                y[e] = (float)v;
            }
        }
    }
    return 0;
}

int ref_attention_forward(ref_state *s, int i, int training)
{
    (void)training;
    if (s->m->decode_pos >= 0)
        return attention_decode(s, i);
    att_geom a = att_geometry(s, i);
    const float *qkv = ref_in(s, i, 0);
#pragma omp parallel for schedule(static) if ((double)s->batch * a.T * a.T * a.C > REF_PAR_WORK)
    for (int bh = 0; bh < s->batch * a.H; bh++) {
        int b = bh / a.H, h = bh % a.H;
        const float *x = qkv + (size_t)b * a.T * 3 * a.C;
        float *lse = s->aux[i] + (size_t)bh * 2 * a.T, *p = lse + a.T;
        for (int t = 0; t < a.T; t++) {
            lse[t] = (float)att_row(&a, x, h, t, p);
            float *y = s->act[i] + ((size_t)b * a.T + t) * a.C + (size_t)h * a.hs;
            for (int e = 0; e < a.hs; e++) {
                double sum = 0;
                for (int j = 0; j <= t; j++)
                    sum += (double)p[j] * x[(size_t)j * 3 * a.C + 2 * a.C + (size_t)h * a.hs + e];
                y[e] = (float)sum;
            }
        }
    }
    return 0;
}

/* Per row t: dp_j = dy_t . v_j, D = sum_j p_j dp_j, ds_j = p_j (dp_j - D);
 * dq_t += scale sum_j ds_j k_j, dk_j += scale ds_j q_t, dv_j += p_j dy_t.
 * Each (b, h) writes its own columns, so they run in parallel. */
int ref_attention_backward(ref_state *s, int i)
{
    float *dqkv = ref_dx(s, i, 0);
    if (!dqkv)
        return 0;
    att_geom a = att_geometry(s, i);
    const float *qkv = ref_in(s, i, 0);
    size_t row = (size_t)3 * a.C;
#pragma omp parallel for schedule(static) if ((double)s->batch * a.T * a.T * a.C > REF_PAR_WORK)
    for (int bh = 0; bh < s->batch * a.H; bh++) {
        int b = bh / a.H, h = bh % a.H;
        const float *x = qkv + (size_t)b * a.T * row;
        float *dx = dqkv + (size_t)b * a.T * row, *p = s->aux[i] + (size_t)bh * 2 * a.T + a.T;
        size_t qo = (size_t)h * a.hs, ko = a.C + qo, vo = 2 * (size_t)a.C + qo;
        for (int t = 0; t < a.T; t++) {
            att_row(&a, x, h, t, p);
            const float *dy = s->diff[i] + ((size_t)b * a.T + t) * a.C + qo;
            double D = 0;
            for (int j = 0; j <= t; j++) {
                double dp = 0;
                for (int e = 0; e < a.hs; e++)
                    dp += (double)dy[e] * x[j * row + vo + e];
                D += p[j] * dp;
            }
            for (int j = 0; j <= t; j++) {
                double dp = 0;
                for (int e = 0; e < a.hs; e++)
                    dp += (double)dy[e] * x[j * row + vo + e];
                double ds = p[j] * (dp - D) * a.scale;
                for (int e = 0; e < a.hs; e++) {
                    dx[t * row + qo + e] += (float)(ds * x[j * row + ko + e]);
                    dx[j * row + ko + e] += (float)(ds * x[t * row + qo + e]);
                    dx[j * row + vo + e] += p[j] * dy[e];
                }
            }
        }
    }
    return 0;
}

/* ---- GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) ---- */

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */

int ref_gelu_forward(ref_state *s, int i, int training)
{
    (void)training;
    const float *x = ref_in(s, i, 0);
    size_t n = (size_t)s->batch * ref_numel(ref_node(s, i)->out);
    for (size_t k = 0; k < n; k++) {
        double v = x[k];
        s->act[i][k] = (float)(0.5 * v * (1.0 + tanh(GELU_K * (v + 0.044715 * v * v * v))));
    }
    return 0;
}

int ref_gelu_backward(ref_state *s, int i)
{
    float *dx = ref_dx(s, i, 0);
    if (!dx)
        return 0;
    const float *x = ref_in(s, i, 0), *dy = s->diff[i];
    size_t n = (size_t)s->batch * ref_numel(ref_node(s, i)->out);
    for (size_t k = 0; k < n; k++) {
        double v = x[k], th = tanh(GELU_K * (v + 0.044715 * v * v * v));
        double d = 0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * GELU_K * (1.0 + 3.0 * 0.044715 * v * v);
        dx[k] += (float)(dy[k] * d);
    }
    return 0;
}

/* ---- softmax cross-entropy per token over the first `vocab` of Vp columns ---- */

/* log sum exp of z[0..k) (max subtracted first). */
static double row_lse(const float *z, int k)
{
    double mx = z[0], sum = 0;
    for (int c = 1; c < k; c++)
        mx = z[c] > mx ? z[c] : mx;
    for (int c = 0; c < k; c++)
        sum += exp(z[c] - mx);
    return mx + log(sum);
}

/* Targets counted: those of the n valid samples that are not -1. */
static size_t counted(const ref_state *s, int T)
{
    size_t k = 0;
    for (size_t r = 0; r < (size_t)s->n * T; r++)
        k += s->labels[r] >= 0;
    return k;
}

/* The node's output holds each sample's mean loss over its counted targets. */
int ref_token_loss_forward(ref_state *s, int i, int training)
{
    (void)training;
    const so_node *nd = ref_node(s, i);
    so_shape lg = ref_in_shape(s, i, 0);
    const float *z = ref_in(s, i, 0);
    double total = 0;
    for (int b = 0; b < s->batch; b++) {
        double sum = 0;
        int k = 0;
        for (int t = 0; b < s->n && t < lg.h; t++) {
            int y = s->labels[(size_t)b * lg.h + t];
            const float *row = z + ((size_t)b * lg.h + t) * lg.w;
            if (y < 0)
                continue;
            sum += row_lse(row, nd->a.vocab) - row[y];
            k++;
        }
        s->act[i][b] = k ? (float)(sum / k) : 0.0f;
        total += sum;
    }
    size_t k = counted(s, lg.h);
    s->m->loss = k ? (float)(total / (double)k) : 0.0f;
    return 0;
}

/* dz = (softmax(z) - onehot(y)) / counted on the first vocab columns of
 * counted rows; 0 on padding columns and on rows not counted. */
int ref_token_loss_backward(ref_state *s, int i)
{
    float *dz = ref_dx(s, i, 0);
    if (!dz)
        return 0;
    const so_node *nd = ref_node(s, i);
    so_shape lg = ref_in_shape(s, i, 0);
    const float *z = ref_in(s, i, 0);
    size_t k = counted(s, lg.h);
    for (size_t r = 0; r < (size_t)s->n * lg.h; r++) {
        int y = s->labels[r];
        if (y < 0)
            continue;
        const float *row = z + r * lg.w;
        double lse = row_lse(row, nd->a.vocab);
        for (int c = 0; c < nd->a.vocab; c++)
            dz[r * lg.w + c] += (float)((exp(row[c] - lse) - (c == y)) / (double)k);
    }
    return 0;
}
