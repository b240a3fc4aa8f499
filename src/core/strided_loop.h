// StridedLoop: walks N same-shaped strided operands in row-major order (private to Kiln).
//
//   StridedLoop<3> loop(out.shape(), {&out, &a, &b});   // a and b already broadcast to out
//   loop.parallel_run(kGrain, [&](char* const* ptrs, const int64_t* strides, int64_t n) {
//     for (int64_t i = 0; i < n; ++i) { ... ptrs[k] + i * strides[k] ... }   // byte strides
//   });
//
// Size-1 dimensions are dropped and adjacent dimensions that are contiguous in every operand are
// merged, so a contiguous problem becomes one flat run whatever its rank; the callback then sees
// long inner runs and can take a fast path when every stride equals the element size.
#pragma once

#include <array>
#include <cstdint>

#include "kiln/parallel.h"
#include "kiln/tensor.h"

namespace kiln {

template <int N>
class StridedLoop {
 public:
  StridedLoop(const Shape& shape, const std::array<const Tensor*, N>& operands) {
    numel_ = shape_numel(shape);
    for (int k = 0; k < N; ++k) {
      base_[k] = numel_ == 0 ? nullptr : static_cast<char*>(operands[k]->data_ptr());
    }
    // Innermost dimension first, as byte strides, without size-1 dims.
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (shape[d] == 1) continue;
      std::array<int64_t, N> s;
      for (int k = 0; k < N; ++k) {
        s[k] = operands[k]->strides()[d] * static_cast<int64_t>(operands[k]->itemsize());
      }
      if (!sizes_.empty()) {
        bool mergeable = true;
        for (int k = 0; k < N; ++k) {
          mergeable = mergeable && s[k] == strides_.back()[k] * sizes_.back();
        }
        if (mergeable) {
          sizes_.back() *= shape[d];
          continue;
        }
      }
      sizes_.push_back(shape[d]);
      strides_.push_back(s);
    }
    if (sizes_.empty()) {  // a single element
      sizes_.push_back(1);
      strides_.push_back({});
    }
  }

  int64_t numel() const { return numel_; }
  /// The merged dimensions, innermost (0) first: their sizes, and each operand's byte strides.
  size_t ndim() const { return sizes_.size(); }
  int64_t size(size_t d) const { return sizes_[d]; }
  const std::array<int64_t, N>& strides(size_t d) const { return strides_[d]; }
  /// Operand k's first element.
  char* base(int k) const { return base_[k]; }

  /// Calls f(ptrs, inner_byte_strides, count) for runs covering linear indices [begin, end).
  template <typename F>
  void run(int64_t begin, int64_t end, F&& f) const {
    if (begin >= end) return;
    const size_t nd = sizes_.size();
    SmallVector<int64_t, kMaxInlineDims> index(nd);
    int64_t rest = begin;
    for (size_t d = 0; d < nd; ++d) {
      index[d] = rest % sizes_[d];
      rest /= sizes_[d];
    }
    std::array<char*, N> ptrs;
    for (int k = 0; k < N; ++k) {
      ptrs[k] = base_[k];
      for (size_t d = 0; d < nd; ++d) ptrs[k] += index[d] * strides_[d][k];
    }
    int64_t remaining = end - begin;
    while (remaining > 0) {
      const int64_t count = std::min(remaining, sizes_[0] - index[0]);
      f(ptrs.data(), strides_[0].data(), count);
      remaining -= count;
      if (remaining == 0) break;
      // Advance to the start of the next inner run, carrying into outer dimensions.
      for (int k = 0; k < N; ++k) ptrs[k] += (count - 1) * strides_[0][k];
      index[0] += count - 1;
      for (size_t d = 0; d < nd; ++d) {
        if (++index[d] < sizes_[d]) {
          for (int k = 0; k < N; ++k) ptrs[k] += strides_[d][k];
          break;
        }
        for (int k = 0; k < N; ++k) ptrs[k] -= (sizes_[d] - 1) * strides_[d][k];
        index[d] = 0;
      }
    }
  }

  /// run() over all elements, split across the intra-op pool in chunks of at least `grain`.
  template <typename F>
  void parallel_run(int64_t grain, F&& f) const {
    if (numel_ <= grain) return run(0, numel_, f);  // one chunk: straight to f, no pool
    parallel_for(0, numel_, grain, [&](int64_t lo, int64_t hi) { run(lo, hi, f); });
  }

 private:
  int64_t numel_ = 0;
  std::array<char*, N> base_{};
  // Inline up to kMaxInlineDims dims, like Shape: a loop over a small tensor allocates nothing.
  SmallVector<int64_t, kMaxInlineDims> sizes_;                   // innermost first
  SmallVector<std::array<int64_t, N>, kMaxInlineDims> strides_;  // byte strides, innermost first
};

/// Elements per parallel chunk for cheap elementwise work: large enough that thread start-up
/// (~2 µs for an OpenMP region) is noise.
inline constexpr int64_t kElementwiseGrain = 1 << 15;

}  // namespace kiln
