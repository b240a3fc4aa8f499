// OpRunner: how a custom op's kernel runs (see kiln/extension.h).
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "kiln/autograd.h"
#include "kiln/extension.h"
#include "kiln/op.h"

namespace kiln {

// Note [OpRunner through the pipeline]
// A custom op is the user's function, which makes the outputs' metadata (the FrontendTask's work,
// done on the caller's thread), and an OpRunner, whose Run() hands the rest to the eager pipeline
// as a bound call (kiln::call_bound_kernel): the DeviceTask allocates the outputs and asks
// CalcWorkspace(), the LaunchTask calls LaunchKernel(). RunnerKernel is that call's kernel object:
// it owns the runner until the call is done, and an OpDef named after the op, so that errors print
// "Add3(float32[4], ...)" exactly as built-in ops print a call. The runner's `queued_` flag spans
// Run() to the end of the call, which is when RunnerKernel dies (on the worker that launched it,
// or on the caller in sync mode). The OpDefs are made once per op name and kept: a custom op's
// call then allocates nothing beyond what a built-in op's does, except the two small objects
// (the runner and its RunnerKernel).

namespace detail {
namespace {

// The OpDef naming the calls of op `name`; the last one a thread used is found without a lock.
const OpDef& op_def_named(const std::string& name) {
  thread_local const OpDef* last = nullptr;
  if (last != nullptr && last->name() == name) return *last;
  static std::mutex mutex;
  static auto* defs = new std::unordered_map<std::string, std::unique_ptr<const OpDef>>();
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<const OpDef>& def = (*defs)[name];
  if (def == nullptr) def = std::make_unique<const OpDef>(name);
  last = def.get();
  return *last;
}

}  // namespace

class RunnerKernel final : public BoundKernel {
 public:
  explicit RunnerKernel(std::shared_ptr<OpRunner> runner)
      : op_(op_def_named(runner->op_name())), runner_(std::move(runner)) {}

  ~RunnerKernel() override {
    runner_->inputs_.clear();
    runner_->outputs_.clear();
    runner_->queued_.store(false, std::memory_order_release);
  }

  const OpDef& op() const { return op_; }

  // Both run within the dispatcher's detail::with_error_context, which makes an exception of the
  // runner's own type a kiln::Error naming the op.
  size_t workspace_size() override { return runner_->CalcWorkspace(); }

  void launch(const KernelContext& ctx) override {
    runner_->workspace_ = ctx.workspace;
    runner_->workspace_size_ = ctx.workspace_size;
    runner_->LaunchKernel();
    runner_->workspace_ = nullptr;
    runner_->workspace_size_ = 0;
  }

 private:
  const OpDef& op_;
  std::shared_ptr<OpRunner> runner_;
};

}  // namespace detail

OpRunner::OpRunner(std::string op_name) : op_name_(std::move(op_name)) {}

OpRunner::~OpRunner() = default;

size_t OpRunner::CalcWorkspace() { return 0; }

void OpRunner::Run(std::vector<Tensor> inputs, std::vector<Tensor> outputs) {
  std::shared_ptr<OpRunner> self = weak_from_this().lock();
  KILN_CHECK_VALUE(self != nullptr)
      << "OpRunner '" << op_name_ << "' was not created by std::make_shared; the pipeline keeps "
      << "a runner alive until its kernel has run, so make it with "
      << "std::make_shared<YourRunner>(...)";
  KILN_CHECK_VALUE(!queued_.exchange(true, std::memory_order_acq_rel))
      << "OpRunner '" << op_name_ << "' is still queued from an earlier Run(); a runner runs one "
      << "call at a time, so make one runner per call";
  auto kernel = std::make_shared<detail::RunnerKernel>(std::move(self));
  // Note [OpRunner results and autograd]
  // Autograd cannot differentiate a kernel object, so the fresh results of a call on inputs that
  // require grad (metadata-only tensors the caller made for Run to fill) get a node that raises
  // at backward, as PyTorch's ops without an autograd kernel do: before, they required no grad,
  // and a loss through them trained on without their share of the gradient. Outputs with memory
  // (written in place) are left alone; a kiln::Function's Forward runs without grad mode, so its
  // runners record nothing and its own Backward gives the gradients.
  std::vector<Tensor> fresh;
  for (const Tensor& t : outputs) {
    if (t.defined() && !t.is_pending() && !t.has_storage()) fresh.push_back(t);
  }
  autograd::detail::record_without_gradient(
      op_name_, inputs, fresh,
      op_name_ +
          " (an OpRunner) has no gradient: autograd cannot differentiate a kernel object; "
          "give the op one through m.def_op and OpDef::grad, or call it inside a "
          "kiln::Function (kiln/autograd.h)");
  inputs_ = std::move(inputs);
  outputs_ = std::move(outputs);
  // From here `kernel` releases the runner when it dies, including when queueing fails.
  call_bound_kernel(kernel->op(), inputs_, outputs_, kernel);
}

}  // namespace kiln
