// Small helpers shared by the gradient rules of the matmul, norm, loss, convolution, pooling and
// embedding ops (private to libkiln).
//
//   std::vector<Tensor> rule(inputs, outputs, attrs, grad_outputs) {
//     const Tensor g = grad::or_zeros(grad_outputs[0], outputs[0]);
//     return {grad::as_grad_of(matmul(g, w), x), ...};
//   }
//
// Rules are written with the public functional ops only, so that the jit can trace them and the
// rules can be differentiated again (see GradFn in kiln/op.h).
#pragma once

#include "kiln/dtype.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/tensor.h"
#include "ops/grad_util.h"

namespace kiln::grad {

/// True when `x` takes a gradient: defined (not an omitted optional input), floating point
/// (integer and bool inputs such as targets and indices do not) and used (detail::differentiable).
inline bool differentiable(const Tensor& x) { return detail::differentiable(x); }

/// The output gradient `g`, or zeros shaped like the output when no gradient flows into it.
inline Tensor or_zeros(const Tensor& g, const Tensor& output) {
  return g.defined() ? g : zeros_like(output);
}

/// `g` as the gradient of input `x`: converted to x's dtype (an input of a mixed-dtype call has
/// a lower precision than the result), or undefined when x takes no gradient.
inline Tensor as_grad_of(const Tensor& g, const Tensor& x) {
  if (!differentiable(x)) return Tensor();
  return g.dtype() == x.dtype() ? g : to(g, x.dtype());
}

}  // namespace kiln::grad
