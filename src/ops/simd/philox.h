// Philox4x32-10 over runs of consecutive counters, vectorised (private to libkiln).
//
//   uint32_t words[4 * 64];
//   kiln::simd::philox4x32_10(first, seed, words, 64);   // word k of counter first + c is
//                                                        // words[k * 64 + c]
//
// The random ops (src/ops/random.cc) draw every value from these words; one counter at a time,
// Philox is a chain of dependent multiplies, and it held rand of 1M floats at 2 ms. Here a vector
// of counters goes through the ten rounds together: MulEven on the even and the odd lanes gives
// each 32 x 32 -> 64-bit product. Dispatched per CPU like the kernels of float_kernels.h (the same
// set_target_for_testing hook applies).
#pragma once

#include <cstdint>

#include "kiln/export.h"

namespace kiln::simd {

/// Philox4x32-10 of the counters (first + c, 0) for c < count under the 64-bit key `seed`: the
/// same words as kiln::detail::philox4x32_10(first + c, seed), counter by counter; word k of
/// counter first + c goes to words[k * count + c]. Counters wrap modulo 2^64. count >= 0.
KILN_API void philox4x32_10(uint64_t first, uint64_t seed, uint32_t* words, int64_t count);

}  // namespace kiln::simd
