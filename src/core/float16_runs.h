// Contiguous runs converted between float and the 16-bit floats (private to Kiln).
//
//   widen_run(half_data, floats, n);     // floats[i] = float(half_data[i])
//   narrow_run(floats, half_data, n);    // half_data[i] = Half(floats[i]), nearest even
//   round_to_odd_run(doubles, floats, n);  // the first step from double (Note [Rounding to odd])
//
// Casts, copies and the elementwise kernels on float16 / bfloat16 convert through these (see
// convert_contiguous in core/dtype_dispatch.h). float16 runs use x86's F16C instructions where the
// CPU has them; bfloat16 runs narrow with AVX2 where the CPU has it and widen compiled per
// instruction set (KILN_TARGET_CLONES). Every path gives the same bits as Half's and BFloat16's own
// conversions (kiln/dtype.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kiln/dtype.h"
#include "kiln/export.h"

namespace kiln {

// Note [Rounding to odd]
// A double or a wide integer converted to float16 / bfloat16 through float would round twice: to
// float, then to 16 bits. A value just past the midpoint of two 16-bit values can land exactly on
// it in float, and the second rounding then goes to even, the wrong way (NumPy's float64 ->
// float16 does not). Rounding to float "to odd" instead, toward zero with the lowest bit set
// when anything was dropped, keeps the dropped part's sign: with float's 13 (float16) or 16
// (bfloat16) more bits than the target, the nearest-even rounding to 16 bits that follows is then
// the correctly rounded result (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums:
// proved algorithms using rounding to odd", 2008).

/// v rounded to float to odd (Note [Rounding to odd]); NaN stays NaN, beyond float's range gives
/// the largest float (which the 16-bit rounding takes to inf, as the exact value would go).
/// Free of branches and library calls, so loops of it vectorise: one step down the magnitude's
/// bits when rounding went up (inf steps to the largest float), then the sticky bit.
inline float float_rounded_to_odd(double v) {
  const float f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  bits -= std::fabs(static_cast<double>(f)) > std::fabs(v) ? 1u : 0u;
  bits |= static_cast<double>(f) != v ? 1u : 0u;
  float odd;
  std::memcpy(&odd, &bits, sizeof(odd));
  return odd;
}

/// An integer rounded to float to odd: exact below 2^24, else its top 24 bits with the lowest set
/// when any bit below them is.
inline float float_rounded_to_odd(int64_t v) {
  constexpr int64_t kExact = int64_t{1} << 24;
  if (v > -kExact && v < kExact) return static_cast<float>(v);
  const uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  const int dropped = 40 - __builtin_clzll(magnitude);  // bits below the top 24, >= 1
  uint64_t kept = magnitude >> dropped;
  if ((magnitude & ((uint64_t{1} << dropped) - 1)) != 0) kept |= 1u;
  const float f = std::ldexp(static_cast<float>(kept), dropped);
  return v < 0 ? -f : f;
}

// Exported for the tests.
KILN_API void widen_run(const Half* x, float* y, int64_t n);
KILN_API void widen_run(const BFloat16* x, float* y, int64_t n);
KILN_API void narrow_run(const float* x, Half* y, int64_t n);
KILN_API void narrow_run(const float* x, BFloat16* y, int64_t n);
/// y[i] = float_rounded_to_odd(x[i]), compiled per instruction set (vectorised).
KILN_API void round_to_odd_run(const double* x, float* y, int64_t n);

}  // namespace kiln
