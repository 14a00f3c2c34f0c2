/* AVX-512 instance of the sequence kernels (onednn_seq_body.h): 16-lane
 * vectors, the same exp as the AVX2 instance. Runs only where
 * od_seq_pick() chose it (so_cpu_isa() >= AVX-512). */
#include <immintrin.h>

#include "core/isa_target.h"

SO_ISA_BEGIN(SO_TARGET_AVX512)

typedef __m512 vf;
#define VL 16
#define SEQ_TABLE od_seq_avx512
#define SEQ_LABEL "scaleout:avx512"

static inline vf v_zero(void) { return _mm512_setzero_ps(); }
static inline vf v_set1(float x) { return _mm512_set1_ps(x); }
static inline vf v_loadu(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_storeu(float *p, vf v) { _mm512_storeu_ps(p, v); }
static inline vf v_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf v_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf v_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf v_div(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf v_max(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf v_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline float v_hsum(vf v) { return _mm512_reduce_add_ps(v); }
static inline float v_hmax(vf v) { return _mm512_reduce_max_ps(v); }
static inline vf v_exp(vf x)
{
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.0f));
    vf n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    vf r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    vf p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

#include "backend/onednn/onednn_seq_body.h"

SO_ISA_END
