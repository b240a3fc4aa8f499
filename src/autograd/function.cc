// Custom differentiable functions (kiln::Function<T>, and Python's kiln.autograd.Function through
// the bindings): AutogradContext and the Node that calls a user's Backward.
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>

#include "autograd/nodes.h"
#include "autograd/view_writes.h"
#include "kiln/functional/elementwise.h"

namespace kiln::autograd {

void AutogradContext::SaveForBackward(std::vector<Tensor> tensors) { saved_ = std::move(tensors); }

const std::vector<Tensor>& AutogradContext::GetSavedTensors() const {
  KILN_CHECK_VALUE(!released_)
      << "GetSavedTensors: the saved tensors were freed by an earlier backward; pass "
      << "retain_graph=true to it to backward through this function again";
  return saved_;
}

bool AutogradContext::NeedsInputGrad(size_t index) const {
  KILN_CHECK_INDEX(index < needs_input_grad_.size())
      << "NeedsInputGrad: index " << index << " out of range for " << needs_input_grad_.size()
      << " tensor inputs";
  return needs_input_grad_[index];
}

void AutogradContext::MarkNonDifferentiable(const std::vector<Tensor>& outputs) {
  non_differentiable_.insert(non_differentiable_.end(), outputs.begin(), outputs.end());
}

bool AutogradContext::is_non_differentiable(const Tensor& output) const {
  return std::any_of(non_differentiable_.begin(), non_differentiable_.end(),
                     [&](const Tensor& t) { return t.is_same(output); });
}

void AutogradContext::replace_saved(const Tensor& from, const Tensor& to) {
  for (Tensor& t : saved_) {
    if (t.is_same(from)) t = to;
  }
}

void AutogradContext::release_saved() {
  saved_.clear();
  released_ = true;
}

namespace {

std::string demangle(const std::string& name) {
  int status = 0;
  char* readable = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (readable == nullptr) return name;
  std::string result(readable);
  std::free(readable);
  return result;
}

class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, std::shared_ptr<AutogradContext> ctx, std::vector<Tensor> inputs,
               std::vector<Edge> edges, size_t num_outputs, detail::FunctionBackward backward)
      : Node(std::move(edges), num_outputs),
        name_(std::move(name)),
        ctx_(std::move(ctx)),
        inputs_(std::move(inputs)),
        backward_(std::move(backward)) {}

  std::string name() const override { return name_; }

  /// Output `index`, saved in the context as `alias` (a handle without gradient state: the
  /// context must not point back at this node).
  void note_saved_output(size_t index, const Tensor& alias) {
    saved_outputs_.emplace_back(index, alias);
  }

  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override {
    try {
      watch_.check(ctx_->GetSavedTensors(), "saved tensor");
      const TrackedOutputs tracked(*this);
      std::vector<Tensor> grads = backward_(ctx_.get(), grad_outputs);
      KILN_CHECK_VALUE(grads.size() == inputs_.size())
          << "Backward returned " << grads.size() << " gradients, expected one per Tensor "
          << "argument of Forward (" << inputs_.size() << ")";
      for (size_t i = 0; i < grads.size(); ++i) {
        if (!grads[i].defined() || !next_edges()[i].valid()) continue;
        KILN_CHECK_SHAPE(grads[i].shape() == inputs_[i].shape())
            << "Backward returned shape " << shape_str(grads[i].shape()) << " for input " << i
            << ", expected " << shape_str(inputs_[i].shape());
        // A gradient is of its input's dtype, as PyTorch casts it (a float64 one of a float32
        // input reached .grad as float64).
        if (grads[i].dtype() != inputs_[i].dtype()) grads[i] = to(grads[i], inputs_[i].dtype());
      }
      return grads;
    } catch (Error& e) {
      e.add_context("in the Backward of " + name_);
      throw;
    }
  }

  void release_saved() override {
    ctx_->release_saved();
    watch_.stop();
  }

 private:
  // With create_graph (grad mode on during backward), Backward's uses of the saved outputs must
  // be differentiable again (d/dx of a Backward that reads y = x * x is 2 * dy/dx...): for the
  // call, the context holds aliases that point back at this node, as OpNode hands its rule.
  class TrackedOutputs {
   public:
    explicit TrackedOutputs(FunctionNode& node) : node_(node) {
      if (!is_grad_enabled()) return;
      for (const auto& [index, alias] : node_.saved_outputs_) {
        Tensor tracked = output_alias(alias, node_.shared_from_this(), index);
        node_.ctx_->replace_saved(alias, tracked);
        swapped_.emplace_back(alias, std::move(tracked));
      }
    }
    ~TrackedOutputs() {
      for (const auto& [alias, tracked] : swapped_) node_.ctx_->replace_saved(tracked, alias);
    }
    TrackedOutputs(const TrackedOutputs&) = delete;
    TrackedOutputs& operator=(const TrackedOutputs&) = delete;

   private:
    FunctionNode& node_;
    std::vector<std::pair<Tensor, Tensor>> swapped_;  // (untracked alias, tracked alias)
  };

  std::string name_;
  std::shared_ptr<AutogradContext> ctx_;
  std::vector<Tensor> inputs_;  // for the shapes of their gradients
  detail::FunctionBackward backward_;
  std::vector<std::pair<size_t, Tensor>> saved_outputs_;  // (output index, the context's alias)
  WriteWatch watch_;  // begins when the call is recorded, after Forward
};

}  // namespace

std::vector<Tensor> detail::record_function(const std::string& name,
                                            std::shared_ptr<AutogradContext> ctx,
                                            const std::vector<Tensor>& inputs,
                                            std::vector<Tensor> outputs,
                                            FunctionBackward backward) {
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && requires_grad(t));
  if (!is_grad_enabled() || !any) return outputs;
  std::vector<Node::Edge> edges;
  for (const Tensor& t : inputs) edges.push_back(t.defined() ? gradient_edge(t) : Node::Edge{});
  auto node = std::make_shared<FunctionNode>(demangle(name), ctx, inputs, std::move(edges),
                                             outputs.size(), std::move(backward));
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    if (!out.defined()) continue;
    // Forward may return a tensor of the caller's as is (an input, a constant): every output gets
    // its own handle, so that the caller's tensor keeps its own gradient state.
    if (ctx->is_non_differentiable(out) || !is_floating_point(out.dtype())) {
      if (requires_grad(out)) out = out.alias();  // requires no grad (an integer output has none)
      continue;
    }
    // The context must not hold the output that points back at it (a cycle): it keeps an alias.
    const Tensor alias = out.alias();
    ctx->replace_saved(out, alias);
    node->note_saved_output(i, alias);
    // An input returned as it is shares its memory with the output: a view of it, so that an
    // in-place write into either moves the other's history on (Note [Writes through views]).
    const auto input = std::find_if(inputs.begin(), inputs.end(), [&](const Tensor& t) {
      return t.defined() && t.is_same(out) && requires_grad(t);
    });
    out = out.alias();
    AutogradMeta& meta = meta_of(out);
    meta.requires_grad = true;
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(i);
    if (input != inputs.end()) note_view(out, *input);
  }
  return outputs;
}

void detail::record_without_gradient(const std::string& name, const std::vector<Tensor>& inputs,
                                     const std::vector<Tensor>& outputs, std::string reason) {
  if (!is_grad_enabled()) return;
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && requires_grad(t));
  if (!any) return;
  std::vector<Node::Edge> edges;
  for (const Tensor& t : inputs) edges.push_back(t.defined() ? gradient_edge(t) : Node::Edge{});
  auto node = std::make_shared<FunctionNode>(
      name, std::make_shared<AutogradContext>(), inputs, std::move(edges), outputs.size(),
      [reason = std::move(reason)](AutogradContext*, const std::vector<Tensor>&)
          -> std::vector<Tensor> { KILN_FAIL(kNotImplemented) << reason; });
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    if (!out.defined() || !is_floating_point(out.dtype()) || out.impl()->autograd != nullptr) {
      continue;
    }
    AutogradMeta& meta = meta_of(out);
    meta.requires_grad = true;
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(i);
  }
}

}  // namespace kiln::autograd
