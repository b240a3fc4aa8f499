// Shared pieces of the built-in ops' gradient rules; see ops/grad_util.h.
#include "ops/grad_util.h"

#include <algorithm>
#include <utility>

#include "kiln/functional.h"
#include "kiln/op.h"
#include "ops/reduce.h"

namespace kiln::detail {

namespace {
thread_local const UnusedGradients* t_unused_gradients = nullptr;
}  // namespace

UnusedGradients::UnusedGradients(std::vector<const TensorImpl*> unused)
    : unused_(std::move(unused)), outer_(t_unused_gradients) {
  t_unused_gradients = this;
}

UnusedGradients::~UnusedGradients() { t_unused_gradients = outer_; }

bool UnusedGradients::contains(const TensorImpl* x) {
  const UnusedGradients* scope = t_unused_gradients;
  return scope != nullptr &&
         std::find(scope->unused_.begin(), scope->unused_.end(), x) != scope->unused_.end();
}

bool differentiable(const Tensor& x) {
  return x.defined() && is_floating_point(x.dtype()) && !x.is_weak_scalar() &&
         !UnusedGradients::contains(x.impl());
}

Tensor input_grad(const Tensor& g, const Tensor& x) {
  if (!g.defined() || !differentiable(x)) return Tensor();
  return to(sum_to(g, x.shape()), x.dtype());
}

GradFn one_output_rule(OneOutputGradFn fn) {
  return [fn = std::move(fn)](const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                              const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
    if (!grad_outputs[0].defined()) return std::vector<Tensor>(inputs.size());
    return fn(inputs, outputs[0], attrs, grad_outputs[0]);
  };
}

Tensor keep_reduced_dims(const Tensor& r, const Shape& x_shape, const std::vector<bool>& mask) {
  const Shape kept = reduced_shape(x_shape, mask, /*keepdim=*/true);
  return r.shape() == kept ? r : reshape(r, kept);
}

Tensor unreduce(const Tensor& g, const Shape& x_shape, const std::vector<bool>& mask) {
  return expand(keep_reduced_dims(g, x_shape, mask), x_shape);
}

Tensor accumulate_at(const Tensor& g, const Tensor& positions, const Tensor& x) {
  const Tensor flat = zeros({x.numel()}, g.dtype());
  const Tensor summed = scatter(flat, 0, reshape(positions, {-1}), reshape(g, {-1}), "add");
  return reshape(summed, x.shape());
}

GradFn reduction_rule(ReductionDerivative d, bool reads_output) {
  return one_output_rule([d, reads_output](const std::vector<Tensor>& in, const Tensor& y,
                                           const Attrs& attrs, const Tensor& g) {
    const Tensor& x = in[0];
    if (!differentiable(x)) return std::vector<Tensor>{Tensor()};
    const Shape& shape = x.shape();
    const std::vector<bool> mask = reduce_args("reduction gradient", shape, attrs).mask;
    std::vector<int64_t> dims;
    for (size_t i = 0; i < mask.size(); ++i) {
      if (mask[i]) dims.push_back(static_cast<int64_t>(i));
    }
    const Tensor dx = d(x, reads_output ? keep_reduced_dims(y, shape, mask) : Tensor(),
                        keep_reduced_dims(g, shape, mask), dims, attrs);
    return std::vector<Tensor>{to(dx, x.dtype())};
  });
}

Tensor divide_by_count(const Tensor& t, const Tensor& x, const std::vector<int64_t>& dims,
                       int64_t correction) {
  if (thread_dispatcher() == nullptr) {
    int64_t count = 1;
    for (int64_t d : dims) count *= x.shape()[d];
    return t / static_cast<double>(std::max<int64_t>(0, count - correction));
  }
  const DType cd = compute_dtype(t.dtype());
  Shape reduced;
  for (int64_t d : dims) reduced.push_back(x.shape()[d]);
  const Tensor count = sum(expand(full({}, Scalar(1.0), cd), reduced), {});
  const Tensor divisor = maximum(count - static_cast<double>(correction), Tensor::scalar(0.0));
  return to(to(t, cd) / divisor, t.dtype());
}

std::vector<Tensor> selected_values_grad(const std::vector<Tensor>& inputs,
                                         const std::vector<Tensor>& outputs, const Attrs& attrs,
                                         const std::vector<Tensor>& grad_outputs) {
  const Tensor& x = inputs[0];
  const Tensor& g = grad_outputs[0];
  if (!g.defined() || !differentiable(x)) return {Tensor()};
  if (x.ndim() == 0) return {reshape(g, {})};
  const int64_t dim = wrap_dim(attrs.get<int64_t>("dim"), x.ndim());
  const bool kept = !attrs.has("keepdim") || attrs.get<bool>("keepdim");
  const Tensor index = kept ? outputs[1] : unsqueeze(outputs[1], dim);
  // Each index names one element of its slice at most once, so GatherBackward's scatter-add
  // into zeros is a scatter, in one op.
  return {gather_backward(kept ? g : unsqueeze(g, dim), index, dim, x.shape())};
}

}  // namespace kiln::detail
