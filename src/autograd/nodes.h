// The Node kinds the autograd layer makes itself (private to src/autograd/):
//   AccumulateGrad  a leaf's accumulator: adds the gradient that reaches it into the leaf's .grad
//   meta_of, untracked_alias, output_alias  helpers of the nodes
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/autograd.h"

namespace kiln::autograd {

/// The AutogradMeta of `t`, created when absent.
AutogradMeta& meta_of(const Tensor& t);
/// A handle autograd does not track with `t`'s values, for a node to save: an alias of t, or,
/// when t is still pending (no metadata to alias yet), a contiguous copy queued behind it.
Tensor untracked_alias(const Tensor& t);
/// An alias of `t` that autograd tracks as output `output_nr` of `node`: what a node hands its
/// gradient rule for a saved output under create_graph, so that the rule's uses of it are
/// differentiable again.
Tensor output_alias(const Tensor& t, std::shared_ptr<Node> node, size_t output_nr);

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : Node({}, 1), leaf_(std::move(leaf)) {}
  /// The accumulator of leaf `t` (which requires grad), shared by every call that uses it.
  static std::shared_ptr<Node> of(const Tensor& t);

  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  const std::shared_ptr<TensorImpl>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

}  // namespace kiln::autograd
