// "kiln_cpu": the default backend of @kiln.jit. Its passes (cpu_passes.h) have fused the graph by
// the time Build sees it; Build compiles it (cpu_program.h: kernel selection and the memory plan)
// and Run executes the precomputed schedule: one arena allocation per run, kernels called
// directly with their outputs already placed, each kernel parallel across the cores.
//
// Run is thread-safe: every run has its own arena and value table. Inputs that eager ops are still
// computing are waited for first (kernels here run on the caller's thread, outside the eager
// pipeline).
#include "backend/cpu/cpu_program.h"
#include "backend/built_graphs.h"
#include "backend/graph_checks.h"
#include "kiln/parallel.h"

namespace kiln::cpu {
namespace {

// A contiguous tensor of `meta` over `storage` at `byte_offset` (a multiple of the item size).
Tensor tensor_at(const TensorMeta& meta, std::shared_ptr<Storage> storage, size_t byte_offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = meta.dtype;
  impl->shape = meta.shape;
  impl->strides = contiguous_strides(meta.shape);
  impl->offset = static_cast<int64_t>(byte_offset / itemsize(meta.dtype));
  impl->storage = std::move(storage);
  impl->weak = meta.weak;
  return Tensor(std::move(impl));
}

Tensor own_tensor(const TensorMeta& meta) {
  return tensor_at(meta, Storage::allocate(static_cast<size_t>(meta.numel()) * itemsize(meta.dtype)),
                   0);
}

class CpuBackend final : public BackendBase, public BackendMemoryPlanner {
 public:
  BackendGraphId Build(const FuncGraphPtr& graph, const BackendJitConfig&) override {
    ir::verify(*graph);
    return graphs_.add(compile(*graph));
  }

  RunningStatus Run(BackendGraphId id, const std::vector<Tensor>& inputs,
                    std::vector<Tensor>* outputs) override {
    const std::shared_ptr<const CpuProgram> p = graphs_.find(id);
    backend_detail::check_inputs(p->name, p->parameters, p->parameter_names, inputs);
    backend_detail::check_ops_current(p->name, p->registry_generation, p->ops);
    for (const Tensor& in : inputs) {
      if (in.numel() > 0) in.data_ptr();  // waits for the eager ops still writing it
    }
    detail::apply_num_threads();
    execute(*p, inputs, outputs);
    return RunningStatus::kRunningSuccess;
  }

  void ClearGraph(BackendGraphId id) override { graphs_.erase(id); }

  void Clear() override { graphs_.clear(); }

  BackendMemoryPlan GetMemoryPlan(BackendGraphId id) const override {
    return graphs_.find(id)->memory;
  }

 private:
  static void execute(const CpuProgram& p, const std::vector<Tensor>& inputs,
                      std::vector<Tensor>* outputs) {
    std::vector<Tensor> values(p.values.size());
    for (size_t i = 0; i < inputs.size(); ++i) values[p.parameter_values[i]] = inputs[i];
    for (const auto& [v, tensor] : p.constants) values[v] = tensor;
    // Allocated even when empty: a graph whose intermediates are all zero-size still hands its
    // kernels tensors with (empty) memory.
    const std::shared_ptr<Storage> arena = Storage::allocate(p.memory.arena_bytes);
    std::vector<Tensor> args;
    std::vector<Tensor> results;
    const int threads = get_num_threads();
    for (const Step& step : p.steps) {
      args.clear();
      for (uint32_t v : step.inputs) args.push_back(values[v]);
      if (step.kind == StepKind::kView) {
        TensorList views = step.op->view_fn()(args, step.attrs);
        if (!views.empty()) {
          for (size_t k = 0; k < views.size(); ++k) values[step.outputs[k]] = std::move(views[k]);
          continue;
        }
      }
      results.clear();
      for (uint32_t v : step.outputs) {
        const Value& value = p.values[v];
        results.push_back(value.home == Home::kArena ? tensor_at(value.meta, arena, value.offset)
                                                     : own_tensor(value.meta));
      }
      // A custom kernel's std::exception becomes a kiln::Error naming the call, as in eager.
      detail::with_error_context(
          [&] {
            void* workspace = step.workspace_bytes > 0
                                  ? static_cast<char*>(arena->data()) + step.workspace_offset
                                  : nullptr;
            if (step.kind == StepKind::kFused) {
              fused::run(step.program, args, results[0]);
            } else if (step.kind == StepKind::kPackedMatmul && step.matmul->threads() == threads) {
              step.matmul->run(args[0], args.size() > 2 ? args[2] : Tensor(), results[0],
                               workspace);
            } else {  // (a packed product whose thread count changed since Build runs its kernel)
              KernelContext ctx{*step.op,   args,      results,
                                step.attrs, workspace, step.workspace_bytes};
              (*step.kernel)(ctx);
            }
          },
          [&] {
            return "in " + op_call_str(*step.op, metas_of(args)) + " of graph \"" + p.name + "\"";
          });
      for (size_t k = 0; k < results.size(); ++k) values[step.outputs[k]] = std::move(results[k]);
    }
    outputs->clear();
    for (uint32_t v : p.outputs) outputs->push_back(values[v]);
  }

  static MetaList metas_of(const std::vector<Tensor>& tensors) {
    MetaList metas;
    for (const Tensor& t : tensors) metas.push_back(TensorMeta::of(t));
    return metas;
  }

  backend_detail::BuiltGraphs<CpuProgram> graphs_;
};

}  // namespace

KILN_REGISTER_BACKEND("kiln_cpu", CpuBackend);

}  // namespace kiln::cpu
