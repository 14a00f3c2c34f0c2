/* The portable instance of the sequence kernels (onednn_seq_body.h): one
 * float per "vector", libm's expf; what CPUs below AVX2 run, and what
 * attention runs when the head size is not a multiple of the vector width. */
#include <math.h>

typedef float vf;
#define VL 1
#define SEQ_TABLE od_seq_scalar
#define SEQ_LABEL "scaleout:scalar"

static inline vf v_zero(void) { return 0.0f; }
static inline vf v_set1(float x) { return x; }
static inline vf v_loadu(const float *p) { return *p; }
static inline void v_storeu(float *p, vf v) { *p = v; }
static inline vf v_add(vf a, vf b) { return a + b; }
static inline vf v_sub(vf a, vf b) { return a - b; }
static inline vf v_mul(vf a, vf b) { return a * b; }
static inline vf v_div(vf a, vf b) { return a / b; }
static inline vf v_max(vf a, vf b) { return a > b ? a : b; }
static inline vf v_fma(vf a, vf b, vf c) { return a * b + c; }
static inline float v_hsum(vf v) { return v; }
static inline float v_hmax(vf v) { return v; }
static inline vf v_exp(vf x) { return expf(x); }

#include "backend/onednn/onednn_seq_body.h"
