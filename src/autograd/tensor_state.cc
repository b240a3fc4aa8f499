// Grad mode, the gradient state of tensors (requires_grad, .grad, grad_fn, detach) and leaf
// accumulators.
#include <algorithm>
#include <atomic>

#include "kiln/functional/elementwise.h"
#include "kiln/functional/shape.h"
#include "autograd/nodes.h"

namespace kiln::autograd {

namespace {
thread_local bool t_grad_enabled = true;

// A copy of `t` in `dtype` with its own memory, made through the pipeline like any op (and
// recorded like one while grad mode is on).
Tensor copy_of(const Tensor& t, DType dtype) {
  static const OpDefPtr cast = OpRegistry::Instance().get("Cast");
  return call_op(*cast, {t}, {{"dtype", dtype}})[0];
}
}  // namespace

Node::~Node() = default;

bool is_grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }

GradModeGuard::GradModeGuard(bool enabled) : previous_(t_grad_enabled) {
  t_grad_enabled = enabled;
}
GradModeGuard::~GradModeGuard() { t_grad_enabled = previous_; }

AutogradMeta& meta_of(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (impl->autograd == nullptr) impl->autograd = std::make_shared<AutogradMeta>();
  return *impl->autograd;
}

namespace {
// t's gradient state, or null when it has none: no state at all, or that of a recorded result
// whose dtype turned out not floating point (AutogradMeta::only_if_floating; deciding it reads
// the dtype, which waits for the call's metadata).
const AutogradMeta* live_meta(const Tensor& t) {
  const AutogradMeta* meta = t.impl()->autograd.get();
  if (meta != nullptr && meta->only_if_floating && !is_floating_point(t.dtype())) return nullptr;
  return meta;
}
}  // namespace

bool requires_grad(const Tensor& t) {
  const AutogradMeta* meta = live_meta(t);
  return meta != nullptr && meta->requires_grad;
}

void set_requires_grad(const Tensor& t, bool value) {
  const AutogradMeta* meta = live_meta(t);
  KILN_CHECK_VALUE(meta == nullptr || meta->grad_fn == nullptr)
      << "set_requires_grad: only a leaf tensor can be marked; this one was made by "
      << meta->grad_fn->name() << " and requires grad because its inputs do (detach() it first)";
  if (!value && meta == nullptr) return;
  KILN_CHECK_DTYPE(!value || is_floating_point(t.dtype()))
      << "set_requires_grad: only floating-point tensors can require grad, got " << type_str(t);
  meta_of(t).requires_grad = value;
}

bool is_leaf(const Tensor& t) {
  const AutogradMeta* meta = live_meta(t);
  return meta == nullptr || meta->grad_fn == nullptr;
}

std::shared_ptr<Node> grad_fn(const Tensor& t) {
  const AutogradMeta* meta = live_meta(t);
  return meta == nullptr ? nullptr : meta->grad_fn;
}

Tensor get_grad(const Tensor& t) {
  AutogradMeta* meta = t.impl()->autograd.get();
  if (meta == nullptr) return Tensor();
  std::lock_guard<std::mutex> lock(meta->mutex);
  return meta->grad;
}

void set_grad(const Tensor& t, const Tensor& grad) {
  if (grad.defined()) {
    KILN_CHECK_SHAPE(grad.shape() == t.shape())
        << "set_grad: the gradient has shape " << shape_str(grad.shape()) << ", expected "
        << shape_str(t.shape());
    KILN_CHECK_DTYPE(grad.dtype() == t.dtype())
        << "set_grad: the gradient has dtype " << grad.dtype() << ", expected " << t.dtype();
  } else if (t.impl()->autograd == nullptr) {
    return;
  }
  AutogradMeta& meta = meta_of(t);
  std::lock_guard<std::mutex> lock(meta.mutex);
  meta.grad = grad;
}

Tensor output_alias(const Tensor& t, std::shared_ptr<Node> node, size_t output_nr) {
  Tensor alias = t.alias();
  AutogradMeta& meta = meta_of(alias);
  meta.requires_grad = true;
  meta.grad_fn = std::move(node);
  meta.output_nr = static_cast<uint32_t>(output_nr);
  return alias;
}

Tensor detach(const Tensor& t) { return t.alias(); }

Tensor differentiable_view(const Tensor& base,
                           const std::function<Tensor(const Tensor&)>& make_view) {
  if (!is_grad_enabled() || !requires_grad(base)) return make_view(base);
  // The same view of a contiguous stand-in gives it in AsStrided's terms (strides and offset
  // over base's elements in row-major order, whatever base's own layout).
  const Tensor standin(base.dtype(), base.shape());
  const Tensor view = make_view(standin);
  return as_strided(base, view.shape(), view.strides(), view.storage_offset());
}

Node::Edge gradient_edge(const Tensor& t) {
  const AutogradMeta* meta = live_meta(t);
  if (meta == nullptr || !meta->requires_grad) return {};
  if (meta->grad_fn != nullptr) return {meta->grad_fn, meta->output_nr};
  return {AccumulateGrad::of(t), 0};
}

std::shared_ptr<Node> AccumulateGrad::of(const Tensor& t) {
  AutogradMeta& meta = meta_of(t);
  std::lock_guard<std::mutex> lock(meta.mutex);
  std::shared_ptr<Node> node = meta.grad_accumulator.lock();
  if (node == nullptr) {
    node = std::make_shared<AccumulateGrad>(t.impl_ptr());
    meta.grad_accumulator = node;
  }
  return node;
}

std::vector<Tensor> AccumulateGrad::apply(const std::vector<Tensor>& grad_outputs) {
  const Tensor& incoming = grad_outputs.at(0);
  if (!incoming.defined()) return {};
  AutogradMeta& meta = *leaf_->autograd;
  std::vector<std::function<void(const Tensor&)>> hooks;
  {
    std::lock_guard<std::mutex> lock(meta.mutex);
    // The gradient that arrives may be shared (Add hands one tensor to both inputs; under
    // create_graph it may be the caller's grad_output) or of another dtype (a custom Function's
    // float64 gradient of a float32 leaf): the leaf gets its own copy in its own dtype. Under
    // create_graph the copy is recorded, so .grad can be differentiated again.
    const DType dtype = leaf_->dtype;
    if (!meta.grad.defined()) {
      meta.grad = copy_of(incoming, dtype);
    } else {
      meta.grad = add(meta.grad, incoming.dtype() == dtype ? incoming : copy_of(incoming, dtype));
    }
    for (const auto& entry : meta.post_accumulate_grad_hooks) hooks.push_back(entry.second);
  }
  // Outside the lock: a hook may read or replace .grad.
  const Tensor leaf(leaf_);
  for (const auto& hook : hooks) hook(leaf);
  return {};
}

uint64_t register_post_accumulate_grad_hook(const Tensor& leaf,
                                            std::function<void(const Tensor&)> hook) {
  KILN_CHECK_VALUE(requires_grad(leaf) && is_leaf(leaf))
      << "register_post_accumulate_grad_hook: expected a leaf tensor that requires grad (a "
         "parameter), got "
      << (requires_grad(leaf) ? "a tensor made by a recorded op"
                              : "one that does not require grad");
  static std::atomic<uint64_t> next_handle{1};
  const uint64_t handle = next_handle++;
  AutogradMeta& meta = meta_of(leaf);
  std::lock_guard<std::mutex> lock(meta.mutex);
  meta.post_accumulate_grad_hooks.emplace_back(handle, std::move(hook));
  return handle;
}

void remove_post_accumulate_grad_hook(const Tensor& leaf, uint64_t handle) {
  AutogradMeta* meta = leaf.impl()->autograd.get();
  if (meta == nullptr) return;
  std::lock_guard<std::mutex> lock(meta->mutex);
  auto& hooks = meta->post_accumulate_grad_hooks;
  hooks.erase(std::remove_if(hooks.begin(), hooks.end(),
                             [&](const auto& entry) { return entry.first == handle; }),
              hooks.end());
}

}  // namespace kiln::autograd
