/* SO_VEC_CLONES marks an element-wise loop the compiler vectorises: it is
 * built for AVX-512, AVX2 and the portable baseline, and the loader picks
 * the copy the CPU runs (ifunc). Only for element-wise loops: with no
 * reassociation and no a*b+c contracted into an FMA (-std=c11 turns
 * contraction off), every copy gives the same bits, so ranks on different
 * CPUs still agree on the parameters. */
#ifndef SO_CORE_VEC_CLONES_H
#define SO_CORE_VEC_CLONES_H

#if defined(__x86_64__) && defined(__GNUC__)
#define SO_VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SO_VEC_CLONES
#endif

#endif
