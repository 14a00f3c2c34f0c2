/* AVX2+FMA instance of the direct convolution (onednn_dconv_body.h): 8-lane
 * vectors and, for 16 ymm registers, 6 output channels x 2 vectors of forward
 * accumulators (one block for LeNet's 6 channels) and 3 x 4 weight-gradient
 * ones. Runs only where od_dconv_op() picked it; built for AVX2+FMA. */
#include <immintrin.h>

#include "core/isa_target.h"

SO_ISA_BEGIN(SO_TARGET_AVX2)

typedef __m256 vf;
#define VL 8
#define OB 6 /* output channels per forward register block: 12 accumulators */
#define GO 3 /* output channels per weight-gradient register block */
#define GT 4 /* taps per weight-gradient register block: 12 accumulators */
#define DC_OP od_op_dconv_avx2

static inline vf v_zero(void) { return _mm256_setzero_ps(); }
static inline vf v_set1(float x) { return _mm256_set1_ps(x); }
static inline vf v_load(const float *p) { return _mm256_load_ps(p); }
static inline vf v_loadu(const float *p) { return _mm256_loadu_ps(p); }
static inline void v_store(float *p, vf v) { _mm256_store_ps(p, v); }
static inline void v_storeu(float *p, vf v) { _mm256_storeu_ps(p, v); }
static inline vf v_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf v_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline float v_sum(vf v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

#include "backend/onednn/onednn_dconv_body.h"

SO_ISA_END
