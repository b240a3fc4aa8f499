// The Node kinds the autograd layer makes itself (private to src/autograd/):
//   AccumulateGrad  a leaf's accumulator: adds the gradient that reaches it into the leaf's .grad
//   WriteWatch      what a node keeps to tell that a tensor it saved was changed in place
//   meta_of, output_alias  helpers of the nodes
//   run_grad_hooks  register_hook's and retain_grad's hooks, for the engine
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/autograd.h"

namespace kiln::autograd {

/// The AutogradMeta of `t`, created when absent.
AutogradMeta& meta_of(const Tensor& t);
/// Runs the gradient hooks of the tensors whose gradients `grads` are (one per output of `n`):
/// register_hook's on n's outputs, or on the leaf of an AccumulateGrad, then retain_grad's.
/// What the engine calls on a node's summed gradients before anything reads them.
void run_grad_hooks(Node& n, std::vector<Tensor>& grads);

/// An alias of `t` that autograd tracks as output `output_nr` of `node`: what a node hands its
/// gradient rule for a saved output under create_graph, so that the rule's uses of it are
/// differentiable again.
Tensor output_alias(const Tensor& t, std::shared_ptr<Node> node, size_t output_nr);

/// Note [Saved tensors changed in place]: a node keeps tensors for its gradient (OpNode the
/// call's inputs and outputs, FunctionNode what Forward saved), which later code may still write
/// into, through them or another view of their memory (an optimizer's step, `x[i] = v`, out=).
/// The gradient would then be computed from the new values, silently wrong. So a node notes the
/// write clock at the call (Storage::write_version) and, before its gradient runs, raises kValue
/// if a counted write has hit a saved tensor's memory since. The check is per tensor, not per use:
/// a rule that needs only a saved tensor's shape (Add's) raises too. While the watch lasts, writes
/// into tensors still pending are counted as well (detail::CountPendingWrites). Not seen: writes
/// through raw pointers or NumPy views, as for kiln_cpu's packed weights.
class WriteWatch {
 public:
  /// Throws kValue when a tensor of `saved` has been written into since the watch began, naming
  /// it as `role` and its index ("input 1").
  void check(const std::vector<Tensor>& saved, const char* role) const;
  /// Ends the watch (the node freed what it saved).
  void stop() { counting_pending_writes_.reset(); }

 private:
  uint64_t since_ = Storage::write_clock();
  std::optional<kiln::detail::CountPendingWrites> counting_pending_writes_{std::in_place};
};

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
