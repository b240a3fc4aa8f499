// Checks an op's gradient rule (OpDef::grad_fn) against central finite differences, without the
// autograd engine: the rule is called directly, so a wrong rule is found here even before any
// backward pass runs through it.
//
//   kiln::testing::expect_grad_rule("Mul", {kiln::randn({2, 3}, f64), kiln::randn({3}, f64)});
//
// Inputs should be float64 (finite differences in float32 are too coarse). For every output a
// random cotangent `gy` is drawn; the rule's input gradients are compared with
// d/dx sum_j <y_j(x), gy_j> computed by perturbing one element of one input at a time by +-eps.
// Integer and bool inputs, and inputs listed in `skip_inputs`, are not perturbed.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kiln/functional.h"
#include "kiln/op.h"
#include "kiln/runtime.h"

namespace kiln::testing {

namespace grad_testing_detail {

// sum_j <outputs_j, cotangents_j> over the floating outputs, in float64.
inline double weighted_sum(const std::vector<Tensor>& outputs,
                           const std::vector<Tensor>& cotangents) {
  double total = 0;
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (!cotangents[j].defined()) continue;
    const Tensor y = to(outputs[j], DType::kFloat64).contiguous();
    const Tensor g = cotangents[j].contiguous();
    for (int64_t i = 0; i < y.numel(); ++i) total += y.data<double>()[i] * g.data<double>()[i];
  }
  return total;
}

}  // namespace grad_testing_detail

/// Expects `op_name`'s gradient rule at `inputs` to match finite differences within
/// atol + rtol * |numeric| per element.
inline void expect_grad_rule(const std::string& op_name, const std::vector<Tensor>& inputs,
                             const Attrs& attrs = {}, double eps = 1e-6, double atol = 1e-5,
                             double rtol = 1e-4, const std::vector<size_t>& skip_inputs = {}) {
  const OpDefPtr op = OpRegistry::Instance().get(op_name);
  ASSERT_TRUE(op->grad_fn()) << op_name << " has no gradient rule";
  const Attrs normalized = op->normalize_attrs(attrs);
  // Contiguous copies we may perturb in place without touching the caller's tensors.
  std::vector<Tensor> xs;
  for (const Tensor& x : inputs) xs.push_back(x.defined() ? x.clone() : x);
  const std::vector<Tensor> ys = call_op(*op, xs, normalized);
  std::vector<Tensor> gys;
  for (const Tensor& y : ys) {
    gys.push_back(is_floating_point(y.dtype()) ? randn(y.shape(), DType::kFloat64) : Tensor());
  }
  std::vector<Tensor> analytic = op->grad_fn()(xs, ys, normalized, gys);
  runtime::synchronize();
  ASSERT_EQ(analytic.size(), xs.size()) << op_name << ": one gradient per input expected";

  for (size_t k = 0; k < xs.size(); ++k) {
    const Tensor& x = xs[k];
    const bool skipped =
        std::find(skip_inputs.begin(), skip_inputs.end(), k) != skip_inputs.end();
    if (!x.defined() || !is_floating_point(x.dtype()) || skipped) continue;
    ASSERT_TRUE(analytic[k].defined()) << op_name << ": no gradient for input " << k;
    ASSERT_EQ(analytic[k].shape(), x.shape()) << op_name << ": gradient " << k << " shape";
    const Tensor a = to(analytic[k], DType::kFloat64).contiguous();
    double* px = x.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double saved = px[i];
      px[i] = saved + eps;
      const double plus = grad_testing_detail::weighted_sum(call_op(*op, xs, normalized), gys);
      px[i] = saved - eps;
      const double minus = grad_testing_detail::weighted_sum(call_op(*op, xs, normalized), gys);
      px[i] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      EXPECT_NEAR(a.data<double>()[i], numeric, atol + rtol * std::abs(numeric))
          << op_name << ": d/d input " << k << " element " << i;
    }
  }
}

/// The gradients `op_name`'s rule gives at `inputs` for the output gradients `grads` (random ones,
/// in each output's dtype, when empty), the rule called directly after the op ran eagerly.
inline std::vector<Tensor> run_rule(const std::string& op_name, const std::vector<Tensor>& inputs,
                                    const Attrs& attrs = {}, std::vector<Tensor> grads = {}) {
  const OpDefPtr op = OpRegistry::Instance().get(op_name);
  const Attrs normalized = op->normalize_attrs(attrs);
  const std::vector<Tensor> outputs = call_op(*op, inputs, normalized);
  if (grads.empty()) {
    for (const Tensor& y : outputs) grads.push_back(randn(y.shape(), y.dtype()));
  }
  std::vector<Tensor> result = op->grad_fn()(inputs, outputs, normalized, grads);
  runtime::synchronize();
  return result;
}

}  // namespace kiln::testing
