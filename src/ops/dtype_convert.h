// Private to src/ops: a kernel's operands in its compute dtype, the conversion kernels make before
// their loops (one place for it, instead of a copy per op file).
#pragma once

#include "kiln/tensor.h"

namespace kiln {

/// `x` itself when it has `dtype`, else a converted contiguous copy of x's shape.
inline Tensor as_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor converted = Tensor::empty(x.shape(), dtype);
  copy_into(converted, x);
  return converted;
}

/// as_dtype for hot kernels: x itself, by reference, when it has `dtype` (no reference-count
/// round trip), else the converted copy, kept in `converted`.
inline const Tensor& as_dtype(const Tensor& x, DType dtype, Tensor& converted) {
  if (x.dtype() == dtype) return x;
  converted = as_dtype(x, dtype);
  return converted;
}
/// A temporary would not outlive the returned reference.
const Tensor& as_dtype(Tensor&& x, DType dtype, Tensor& converted) = delete;

/// `x` as a contiguous tensor of `dtype`: x itself when it already is one, else a copy.
inline Tensor contiguous_as(const Tensor& x, DType dtype) {
  return x.dtype() == dtype ? x.contiguous() : as_dtype(x, dtype);
}

}  // namespace kiln
