/* The sequence kernels of onednn_seq.h, written once over the vector
 * operations of one ISA: included by onednn_seq_avx512.c, onednn_seq_avx2.c
 * and onednn_seq_scalar.c after they define vf, VL, the v_*() operations
 * (v_fma(a, b, c) = a b + c, v_hsum / v_hmax across lanes, v_exp) and
 * SEQ_TABLE / SEQ_LABEL (the instance's name). Every kernel runs on one
 * thread; onednn_seq.c splits the work. Loops over C take VL floats at a
 * time and finish the row's tail one float at a time.
 * No include guard: each instance file includes it once. */
#include <math.h>
#include <string.h>

#include "backend/onednn/onednn_seq.h"

#define BR OD_ATT_BR   /* query rows per block */
#define BC (2 * VL)    /* keys per block: two vectors of scores per row */

/* ---- embedding ---- */

static void embed_fwd(const float *tok, const float *wte, const float *wpe, float *y, size_t r0, size_t r1, int T,
                      int C)
{
    for (size_t r = r0; r < r1; r++) {
        const float *e = wte + (size_t)tok[r] * C, *p = wpe + (r % (size_t)T) * C;
        float *o = y + r * C;
        int c = 0;
        for (; c + VL <= C; c += VL)
            v_storeu(o + c, v_add(v_loadu(e + c), v_loadu(p + c)));
        for (; c < C; c++)
            o[c] = e[c] + p[c];
    }
}

/* Repeated tokens add into the same row, so threads split the columns. */
static void embed_bwd(const float *tok, const float *dy, float *dwte, float *dwpe, size_t rows, int T, int C, int c0,
                      int c1)
{
    for (size_t r = 0; r < rows; r++) {
        const float *d = dy + r * C;
        float *e = dwte + (size_t)tok[r] * C, *p = dwpe + (r % (size_t)T) * C;
        int c = c0;
        for (; c + VL <= c1; c += VL) {
            vf g = v_loadu(d + c);
            v_storeu(e + c, v_add(v_loadu(e + c), g));
            v_storeu(p + c, v_add(v_loadu(p + c), g));
        }
        for (; c < c1; c++) {
            e[c] += d[c];
            p[c] += d[c];
        }
    }
}

/* ---- LayerNorm ---- */

static float row_sum(const float *x, int C)
{
    vf a0 = v_zero(), a1 = v_zero();
    int c = 0;
    for (; c + 2 * VL <= C; c += 2 * VL) {
        a0 = v_add(a0, v_loadu(x + c));
        a1 = v_add(a1, v_loadu(x + c + VL));
    }
    for (; c + VL <= C; c += VL)
        a0 = v_add(a0, v_loadu(x + c));
    float s = v_hsum(v_add(a0, a1));
    for (; c < C; c++)
        s += x[c];
    return s;
}

/* sum (x - m)^2: the second pass of a two-pass variance (the row is in L1). */
static float row_var_sum(const float *x, int C, float m)
{
    vf a0 = v_zero(), a1 = v_zero(), vm = v_set1(m);
    int c = 0;
    for (; c + 2 * VL <= C; c += 2 * VL) {
        vf d0 = v_sub(v_loadu(x + c), vm), d1 = v_sub(v_loadu(x + c + VL), vm);
        a0 = v_fma(d0, d0, a0);
        a1 = v_fma(d1, d1, a1);
    }
    for (; c + VL <= C; c += VL) {
        vf d0 = v_sub(v_loadu(x + c), vm);
        a0 = v_fma(d0, d0, a0);
    }
    float s = v_hsum(v_add(a0, a1));
    for (; c < C; c++)
        s += (x[c] - m) * (x[c] - m);
    return s;
}

static void ln_fwd(const float *x, const float *w, const float *b, float *y, float *stats, size_t r0, size_t r1, int C,
                   float eps)
{
    for (size_t r = r0; r < r1; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        float mean = row_sum(xr, C) / (float)C;
        float rstd = 1.0f / sqrtf(row_var_sum(xr, C, mean) / (float)C + eps);
        vf vm = v_set1(mean), vs = v_set1(rstd);
        int c = 0;
        for (; c + VL <= C; c += VL) {
            vf n = v_mul(v_sub(v_loadu(xr + c), vm), vs);
            v_storeu(yr + c, v_fma(n, v_loadu(w + c), v_loadu(b + c)));
        }
        for (; c < C; c++)
            yr[c] = (xr[c] - mean) * rstd * w[c] + b[c];
        stats[2 * r] = mean;
        stats[2 * r + 1] = rstd;
    }
}

/* With n = (x - mean) rstd and g = dy w: dx = rstd (g - mean(g) - n mean(g n)),
 * dw += dy n, db += dy. Pass 1 takes the two means and the parameter sums,
 * pass 2 writes dx. */
static void ln_bwd(const float *x, const float *w, const float *stats, const float *dy, float *dx, int add, float *dw,
                   float *db, size_t r0, size_t r1, int C)
{
    for (size_t r = r0; r < r1; r++) {
        const float *xr = x + r * C, *dr = dy + r * C;
        float *o = dx ? dx + r * C : NULL;
        float mean = stats[2 * r], rstd = stats[2 * r + 1];
        vf vm = v_set1(mean), vs = v_set1(rstd), sg = v_zero(), sgn = v_zero();
        int c = 0;
        for (; c + VL <= C; c += VL) {
            vf n = v_mul(v_sub(v_loadu(xr + c), vm), vs), d = v_loadu(dr + c), g = v_mul(d, v_loadu(w + c));
            sg = v_add(sg, g);
            sgn = v_fma(g, n, sgn);
            v_storeu(dw + c, v_fma(d, n, v_loadu(dw + c)));
            v_storeu(db + c, v_add(v_loadu(db + c), d));
        }
        float gm = v_hsum(sg), gnm = v_hsum(sgn);
        for (int t = c; t < C; t++) {
            float n = (xr[t] - mean) * rstd, g = dr[t] * w[t];
            gm += g;
            gnm += g * n;
            dw[t] += dr[t] * n;
            db[t] += dr[t];
        }
        gm /= (float)C;
        gnm /= (float)C;
        if (!o)
            continue;
        vf vgm = v_set1(gm), vgnm = v_set1(gnm);
        for (c = 0; c + VL <= C; c += VL) {
            vf n = v_mul(v_sub(v_loadu(xr + c), vm), vs), g = v_mul(v_loadu(dr + c), v_loadu(w + c));
            vf v = v_mul(vs, v_sub(v_sub(g, vgm), v_mul(n, vgnm)));
            v_storeu(o + c, add ? v_add(v_loadu(o + c), v) : v);
        }
        for (; c < C; c++) {
            float n = (xr[c] - mean) * rstd, v = rstd * (dr[c] * w[c] - gm - n * gnm);
            o[c] = add ? o[c] + v : v;
        }
    }
}

/* ---- GELU: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3) ---- */

#define GELU_K 0.7978845608028654f
#define GELU_A 0.044715f

/* tanh(u) = 1 - 2 / (exp(2u) + 1): exact at both ends (exp saturates to 0 or inf). */
static inline vf v_tanh(vf u)
{
    vf e = v_exp(v_add(u, u));
    return v_sub(v_set1(1.0f), v_div(v_set1(2.0f), v_add(e, v_set1(1.0f))));
}

static inline float s_tanh(float u) { return 1.0f - 2.0f / (expf(2.0f * u) + 1.0f); }

static void gelu_fwd(const float *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + VL <= n; i += VL) {
        vf v = v_loadu(x + i), v3 = v_mul(v_mul(v, v), v);
        vf t = v_tanh(v_mul(v_set1(GELU_K), v_fma(v3, v_set1(GELU_A), v)));
        v_storeu(y + i, v_mul(v_mul(v_set1(0.5f), v), v_add(v_set1(1.0f), t)));
    }
    for (; i < n; i++) {
        float v = x[i], t = s_tanh(GELU_K * (v + GELU_A * v * v * v));
        y[i] = 0.5f * v * (1.0f + t);
    }
}

/* gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) K (1 + 3 A x^2). */
static void gelu_bwd(const float *x, const float *dy, float *dx, size_t n, int add)
{
    size_t i = 0;
    vf half = v_set1(0.5f), one = v_set1(1.0f), k = v_set1(GELU_K), a = v_set1(GELU_A), a3 = v_set1(3.0f * GELU_A);
    for (; i + VL <= n; i += VL) {
        vf v = v_loadu(x + i), v2 = v_mul(v, v);
        vf t = v_tanh(v_mul(k, v_fma(v_mul(v2, v), a, v)));
        vf sech2 = v_sub(one, v_mul(t, t));
        vf d = v_fma(v_mul(v_mul(half, v), v_mul(sech2, k)), v_fma(a3, v2, one), v_mul(half, v_add(one, t)));
        vf g = v_mul(v_loadu(dy + i), d);
        v_storeu(dx + i, add ? v_add(v_loadu(dx + i), g) : g);
    }
    for (; i < n; i++) {
        float v = x[i], t = s_tanh(GELU_K * (v + GELU_A * v * v * v));
        float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_A * v * v);
        dx[i] = add ? dx[i] + dy[i] * d : dy[i] * d;
    }
}

static void col_sums(const float *x, size_t r0, size_t r1, int n, float *acc)
{
    for (size_t r = r0; r < r1; r++) {
        const float *xr = x + r * n;
        int c = 0;
        for (; c + VL <= n; c += VL)
            v_storeu(acc + c, v_add(v_loadu(acc + c), v_loadu(xr + c)));
        for (; c < n; c++)
            acc[c] += xr[c];
    }
}

/* ---- causal attention, one (sample, head) at a time ----
 * Keys are transposed into Kt (hs x Tp, Tp = T rounded up to BC, zero
 * padded) so a block of scores S (BR x BC) = Q_rows Kt[:, j0..j0+BC) is
 * BR x 2 vector accumulators fed by broadcasts of q. Forward keeps, per
 * row, the running max m, the running sum l and the unnormalised output
 * O, rescaled by exp(m_old - m_new) as each key block arrives (online
 * softmax): memory is O(T) per block of rows, never T x T. */

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

/* rows [0, T) of a (T, hs) slice with row stride `stride` into (hs, Tp). */
static void transpose_head(const float *src, size_t stride, int T, int Tp, int hs, float *dst)
{
    for (int d = 0; d < hs; d++) {
        float *row = dst + (size_t)d * Tp;
        for (int j = 0; j < T; j++)
            row[j] = src[(size_t)j * stride + d];
        for (int j = T; j < Tp; j++)
            row[j] = 0.0f;
    }
}

/* S[r][c] = scale sum_d q_r[d] Kt[d][j0 + c] for r < BR, c < BC; rows past
 * br repeat the last valid row (their results are not used). */
static void qk_block(const float *q, size_t stride, int br, const float *Kt, int Tp, int j0, int hs, float scale,
                     float *S)
{
    const float *qr[BR];
    for (int r = 0; r < BR; r++)
        qr[r] = q + (size_t)(r < br ? r : br - 1) * stride;
    vf a[BR][2];
    for (int r = 0; r < BR; r++)
        a[r][0] = a[r][1] = v_zero();
    const float *kt = Kt + j0;
    for (int d = 0; d < hs; d++, kt += Tp) {
        vf k0 = v_loadu(kt), k1 = v_loadu(kt + VL);
        for (int r = 0; r < BR; r++) {
            vf qv = v_set1(qr[r][d]);
            a[r][0] = v_fma(qv, k0, a[r][0]);
            a[r][1] = v_fma(qv, k1, a[r][1]);
        }
    }
    vf s = v_set1(scale);
    for (int r = 0; r < BR; r++) {
        v_storeu(S + r * BC, v_mul(a[r][0], s));
        v_storeu(S + r * BC + VL, v_mul(a[r][1], s));
    }
}

/* out[r][0..hs) = init[r] + sum_{c < nc} P[r][c] rows[c][0..hs) for r < BR,
 * where rows[c] = base + c * stride; two vector columns of all BR rows at
 * a time (8 independent chains). init NULL: zero; out may equal init. */
static void pv_block(const float *P, int nc, const float *base, size_t stride, int hs, const float *init, float *out)
{
    for (int d = 0; d < hs; d += 2 * VL) {
        int two = d + VL < hs;
        vf a[BR][2];
        for (int r = 0; r < BR; r++) {
            a[r][0] = init ? v_loadu(init + r * hs + d) : v_zero();
            a[r][1] = init && two ? v_loadu(init + r * hs + d + VL) : v_zero();
        }
        for (int c = 0; c < nc; c++) {
            const float *row = base + (size_t)c * stride + d;
            vf v0 = v_loadu(row), v1 = two ? v_loadu(row + VL) : v_zero();
            for (int r = 0; r < BR; r++) {
                vf p = v_set1(P[r * BC + c]);
                a[r][0] = v_fma(p, v0, a[r][0]);
                a[r][1] = v_fma(p, v1, a[r][1]);
            }
        }
        for (int r = 0; r < BR; r++) {
            v_storeu(out + r * hs + d, a[r][0]);
            if (two)
                v_storeu(out + r * hs + d + VL, a[r][1]);
        }
    }
}

/* Exact exp for the few scalars (rescale factors, masked rows). */
static inline float s_exp(float x) { return expf(x); }

/* P[r][c] = exp(S[r][c] - m) in place for the valid keys of row r, 0 beyond;
 * returns their sum. */
static float exp_row(float *S, int valid, float m)
{
    vf vm = v_set1(m), acc = v_zero();
    int c = 0;
    for (; c + VL <= valid; c += VL) {
        vf p = v_exp(v_sub(v_loadu(S + c), vm));
        v_storeu(S + c, p);
        acc = v_add(acc, p);
    }
    float s = v_hsum(acc);
    for (; c < valid; c++) {
        S[c] = s_exp(S[c] - m);
        s += S[c];
    }
    for (; c < BC; c++)
        S[c] = 0.0f;
    return s;
}

static float max_of(const float *x, int n)
{
    float m = x[0];
    for (int c = 1; c < n; c++)
        m = x[c] > m ? x[c] : m;
    return m;
}

static void attn_fwd(const od_attn_args *a, int b, int h, float *scratch)
{
    int T = a->T, hs = a->hs, Tp = round_up(T, BC);
    size_t stride = 3 * (size_t)a->C;
    const float *base = a->qkv + (size_t)b * T * stride;
    const float *q = base + (size_t)h * hs, *k = q + a->C, *v = k + a->C;
    float *Kt = scratch, *O = Kt + (size_t)hs * Tp, *S = O + BR * hs, *m = S + BR * BC, *l = m + BR;
    float *lse = a->lse + ((size_t)b * a->H + h) * T;
    transpose_head(k, stride, T, Tp, hs, Kt);
    for (int i0 = 0; i0 < T; i0 += BR) {
        int br = T - i0 < BR ? T - i0 : BR, last = i0 + br - 1;
        for (int r = 0; r < BR; r++) {
            m[r] = -INFINITY;
            l[r] = 0.0f;
        }
        memset(O, 0, (size_t)BR * hs * sizeof *O);
        for (int j0 = 0; j0 <= last; j0 += BC) {
            int nc = last - j0 + 1 < BC ? last - j0 + 1 : BC;
            qk_block(q + (size_t)i0 * stride, stride, br, Kt, Tp, j0, hs, a->scale, S);
            for (int r = 0; r < BR; r++) {
                float *Sr = S + r * BC, alpha = 1.0f;
                int valid = r < br ? i0 + r - j0 + 1 : 0; /* keys j <= i */
                valid = valid > nc ? nc : valid;
                if (valid > 0) {
                    float mnew = fmaxf(m[r], max_of(Sr, valid));
                    alpha = s_exp(m[r] - mnew);
                    l[r] = l[r] * alpha + exp_row(Sr, valid, mnew);
                    m[r] = mnew;
                } else
                    exp_row(Sr, 0, 0.0f);
                for (int d = 0; d < hs; d++) /* rescale the running output (a row is in L1) */
                    O[r * hs + d] *= alpha;
            }
            pv_block(S, nc, v + (size_t)j0 * stride, stride, hs, O, O);
        }
        for (int r = 0; r < br; r++) {
            float inv = 1.0f / l[r];
            float *y = a->y + ((size_t)b * T + i0 + r) * a->C + (size_t)h * hs;
            for (int d = 0; d < hs; d++)
                y[d] = O[r * hs + d] * inv;
            lse[i0 + r] = m[r] + logf(l[r]);
        }
    }
}

/* Backward (FlashAttention-2's recomputation): per block of query rows and
 * key block, P = exp(S - lse), dP = dO V^T, dS = P (dP - D) with
 * D_i = dO_i . O_i; then dV += P^T dO, dK += scale dS^T Q, dQ += scale dS K.
 * dK and dV accumulate in dqkv across query blocks (this head's columns of
 * this sample: no other task touches them). */
static void attn_bwd(const od_attn_args *a, int b, int h, float *scratch)
{
    int T = a->T, hs = a->hs, Tp = round_up(T, BC);
    size_t stride = 3 * (size_t)a->C, ys = (size_t)a->C;
    const float *base = a->qkv + (size_t)b * T * stride;
    const float *q = base + (size_t)h * hs, *k = q + a->C, *v = k + a->C;
    const float *y = a->y + (size_t)b * T * ys + (size_t)h * hs, *dy = a->dy + (size_t)b * T * ys + (size_t)h * hs;
    float *dq = a->dqkv + (size_t)b * T * stride + (size_t)h * hs, *dk = dq + a->C, *dv = dk + a->C;
    const float *lse = a->lse + ((size_t)b * a->H + h) * T;
    float *Kt = scratch, *Vt = Kt + (size_t)hs * Tp, *D = Vt + (size_t)hs * Tp, *P = D + Tp, *dS = P + BR * BC;
    float *dQ = dS + BR * BC;
    transpose_head(k, stride, T, Tp, hs, Kt);
    transpose_head(v, stride, T, Tp, hs, Vt);
    for (int i = 0; i < T; i++) {
        float s = 0.0f;
        for (int d = 0; d < hs; d++)
            s += dy[(size_t)i * ys + d] * y[(size_t)i * ys + d];
        D[i] = s;
        memset(dq + (size_t)i * stride, 0, (size_t)hs * sizeof *dq);
        memset(dk + (size_t)i * stride, 0, (size_t)hs * sizeof *dk);
        memset(dv + (size_t)i * stride, 0, (size_t)hs * sizeof *dv);
    }
    for (int i0 = 0; i0 < T; i0 += BR) {
        int br = T - i0 < BR ? T - i0 : BR, last = i0 + br - 1;
        memset(dQ, 0, (size_t)BR * hs * sizeof *dQ);
        for (int j0 = 0; j0 <= last; j0 += BC) {
            int nc = last - j0 + 1 < BC ? last - j0 + 1 : BC;
            qk_block(q + (size_t)i0 * stride, stride, br, Kt, Tp, j0, hs, a->scale, P);
            qk_block(dy + (size_t)i0 * ys, ys, br, Vt, Tp, j0, hs, 1.0f, dS); /* dP */
            for (int r = 0; r < BR; r++) {
                int valid = r < br ? i0 + r - j0 + 1 : 0;
                valid = valid > nc ? nc : valid;
                float *Pr = P + r * BC, *dSr = dS + r * BC, li = valid > 0 ? lse[i0 + r] : 0.0f;
                exp_row(Pr, valid > 0 ? valid : 0, li);
                float Di = valid > 0 ? D[i0 + r] : 0.0f;
                for (int c = 0; c < BC; c++)
                    dSr[c] = Pr[c] * (dSr[c] - Di) * a->scale;
            }
            /* dV[j] += sum_r P[r][j] dO[r], dK[j] += sum_r dS[r][j] Q[r] */
            for (int c = 0; c < nc; c++) {
                float *dvj = dv + (size_t)(j0 + c) * stride, *dkj = dk + (size_t)(j0 + c) * stride;
                for (int d = 0; d < hs; d += VL) {
                    vf av = v_loadu(dvj + d), ak = v_loadu(dkj + d);
                    for (int r = 0; r < br; r++) {
                        av = v_fma(v_set1(P[r * BC + c]), v_loadu(dy + (size_t)(i0 + r) * ys + d), av);
                        ak = v_fma(v_set1(dS[r * BC + c]), v_loadu(q + (size_t)(i0 + r) * stride + d), ak);
                    }
                    v_storeu(dvj + d, av);
                    v_storeu(dkj + d, ak);
                }
            }
            pv_block(dS, nc, k + (size_t)j0 * stride, stride, hs, dQ, dQ); /* dQ += dS K */
        }
        for (int r = 0; r < br; r++) {
            float *dqi = dq + (size_t)(i0 + r) * stride;
            for (int d = 0; d < hs; d++)
                dqi[d] += dQ[r * hs + d];
        }
    }
}

/* One query against the cached keys and values of positions 0..n-1. */
static void attn_decode(const float *q, const float *k, const float *v, size_t stride, int n, int hs, float scale,
                        float *scores, float *out)
{
    float mx = -INFINITY, sum = 0.0f;
    for (int t = 0; t < n; t++) {
        const float *kt = k + (size_t)t * stride;
        vf acc = v_zero();
        int d = 0;
        for (; d + VL <= hs; d += VL)
            acc = v_fma(v_loadu(q + d), v_loadu(kt + d), acc);
        float dot = v_hsum(acc);
        for (; d < hs; d++)
            dot += q[d] * kt[d];
        scores[t] = dot * scale;
        mx = scores[t] > mx ? scores[t] : mx;
    }
    for (int t = 0; t < n; t++)
        sum += (scores[t] = s_exp(scores[t] - mx));
    for (int d = 0; d < hs; d++)
        out[d] = 0.0f;
    for (int t = 0; t < n; t++) {
        const float *vt = v + (size_t)t * stride;
        vf p = v_set1(scores[t] / sum);
        int d = 0;
        for (; d + VL <= hs; d += VL)
            v_storeu(out + d, v_fma(p, v_loadu(vt + d), v_loadu(out + d)));
        for (; d < hs; d++)
            out[d] += scores[t] / sum * vt[d];
    }
}

/* ---- softmax cross-entropy over the vocabulary ---- */

static float xent_lse(const float *z, int V)
{
    vf mx = v_set1(-INFINITY);
    int c = 0;
    for (; c + VL <= V; c += VL)
        mx = v_max(mx, v_loadu(z + c));
    float m = v_hmax(mx);
    for (; c < V; c++)
        m = z[c] > m ? z[c] : m;
    vf vm = v_set1(m), a0 = v_zero(), a1 = v_zero();
    for (c = 0; c + 2 * VL <= V; c += 2 * VL) {
        a0 = v_add(a0, v_exp(v_sub(v_loadu(z + c), vm)));
        a1 = v_add(a1, v_exp(v_sub(v_loadu(z + c + VL), vm)));
    }
    for (; c + VL <= V; c += VL)
        a0 = v_add(a0, v_exp(v_sub(v_loadu(z + c), vm)));
    float s = v_hsum(v_add(a0, a1));
    for (; c < V; c++)
        s += expf(z[c] - m);
    return m + logf(s);
}

static void xent_grad(float *z, int V, int Vp, float lse, int y, float scale)
{
    vf vl = v_set1(lse), vs = v_set1(scale);
    int c = 0;
    for (; c + VL <= V; c += VL)
        v_storeu(z + c, v_mul(v_exp(v_sub(v_loadu(z + c), vl)), vs));
    for (; c < V; c++)
        z[c] = expf(z[c] - lse) * scale;
    z[y] -= scale;
    for (c = V; c < Vp; c++)
        z[c] = 0.0f;
}

const od_seq_kernels SEQ_TABLE = {
    .name = SEQ_LABEL,
    .vl = VL,
    .embed_fwd = embed_fwd,
    .embed_bwd = embed_bwd,
    .ln_fwd = ln_fwd,
    .ln_bwd = ln_bwd,
    .gelu_fwd = gelu_fwd,
    .gelu_bwd = gelu_bwd,
    .col_sums = col_sums,
    .attn_fwd = attn_fwd,
    .attn_bwd = attn_bwd,
    .attn_decode = attn_decode,
    .xent_lse = xent_lse,
    .xent_grad = xent_grad,
};
