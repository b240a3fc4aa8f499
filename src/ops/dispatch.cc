// Eager dispatch: the one path every eager op call takes (see Note [Dispatch]).
#include <atomic>

#include "kiln/op.h"

namespace kiln {

// Note [Dispatch]
// call_op normalizes attributes and hands the call to the current Dispatcher. The built-in
// SyncDispatcher runs run_op_sync inline; the runtime replaces it with the asynchronous pipeline,
// which runs the same steps (infer, allocate, launch) as separate stages. Keeping the steps in
// run_op_sync means there is one definition of "what running an op means".

namespace {

class SyncDispatcher final : public Dispatcher {
 public:
  std::vector<Tensor> dispatch(const OpDef& op, const std::vector<Tensor>& inputs,
                               const Attrs& attrs, const std::vector<Tensor>& out) override {
    return run_op_sync(op, inputs, attrs, out);
  }
};

SyncDispatcher g_sync_dispatcher;
std::atomic<Dispatcher*> g_dispatcher{&g_sync_dispatcher};

MetaList metas_of(const std::vector<Tensor>& tensors) {
  MetaList metas;
  metas.reserve(tensors.size());
  for (const Tensor& t : tensors) metas.push_back(TensorMeta::of(t));
  return metas;
}

}  // namespace

Dispatcher::~Dispatcher() = default;

Dispatcher* current_dispatcher() { return g_dispatcher.load(std::memory_order_acquire); }

Dispatcher* set_dispatcher(Dispatcher* dispatcher) {
  KILN_CHECK(dispatcher != nullptr) << "set_dispatcher: expected a dispatcher, got null";
  return g_dispatcher.exchange(dispatcher, std::memory_order_acq_rel);
}

std::vector<Tensor> run_op_sync(const OpDef& op, const std::vector<Tensor>& inputs,
                                const Attrs& attrs, const std::vector<Tensor>& out) {
  const MetaList in_metas = metas_of(inputs);
  if (op.view_fn() && out.empty()) {
    op.infer_outputs(in_metas, attrs);  // validates arguments with the op's messages
    try {
      return op.view_fn()(inputs, attrs);
    } catch (Error& e) {
      e.add_context("in " + op_call_str(op, in_metas));
      throw;
    }
  }
  const MetaList out_metas = op.infer_outputs(in_metas, attrs);
  std::vector<Tensor> outputs;
  outputs.reserve(out_metas.size());
  // Results the caller asked for in `out` with another dtype are computed into a temporary
  // first and converted at the end.
  std::vector<std::pair<Tensor, Tensor>> convert_back;
  if (!out.empty()) {
    KILN_CHECK_VALUE(out.size() == out_metas.size())
        << op.name() << ": expected " << out_metas.size() << " out tensors, got " << out.size();
  }
  for (size_t i = 0; i < out_metas.size(); ++i) {
    const TensorMeta& meta = out_metas[i];
    if (out.empty()) {
      outputs.push_back(Tensor::empty(meta.shape, meta.dtype));
      continue;
    }
    const Tensor& target = out[i];
    KILN_CHECK_SHAPE(target.shape() == meta.shape)
        << op.name() << ": out tensor " << i << " has shape " << shape_str(target.shape())
        << ", expected " << shape_str(meta.shape);
    if (target.dtype() == meta.dtype && target.is_contiguous() && target.has_storage()) {
      outputs.push_back(target);
    } else {
      outputs.push_back(Tensor::empty(meta.shape, meta.dtype));
      convert_back.emplace_back(target, outputs.back());
    }
  }
  const KernelFn* kernel = op.find_kernel(DeviceType::kCPU);
  KILN_CHECK_KIND(ErrorKind::kNotImplemented, kernel != nullptr)
      << op.name() << " has no CPU kernel";
  std::shared_ptr<Storage> workspace;
  KernelContext ctx{op, inputs, outputs, attrs};
  if (op.workspace_fn()) {
    ctx.workspace_size = op.workspace_fn()(InferContext{op, in_metas, attrs});
    if (ctx.workspace_size > 0) {
      workspace = Storage::allocate(ctx.workspace_size);
      ctx.workspace = workspace->data();
    }
  }
  try {
    (*kernel)(ctx);
  } catch (Error& e) {
    e.add_context("in " + op_call_str(op, in_metas));
    throw;
  }
  for (const auto& [target, computed] : convert_back) copy_into(target, computed);
  return out.empty() ? outputs : out;
}

std::vector<Tensor> call_op(const OpDef& op, const std::vector<Tensor>& inputs,
                            const Attrs& attrs, const std::vector<Tensor>& out) {
  return current_dispatcher()->dispatch(op, inputs, op.normalize_attrs(attrs), out);
}

std::vector<Tensor> call_op(const std::string& name, const std::vector<Tensor>& inputs,
                            const Attrs& attrs, const std::vector<Tensor>& out) {
  return call_op(*OpRegistry::Instance().get(name), inputs, attrs, out);
}

}  // namespace kiln
