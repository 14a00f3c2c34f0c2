/* AVX-512 instance of scaleout's GEMM (onednn_gemm_body.h): a 12 x 32 tile
 * (24 of the 32 zmm registers accumulate), the blocks as the AVX2 one's. */
#include <immintrin.h>

#include "core/isa_target.h"

SO_ISA_BEGIN(SO_TARGET_AVX512)

typedef __m512 vf;
#define VL 16
#define MR 12
#define KC 256
#define MC 120
#define NC 4096
#define GEMM_TABLE od_gemm_avx512
#define GEMM_LABEL "scaleout:avx512"

static inline vf v_zero(void) { return _mm512_setzero_ps(); }
static inline vf v_set1(float x) { return _mm512_set1_ps(x); }
static inline vf v_load(const float *p) { return _mm512_load_ps(p); }
static inline vf v_loadu(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_storeu(float *p, vf v) { _mm512_storeu_ps(p, v); }
static inline vf v_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf v_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }

#include "backend/onednn/onednn_gemm_tr8.h"
#include "backend/onednn/onednn_gemm_body.h"

SO_ISA_END
