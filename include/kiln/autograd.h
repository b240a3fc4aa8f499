// Autograd: reverse-mode gradients of eager computations.
//
//   kiln::Tensor w = kiln::randn({3, 2});
//   kiln::autograd::set_requires_grad(w, true);
//   kiln::Tensor loss = kiln::sum(kiln::square(kiln::matmul(x, w)));
//   kiln::autograd::backward({loss});                      // w's .grad is now d loss / d w
//   kiln::Tensor dw = kiln::autograd::get_grad(w);
//   std::vector<kiln::Tensor> g = kiln::autograd::grad({loss}, {w});   // or, without .grad
//
// Recording. Every eager op call goes through call_op (kiln/op.h). When grad mode is on and an
// input requires grad, the call is recorded as a Node of the backward graph: the op, its inputs,
// its outputs, its attributes and one Edge per input to where that input's gradient goes (the
// Node that made it, or the leaf's accumulator). The outputs then require grad and point back at
// the Node (AutogradMeta::grad_fn). An op's gradient is its OpDef's gradient rule (OpDef::grad),
// written with other ops, so that:
//   - backward runs those ops eagerly, through the pipeline, like any other call;
//   - with create_graph the backward ops are recorded too (higher-order gradients);
//   - inside kiln::jit the backward ops are traced, so forward and backward become one graph.
// Ops with kTraitNotDifferentiable (comparisons, argmax, ...) are not recorded; their outputs do
// not require grad. An op without a gradient rule is recorded, and backward through it raises a
// kNotImplemented error naming it.
//
// In-place writes (out= or an in-place operator) are recorded as PyTorch records them: the
// written tensor's history moves on to the call (`y += b` makes y's grad_fn an Add whose edge
// goes to y's previous grad_fn), so `y = conv(x); y += identity` trains. A write through a view a
// recorded view op made (reshape, transpose, x[i] from Python) moves its base's history on too,
// and a write into a base its live views' (PyTorch's CopySlices; src/autograd/view_writes.cc).
// With grad mode on these writes are refused (kValue), since autograd would miss part of the
// change: into a leaf that requires grad, or a view of one (run an optimizer's update under
// NoGradGuard); into part of another tensor's memory that no recorded view op made (a Tensor view
// made in C++, a view of a tensor that did not require grad); through views of a base that is not
// contiguous. A tensor a node saved (an op's inputs and
// outputs, a Function's saved tensors) that such a write, or one through another view of its
// memory, changes before backward reaches the node fails that backward with a kValue naming it,
// if the node's gradient reads it (Storage::write_version tells; writes through raw pointers are
// not seen): clone it first, or change it after backward. So `y = exp(x); y += 1` fails its
// backward, as Exp's gradient reads y, as PyTorch's does; `y *= w` keeps a copy of y's old value.
//
// Custom differentiable functions: kiln::Function<T> (below), whose T has static Forward and
// Backward, for code that is not a single op (a custom op's kernel called through OpRunner, or a
// composite with a cheaper hand-written gradient).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "kiln/export.h"
#include "kiln/op.h"
#include "kiln/tensor.h"

namespace kiln {

namespace autograd {
class Node;
/// A hook on a tensor's gradient (register_hook): returns the gradient to use instead, or an
/// undefined tensor to keep it.
using GradHook = std::function<Tensor(const Tensor& grad)>;
}  // namespace autograd

/// The gradient state of one tensor (TensorImpl::autograd). Read it through the functions below
/// (requires_grad(), grad_fn(), ...), which honour `only_if_floating`.
struct KILN_API AutogradMeta {
  AutogradMeta() = default;
  ~AutogradMeta();  // forgets its grad_hooks in the process-wide count
  bool requires_grad = false;
  /// The recorded call that made this tensor; null for a leaf (a tensor the user marked).
  std::shared_ptr<autograd::Node> grad_fn;
  /// Set on a recorded op's result whose dtype the pipeline had not planned yet: requires_grad
  /// and grad_fn hold only if the dtype turns out floating point (an integer or bool result has
  /// no gradient). Deciding it when read, not when recorded, spares the caller a wait for the
  /// call's metadata.
  bool only_if_floating = false;
  /// Which output of grad_fn this tensor is.
  uint32_t output_nr = 0;
  /// A leaf's accumulator: the Node that adds gradients into `grad`. Weak: the graphs that use
  /// the leaf own it.
  std::weak_ptr<autograd::Node> grad_accumulator;
  std::mutex mutex;  // guards grad, grad_accumulator and the hooks
  /// The accumulated gradient of a leaf (PyTorch's .grad); undefined until a backward reaches it.
  Tensor grad;
  /// register_post_accumulate_grad_hook's hooks, by handle.
  std::vector<std::pair<uint64_t, std::function<void(const Tensor&)>>> post_accumulate_grad_hooks;
  /// register_hook's hooks on a leaf's gradient, by handle (a non-leaf's are on its grad_fn).
  std::vector<std::pair<uint64_t, autograd::GradHook>> grad_hooks;
  /// retain_grad() was called on this non-leaf: backward accumulates its gradient into `grad`.
  bool retains_grad = false;
  /// Set on a tensor a recorded view op (kTraitView) made: the op's input, kept alive as
  /// PyTorch's `_base` is. Where the two share memory (the op made a view, not a copy), an
  /// in-place write into either moves the other's history on too (see "In-place writes").
  std::shared_ptr<TensorImpl> view_parent;
  /// On a view op's input: the tensors recorded view ops made of it (their view_parent).
  std::vector<std::weak_ptr<TensorImpl>> views;
};

namespace autograd {

/// One step of the backward graph: the gradients of a call's inputs from those of its outputs.
class KILN_API Node : public std::enable_shared_from_this<Node> {
 public:
  /// Where one input's gradient goes: input `input_nr` of `node`, or nowhere (null node).
  struct Edge {
    std::shared_ptr<Node> node;
    uint32_t input_nr = 0;
    bool valid() const { return node != nullptr; }
  };

  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// What backward errors and grad_fn print: the op's name ("Mul"), "AccumulateGrad", ...
  virtual std::string name() const = 0;
  /// One gradient per next edge, from one gradient per output of the recorded call (an
  /// undefined tensor is a zero gradient; at least one is defined). Undefined results: none.
  virtual std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) = 0;
  /// Frees what the node saved for apply(), after a backward that does not retain the graph.
  virtual void release_saved() {}

  size_t num_outputs() const { return num_outputs_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }

 protected:
  Node(std::vector<Edge> next_edges, size_t num_outputs)
      : next_edges_(std::move(next_edges)), num_outputs_(num_outputs) {}

 private:
  friend struct NodeGradHooks;  // register_hook's access (tensor_state.cc)
  struct GradHookEntry {
    uint64_t handle = 0;  // 0: retain_grad's, which runs after the others
    uint32_t output_nr = 0;
    GradHook hook;
  };

  std::vector<Edge> next_edges_;
  size_t num_outputs_;
  /// register_hook's hooks on the gradients of this node's outputs (non-leaf tensors), and
  /// retain_grad's, guarded by one process-wide mutex.
  std::vector<GradHookEntry> grad_hooks_;
};

/// The edge along which a gradient of `t` flows back: t's grad_fn and output number, the
/// accumulator of a leaf, or an invalid edge when t does not require grad.
KILN_API Node::Edge gradient_edge(const Tensor& t);

/// The leaf whose .grad `node` accumulates into when it is a leaf's accumulator (the node
/// gradient_edge gives a leaf; PyTorch's AccumulateGrad.variable); an undefined tensor for any
/// other node.
KILN_API Tensor accumulated_leaf(const Node& node);

// ---- Grad mode (per thread; on by default) ------------------------------------------------------

KILN_API bool is_grad_enabled();
KILN_API void set_grad_enabled(bool enabled);

/// Sets grad mode for a scope and restores the previous mode on exit.
class KILN_API GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

/// No recording in this scope (inference, optimizer updates).
class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

/// Makes backward() on this thread refuse to accumulate into leaves' .grad, with `reason` as the
/// error's message (kNotImplemented), until it is called with nullptr; returns the previous
/// reason. Only the pointer is kept: `reason` must outlive the setting (a string literal).
/// kiln.jit's trace sets one: the gradients it records are values without data.
KILN_API const char* set_grad_accumulation_refused(const char* reason);

// ---- Tensor state -------------------------------------------------------------------------------
// Whether a recorded op's result requires grad depends on its dtype (floating point only), so for
// a result still in the pipeline requires_grad(), is_leaf(), grad_fn() and gradient_edge() wait
// for its metadata, and raise its op's failure if the op failed before it was known.

KILN_API bool requires_grad(const Tensor& t);
/// Marks a leaf as requiring grad (or not). Throws kDType for a non-floating tensor and kValue for
/// taking it away from a tensor made by a recorded op (its requires_grad follows from its inputs;
/// detach() it first); asking such a tensor to require grad changes nothing, as in PyTorch.
KILN_API void set_requires_grad(const Tensor& t, bool value = true);
/// True for tensors no recorded op made (every tensor that does not require grad, too).
KILN_API bool is_leaf(const Tensor& t);
/// The recorded call that made `t`, or null.
KILN_API std::shared_ptr<Node> grad_fn(const Tensor& t);
/// The accumulated gradient of a leaf (undefined until backward reaches it).
KILN_API Tensor get_grad(const Tensor& t);
/// Replaces (or, with an undefined tensor, clears) the accumulated gradient. Throws kShape or
/// kDType when `grad` does not match `t`.
KILN_API void set_grad(const Tensor& t, const Tensor& grad);
/// A new handle to the same data that autograd does not track (a leaf that does not require
/// grad): Tensor::alias(), so it does not wait for a pending tensor, and a failed one's failure
/// is raised where the detached tensor is read.
KILN_API Tensor detach(const Tensor& t);
/// Makes `t` itself a leaf that does not require grad (PyTorch's detach_): its history is
/// forgotten. Throws kValue for a view a recorded view op made (as PyTorch): detach() it instead.
KILN_API void detach_in_place(const Tensor& t);
/// The view `make_view(base)` of base (a Tensor view method: select, slice, ...), recorded as an
/// AsStrided call when base requires grad and grad mode is on, so that gradients flow through it.
KILN_API Tensor differentiable_view(const Tensor& base,
                                   const std::function<Tensor(const Tensor&)>& make_view);

/// Calls `hook(leaf)` every time backward() has accumulated a gradient into the leaf's .grad
/// (after the add, on the thread running backward): DataParallel starts a gradient's all-reduce
/// from here while backward goes on. Returns a handle for remove_post_accumulate_grad_hook.
/// Throws kValue unless `leaf` is a leaf that requires grad. grad() does not accumulate, so it
/// calls no hooks.
KILN_API uint64_t register_post_accumulate_grad_hook(const Tensor& leaf,
                                                      std::function<void(const Tensor&)> hook);
/// Removes a hook; an unknown handle is ignored (removing twice is harmless).
KILN_API void remove_post_accumulate_grad_hook(const Tensor& leaf, uint64_t handle);

/// Calls `hook(grad)` with the gradient of `t` each time backward() or grad() computes it: for a
/// tensor a recorded op made, the sum over its uses, before it flows on (the hook is on its
/// grad_fn, so it also sees the gradient of other handles to the same output); for a leaf,
/// before it is accumulated into .grad or returned by grad(). A defined result replaces the
/// gradient (it must have the gradient's shape and dtype: kShape / kDType otherwise, raised by
/// that backward). Hooks run in the order registered, on the thread running backward, with grad
/// mode set to create_graph. Returns a handle for remove_hook. Throws kValue when t does not
/// require grad.
KILN_API uint64_t register_hook(const Tensor& t, GradHook hook);
/// Removes a hook of t; an unknown handle is ignored.
KILN_API void remove_hook(const Tensor& t, uint64_t handle);
/// Removes a hook registered on a tensor `grad_fn` made (its hooks live there): for a holder that
/// must not keep the tensor alive, as a Python hook handle, whose hook may refer to the handle.
KILN_API void remove_hook(Node& grad_fn, uint64_t handle);
/// Makes backward() accumulate the gradient of `t`, a tensor a recorded op made, into its .grad
/// as it does for leaves (after t's hooks); a leaf's is kept anyway. Throws kValue when t does
/// not require grad.
KILN_API void retain_grad(const Tensor& t);
/// True for a tensor a recorded op made that retain_grad() was called on (false for a leaf, as in
/// PyTorch, though a leaf's .grad is kept anyway).
KILN_API bool retains_grad(const Tensor& t);

// ---- Backward -----------------------------------------------------------------------------------

/// Accumulates d outputs / d leaf into the .grad of every leaf the outputs depend on.
/// `grad_outputs` holds one gradient per output (the weights of a vector-Jacobian product); it may
/// be empty, or hold undefined tensors, where outputs have one element (the gradient is then 1, as
/// in PyTorch); elsewhere a missing gradient raises kValue. Without retain_graph the
/// graph's saved tensors are freed and a second backward through it raises kValue. With
/// create_graph the backward ops are recorded, so the gradients can be differentiated again; a
/// leaf's .grad then holds a graph that holds the leaf, a cycle that keeps both alive until the
/// .grad is reset (set_grad(leaf, {})), as in PyTorch: prefer grad() for higher orders.
KILN_API void backward(const std::vector<Tensor>& outputs,
                       const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                       bool create_graph = false);
/// backward into the .grad of `inputs` only (tensors that require grad, leaves or not; PyTorch's
/// backward(inputs=...)): the other leaves' .grad stay as they were, and only the nodes on the
/// way to `inputs` run. As in PyTorch, an input that is not a leaf retains its gradient from then
/// on (retain_grad), so later backward calls add into its .grad too. An input the outputs do not
/// reach keeps its .grad; an empty `inputs` or one that does not require grad raises kValue.
KILN_API void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                       bool retain_graph, bool create_graph, const std::vector<Tensor>& inputs);
/// The gradients of `outputs` with respect to `inputs` (leaves or not), without touching .grad.
/// An input the outputs do not depend on raises kValue, or gives an undefined tensor with
/// allow_unused.
KILN_API std::vector<Tensor> grad(const std::vector<Tensor>& outputs,
                                  const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& grad_outputs = {},
                                  bool retain_graph = false, bool create_graph = false,
                                  bool allow_unused = false);

// ---- Functional differentiation (MindSpore's grad / value_and_grad) -----------------------------
//
//   auto loss_fn = [&](const std::vector<kiln::Tensor>& a) {
//     return std::vector<kiln::Tensor>{kiln::mean(kiln::square(kiln::matmul(a[0], w) - a[1]))};
//   };
//   auto step = kiln::autograd::value_and_grad(loss_fn, /*grad_positions=*/{}, /*weights=*/{w});
//   kiln::autograd::GradResult r = step({x, y});
//   // r.value[0]: the loss; r.weight_grads[0]: d loss / d w; x and y get no gradient.
//
// Python's kiln.grad / kiln.value_and_grad follow the same rules in a Python implementation of
// their own (Python functions may take and return values that are not tensors).

/// A function of tensors to differentiate: its outputs from its arguments.
using DifferentiableFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// What value_and_grad gives.
struct GradResult {
  /// fn's outputs; detached (they do not require grad) unless the call is nested in another
  /// differentiation, whose graph they then stay part of.
  std::vector<Tensor> value;
  /// One gradient per grad position, in their order.
  std::vector<Tensor> grads;
  /// One gradient per weight, in their order.
  std::vector<Tensor> weight_grads;
};

/// MindSpore's value_and_grad: a function that evaluates `fn` at its arguments and gives its
/// gradients with respect to the arguments at `grad_positions` (negative ones count from the end)
/// and to `weights` (tensors fn uses, such as parameters). Every output of fn is differentiated
/// with a gradient of ones; with has_aux only the first (the others are returned in `value`, as
/// auxiliary results). A differentiated argument that does not require grad is differentiated
/// through a detached copy, so the caller's tensor is not marked; a weight that does not require
/// grad, or a target the outputs do not depend on, gets zeros. A call is nested when one of its
/// arguments already requires grad with grad mode on (it is inside another differentiation, or
/// was given a tracked tensor): it then records the backward too, so an outer call
/// differentiates it again (higher orders), and leaves the value attached. Only the arguments
/// decide this: a weights-only call inside another differentiation gives first-order gradients.
/// The returned function throws kValue for a position out of range, nothing to differentiate,
/// has_aux with fewer than two outputs or an undefined argument or weight, and kDType for a
/// differentiated argument that is not floating-point.
KILN_API std::function<GradResult(const std::vector<Tensor>&)> value_and_grad(
    DifferentiableFn fn, std::vector<int64_t> grad_positions = {0},
    std::vector<Tensor> weights = {}, bool has_aux = false);

// ---- Custom differentiable functions ------------------------------------------------------------

/// What a Function's Forward hands its Backward.
class KILN_API AutogradContext {
 public:
  /// Tensors Backward needs (inputs or outputs of Forward).
  void SaveForBackward(std::vector<Tensor> tensors);
  /// The saved tensors; throws kValue after a backward that freed them.
  const std::vector<Tensor>& GetSavedTensors() const;
  /// Whether the gradient of tensor input `index` (counting Tensor arguments only) is needed.
  bool NeedsInputGrad(size_t index) const;
  /// Outputs that carry no gradient (indices, masks): they will not require grad.
  void MarkNonDifferentiable(const std::vector<Tensor>& outputs);
  /// Non-tensor values Forward leaves for Backward (shapes, flags, scales).
  Attrs saved_data;

  // For the machinery in Function<T>::apply.
  void set_needs_input_grad(std::vector<bool> needs) { needs_input_grad_ = std::move(needs); }
  bool is_non_differentiable(const Tensor& output) const;
  void replace_saved(const Tensor& from, const Tensor& to);
  void release_saved();

 private:
  std::vector<Tensor> saved_;
  std::vector<bool> needs_input_grad_;
  std::vector<Tensor> non_differentiable_;
  bool released_ = false;
};

namespace detail {
using FunctionBackward =
    std::function<std::vector<Tensor>(AutogradContext*, const std::vector<Tensor>&)>;
/// Records a custom function's call: `outputs` (made by Forward under no grad) get a Node whose
/// apply calls `backward`. Returns the outputs (an output that is an input becomes a new handle).
KILN_API std::vector<Tensor> record_function(const std::string& name,
                                             std::shared_ptr<AutogradContext> ctx,
                                             const std::vector<Tensor>& inputs,
                                             std::vector<Tensor> outputs,
                                             FunctionBackward backward);
/// Records a call autograd cannot differentiate (an OpRunner's): under grad mode, when an input
/// requires grad, each floating `output` that has no gradient state yet (a fresh result) gets a
/// node named `name` whose backward raises kNotImplemented with `reason`. A loss through such a
/// result then fails at backward rather than training without its share of the gradient.
KILN_API void record_without_gradient(const std::string& name, const std::vector<Tensor>& inputs,
                                      const std::vector<Tensor>& outputs, std::string reason);
}  // namespace detail

}  // namespace autograd

/// A differentiable function with a hand-written gradient:
///
///   struct ScaledExp : kiln::Function<ScaledExp> {
///     static kiln::Tensor Forward(kiln::AutogradContext* ctx, const kiln::Tensor& x, double s) {
///       kiln::Tensor y = kiln::exp(x) * s;
///       ctx->SaveForBackward({y});
///       return y;
///     }
///     static std::vector<kiln::Tensor> Backward(kiln::AutogradContext* ctx,
///                                               const std::vector<kiln::Tensor>& grads) {
///       return {grads[0] * ctx->GetSavedTensors()[0]};   // one gradient per Tensor argument
///     }
///   };
///   kiln::Tensor y = ScaledExp::apply(x, 2.0);
///
/// Forward runs with grad mode off; it returns a Tensor, a std::vector<Tensor> or a std::tuple of
/// Tensors. Backward gets one gradient per output (undefined: zero) and returns one per Tensor
/// argument of Forward, undefined where there is none.
using AutogradContext = autograd::AutogradContext;

template <typename T>
class Function {
 public:
  template <typename... Args>
  static auto apply(Args&&... args) {
    auto ctx = std::make_shared<AutogradContext>();
    std::vector<Tensor> inputs;
    (collect(inputs, args), ...);
    std::vector<bool> needs;
    for (const Tensor& t : inputs) needs.push_back(autograd::requires_grad(t));
    ctx->set_needs_input_grad(needs);
    using Result = decltype(T::Forward(ctx.get(), std::forward<Args>(args)...));
    Result result = [&] {
      autograd::NoGradGuard no_grad;
      return T::Forward(ctx.get(), std::forward<Args>(args)...);
    }();
    std::vector<Tensor> outputs = autograd::detail::record_function(
        typeid(T).name(), ctx, inputs, flatten(result),
        [](AutogradContext* c, const std::vector<Tensor>& grads) {
          // A std exception of the user's Backward becomes a kiln::Error, which the node names.
          return kiln::detail::as_kiln_error([&] { return T::Backward(c, grads); });
        });
    return unflatten(result, outputs);
  }

 private:
  template <typename A>
  static void collect(std::vector<Tensor>& inputs, const A& arg) {
    if constexpr (std::is_same_v<std::decay_t<A>, Tensor>) inputs.push_back(arg);
  }
  static std::vector<Tensor> flatten(const Tensor& t) { return {t}; }
  static std::vector<Tensor> flatten(const std::vector<Tensor>& ts) { return ts; }
  template <typename... Ts>
  static std::vector<Tensor> flatten(const std::tuple<Ts...>& ts) {
    return std::apply([](const auto&... t) { return std::vector<Tensor>{t...}; }, ts);
  }
  static Tensor unflatten(const Tensor&, const std::vector<Tensor>& out) { return out[0]; }
  static std::vector<Tensor> unflatten(const std::vector<Tensor>&,
                                       const std::vector<Tensor>& out) {
    return out;
  }
  template <typename... Ts>
  static std::tuple<Ts...> unflatten(const std::tuple<Ts...>&, const std::vector<Tensor>& out) {
    return unflatten_tuple<Ts...>(out, std::index_sequence_for<Ts...>{});
  }
  template <typename... Ts, size_t... I>
  static std::tuple<Ts...> unflatten_tuple(const std::vector<Tensor>& out,
                                           std::index_sequence<I...>) {
    return std::tuple<Ts...>{out[I]...};
  }
};

}  // namespace kiln
