#include "core/float16_runs.h"

#include "core/target_clones.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KILN_F16C_RUNS 1
#endif

namespace kiln {
namespace {

#ifdef KILN_F16C_RUNS
// x86's F16C instructions convert 8 halves in one instruction, rounding to nearest even; the
// portable conversion of kiln/dtype.h gives the same bits, NaNs included (checked on every float),
// so which path a run takes never shows. F16C came with AVX (Ivy Bridge, every AMD since 2011).
bool cpu_has_f16c() {
  static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return has;
}

// Each converts the longest prefix of whole vectors and returns its length.
__attribute__((target("avx,f16c"))) int64_t widen_f16c(const Half* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
  return i;
}

__attribute__((target("avx,f16c"))) int64_t narrow_f16c(const float* x, Half* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  return i;
}
#endif

}  // namespace

// The portable loops go through the bits: a store of the struct itself keeps GCC from
// vectorising them.

void widen_run(const Half* x, float* y, int64_t n) {
  int64_t i = 0;
#ifdef KILN_F16C_RUNS
  if (cpu_has_f16c()) i = widen_f16c(x, y, n);
#endif
  for (; i < n; ++i) y[i] = static_cast<float>(x[i]);
}

void narrow_run(const float* x, Half* y, int64_t n) {
  int64_t i = 0;
#ifdef KILN_F16C_RUNS
  if (cpu_has_f16c()) i = narrow_f16c(x, y, n);
#endif
  for (; i < n; ++i) y[i].bits = Half(x[i]).bits;
}

KILN_TARGET_CLONES void widen_run(const BFloat16* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(x[i]);
}

KILN_TARGET_CLONES void narrow_run(const float* x, BFloat16* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i].bits = BFloat16(x[i]).bits;
}

KILN_TARGET_CLONES void round_to_odd_run(const double* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = float_rounded_to_odd(x[i]);
}

}  // namespace kiln
