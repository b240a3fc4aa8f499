// Philox4x32-10, the function behind every kiln::Generator's stream, and the argument checks
// every factory op shares (private to Kiln).
//
//   RngState d = generator.reserve(n_counters);              // thread-safe
//   std::array<uint32_t, 4> w = philox4x32_10(d.offset + g, d.seed);
//   float u = uniform_float(w[0]);                           // in [0, 1)
//
// See Note [Counter-based generator] in random.cc for how ops use the counters.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "kiln/dtype.h"
#include "kiln/export.h"
#include "kiln/tensor.h"

namespace kiln::detail {

/// Philox4x32-10's round multipliers and key increments (Random123's).
inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

/// Philox4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
/// SC'11): four 32-bit words from a 128-bit counter and a 64-bit key. Pure and thread-safe. The
/// definition that simd::philox4x32_10, which the kernels draw from, is tested against.
inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr,
                                             std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
  }
  return ctr;
}

/// Philox4x32-10 of the counter (counter, 0) under the key `seed`.
inline std::array<uint32_t, 4> philox4x32_10(uint64_t counter, uint64_t seed) {
  return philox4x32_10({static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0},
                       {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

/// The top 24 bits of `w` as a float in [0, 1) (every value exact, never 1).
inline float uniform_float(uint32_t w) { return static_cast<float>(w >> 8) * 0x1p-24f; }
/// 53 bits of (hi, lo) as a double in [0, 1) (never 1).
inline double uniform_double(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<double>(bits >> 11) * 0x1p-53;
}

/// Throws kShape naming `op` when a size in `shape` is negative.
inline void check_factory_shape(const std::string& op, const Shape& shape) {
  for (int64_t s : shape) {
    KILN_CHECK_SHAPE(s >= 0) << op << ": expected non-negative sizes, got " << shape_str(shape);
  }
}

}  // namespace kiln::detail
