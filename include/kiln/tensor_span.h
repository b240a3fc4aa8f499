// TensorSpan: a read-only view of consecutive tensors, the type op calls take their inputs as.
//
//   kiln::call_op(op, {a, b});         // a braced list: no std::vector is built
//   kiln::call_op(op, inputs);         // a std::vector<Tensor> or a SmallVector<Tensor, N>
//
// Why: every eager op call passes its inputs down through call_op, the dispatcher and the
// autograd hook; a std::vector parameter made each call allocate a vector (and copy every tensor
// handle into it twice when built from a braced list), for a list the callee only reads.
//
// A TensorSpan does not own the tensors it shows, like std::span or llvm::ArrayRef: use it as a
// parameter. A braced list's tensors, like a temporary vector's, live until the end of the full
// expression that makes the call, so a TensorSpan variable initialised from either dangles
// (`TensorSpan s = make_inputs();`); a callee that keeps the tensors copies them (vec()).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

class TensorSpan {
 public:
  TensorSpan() = default;
  TensorSpan(const std::vector<Tensor>& tensors)  // NOLINT: implicit, as a parameter type
      : data_(tensors.data()), size_(tensors.size()) {}
// GCC warns that the list's array is not kept alive by the span; as a parameter, it need not be
// (the array lives until the end of the call's full expression). llvm::ArrayRef does the same.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  TensorSpan(std::initializer_list<Tensor> tensors)  // NOLINT: implicit, as a parameter type
      : data_(tensors.begin()), size_(tensors.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  // (A span of an inline SmallVector shows the elements where they are: moving the list moves
  // them, as a vector's growth would.)
  template <size_t N>
  TensorSpan(const SmallVector<Tensor, N>& tensors)  // NOLINT: implicit, as a parameter type
      : data_(tensors.data()), size_(tensors.size()) {}
  TensorSpan(const Tensor* data, size_t size) : data_(data), size_(size) {}

  const Tensor* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Tensor& operator[](size_t i) const { return data_[i]; }
  const Tensor* begin() const { return data_; }
  const Tensor* end() const { return data_ + size_; }
  /// The tensors as a vector of their own (handles copied; the tensors are shared).
  std::vector<Tensor> vec() const { return std::vector<Tensor>(begin(), end()); }

 private:
  const Tensor* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln
