// Which Highway targets Kiln's SIMD kernels are compiled for.
//
// Include this first in every .cc under src/ops/simd/, before any Highway header: Highway reads
// HWY_DISABLED_TARGETS when it first detects targets.
#pragma once

// Note [SIMD target set]
// Every dispatched kernel is compiled once per target, so each extra target costs compile time
// (CI builds everything twice: plain and sanitized). On x86 we keep SSE4 (any x86-64 from ~2008),
// AVX2 (Haswell+, Zen) and AVX3 (AVX-512 F/BW/DQ/VL: Skylake-X+, Zen4), plus the scalar fallback
// Highway always compiles as the static baseline. AVX3_DL/ZEN4/SPR gain little for float
// elementwise code, and SSSE3 only matters for pre-2008 CPUs. Disabling "everything except" (rather
// than naming what to drop) also keeps newer Highway versions from adding targets behind our back.
//
// Sanitizer builds (ASan / TSan / MSan) compile only SSE4 and the scalar fallback: instrumented
// AVX2 / AVX-512 code triples the compile time, and SSE4 already runs every loop skeleton with
// real multi-lane vectors and tails (4 float / 2 double lanes), which is what the sanitizers check.
// The plain build's tests cover the numerics of every target. Define KILN_SIMD_ALL_TARGETS to
// keep all targets in a sanitizer build, or HWY_DISABLED_TARGETS to choose the set outright.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define KILN_SIMD_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KILN_SIMD_SANITIZED 1
#endif

#if !defined(HWY_DISABLED_TARGETS) && (defined(__x86_64__) || defined(_M_X64))
#if defined(KILN_SIMD_SANITIZED) && !defined(KILN_SIMD_ALL_TARGETS)
#define HWY_DISABLED_TARGETS (~(HWY_SCALAR | HWY_EMU128 | HWY_SSE4))
#else
#define HWY_DISABLED_TARGETS (~(HWY_SCALAR | HWY_EMU128 | HWY_SSE4 | HWY_AVX2 | HWY_AVX3))
#endif
#endif
