// KILN_TARGET_CLONES before a function of plain loops compiles it for AVX-512, AVX2 and baseline
// x86-64, and the widest the CPU runs is picked when the library loads (GCC's target_clones,
// through an ifunc). Highway is the project's SIMD dispatch; this is for kernels written as
// auto-vectorised `omp simd` loops (see docs/architecture.md, "SIMD math").
//
// Empty where it is unavailable or unsafe: other compilers and architectures, and ThreadSanitizer
// builds, where the ifunc resolvers run during relocation, before TSan's runtime is initialised,
// and crash the process at load.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define KILN_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KILN_TARGET_CLONES
#endif
