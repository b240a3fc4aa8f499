// Grad mode, the gradient state of tensors (requires_grad, .grad, grad_fn, detach) and leaf
// accumulators.
#include <algorithm>
#include <atomic>
#include <utility>

#include "autograd/nodes.h"
#include "autograd/view_writes.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/shape.h"

namespace kiln::autograd {

namespace {
thread_local bool t_grad_enabled = true;

// A copy of `t` in `dtype` with its own memory, made through the pipeline like any op (and
// recorded like one while grad mode is on).
Tensor copy_of(const Tensor& t, DType dtype) {
  static const OpDefPtr cast = OpRegistry::Instance().get("Cast");
  return call_op(*cast, {t}, {{"dtype", dtype}})[0];
}

// Adds `incoming` into the .grad of `meta`, a tensor of `dtype` (its mutex held). The gradient that
// arrives may be shared (Add hands one tensor to both inputs; under create_graph it may be the
// caller's grad_output) or of another dtype (a custom Function's float64 gradient of a float32
// leaf): .grad gets its own copy in its own dtype. Under create_graph the copy is recorded, so
// .grad can be differentiated again; a .grad with such a history keeps it through a later plain
// backward's addition (recorded whatever the grad mode), as PyTorch's does.
void accumulate_into(AutogradMeta& meta, DType dtype, const Tensor& incoming) {
  if (!meta.grad.defined()) {
    meta.grad = copy_of(incoming, dtype);
  } else {
    const GradModeGuard record(is_grad_enabled() || requires_grad(meta.grad));
    meta.grad = add(meta.grad, incoming.dtype() == dtype ? incoming : copy_of(incoming, dtype));
  }
}

// Note [Freeing deep graphs]
// A graph of N recorded calls is a chain of N Nodes, each owning the next through its edges, and
// a chain of views owns its parents (AutogradMeta::view_parent): freed by plain destructors, it
// recurses N frames deep and overflows the stack near N = 100k (a Python loop of recorded ops).
// Their destructors hand those references to release_without_recursion instead, which frees them
// in place up to kMaxReleaseDepth such calls deep (a short graph, the common case, costs no
// allocation); deeper, the call frees them from a queue on its own stack, where a reference that
// turns out the last one appends what its object owned (PyTorch's deleteNode does the same).
constexpr int kMaxReleaseDepth = 32;
thread_local int t_release_depth = 0;
thread_local std::vector<std::shared_ptr<void>>* t_release_queue = nullptr;

void release_without_recursion(std::shared_ptr<void> owned) {
  if (owned == nullptr) return;
  if (t_release_queue != nullptr) {
    t_release_queue->push_back(std::move(owned));
    return;
  }
  if (t_release_depth < kMaxReleaseDepth) {
    ++t_release_depth;
    owned.reset();
    --t_release_depth;
    return;
  }
  std::vector<std::shared_ptr<void>> queue;
  t_release_queue = &queue;
  owned.reset();
  while (!queue.empty()) {
    std::shared_ptr<void> next = std::move(queue.back());
    queue.pop_back();
    next.reset();
  }
  t_release_queue = nullptr;
}

std::atomic<uint64_t> g_next_hook_handle{1};  // post-accumulate and gradient hooks alike
std::mutex g_node_hooks_mutex;                // guards every Node::grad_hooks_
// Gradient hooks registered and not removed (on nodes and leaves): while there are none, the
// engine's run_grad_hooks returns at once.
std::atomic<int64_t> g_grad_hooks{0};

// Moves the entries of `hooks` that `match` into `removed` (for the caller to destroy after its
// lock: releasing a Python hook runs Python, which may switch threads) and uncounts them.
template <typename Entry, typename Match>
void take_out(std::vector<Entry>& hooks, const Match& match, std::vector<Entry>* removed) {
  const auto end =
      std::stable_partition(hooks.begin(), hooks.end(), [&](const Entry& e) { return !match(e); });
  g_grad_hooks.fetch_sub(hooks.end() - end, std::memory_order_relaxed);
  removed->insert(removed->end(), std::make_move_iterator(end),
                  std::make_move_iterator(hooks.end()));
  hooks.erase(end, hooks.end());
}

// hook(g), checked: an undefined result keeps g.
Tensor hooked(const GradHook& hook, const Tensor& g) {
  Tensor result = hook(g);
  if (!result.defined()) return g;
  KILN_CHECK_SHAPE(result.shape() == g.shape())
      << "a gradient hook (register_hook) returned a gradient of shape "
      << shape_str(result.shape()) << ", expected " << shape_str(g.shape());
  KILN_CHECK_DTYPE(result.dtype() == g.dtype())
      << "a gradient hook (register_hook) returned a gradient of dtype " << result.dtype()
      << ", expected " << g.dtype();
  return result;
}
}  // namespace

// register_hook's access to Node::grad_hooks_, under g_node_hooks_mutex.
struct NodeGradHooks {
  using Entry = Node::GradHookEntry;

  static void add(Node& n, Entry entry) {
    std::lock_guard<std::mutex> lock(g_node_hooks_mutex);
    n.grad_hooks_.push_back(std::move(entry));
    g_grad_hooks.fetch_add(1, std::memory_order_relaxed);
  }
  static void remove(Node& n, uint64_t handle) {
    std::vector<Entry> removed;  // destroyed after the lock: a Python hook's release runs Python
    std::lock_guard<std::mutex> lock(g_node_hooks_mutex);
    take_out(
        n.grad_hooks_, [&](const Entry& e) { return e.handle == handle; }, &removed);
  }
  // A copy, run outside the lock (a hook may register another or run a backward).
  static std::vector<Entry> of(const Node& n) {
    std::lock_guard<std::mutex> lock(g_node_hooks_mutex);
    return n.grad_hooks_;
  }
  static void forget(Node& n) {  // n is being destroyed
    if (n.grad_hooks_.empty()) return;
    std::lock_guard<std::mutex> lock(g_node_hooks_mutex);
    g_grad_hooks.fetch_sub(static_cast<int64_t>(n.grad_hooks_.size()), std::memory_order_relaxed);
  }
};

Node::~Node() {
  NodeGradHooks::forget(*this);
  for (Edge& edge : next_edges_) release_without_recursion(std::move(edge.node));
}

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
  // An op's result already requires grad: asking for it again changes nothing (PyTorch's no-op);
  // only taking it away is refused.
  if (value && meta != nullptr && meta->grad_fn != nullptr) return;
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

namespace {
// Takes t's retain_grad() back (its hook on the current grad_fn then passes gradients by);
// returns whether it had one.
bool stop_retaining(AutogradMeta& meta) {
  std::lock_guard<std::mutex> lock(meta.mutex);
  return std::exchange(meta.retains_grad, false);
}
}  // namespace

void detach_in_place(const Tensor& t) {
  if (live_meta(t) == nullptr) return;
  AutogradMeta& meta = meta_of(t);
  KILN_CHECK_VALUE(!made_by_a_view_op(t))
      << "detach_: this " << type_str(t) << " tensor is a view of a tensor that requires grad "
      << "(x[i], x.T, reshape, ...), whose history would still describe its memory; use "
      << "detach(), which makes a new tensor";
  // A node that saved t and reads it would take it for the value with its old history (in a
  // create_graph backward): count a write, so that such a read is refused as one of a saved tensor
  // changed in place (Note [Saved tensors changed in place]), as PyTorch refuses it.
  if (const std::shared_ptr<Storage>& storage = t.storage()) storage->note_write();
  stop_retaining(meta);
  meta.grad_fn.reset();
  meta.output_nr = 0;
  meta.only_if_floating = false;
  meta.requires_grad = false;
}

void rebase_history(const Tensor& t, std::shared_ptr<Node> node, uint32_t output_nr) {
  AutogradMeta& meta = meta_of(t);
  const bool retained = stop_retaining(meta);
  meta.grad_fn = std::move(node);
  meta.output_nr = output_nr;
  meta.only_if_floating = false;
  meta.requires_grad = true;
  if (retained) retain_grad(t);
}

Tensor differentiable_view(const Tensor& base,
                           const std::function<Tensor(const Tensor&)>& make_view) {
  if (!is_grad_enabled() || !requires_grad(base)) return make_view(base);
  // The view itself, of base's memory (it raises where it cannot be made, as without autograd),
  // recorded as an AsStrided call on base without running one: the same view of a contiguous
  // stand-in gives its attributes, over base's elements in row-major order whatever base's
  // layout (running AsStrided on a non-contiguous base would make a copy, which an in-place
  // write would not reach base through).
  Tensor view = make_view(base);
  const Tensor standin(base.dtype(), base.shape());
  const Tensor of_standin = make_view(standin);
  KILN_CHECK_VALUE(view.defined() && view.storage() == base.storage() &&
                   view.dtype() == base.dtype() && of_standin.shape() == view.shape())
      << "differentiable_view: make_view must return a view of its argument (a Tensor view "
         "method such as select or slice), got another tensor";
  if (view.is_same(base)) view = view.alias();  // (a view of all of it: a handle of its own)
  record_strided_view(view, base, of_standin, standin);
  note_view(view, base);
  return view;
}

Node::Edge gradient_edge(const Tensor& t) {
  const AutogradMeta* meta = live_meta(t);
  if (meta == nullptr || !meta->requires_grad) return {};
  if (meta->grad_fn != nullptr) return {meta->grad_fn, meta->output_nr};
  return {AccumulateGrad::of(t), 0};
}

Tensor accumulated_leaf(const Node& node) {
  const auto* accumulator = dynamic_cast<const AccumulateGrad*>(&node);
  return accumulator != nullptr ? Tensor(accumulator->leaf()) : Tensor();
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

namespace {
thread_local const char* t_accumulation_refused = nullptr;  // set_grad_accumulation_refused
}  // namespace

const char* set_grad_accumulation_refused(const char* reason) {
  return std::exchange(t_accumulation_refused, reason);
}

std::vector<Tensor> AccumulateGrad::apply(const std::vector<Tensor>& grad_outputs) {
  const Tensor& incoming = grad_outputs.at(0);
  if (!incoming.defined()) return {};
  KILN_CHECK_KIND(ErrorKind::kNotImplemented, t_accumulation_refused == nullptr)
      << t_accumulation_refused;
  AutogradMeta& meta = *leaf_->autograd;
  std::vector<std::function<void(const Tensor&)>> hooks;
  {
    std::lock_guard<std::mutex> lock(meta.mutex);
    accumulate_into(meta, leaf_->dtype, incoming);
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
  const uint64_t handle = g_next_hook_handle++;
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

uint64_t register_hook(const Tensor& t, GradHook hook) {
  KILN_CHECK_VALUE(requires_grad(t))
      << "register_hook: expected a tensor that requires grad, got one that does not (no "
         "gradient is computed for it)";
  const uint64_t handle = g_next_hook_handle++;
  if (const std::shared_ptr<Node> node = grad_fn(t)) {
    NodeGradHooks::add(*node, {handle, meta_of(t).output_nr, std::move(hook)});
  } else {
    AutogradMeta& meta = meta_of(t);
    std::lock_guard<std::mutex> lock(meta.mutex);
    meta.grad_hooks.emplace_back(handle, std::move(hook));
    g_grad_hooks.fetch_add(1, std::memory_order_relaxed);
  }
  return handle;
}

void remove_hook(const Tensor& t, uint64_t handle) {
  AutogradMeta* meta = t.impl()->autograd.get();
  if (meta == nullptr || handle == 0) return;
  if (const std::shared_ptr<Node> node = grad_fn(t)) {
    remove_hook(*node, handle);
    return;
  }
  std::vector<std::pair<uint64_t, GradHook>> removed;  // destroyed after the lock, as above
  std::lock_guard<std::mutex> lock(meta->mutex);
  take_out(
      meta->grad_hooks, [&](const auto& entry) { return entry.first == handle; }, &removed);
}

void remove_hook(Node& grad_fn, uint64_t handle) {
  if (handle != 0) NodeGradHooks::remove(grad_fn, handle);
}

void retain_grad(const Tensor& t) {
  KILN_CHECK_VALUE(requires_grad(t))
      << "retain_grad: expected a tensor that requires grad, got one that does not";
  const std::shared_ptr<Node> node = grad_fn(t);
  if (node == nullptr) return;  // a leaf keeps its gradient anyway
  AutogradMeta& meta = meta_of(t);
  {
    std::lock_guard<std::mutex> lock(meta.mutex);
    if (meta.retains_grad) return;
    meta.retains_grad = true;
  }
  // Weak: the node must not keep the tensor (and so itself, through grad_fn) alive. The hook
  // passes gradients by once an in-place write has moved the tensor's history past this node
  // (rebase_history registers another on the new one).
  std::weak_ptr<TensorImpl> weak = t.impl_ptr();
  const Node* retained_at = node.get();
  NodeGradHooks::add(*node, {0, meta.output_nr, [weak, retained_at](const Tensor& g) {
                               const std::shared_ptr<TensorImpl> impl = weak.lock();
                               if (impl == nullptr) return Tensor();
                               AutogradMeta& m = *impl->autograd;
                               std::lock_guard<std::mutex> lock(m.mutex);
                               if (m.retains_grad && m.grad_fn.get() == retained_at) {
                                 accumulate_into(m, impl->dtype, g);
                               }
                               return Tensor();
                             }});
}

bool retains_grad(const Tensor& t) {
  const AutogradMeta* meta = live_meta(t);
  return meta != nullptr && meta->grad_fn != nullptr && meta->retains_grad;
}

void run_grad_hooks(Node& n, std::vector<Tensor>& grads) {
  if (g_grad_hooks.load(std::memory_order_relaxed) == 0) return;
  if (auto* accumulate = dynamic_cast<AccumulateGrad*>(&n)) {
    AutogradMeta& meta = *accumulate->leaf()->autograd;
    std::vector<GradHook> hooks;
    {
      std::lock_guard<std::mutex> lock(meta.mutex);
      for (const auto& entry : meta.grad_hooks) hooks.push_back(entry.second);
    }
    for (const GradHook& hook : hooks) {
      if (grads[0].defined()) grads[0] = hooked(hook, grads[0]);
    }
    return;
  }
  const std::vector<NodeGradHooks::Entry> hooks = NodeGradHooks::of(n);
  for (const bool retaining : {false, true}) {  // retain_grad's after the others
    for (const NodeGradHooks::Entry& entry : hooks) {
      Tensor& g = grads.at(entry.output_nr);
      if ((entry.handle == 0) == retaining && g.defined()) g = hooked(entry.hook, g);
    }
  }
}

}  // namespace kiln::autograd

kiln::AutogradMeta::~AutogradMeta() {
  if (!grad_hooks.empty()) {
    autograd::g_grad_hooks.fetch_sub(static_cast<int64_t>(grad_hooks.size()),
                                     std::memory_order_relaxed);
  }
  // Note [Freeing deep graphs]
  autograd::release_without_recursion(std::move(grad_fn));
  autograd::release_without_recursion(std::move(view_parent));
}
