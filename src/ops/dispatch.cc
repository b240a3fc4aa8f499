// Eager dispatch: the one path every eager op call takes, and the three steps of running an op
// (see Note [Dispatch]).
#include <atomic>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/autocast_inputs.h"

namespace kiln {

// Note [Dispatch]
// call_op normalizes attributes and hands the call to the current Dispatcher. What running an op
// means is defined once, here, as three steps over an OpCall:
//   plan_op      infer the results' metadata; make views, or results with deferred storage
//   allocate_op  give the kernel outputs and the workspace their memory
//   launch_op    run the kernel; convert into `out` tensors of another dtype or layout
// The built-in SyncDispatcher runs them in a row (run_op_sync). The runtime's pipeline runs them
// as its FrontendTask, DeviceTask and LaunchTask on worker threads, handing the caller tensors
// whose metadata plan_op fills later (OpCall::results made beforehand). plan_op reads metadata
// only, never data, so it may run before the kernels that compute its inputs. A thread may put
// its own dispatcher in front of the process-wide one (set_thread_dispatcher): the jit's tracer
// records the calls of a traced function as graph nodes instead of running them.
//
// A bound call (call_bound_kernel: a custom op's OpRunner) brings its own kernel object and its
// outputs, already described by the code that made them, which plays the FrontendTask's part. So
// plan_op only records the outputs; the workspace size is asked in allocate_op, the kernel object
// run in launch_op. Its outputs without memory are fresh results (a failure stays on them); those
// with memory are written in place like `out` tensors.

namespace {

class SyncDispatcher final : public Dispatcher {
 public:
  TensorList dispatch(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                      const std::vector<Tensor>& out,
                      const std::shared_ptr<BoundKernel>& bound_kernel) override {
    return run_op_sync(op, inputs, attrs, out, bound_kernel);
  }
};

SyncDispatcher g_sync_dispatcher;
std::atomic<Dispatcher*> g_dispatcher{&g_sync_dispatcher};
thread_local Dispatcher* t_dispatcher = nullptr;  // set_thread_dispatcher
std::atomic<detail::AutogradCallHook> g_autograd_hook{nullptr};

bool seen_by_autograd(TensorSpan tensors) {
  for (const Tensor& t : tensors) {
    if (t.defined() && t.impl()->autograd != nullptr) return true;
  }
  return false;
}

// Runs one step of `call`, adding the op call to any error it raises (a kernel's std::exception
// becomes a kiln::Error).
template <typename Step>
void with_op_context(const OpCall& call, Step&& step) {
  detail::with_error_context(step, [&] { return "in " + op_call_str(*call.op, call.input_metas); });
}

// Gives a result handle the metadata of a new contiguous tensor and deferred storage.
void fill_result(const Tensor& result, const TensorMeta& meta) {
  const size_t nbytes = checked_nbytes(meta.shape, meta.dtype, "the result");
  TensorImpl* impl = result.impl();
  impl->dtype = meta.dtype;
  impl->shape = meta.shape;
  impl->strides = contiguous_strides(meta.shape);
  impl->offset = 0;
  impl->storage = Storage::deferred(nbytes, impl->device);
}

// Makes a result handle an alias of `view` (same storage, shape, strides and offset).
void alias_result(const Tensor& result, const Tensor& view) {
  TensorImpl* impl = result.impl();
  const TensorImpl* source = view.impl();
  impl->dtype = source->dtype;
  impl->device = source->device;
  impl->shape = source->shape;
  impl->strides = source->strides;
  impl->offset = source->offset;
  impl->storage = source->storage;
}

// Fills call.results with the views; false when the view function declined (a copy is needed).
bool plan_views(OpCall& call) {
  TensorList views = call.op->view_fn()(call.inputs, call.attrs);
  if (views.empty()) return false;
  if (call.results.empty()) {
    call.results = std::move(views);
  } else {
    KILN_ASSERT(views.size() == call.results.size())
        << call.op->name() << ": the view function gave " << views.size() << " results, expected "
        << call.results.size();
    for (size_t i = 0; i < views.size(); ++i) alias_result(call.results[i], views[i]);
  }
  call.aliased = true;
  return true;
}

void plan_outputs(OpCall& call, const MetaList& metas) {
  const OpDef& op = *call.op;
  if (!call.out.empty()) {
    KILN_CHECK_VALUE(call.out.size() == metas.size())
        << op.name() << ": expected " << metas.size() << " out tensors, got " << call.out.size();
    call.results.assign(call.out.begin(), call.out.end());
  } else if (call.results.empty()) {
    call.results.reserve(metas.size());
    for (size_t i = 0; i < metas.size(); ++i) {
      call.results.emplace_back(std::make_shared<TensorImpl>());
    }
  } else {
    KILN_ASSERT(call.results.size() == metas.size())
        << op.name() << ": infer gave " << metas.size() << " outputs, expected "
        << call.results.size();
  }
  call.kernel_outputs.reserve(metas.size());
  for (size_t i = 0; i < metas.size(); ++i) {
    const TensorMeta& meta = metas[i];
    if (call.out.empty()) {
      fill_result(call.results[i], meta);
      call.kernel_outputs.push_back(call.results[i]);
      continue;
    }
    const Tensor& target = call.out[i];
    KILN_CHECK_SHAPE(target.shape() == meta.shape)
        << op.name() << ": out tensor " << i << " has shape " << shape_str(target.shape())
        << ", expected " << shape_str(meta.shape);
    KILN_CHECK_DTYPE(can_write_result(meta.dtype, target.dtype()))
        << op.name() << ": result type " << meta.dtype << " can't be cast to the dtype of out "
        << "tensor " << i << ", " << target.dtype();
    for (int64_t d = 0; d < target.ndim(); ++d) {
      // Several elements on one memory location (an expanded view): which write lands last
      // would decide the result. PyTorch refuses too.
      KILN_CHECK_VALUE(target.strides()[d] != 0 || target.shape()[d] <= 1)
          << op.name() << ": out tensor " << i << " (shape " << shape_str(target.shape())
          << ", strides " << shape_str(target.strides()) << ") has elements that share memory "
          << "(an expanded view); write into a tensor of its own (clone() the view first)";
    }
    if (target.dtype() == meta.dtype && target.is_contiguous() && target.has_storage()) {
      call.kernel_outputs.push_back(target);
    } else {
      // Computed into a temporary first and converted at the end.
      Tensor computed(meta.dtype, meta.shape);
      fill_result(computed, meta);
      call.kernel_outputs.push_back(computed);
      call.convert_back.emplace_back(target, computed);
    }
  }
}

}  // namespace

BoundKernel::~BoundKernel() = default;

Dispatcher::~Dispatcher() = default;

Dispatcher* current_dispatcher() {
  if (Dispatcher* d = t_dispatcher; __builtin_expect(d != nullptr, 0)) return d;
  return g_dispatcher.load(std::memory_order_acquire);
}

Dispatcher* thread_dispatcher() { return t_dispatcher; }

Dispatcher* set_thread_dispatcher(Dispatcher* dispatcher) {
  Dispatcher* previous = t_dispatcher;
  t_dispatcher = dispatcher;
  return previous;
}

Dispatcher* set_dispatcher(Dispatcher* dispatcher) {
  KILN_CHECK(dispatcher != nullptr) << "set_dispatcher: expected a dispatcher, got null";
  return g_dispatcher.exchange(dispatcher, std::memory_order_acq_rel);
}

void OpCall::clear() {
  op = nullptr;
  inputs.clear();
  attrs = Attrs();
  out.clear();
  bound_kernel.reset();
  results.clear();
  input_metas.clear();
  aliased = false;
  kernel_outputs.clear();
  convert_back.clear();
  workspace_size = 0;
  workspace.reset();
}

void bind_outputs(OpCall& call, const std::vector<Tensor>& outputs) {
  call.results.assign(outputs.begin(), outputs.end());
  call.out.clear();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    KILN_ASSERT(t.defined()) << call.op->name() << ": output " << i << " is undefined";
    if (t.has_storage()) {
      call.out.push_back(t);
    } else {
      TensorImpl* impl = t.impl();
      impl->storage = Storage::deferred(t.nbytes(), impl->device);
    }
  }
}

void plan_op(OpCall& call) {
  const OpDef& op = *call.op;
  call.input_metas.clear();
  call.input_metas.reserve(call.inputs.size());
  for (const Tensor& t : call.inputs) call.input_metas.push_back(TensorMeta::of(t));
  if (call.bound_kernel != nullptr) {
    call.kernel_outputs.assign(call.results.begin(), call.results.end());
    return;
  }
  const MetaList metas = op.infer_outputs(call.input_metas, call.attrs);  // adds its own context
  with_op_context(call, [&] {
    if (op.view_fn() && call.out.empty() && plan_views(call)) return;
    plan_outputs(call, metas);
    if (op.workspace_fn()) {
      call.workspace_size = op.workspace_fn()(InferContext{op, call.input_metas, call.attrs});
    }
  });
}

void allocate_op(OpCall& call) {
  if (call.aliased) return;
  with_op_context(call, [&] {
    for (const Tensor& t : call.kernel_outputs) t.storage()->materialize();
    if (call.bound_kernel != nullptr) call.workspace_size = call.bound_kernel->workspace_size();
    if (call.workspace_size > 0) call.workspace = Storage::allocate(call.workspace_size);
  });
}

void launch_op(OpCall& call) {
  if (call.aliased) return;
  const OpDef& op = *call.op;
  const KernelFn* kernel =
      call.bound_kernel != nullptr ? nullptr : op.find_kernel(DeviceType::kCPU);
  KILN_CHECK_KIND(ErrorKind::kNotImplemented, kernel != nullptr || call.bound_kernel != nullptr)
      << op.name() << " has no CPU kernel";
  KernelContext ctx{op, call.inputs, call.kernel_outputs, call.attrs};
  if (call.workspace != nullptr) {
    ctx.workspace = call.workspace->data();
    ctx.workspace_size = call.workspace_size;
  }
  detail::apply_num_threads();
  with_op_context(call, [&] {
    if (kernel != nullptr) {
      (*kernel)(ctx);
    } else {
      call.bound_kernel->launch(ctx);
    }
    for (const auto& [target, computed] : call.convert_back) copy_into(target, computed);
  });
}

namespace {

// The OpCall objects a thread's synchronous calls run in, one per nesting depth (kernels call
// ops), reused so that their vectors keep their capacity: a small op call then allocates little
// more than its results. Cleared, holding no tensors, whenever not in use.
class PooledCall {
 public:
  // The pool is found once: each thread_local access from a shared library is a call into the
  // dynamic linker (__tls_get_addr), two for a thread_local with a constructor.
  PooledCall() : pool_(t_pool) {
    if (pool_.depth == pool_.calls.size()) pool_.calls.push_back(std::make_unique<OpCall>());
    call_ = pool_.calls[pool_.depth++].get();
  }
  ~PooledCall() {
    call_->clear();
    --pool_.depth;
  }
  PooledCall(const PooledCall&) = delete;
  PooledCall& operator=(const PooledCall&) = delete;
  OpCall& get() { return *call_; }

 private:
  struct Pool {
    std::vector<std::unique_ptr<OpCall>> calls;
    size_t depth = 0;
  };
  static thread_local Pool t_pool;
  Pool& pool_;
  OpCall* call_;
};

thread_local PooledCall::Pool PooledCall::t_pool;

}  // namespace

TensorList run_op_sync(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                       const std::vector<Tensor>& out,
                       const std::shared_ptr<BoundKernel>& bound_kernel) {
  PooledCall pooled;
  OpCall& call = pooled.get();
  call.op = &op;
  call.inputs.assign(inputs.begin(), inputs.end());
  call.attrs = attrs;
  call.bound_kernel = bound_kernel;
  if (bound_kernel != nullptr) {
    bind_outputs(call, out);
  } else {
    call.out = out;
  }
  plan_op(call);
  allocate_op(call);
  launch_op(call);
  return std::move(call.results);
}

namespace {

std::atomic<int64_t> g_pending_writes_counted{0};  // live detail::CountPendingWrites

// Counts a write into each `out` tensor's memory (Storage::write_version). A pending out tensor
// is a result still being made, whose storage is not known yet: usually nothing can have derived
// anything from it, and waiting would hold the caller back; while autograd keeps saved tensors
// (one may be this one, or share its memory), the write waits for the tensor's metadata (which
// names its storage; not its data) and is counted. That wait raises the failure of the op that
// made the tensor, if it failed before its metadata was known.
void note_writes(const std::vector<Tensor>& out) {
  for (const Tensor& t : out) {
    if (!t.defined()) continue;
    if (t.is_pending() && g_pending_writes_counted.load(std::memory_order_relaxed) == 0) continue;
    if (const std::shared_ptr<Storage>& storage = t.storage()) storage->note_write();
  }
}

thread_local const detail::CallInputCheck* t_call_input_check = nullptr;

}  // namespace

TensorList detail::dispatch_counting_writes(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                                            const std::vector<Tensor>& out) {
  TensorList results = current_dispatcher()->dispatch(op, inputs, attrs, out, nullptr);
  // Counted once the call is accepted (a refused one wrote nothing), still before the next call.
  if (!out.empty()) note_writes(out);
  return results;
}

const detail::CallInputCheck* detail::set_call_input_check(const CallInputCheck* check) {
  return std::exchange(t_call_input_check, check);
}

TensorList call_op(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                   const std::vector<Tensor>& out) {
  if (out.empty()) {
    if (const std::optional<std::vector<Tensor>> cast =
            detail::autocast_inputs(op.name(), inputs)) {
      return call_op(op, *cast, attrs, out);  // the casts are done: no further ones
    }
  }
  if (t_call_input_check != nullptr) t_call_input_check->check(op, inputs);
  detail::AutogradCallHook hook = g_autograd_hook.load(std::memory_order_acquire);
  if (hook != nullptr && (seen_by_autograd(inputs) || seen_by_autograd(out))) {
    return hook(op, inputs, op.normalize_attrs(attrs), out);
  }
  return detail::dispatch_counting_writes(op, inputs, op.normalize_attrs(attrs), out);
}

detail::CountPendingWrites::CountPendingWrites() {
  g_pending_writes_counted.fetch_add(1, std::memory_order_relaxed);
}

detail::CountPendingWrites::~CountPendingWrites() {
  g_pending_writes_counted.fetch_sub(1, std::memory_order_relaxed);
}

void detail::set_autograd_call_hook(AutogradCallHook hook) {
  g_autograd_hook.store(hook, std::memory_order_release);
}

void call_bound_kernel(const OpDef& op, TensorSpan inputs, const std::vector<Tensor>& outputs,
                       std::shared_ptr<BoundKernel> kernel) {
  KILN_CHECK(kernel != nullptr) << "call_bound_kernel: expected a kernel object, got null";
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].defined()) continue;
    MetaList metas;
    for (const Tensor& t : inputs) metas.push_back(TensorMeta::of(t));
    Error error(ErrorKind::kValue, "output " + std::to_string(i) +
                                       " is an undefined tensor; make outputs with "
                                       "kiln::Tensor(dtype, shape)");
    error.add_context("in " + op_call_str(op, metas));
    throw error;
  }
  current_dispatcher()->dispatch(op, inputs, Attrs(), outputs, kernel);
  note_writes(outputs);  // those with memory are written in place
}

}  // namespace kiln
