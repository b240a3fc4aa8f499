// OpRunner: how a custom op's kernel runs (see kiln/extension.h).
#include <exception>
#include <string>
#include <utility>

#include "kiln/extension.h"
#include "kiln/op.h"

namespace kiln {

// Note [OpRunner steps]
// run_op_runner holds every step of OpRunner::Run, in the order a built-in op's dispatch runs
// them after `infer` (which, for a custom op, is the user's own function that made the output
// tensors): give outputs memory, give the kernel its workspace, launch. Until the asynchronous
// pipeline lands these run inline on the caller's thread; the pipeline sends the allocation steps
// as the DeviceTask and LaunchKernel as the LaunchTask, keeping the runner alive through
// shared_from_this(). Keeping the steps in one function keeps one definition of "running a custom
// op", as run_op_sync does for built-ins.

OpRunner::OpRunner(std::string op_name) : op_name_(std::move(op_name)) {}

OpRunner::~OpRunner() = default;

size_t OpRunner::CalcWorkspace() { return 0; }

void OpRunner::Run(std::vector<Tensor> inputs, std::vector<Tensor> outputs) {
  inputs_ = std::move(inputs);
  outputs_ = std::move(outputs);
  detail::run_op_runner(*this);
}

namespace detail {
namespace {

// "Add3(float32[4], float32[4], None)", formatted exactly as built-in ops print a call.
std::string runner_call_str(const OpRunner& runner) {
  MetaList metas;
  for (const Tensor& t : runner.inputs()) {
    TensorMeta meta;
    if (t.defined()) {
      meta = TensorMeta::of(t);
    } else {
      meta.defined = false;
    }
    metas.push_back(std::move(meta));
  }
  return op_call_str(OpDef(runner.op_name()), metas);
}

}  // namespace

void run_op_runner(OpRunner& runner) {
  try {
    for (size_t i = 0; i < runner.outputs_.size(); ++i) {
      const Tensor& out = runner.outputs_[i];
      KILN_CHECK_VALUE(out.defined())
          << "output " << i << " is an undefined tensor; make outputs with "
          << "kiln::Tensor(dtype, shape)";
      if (!out.has_storage()) out.allocate();
    }
    const size_t workspace_bytes = runner.CalcWorkspace();
    runner.workspace_ = workspace_bytes > 0 ? Storage::allocate(workspace_bytes) : nullptr;
    runner.LaunchKernel();
    runner.workspace_.reset();
  } catch (Error& e) {
    runner.workspace_.reset();
    e.add_context("in " + runner_call_str(runner));
    throw;
  } catch (const std::exception& e) {
    // A kernel's own exception type: keep its message, add the op like any other error.
    runner.workspace_.reset();
    Error error(ErrorKind::kGeneric, e.what());
    error.add_context("in " + runner_call_str(runner));
    throw error;
  }
}

}  // namespace detail
}  // namespace kiln
