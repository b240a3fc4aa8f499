// Functional differentiation (kiln/autograd.h, "Functional differentiation"): the function runs
// with recording on, then one grad() call finds every target's gradient at once.
#include <utility>
#include <vector>

#include "kiln/autograd.h"
#include "kiln/error.h"
#include "kiln/functional/factory.h"

namespace kiln::autograd {
namespace {

GradResult evaluate(const DifferentiableFn& fn, const std::vector<Tensor>& args,
                    const std::vector<int64_t>& grad_positions, const std::vector<Tensor>& weights,
                    bool has_aux) {
  KILN_CHECK_VALUE(!grad_positions.empty() || !weights.empty())
      << "value_and_grad: nothing to differentiate: no grad position and no weight";
  const auto num_args = static_cast<int64_t>(args.size());
  std::vector<Tensor> call_args = args;
  bool nested = false;
  if (is_grad_enabled()) {
    for (const Tensor& a : args) nested = nested || (a.defined() && requires_grad(a));
  }
  std::vector<Tensor> sources;
  for (int64_t position : grad_positions) {
    KILN_CHECK_VALUE(position >= -num_args && position < num_args)
        << "value_and_grad: grad position " << position << " is out of range for " << num_args
        << " arguments";
    const size_t p = static_cast<size_t>(position < 0 ? position + num_args : position);
    KILN_CHECK_VALUE(call_args[p].defined())
        << "value_and_grad: argument " << p << " is undefined; expected a tensor";
    KILN_CHECK_DTYPE(is_floating_point(call_args[p].dtype()))
        << "value_and_grad: argument " << p << " is " << call_args[p].dtype()
        << "; only floating-point arguments can be differentiated";
    if (!requires_grad(call_args[p])) {
      call_args[p] = detach(call_args[p]);
      set_requires_grad(call_args[p], true);
    }
    sources.push_back(call_args[p]);
  }
  const size_t num_targets = sources.size();
  for (const Tensor& w : weights) {
    KILN_CHECK_VALUE(w.defined()) << "value_and_grad: a weight is undefined";
    if (requires_grad(w)) sources.push_back(w);
  }

  GradResult result;
  {
    GradModeGuard recording(true);
    result.value = fn(call_args);
  }
  KILN_CHECK_VALUE(!has_aux || result.value.size() >= 2)
      << "value_and_grad: has_aux needs fn to return at least two outputs, got "
      << result.value.size();
  const size_t differentiated = has_aux ? 1 : result.value.size();
  std::vector<Tensor> live, ones;
  for (size_t i = 0; i < differentiated; ++i) {
    const Tensor& out = result.value[i];
    if (!out.defined() || !requires_grad(out)) continue;
    live.push_back(out);
    ones.push_back(ones_like(out));
  }
  std::vector<Tensor> found(sources.size());
  if (!live.empty() && !sources.empty()) {
    found = grad(live, sources, ones, /*retain_graph=*/nested, /*create_graph=*/nested,
                 /*allow_unused=*/true);
  }
  const auto gradient_of = [&](size_t k, const Tensor& t) {
    return found[k].defined() ? found[k] : zeros_like(t);
  };
  for (size_t k = 0; k < num_targets; ++k) result.grads.push_back(gradient_of(k, sources[k]));
  size_t next = num_targets;
  for (const Tensor& w : weights) {
    result.weight_grads.push_back(requires_grad(w) ? gradient_of(next++, w) : zeros_like(w));
  }
  if (!nested) {
    for (Tensor& v : result.value) {
      if (v.defined()) v = detach(v);
    }
  }
  return result;
}

}  // namespace

std::function<GradResult(const std::vector<Tensor>&)> value_and_grad(
    DifferentiableFn fn, std::vector<int64_t> grad_positions, std::vector<Tensor> weights,
    bool has_aux) {
  return [fn = std::move(fn), positions = std::move(grad_positions),
          weights = std::move(weights), has_aux](const std::vector<Tensor>& args) {
    return evaluate(fn, args, positions, weights, has_aux);
  };
}

}  // namespace kiln::autograd
