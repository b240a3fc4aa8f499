// Shared pieces of the built-in ops' gradient rules (OpDef::grad; private to libkiln).
//
//   def.grad(one_output_rule([](const std::vector<Tensor>& in, const Tensor& y, const Attrs&,
//                               const Tensor& g) {
//     return std::vector<Tensor>{input_grad(g * y, in[0])};  // d exp(x) = exp(x) dx
//   }));
//
// Note [Gradient rules]
// A rule is written with the public functional ops only (kiln/functional.h) and reads shapes and
// dtypes, never data: eager ops are asynchronous, the jit traces a rule into a graph, and autograd
// differentiates a rule's ops again for higher-order gradients. A rule returns one tensor per
// input: the gradient with that input's shape and dtype, or an undefined tensor for an input no
// gradient flows into (integer and bool tensors, weak Python numbers). An undefined output
// gradient means zero.
#pragma once

#include <functional>
#include <vector>

#include "kiln/op.h"

namespace kiln::detail {

/// True when gradients flow into `x`: a defined floating-point tensor that is
/// not a weak Python number (a Python number never requires a gradient) nor an
/// input whose gradient the backward step running the rule will not use (see
/// UnusedGradients).
bool differentiable(const Tensor& x);

/// While alive, differentiable() is false on this thread for the tensors
/// `unused` (it is asked about a rule's own inputs, never about g): autograd's backward step of an
/// op call names the inputs whose gradients reach no tensor that requires one (a layer's input
/// data, a constant operand), so that rules gated on differentiable() skip computing them. Scopes
/// nest; outside any (the jit tracing a rule) every input counts.
class UnusedGradients {
 public:
  explicit UnusedGradients(std::vector<const TensorImpl*> unused);
  ~UnusedGradients();
  UnusedGradients(const UnusedGradients&) = delete;
  UnusedGradients& operator=(const UnusedGradients&) = delete;

  /// Whether the innermost scope on this thread names `x`.
  static bool contains(const TensorImpl* x);

 private:
  std::vector<const TensorImpl*> unused_;
  const UnusedGradients* outer_;
};

/// The gradient of input `x` from `g`, a gradient in the shape and dtype of a
/// result that x entered broadcast and promoted: g summed to x's shape and
/// converted to x's dtype. Undefined when `g` is undefined or x is not
/// differentiable.
Tensor input_grad(const Tensor& g, const Tensor& x);

/// The body of a one-output op's rule: the input gradients from the inputs, the
/// output `y`, the normalized attributes and y's gradient `g`, which is
/// defined.
using OneOutputGradFn = std::function<std::vector<Tensor>(
    const std::vector<Tensor>& inputs, const Tensor& y, const Attrs& attrs, const Tensor& g)>;
/// A rule that gives every input an undefined gradient when the output's
/// gradient is undefined and calls `fn` otherwise.
GradFn one_output_rule(OneOutputGradFn fn);

/// `r`, a tensor of the shape a reduction of a tensor of shape `x_shape` over
/// `mask` has (with or without the reduced dims), reshaped to keep the reduced
/// dims with size 1, so that it broadcasts against the input.
Tensor keep_reduced_dims(const Tensor& r, const Shape& x_shape, const std::vector<bool>& mask);
/// The gradient `g` of a reduction, broadcast back to the input's shape
/// `x_shape`.
Tensor unreduce(const Tensor& g, const Shape& x_shape, const std::vector<bool>& mask);

/// A tensor of x's shape and g's dtype whose element i (in row-major order) is
/// the sum of the elements of `g` whose entry in `positions` (int64, g's shape)
/// is i: the gradient of an op whose output elements are copies of x's elements
/// at `positions` (as_strided, pad).
Tensor accumulate_at(const Tensor& g, const Tensor& positions, const Tensor& x);

/// Zeros of shape `input_shape` with g added at `index` along `dim` (the GatherBackward op, the
/// gradient of gather(x, dim, index); repeated indices sum): defined in index.cc.
Tensor gather_backward(const Tensor& g, const Tensor& index, int64_t dim, const Shape& input_shape);

/// The rule of an op whose outputs are (values, indices), values being x's elements at the int64
/// `indices` along the attribute `dim` (max / min along a dim, sort, topk): the gradient of the
/// values goes to the elements the indices name; the indices carry none. A "keepdim" attribute
/// that is false means the outputs lost `dim`. See Note [Gradient rules].
std::vector<Tensor> selected_values_grad(const std::vector<Tensor>& inputs,
                                         const std::vector<Tensor>& outputs, const Attrs& attrs,
                                         const std::vector<Tensor>& grad_outputs);

/// The derivative of a reduction with the attributes `dims` and `keepdim`: x's
/// gradient (in any floating dtype) from x, the output y and its gradient g
/// (both with the reduced dims kept with size 1, so they broadcast against x),
/// the reduced dims (non-negative, ascending) and the op's attributes.
using ReductionDerivative = Tensor (*)(const Tensor& x, const Tensor& y, const Tensor& g,
                                       const std::vector<int64_t>& dims, const Attrs& attrs);
/// The rule of such a reduction: no gradient for integer and bool inputs; the
/// result converted to x's dtype (a `dtype` attribute may have made the output
/// wider). Without `reads_output` d gets an undefined y, and the rule never touches the output
/// (an in-place write into it, `loss += reg`, then leaves the gradient alone).
GradFn reduction_rule(ReductionDerivative d, bool reads_output = true);

/// `t` divided by the number of elements of x over `dims` (non-negative) less `correction`, at
/// least 0, in t's dtype (computed in compute_dtype, rounded once, as a Python number would be).
/// Eagerly the count is a number; under a thread dispatcher (the jit's trace is the one Kiln
/// installs; another only makes this slower) it is an op of x's shape (a sum of a broadcast 1), so
/// that a traced backward holds no constant that changes with a dynamic batch size (Note [Dynamic
/// batch size] in src/jit/dynamic_graph.cc); kiln_cpu folds it to a constant at each build.
Tensor divide_by_count(const Tensor& t, const Tensor& x, const std::vector<int64_t>& dims,
                       int64_t correction = 0);

}  // namespace kiln::detail
