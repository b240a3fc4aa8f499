// A backend that computes nothing, for measuring the jit's own cost per call (bench/jit_bench.py
// and bench/cpp/jit_bench.cc): Build keeps the graph's output dtypes and shapes; Run returns new
// uninitialised tensors of those (the least any backend must do: hand back outputs).
#include <kiln/backend.h>

#include <map>
#include <mutex>

namespace {

class NullBackend : public kiln::BackendBase {
 public:
  kiln::BackendGraphId Build(const kiln::FuncGraphPtr& g, const kiln::BackendJitConfig&) override {
    std::vector<kiln::TensorMeta> outputs;
    for (const kiln::NodePtr& out : g->outputs()) outputs.push_back(out->abstract().tensor());
    std::lock_guard<std::mutex> lock(mutex_);
    graphs_[next_id_] = std::move(outputs);
    return next_id_++;
  }
  kiln::RunningStatus Run(kiln::BackendGraphId id, const std::vector<kiln::Tensor>&,
                          std::vector<kiln::Tensor>* out) override {
    std::lock_guard<std::mutex> lock(mutex_);
    out->clear();
    for (const kiln::TensorMeta& meta : graphs_.at(id)) {
      out->push_back(kiln::Tensor::empty(meta.shape, meta.dtype));
    }
    return kiln::RunningStatus::kRunningSuccess;
  }
  void ClearGraph(kiln::BackendGraphId id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    graphs_.erase(id);
  }

 private:
  std::mutex mutex_;
  std::map<kiln::BackendGraphId, std::vector<kiln::TensorMeta>> graphs_;
  kiln::BackendGraphId next_id_ = 0;
};

}  // namespace

KILN_REGISTER_BACKEND("bench_null_backend", NullBackend);
