// The Node kinds the autograd layer makes itself (private to src/autograd/):
//   AccumulateGrad  a leaf's accumulator: adds the gradient that reaches it into the leaf's .grad
//   WriteWatch      what a node keeps to tell that a tensor it saved was changed in place
//   RefuseReads     what refuses a gradient rule's reads of such a tensor
//   make_op_node, rebase_history  recording a call, and moving a tensor's history on to a write
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

/// The node of a recorded call of `op` (its gradient rule over the saved tensors); `overwritten`
/// marks inputs whose values the call itself wrote over (a read of them raises), empty for none.
std::shared_ptr<Node> make_op_node(OpDefPtr op, std::vector<Tensor> inputs,
                                   std::vector<bool> overwritten, std::vector<Tensor> outputs,
                                   Attrs attrs, std::vector<Node::Edge> edges);

/// Moves t's history on to output `output_nr` of `node`, the in-place call that wrote it (`y +=
/// b`): t requires grad and its grad_fn is `node`, whose edges lead to t's previous history; a
/// retain_grad() follows t to the new node.
void rebase_history(const Tensor& t, std::shared_ptr<Node> node, uint32_t output_nr);

/// An alias of `t` that autograd tracks as output `output_nr` of `node`: what a node hands its
/// gradient rule for a saved output under create_graph, so that the rule's uses of it are
/// differentiable again.
Tensor output_alias(const Tensor& t, std::shared_ptr<Node> node, size_t output_nr);

/// Note [Saved tensors changed in place]: a node keeps tensors for its gradient (OpNode the
/// call's inputs and outputs, FunctionNode what Forward saved), which later code may still write
/// into, through them or another view of their memory (an optimizer's step, `x[i] = v`, out=).
/// The gradient would then be computed from the new values, silently wrong. So a node notes the
/// write clock at the call (Storage::write_version) and, before its gradient runs, raises kValue
/// if a counted write has hit a saved tensor's memory since. A FunctionNode checks each tensor
/// Forward saved (it saved them to use them); an OpNode checks per use, since it saves all of a
/// call's tensors and most rules read few (Add's none, Conv's not its output): while its rule
/// runs, RefuseReads makes every op call that reads a changed tensor's memory raise, so
/// `y = conv(x); y += b` has a backward and `y = exp(x); y += b` (Exp's rule reads y) raises.
/// A rule that reads a saved tensor's data without an op is not covered (none of Kiln's do).
/// While the watch lasts, writes into tensors still pending are counted as well
/// (detail::CountPendingWrites). Not seen: writes through raw pointers or NumPy views, as for
/// kiln_cpu's packed weights.
class WriteWatch {
 public:
  /// A saved tensor whose values are gone, and the error reading it raises.
  struct Changed {
    const TensorImpl* tensor;  // the saved handle
    const Storage* memory;     // any view of it reads the changed values too; null: the handle only
    std::string message;
  };
  /// The tensors of `saved` written into since the watch began, each named as `role` and its index
  /// ("input 1"); with those `overwritten` marks (an in-place call's own target, by handle).
  std::vector<Changed> changed(const std::vector<Tensor>& saved, const char* role,
                               const std::vector<bool>& overwritten = {}) const;
  /// Throws the kValue error of the first changed tensor of `saved`.
  void check(const std::vector<Tensor>& saved, const char* role) const;
  /// Ends the watch (the node freed what it saved).
  void stop() { counting_pending_writes_.reset(); }

 private:
  uint64_t since_ = Storage::write_clock();
  std::optional<kiln::detail::CountPendingWrites> counting_pending_writes_{std::in_place};
};

/// While alive, makes this thread's op calls that read a changed tensor raise its error (see
/// Note [Saved tensors changed in place]); installs nothing when none changed.
class RefuseReads final : public kiln::detail::CallInputCheck {
 public:
  RefuseReads(std::vector<WriteWatch::Changed> inputs, std::vector<WriteWatch::Changed> outputs);
  ~RefuseReads();
  RefuseReads(const RefuseReads&) = delete;
  RefuseReads& operator=(const RefuseReads&) = delete;
  void check(const OpDef& op, TensorSpan inputs) const override;

 private:
  std::vector<WriteWatch::Changed> changed_;
  const kiln::detail::CallInputCheck* previous_ = nullptr;
  bool installed_ = false;
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
