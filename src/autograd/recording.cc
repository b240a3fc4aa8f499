// Recording eager op calls for backward (see "Recording" in kiln/autograd.h): the hook call_op
// hands calls with autograd state to, and OpNode, the backward step of one recorded call.
#include <algorithm>
#include <deque>
#include <memory>

#include "autograd/nodes.h"
#include "autograd/view_writes.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/shape.h"
#include "ops/grad_util.h"

namespace kiln::autograd {
namespace {

// Zero tensors of `metas`' shapes and dtypes: the gradients of histories a write replaced.
// (Defined, as PyTorch's: an undefined one would not reach the leaves behind them.)
std::vector<Tensor> zeros_of(const std::vector<TensorMeta>& metas) {
  std::vector<Tensor> zero;
  for (const TensorMeta& m : metas) zero.push_back(zeros(m.shape, m.dtype));
  return zero;
}

// The backward step of one recorded op call: the op's gradient rule over the saved inputs and
// outputs. Outputs are saved as untracked aliases: the outputs themselves point at this node
// (AutogradMeta::grad_fn), so holding them would make a cycle.
//
// An input an op made (a non-leaf) is saved as an untracked alias too (saved): an in-place
// write may later move that tensor's history on to a path through this node (F.relu(y,
// inplace=True) computes from a copy of y, whose node saved y), and the tensor itself would close
// a cycle. The history it had is this node's edge; with create_graph the rule gets aliases that
// point back along the edges (inputs_for_rule), as PyTorch's SavedVariable keeps the grad_fn.
//
// An in-place call's inputs may include the tensor it wrote (y in `y += b`): their values are
// gone, which `overwritten` marks, so a rule that reads them raises instead of computing from
// the new ones. A tensor it wrote that is not among its inputs (y in `y.copy_(w)`) had a history
// the write cut off: one more edge each, after the inputs', gives it zero gradients
// (`replaced`), as PyTorch's does, so the leaves behind it get zeros, not no gradient.
class OpNode final : public Node {
 public:
  OpNode(OpDefPtr op, std::vector<Tensor> inputs, std::vector<bool> overwritten,
         std::vector<Tensor> outputs, Attrs attrs, std::vector<Edge> edges,
         std::vector<TensorMeta> replaced = {})
      : Node(std::move(edges), outputs.size()),
        op_(std::move(op)),
        inputs_(std::move(inputs)),
        overwritten_(std::move(overwritten)),
        outputs_(std::move(outputs)),
        attrs_(std::move(attrs)),
        replaced_(std::move(replaced)) {}

  std::string name() const override { return op_->name(); }

  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override {
    KILN_CHECK_VALUE(!released_)
        << "backward through " << name() << " a second time: the first backward freed what it "
        << "saved; pass retain_graph=true to the first backward to keep it";
    KILN_CHECK_KIND(ErrorKind::kNotImplemented, op_->grad_fn() != nullptr)
        << name() << " has no gradient rule (OpDef::grad), so gradients cannot flow through it";
    return kiln::detail::with_error_context(
        [&] {
          const std::vector<Tensor> inputs = inputs_for_rule();
          const RefuseReads refused(watch_.changed(inputs, "input", overwritten_),
                                    watch_.changed(outputs_, "output"));
          const kiln::detail::UnusedGradients unused(unused_inputs(inputs));
          std::vector<Tensor> grads =
              op_->grad_fn()(inputs, outputs_for_rule(), attrs_, grad_outputs);
          check_gradients(grads);
          for (Tensor& zero : zeros_of(replaced_)) grads.push_back(std::move(zero));
          return grads;
        },
        [&] {
          MetaList metas;
          for (const Tensor& t : inputs_) metas.push_back(TensorMeta::of(t));
          return "in the gradient of " + op_call_str(*op_, metas);
        });
  }

  void release_saved() override {
    inputs_.clear();
    outputs_.clear();
    watch_.stop();
    released_ = true;
  }

 private:
  // With create_graph (grad mode on during backward), a rule's uses of the inputs must be
  // differentiable again: the untracked aliases saved for inputs an op made become aliases along
  // their edges.
  std::vector<Tensor> inputs_for_rule() const {
    if (!is_grad_enabled()) return inputs_;
    std::vector<Tensor> tracked = inputs_;
    for (size_t i = 0; i < tracked.size(); ++i) {
      const Edge& edge = next_edges()[i];
      if (tracked[i].defined() && edge.valid() && tracked[i].impl()->autograd == nullptr) {
        tracked[i] = output_alias(tracked[i], edge.node, edge.input_nr);
      }
    }
    return tracked;
  }

  // With create_graph (grad mode on during backward), a rule's uses of the outputs must be
  // differentiable again: hand it aliases that point back at this node.
  std::vector<Tensor> outputs_for_rule() {
    if (!is_grad_enabled()) return outputs_;
    std::vector<Tensor> tracked;
    for (size_t i = 0; i < outputs_.size(); ++i) {
      tracked.push_back(output_alias(outputs_[i], shared_from_this(), i));
    }
    return tracked;
  }

  // The inputs whose gradients no edge carries on (they do not require one): the rule may skip
  // them (a layer's input data, a constant operand).
  std::vector<const TensorImpl*> unused_inputs(const std::vector<Tensor>& inputs) const {
    std::vector<const TensorImpl*> unused;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].defined() && !next_edges()[i].valid()) unused.push_back(inputs[i].impl());
    }
    return unused;
  }

  void check_gradients(std::vector<Tensor>& grads) const {
    KILN_CHECK_VALUE(grads.size() == inputs_.size())
        << "the gradient rule returned " << grads.size() << " gradients, expected one per input ("
        << inputs_.size() << ")";
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined() || !next_edges()[i].valid()) continue;
      const Tensor& input = inputs_[i];
      KILN_CHECK_SHAPE(grads[i].shape() == input.shape())
          << "the gradient rule returned shape " << shape_str(grads[i].shape()) << " for input "
          << i << ", expected " << shape_str(input.shape());
      if (grads[i].dtype() != input.dtype()) grads[i] = to(grads[i], input.dtype());
    }
  }

  OpDefPtr op_;
  std::vector<Tensor> inputs_;
  std::vector<bool> overwritten_;  // per input: the call itself wrote over it (in place)
  std::vector<Tensor> outputs_;
  Attrs attrs_;
  std::vector<TensorMeta> replaced_;  // per edge after the inputs': the tensor it led from
  WriteWatch watch_;                  // begins at the call: the node is made right after it
  bool released_ = false;
};

// The registry's shared handle of `op`, which keeps it alive as long as the graph needs it; an
// op object that is not the registered one (made by hand) is copied.
OpDefPtr owned(const OpDef& op) {
  OpDefPtr registered = OpRegistry::Instance().find(op.name());
  if (registered.get() == &op) return registered;
  return std::make_shared<const OpDef>(op);
}

// Note [Results decided later]
// A recorded result still in the pipeline points at its node until its dtype says whether it has
// a gradient (AutogradMeta::only_if_floating). An integer one must then let go of the node, or a
// stored integer result (max's indices, a cast) would keep the graph behind it, activations and
// all, alive until it dies. The recording thread keeps its undecided results in the order it made
// them, which is the order the pipeline plans them, and at each call that reaches record_call
// (any call on a tensor with autograd state) releases the nodes of the integer ones planned since.
// So an integer result holds its graph until its thread's next such call, or while it lives if the
// thread makes none (it ended; a result whose op failed keeps it too: reading it raises). Nothing
// is released when the thread ends: releasing a node may run code (a Python Function's context)
// that records, which must not reach this object while it is destroyed. Only this thread ever
// writes the node of such a result, and every reader stops at its dtype first (live_meta in
// tensor_state.cc), so the release needs no lock.
class UndecidedResults {
 public:
  void add(const Tensor& result) { results_.push_back(result.impl_ptr()); }

  void decide_planned() {
    while (!results_.empty()) {
      const std::shared_ptr<TensorImpl> result = results_.front().lock();
      const uint64_t pending =
          result == nullptr ? 0 : result->pending.load(std::memory_order_acquire);
      if (pending != 0 && pending != TensorImpl::kFailedMetadata) return;  // not planned yet
      results_.pop_front();  // first: releasing a node may run code that records (Python's)
      if (result != nullptr && pending == 0 && !is_floating_point(result->dtype)) {
        result->autograd->grad_fn.reset();  // grad_fn is null before the node's destructor runs
      }
    }
  }

 private:
  std::deque<std::weak_ptr<TensorImpl>> results_;
};

thread_local UndecidedResults t_undecided_results;

bool any_requires_grad(TensorSpan tensors) {
  for (const Tensor& t : tensors) {
    if (t.defined() && requires_grad(t)) return true;
  }
  return false;
}

// The step of a write that no input's gradient flows through (`y.zero_()`, `y.copy_(constant)`)
// into tensors that required grad: they still require grad, as in PyTorch, and their previous
// histories (`overwritten`, one edge per out tensor) get zero gradients, so that
// kiln.autograd.grad(y, x) is zeros rather than "x is not used".
class WriteOfConstantNode final : public Node {
 public:
  WriteOfConstantNode(std::string op_name, std::vector<Edge> overwritten,
                      const std::vector<Tensor>& out)
      : Node(overwritten, overwritten.size()), op_name_(std::move(op_name)) {
    for (const Tensor& t : out) metas_.push_back(TensorMeta::of(t));
  }
  std::string name() const override { return op_name_; }
  std::vector<Tensor> apply(const std::vector<Tensor>&) override { return zeros_of(metas_); }

 private:
  std::string op_name_;
  std::vector<TensorMeta> metas_;
};

bool same_memory(const Tensor& a, const Tensor& b) {
  if (a.is_same(b)) return true;
  if (a.is_pending() || b.is_pending()) return false;  // a result still being made: its own memory
  return a.impl()->storage != nullptr && a.impl()->storage == b.impl()->storage;
}

// Whether t is all of its memory: a part of another tensor's (a view made by a Tensor method,
// which autograd does not see) is not.
bool is_all_of_its_memory(const Tensor& t) {
  const std::shared_ptr<Storage>& storage = t.storage();  // (waits for a pending tensor's metadata)
  return storage == nullptr ||
         (t.storage_offset() == 0 && t.is_contiguous() && t.nbytes() == storage->nbytes());
}

// Refuses an in-place write that autograd would track wrongly (see "In-place writes" in
// kiln/autograd.h); returns, per out tensor, the views the write changes too.
std::vector<ViewWrite> check_tracked_write(const OpDef& op, const std::vector<Tensor>& out) {
  std::vector<ViewWrite> writes;
  for (const Tensor& target : out) {
    const bool tracked = requires_grad(target);
    KILN_CHECK_VALUE(!tracked || !is_leaf(target))
        << op.name() << " writes into a leaf tensor that requires grad (out= or an in-place "
        << "operator), which autograd cannot track: its gradient is that of the values before the "
        << "write. Run an update of a parameter under no_grad, or write into a clone() of it";
    // A part of other memory that no recorded view op made (a Tensor view, or a view of a
    // tensor autograd did not track): autograd does not know the other tensor.
    KILN_CHECK_VALUE(made_by_a_view_op(target) || is_all_of_its_memory(target))
        << op.name() << " writes into a " << type_str(target) << " tensor that is part of "
        << "another's memory (a view made where autograd did not see it: of a tensor that did "
        << "not require grad, or under no_grad), which autograd cannot track: the other "
        << "tensor's gradient would miss the write. Use the out-of-place form (y = y + b)";
    writes.push_back(ViewWrite::plan(op, target));
  }
  return writes;
}

// What an OpNode saves of input `t`: an untracked alias of one an op made (see OpNode), else t.
Tensor saved(const Tensor& t) {
  const AutogradMeta* meta = t.defined() ? t.impl()->autograd.get() : nullptr;
  return meta != nullptr && meta->grad_fn != nullptr ? t.alias() : t;
}

// The value of `t` that an in-place call is about to write over, copied for the call's gradient:
// a tensor with t's history (`edge`), so that a rule's use of it is differentiable again.
Tensor copy_before_write(const Tensor& t, const Node::Edge& edge) {
  static const OpDefPtr cast = OpRegistry::Instance().get("Cast");
  Tensor copy = kiln::detail::dispatch_counting_writes(
      *cast, {t}, cast->normalize_attrs({{"dtype", t.dtype()}}), {})[0];
  if (edge.valid()) rebase_history(copy, edge.node, edge.input_nr);
  return copy;
}

// Records an in-place call (one with out tensors) that an input's gradient flows through
// (`recorded`), or that writes into a tensor that requires grad: each floating out tensor's
// history moves on to the call (rebase_history). An input the call writes over is saved as a
// copy of its old value, as PyTorch saves `self` for mul_ and sin_, unless the op's gradient
// ignores it (kTraitGradIgnoresFirstInput: `y += b` copies nothing); the node then refuses a
// read of it. The history of an out tensor that is not an input (`y.copy_(w)`) gets zeros, unless
// it is a view, whose root's history covers it (ViewWrite).
TensorList record_write(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                        const std::vector<Tensor>& out, bool recorded) {
  const std::vector<ViewWrite> view_writes = check_tracked_write(op, out);
  std::vector<Node::Edge> edges;
  std::vector<Tensor> saved_inputs;
  for (const Tensor& t : inputs) saved_inputs.push_back(saved(t));
  std::vector<bool> overwritten(inputs.size(), false);
  std::vector<TensorMeta> replaced;
  if (!recorded) {
    for (const Tensor& target : out) edges.push_back(gradient_edge(target));  // before the write
  } else {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      edges.push_back(t.defined() ? gradient_edge(t) : Node::Edge{});  // before the write
      if (!t.defined() || std::none_of(out.begin(), out.end(),
                                       [&](const Tensor& o) { return same_memory(t, o); })) {
        continue;
      }
      if (i == 0 && op.has_trait(kTraitGradIgnoresFirstInput)) {
        // An untracked alias: the tensor itself would hold the node its history now is (a cycle).
        saved_inputs[i] = t.alias();
        overwritten[i] = true;
      } else {
        saved_inputs[i] = copy_before_write(t, edges.back());
      }
    }
    for (size_t i = 0; i < out.size(); ++i) {
      const Tensor& target = out[i];
      if (view_writes[i].into_a_view() || !requires_grad(target) ||
          std::any_of(inputs.begin(), inputs.end(),
                      [&](const Tensor& t) { return t.defined() && same_memory(t, target); })) {
        continue;
      }
      edges.push_back(gradient_edge(target));
      replaced.push_back(TensorMeta::of(target));
    }
  }
  TensorList results = kiln::detail::dispatch_counting_writes(op, inputs, attrs, out);
  std::shared_ptr<Node> node;
  if (recorded) {
    std::vector<Tensor> saved_outputs;
    for (const Tensor& result : results) saved_outputs.push_back(result.alias());
    node = std::make_shared<OpNode>(owned(op), std::move(saved_inputs), std::move(overwritten),
                                    std::move(saved_outputs), attrs, std::move(edges),
                                    std::move(replaced));
  } else {
    node = std::make_shared<WriteOfConstantNode>(op.name(), std::move(edges), out);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (!is_floating_point(results[i].dtype())) continue;
    rebase_history(results[i], node, static_cast<uint32_t>(i));
    view_writes[i].rebase_after(results[i]);
  }
  return results;
}

TensorList record_call(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                       const std::vector<Tensor>& out) {
  t_undecided_results.decide_planned();
  decide_planned_views();
  const auto dispatch = kiln::detail::dispatch_counting_writes;
  if (!is_grad_enabled()) return dispatch(op, inputs, attrs, out);
  const bool recorded = any_requires_grad(inputs) && !op.has_trait(kTraitNotDifferentiable);
  if (!out.empty()) {
    if (!recorded && !any_requires_grad(out)) return dispatch(op, inputs, attrs, out);
    return record_write(op, inputs, attrs, out, recorded);
  }
  TensorList results = dispatch(op, inputs, attrs, out);
  if (!recorded) return results;

  std::vector<Node::Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) edges.push_back(t.defined() ? gradient_edge(t) : Node::Edge{});
  std::vector<Tensor> saved_outputs;
  saved_outputs.reserve(results.size());
  for (Tensor& result : results) {
    // A result that is an input (a view op with nothing to do) must not turn the input into a
    // non-leaf: it becomes a handle of its own.
    for (const Tensor& t : inputs) {
      if (result.is_same(t)) result = result.alias();
    }
    saved_outputs.push_back(result.alias());
  }
  // A view op's node keeps untracked aliases of all its inputs (its rule reads only their
  // shapes): a write through the view makes the base's history lead back to this node (Note
  // [Writes through views]), and the base itself would close a cycle.
  const bool view = op.has_trait(kTraitView);
  std::vector<Tensor> saved_inputs;
  for (const Tensor& t : inputs) saved_inputs.push_back(view && t.defined() ? t.alias() : saved(t));
  auto node = std::make_shared<OpNode>(owned(op), std::move(saved_inputs), std::vector<bool>(),
                                       std::move(saved_outputs), attrs, std::move(edges));
  const Tensor* view_of = nullptr;  // a view op's first input that requires grad
  for (const Tensor& t : inputs) {
    if (view && view_of == nullptr && t.defined() && requires_grad(t)) view_of = &t;
  }
  for (size_t i = 0; i < results.size(); ++i) {
    // An integer or bool result (max's indices, a comparison, a cast to int) has no gradient. A
    // result still in the pipeline is decided when read (AutogradMeta::only_if_floating): its
    // dtype would wait for the call's planning, and the next op that reads it usually finds it
    // planned.
    const bool pending = results[i].is_pending();
    if (!pending && !is_floating_point(results[i].dtype())) continue;
    AutogradMeta& meta = meta_of(results[i]);
    meta.requires_grad = true;
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(i);
    meta.only_if_floating = pending;
    if (view_of != nullptr) note_view(results[i], *view_of);
    if (pending) t_undecided_results.add(results[i]);
  }
  return results;
}

const bool g_hook_installed = (kiln::detail::set_autograd_call_hook(&record_call), true);

}  // namespace

std::shared_ptr<Node> make_op_node(OpDefPtr op, std::vector<Tensor> inputs,
                                   std::vector<bool> overwritten, std::vector<Tensor> outputs,
                                   Attrs attrs, std::vector<Node::Edge> edges) {
  return std::make_shared<OpNode>(std::move(op), std::move(inputs), std::move(overwritten),
                                  std::move(outputs), std::move(attrs), std::move(edges));
}

}  // namespace kiln::autograd
