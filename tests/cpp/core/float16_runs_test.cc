// The vectorised float16 / bfloat16 runs (F16C on x86 where the CPU has it, portable bit code
// elsewhere and in every run's tail) against independent references: the exact value of every
// half, and the nearest representable value found by search, ties to even.
#include "core/float16_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace kiln {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// The value of half bits h from the format's definition (finite values only).
double half_value(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
  return (h & 0x8000) != 0 ? -magnitude : magnitude;
}

// Floats that exercise every case: random bit patterns over the whole range, values around the
// half's subnormal, normal and overflow boundaries, exact ties, zeros, infinities and NaNs.
std::vector<float> test_floats() {
  std::vector<float> values;
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) values.push_back(float_of(static_cast<uint32_t>(rng())));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (int e = -30; e <= 17; ++e) {
    for (int i = 0; i < 2000; ++i) values.push_back(std::ldexp(unit(rng), e));
  }
  for (uint32_t h = 0; h < 0x7c00; h += 7) {  // halves and the ties just above them
    const float f = static_cast<float>(half_value(static_cast<uint16_t>(h)));
    const float next = static_cast<float>(half_value(static_cast<uint16_t>(h + 1)));
    values.push_back(f);
    values.push_back(-f);
    values.push_back((f + next) / 2);  // exact in float: a tie
    values.push_back(std::nextafter((f + next) / 2, 0.0f));
    values.push_back(std::nextafter((f + next) / 2, 1e9f));
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float f : {0.0f, -0.0f, inf, -inf, 65504.0f, 65519.99f, 65520.0f, 1e30f, 6e-8f, 2.9e-8f,
                  3e-8f, float_of(0x7f800001u), float_of(0xffc12345u), float_of(0x7fbfe000u)}) {
    values.push_back(f);
  }
  return values;
}

// The nearest half to f, ties to the even mantissa, inf from 65520 up (finite f only).
uint16_t nearest_half(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double magnitude = std::fabs(static_cast<double>(f));
  if (magnitude >= 65520.0) return sign | 0x7c00;
  uint16_t lo = 0, hi = 0x7bff;  // the largest half not above `magnitude`, by bisection
  while (lo < hi) {
    const auto mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (half_value(mid) <= magnitude)
      lo = mid;
    else
      hi = static_cast<uint16_t>(mid - 1);
  }
  if (half_value(lo) == magnitude) return sign | lo;
  const double below = magnitude - half_value(lo);
  const double above = half_value(static_cast<uint16_t>(lo + 1)) - magnitude;
  const bool up = above < below || (above == below && (lo & 1) != 0);
  return sign | static_cast<uint16_t>(up ? lo + 1 : lo);
}

// The nearest bfloat16 to f (its bits), ties to even (finite f only).
uint16_t nearest_bfloat16(float f) {
  const uint32_t truncated = bits_of(f) & 0xffff0000u;
  const double down = float_of(truncated), up = float_of(truncated + 0x10000u);
  const double below = std::fabs(f - down), above = std::fabs(up - f);
  const bool round_up = above < below || (above == below && ((truncated >> 16) & 1) != 0);
  return static_cast<uint16_t>((round_up ? truncated + 0x10000u : truncated) >> 16);
}

// Runs `run` over x at several offsets and lengths (whole vectors and tails), checking each
// output element with check(input, output).
template <typename In, typename Out, typename Run, typename Check>
void check_runs(const std::vector<In>& x, Run run, Check check) {
  for (size_t offset : {0, 1, 3}) {
    for (size_t length :
         {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{31}, x.size() - offset}) {
      std::vector<Out> y(length);
      run(x.data() + offset, y.data(), static_cast<int64_t>(length));
      for (size_t i = 0; i < length; ++i) check(x[offset + i], y[i]);
    }
  }
}

TEST(Float16Runs, WidenGivesEveryHalfItsExactValue) {
  std::vector<Half> halves(0x10000);
  for (uint32_t h = 0; h < 0x10000; ++h) halves[h].bits = static_cast<uint16_t>(h);
  check_runs<Half, float>(
      halves, [](const Half* x, float* y, int64_t n) { widen_run(x, y, n); },
      [](Half h, float f) {
        ASSERT_EQ(bits_of(f), bits_of(static_cast<float>(h))) << "half " << h.bits;
        const bool sign = (h.bits & 0x8000) != 0;
        ASSERT_EQ(std::signbit(f), sign) << "half " << h.bits;
        if ((h.bits & 0x7c00) != 0x7c00) {
          ASSERT_EQ(static_cast<double>(f), half_value(h.bits)) << "half " << h.bits;
        } else if ((h.bits & 0x3ff) == 0) {
          ASSERT_TRUE(std::isinf(f)) << "half " << h.bits;
        } else {  // NaN: quiet, payload kept
          ASSERT_EQ(bits_of(f) & 0x7fffffffu, 0x7fc00000u | ((h.bits & 0x3ffu) << 13))
              << "half " << h.bits;
        }
      });
}

TEST(Float16Runs, NarrowRoundsToTheNearestHalf_TiesToEven) {
  check_runs<float, Half>(
      test_floats(), [](const float* x, Half* y, int64_t n) { narrow_run(x, y, n); },
      [](float f, Half h) {
        ASSERT_EQ(h.bits, Half(f).bits) << "float bits " << bits_of(f);
        if (std::isnan(f)) {  // quiet, sign and the payload's top bits kept
          const uint32_t u = bits_of(f);
          ASSERT_EQ(h.bits, ((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu));
        } else {
          ASSERT_EQ(h.bits, nearest_half(f)) << "float " << f << " (bits " << bits_of(f) << ")";
        }
      });
}

TEST(Float16Runs, BFloat16RunsWidenExactly_AndRoundToNearestEven) {
  const std::vector<float> floats = test_floats();
  check_runs<float, BFloat16>(
      floats, [](const float* x, BFloat16* y, int64_t n) { narrow_run(x, y, n); },
      [](float f, BFloat16 b) {
        ASSERT_EQ(b.bits, BFloat16(f).bits) << "float bits " << bits_of(f);
        if (std::isnan(f)) {
          ASSERT_TRUE(std::isnan(static_cast<float>(b)));
        } else if (std::fabs(f) < 3.3e38f) {  // nearest_bfloat16 needs a finite neighbour above
          ASSERT_EQ(b.bits, nearest_bfloat16(f)) << "float " << f;
        }
      });
  std::vector<BFloat16> all(0x10000);
  for (uint32_t b = 0; b < 0x10000; ++b) all[b].bits = static_cast<uint16_t>(b);
  check_runs<BFloat16, float>(
      all, [](const BFloat16* x, float* y, int64_t n) { widen_run(x, y, n); },
      [](BFloat16 b, float f) { ASSERT_EQ(bits_of(f), static_cast<uint32_t>(b.bits) << 16); });
}

}  // namespace
}  // namespace kiln
