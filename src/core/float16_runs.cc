#include "core/float16_runs.h"

#include "core/target_clones.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KILN_X86_RUNS 1
#endif

namespace kiln {
namespace {

#ifdef KILN_X86_RUNS
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

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// BFloat16(float)'s rounding on 16 floats at a time, one pack for both halves: about half the
// instructions of the compiler's vectorisation of the scalar loop, which packs the NaN and the
// rounded bits separately (cast to bfloat16 of 1M floats: 0.24 -> 0.13 ms).
__attribute__((target("avx2"))) __m256i round_to_bfloat16_bits(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i high = _mm256_srli_epi32(u, 16);
  const __m256i lowest_kept = _mm256_and_si256(high, _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lowest_kept), 16);
  const __m256i quiet_nan = _mm256_or_si256(high, _mm256_set1_epi32(0x40));
  const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
}

__attribute__((target("avx2"))) int64_t narrow_bf16_avx2(const float* x, BFloat16* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = round_to_bfloat16_bits(_mm256_loadu_ps(x + i));
    const __m256i hi = round_to_bfloat16_bits(_mm256_loadu_ps(x + i + 8));
    // packus interleaves the 128-bit halves of lo and hi; the permute puts them back in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), packed);
  }
  return i;
}
#endif

}  // namespace

// The portable loops go through the bits: a store of the struct itself keeps GCC from
// vectorising them.

void widen_run(const Half* x, float* y, int64_t n) {
  int64_t i = 0;
#ifdef KILN_X86_RUNS
  if (cpu_has_f16c()) i = widen_f16c(x, y, n);
#endif
  for (; i < n; ++i) y[i] = static_cast<float>(x[i]);
}

void narrow_run(const float* x, Half* y, int64_t n) {
  int64_t i = 0;
#ifdef KILN_X86_RUNS
  if (cpu_has_f16c()) i = narrow_f16c(x, y, n);
#endif
  for (; i < n; ++i) y[i].bits = Half(x[i]).bits;
}

KILN_TARGET_CLONES void widen_run(const BFloat16* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(x[i]);
}

void narrow_run(const float* x, BFloat16* y, int64_t n) {
  int64_t i = 0;
#ifdef KILN_X86_RUNS
  if (cpu_has_avx2()) i = narrow_bf16_avx2(x, y, n);
#endif
  for (; i < n; ++i) y[i].bits = BFloat16(x[i]).bits;
}

KILN_TARGET_CLONES void round_to_odd_run(const double* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = float_rounded_to_odd(x[i]);
}

}  // namespace kiln
