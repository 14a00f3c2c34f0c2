/* Reference softmax cross-entropy: numerically stable (max subtracted before
 * exp), mean over the n valid samples; padded rows (n < batch, evaluation)
 * get loss 0 and gradient 0. The node's output holds each sample's loss. */
#include <math.h>

#include "ref_internal.h"

/* log sum_k exp(z[k]) of one row z (K), computed as max + log sum exp(z - max). */
static double logsumexp(const float *z, int k)
{
    float mx = z[0];
    for (int c = 1; c < k; c++)
        mx = z[c] > mx ? z[c] : mx;
    double sum = 0.0;
    for (int c = 0; c < k; c++)
        sum += exp((double)z[c] - mx);
    return mx + log(sum);
}

/* logits are (N,K); sets m->loss = mean over rows < n of lse(z) - z[label]. */
int ref_loss_forward(ref_state *s, int i, int training)
{
    (void)training;
    int k = ref_in_shape(s, i, 0).c;
    const float *z = ref_in(s, i, 0);
    double sum = 0.0;
    for (int n = 0; n < s->batch; n++) {
        const float *row = z + (size_t)n * k;
        double l = n < s->n ? logsumexp(row, k) - row[s->labels[n]] : 0.0;
        s->act[i][n] = (float)l;
        sum += l;
    }
    s->m->loss = (float)(sum / s->n);
    return 0;
}

/* d loss / d z = (softmax(z) - onehot(label)) / n for valid rows, 0 otherwise. */
int ref_loss_backward(ref_state *s, int i)
{
    float *dz = ref_dx(s, i, 0);
    if (!dz)
        return 0;
    int k = ref_in_shape(s, i, 0).c;
    const float *z = ref_in(s, i, 0);
    for (int n = 0; n < s->n; n++) {
        const float *row = z + (size_t)n * k;
        float *drow = dz + (size_t)n * k;
        double lse = logsumexp(row, k);
        for (int c = 0; c < k; c++)
            drow[c] += (float)((exp(row[c] - lse) - (c == s->labels[n])) / s->n);
    }
    return 0;
}
