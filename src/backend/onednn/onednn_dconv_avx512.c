/* AVX-512 instance of the direct convolution (onednn_dconv_body.h): 16-lane
 * vectors, 8 output channels x 2 vectors of forward accumulators and 4 x 5
 * weight-gradient ones (of 32 zmm registers). Runs only where
 * od_dconv_op() picked it, so the whole file is built for AVX-512. */
#include <immintrin.h>

#include "core/isa_target.h"

SO_ISA_BEGIN(SO_TARGET_AVX512)

typedef __m512 vf;
#define VL 16
#define OB 8 /* output channels per forward register block */
#define GO 4 /* output channels per weight-gradient register block */
#define GT 5 /* taps per weight-gradient register block */
#define DC_OP od_op_dconv_avx512

static inline vf v_zero(void) { return _mm512_setzero_ps(); }
static inline vf v_set1(float x) { return _mm512_set1_ps(x); }
static inline vf v_load(const float *p) { return _mm512_load_ps(p); }
static inline vf v_loadu(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_store(float *p, vf v) { _mm512_store_ps(p, v); }
static inline void v_storeu(float *p, vf v) { _mm512_storeu_ps(p, v); }
static inline vf v_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf v_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline float v_sum(vf v) { return _mm512_reduce_add_ps(v); }

#include "backend/onednn/onednn_dconv_body.h"

SO_ISA_END
