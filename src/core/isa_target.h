/* SO_ISA_BEGIN(isa) ... SO_ISA_END: every function between the two is
 * compiled for that instruction set whatever the build's baseline, so a
 * portable build still carries its AVX2 and AVX-512 kernels (chosen at run
 * time by so_cpu_isa). GCC's target pragma, or clang's attribute push: clang
 * ignores the GCC pragma, and its builds (AOCC, icx) would lose the kernels. */
#ifndef SO_CORE_ISA_TARGET_H
#define SO_CORE_ISA_TARGET_H

#define SO_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define SO_ISA_BEGIN(isa) SO_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define SO_ISA_END SO_PRAGMA(clang attribute pop)
#define SO_TARGET_AVX512 "avx512f,avx512bw,avx512vl,avx512dq,fma"
#else
#define SO_ISA_BEGIN(isa) SO_PRAGMA(GCC push_options) SO_PRAGMA(GCC target(isa))
#define SO_ISA_END SO_PRAGMA(GCC pop_options)
/* 512-bit auto-vectorisation too: GCC's generic tuning would keep the loops
 * around the kernels at 256 bits. */
#define SO_TARGET_AVX512 "avx512f,avx512bw,avx512vl,avx512dq,fma,prefer-vector-width=512"
#endif
#define SO_TARGET_AVX2 "avx2,fma"

#endif
