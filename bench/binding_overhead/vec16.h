// The object every binding in this study wraps: 16 floats on the heap, so that each add() pays
// one allocation for its result, as a tensor op does.
#pragma once

#include <cstddef>
#include <vector>

struct Vec16 {
  static constexpr std::size_t kSize = 16;
  std::vector<float> data = std::vector<float>(kSize, 1.0f);
};

/// a + b elementwise, into a newly allocated Vec16.
inline Vec16 add(const Vec16& a, const Vec16& b) {
  Vec16 r;
  for (std::size_t i = 0; i < Vec16::kSize; ++i) r.data[i] = a.data[i] + b.data[i];
  return r;
}
