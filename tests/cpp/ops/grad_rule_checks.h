// Checks on the built-in ops' gradient rules beyond finite differences
// (grad_testing.h), shared by the grad_*_test.cc suites.
//
//   expect_rule_uses_ops("Mul", {x_f32, y_f32.transpose(0, 1)});
//   EXPECT_TRUE(not_differentiable("Eq"));
//
// expect_rule_uses_ops runs a rule eagerly and inside a kiln::jit trace, where
// reading data throws: a rule that passes is made of ops only (see Note
// [Gradient rules] in src/ops/grad_util.h), so autograd can differentiate it
// again and the jit can trace a backward.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/functional.h"
#include "kiln/jit.h"
#include "kiln/op.h"
#include "testing.h"

namespace kiln::testing {

/// Expects `op_name`'s rule at `inputs` (any dtype and layout) to give,
/// eagerly, a gradient with the input's shape and dtype for every floating
/// input and none for the others, and the same gradients when traced and run by
/// the jit.
inline void expect_rule_uses_ops(const std::string &op_name,
                                 const std::vector<Tensor> &inputs,
                                 const Attrs &attrs = {}, double rtol = 1e-5) {
  SCOPED_TRACE(op_name);
  const OpDefPtr op = OpRegistry::Instance().get(op_name);
  ASSERT_TRUE(op->grad_fn()) << op_name << " has no gradient rule";
  const Attrs normalized = op->normalize_attrs(attrs);
  const std::vector<Tensor> ys = call_op(*op, inputs, normalized);
  std::vector<Tensor> gys;
  std::vector<Tensor> jit_inputs = inputs;
  for (const Tensor &y : ys) {
    gys.push_back(is_floating_point(y.dtype()) ? randn(y.shape(), y.dtype())
                                               : Tensor());
    if (gys.back().defined())
      jit_inputs.push_back(gys.back());
  }
  const std::vector<Tensor> eager = op->grad_fn()(inputs, ys, normalized, gys);
  ASSERT_EQ(eager.size(), inputs.size());
  std::vector<Tensor> eager_defined;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor &x = inputs[k];
    if (!is_floating_point(x.dtype())) {
      EXPECT_FALSE(eager[k].defined())
          << "a gradient for the non-floating input " << k;
      continue;
    }
    ASSERT_TRUE(eager[k].defined()) << "no gradient for input " << k;
    EXPECT_EQ(eager[k].dtype(), x.dtype()) << "gradient " << k;
    EXPECT_EQ(eager[k].shape(), x.shape()) << "gradient " << k;
    eager_defined.push_back(eager[k]);
  }
  const size_t n = inputs.size();
  const TensorFn traced = [&](const std::vector<Tensor> &in) {
    const std::vector<Tensor> xs(in.begin(),
                                 in.begin() + static_cast<std::ptrdiff_t>(n));
    const std::vector<Tensor> outs = call_op(*op, xs, normalized);
    std::vector<Tensor> gs;
    size_t next = n;
    for (const Tensor &g : gys)
      gs.push_back(g.defined() ? in[next++] : Tensor());
    std::vector<Tensor> result;
    for (const Tensor &gx : op->grad_fn()(xs, outs, normalized, gs)) {
      if (gx.defined())
        result.push_back(gx);
    }
    return result;
  };
  const std::vector<Tensor> jitted =
      jit(traced, {}, "grad_" + op_name)(jit_inputs);
  ASSERT_EQ(jitted.size(), eager_defined.size());
  for (size_t i = 0; i < jitted.size(); ++i)
    expect_close(jitted[i], eager_defined[i], rtol);
}

/// True when `op_name` is marked kTraitNotDifferentiable and has no rule.
inline bool not_differentiable(const std::string &op_name) {
  const OpDefPtr op = OpRegistry::Instance().get(op_name);
  return op->has_trait(kTraitNotDifferentiable) && !op->grad_fn();
}

} // namespace kiln::testing
