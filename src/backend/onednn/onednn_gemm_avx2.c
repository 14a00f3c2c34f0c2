/* AVX2+FMA instance of scaleout's GEMM (onednn_gemm_body.h): a 6 x 16 tile
 * (12 of the 16 ymm registers accumulate), KC 256 deep, A blocks of 120
 * rows (120 KB, in L2), B blocks of 4096 columns (4 MB, in L3). */
#include <immintrin.h>

#include "core/isa_target.h"

SO_ISA_BEGIN(SO_TARGET_AVX2)

typedef __m256 vf;
#define VL 8
#define MR 6
#define KC 256
#define MC 120
#define NC 4096
#define GEMM_TABLE od_gemm_avx2
#define GEMM_LABEL "scaleout:avx2"

static inline vf v_zero(void) { return _mm256_setzero_ps(); }
static inline vf v_set1(float x) { return _mm256_set1_ps(x); }
static inline vf v_load(const float *p) { return _mm256_load_ps(p); }
static inline vf v_loadu(const float *p) { return _mm256_loadu_ps(p); }
static inline void v_storeu(float *p, vf v) { _mm256_storeu_ps(p, v); }
static inline vf v_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf v_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }

#include "backend/onednn/onednn_gemm_tr8.h"
#include "backend/onednn/onednn_gemm_body.h"

SO_ISA_END
