// The jit tests' backend plugin, built as a user builds one: "jit_plugin_backend" runs every node
// and "jit_plugin_elementwise" only elementwise ones (the jit runs the rest on kiln_cpu); both
// delegate Build and Run to the built-in "reference" backend. "jit_plugin_failing" and
// "jit_plugin_throwing" build like them but fail every Run, by status and by exception;
// "jit_plugin_flattening" and "jit_plugin_widening" run but return their results flattened to
// 1-d and converted to float64, which the jit must not pass on.
#include <kiln/backend.h>
#include <kiln/functional.h>
#include <kiln/op.h>

#include <stdexcept>

namespace {

kiln::BackendBase* reference() { return kiln::BackendManager::Instance().Get("reference"); }

class PluginBackend : public kiln::BackendBase {
 public:
  kiln::BackendGraphId Build(const kiln::FuncGraphPtr& g,
                             const kiln::BackendJitConfig& c) override {
    return reference()->Build(g, c);
  }
  kiln::RunningStatus Run(kiln::BackendGraphId id, const std::vector<kiln::Tensor>& in,
                          std::vector<kiln::Tensor>* out) override {
    return reference()->Run(id, in, out);
  }
  void ClearGraph(kiln::BackendGraphId id) override { reference()->ClearGraph(id); }
};

class ElementwiseBackend : public PluginBackend {
 public:
  bool Supports(const kiln::CNodePtr& node) const override {
    const kiln::OpDefPtr op = node->primitive()->op_def();
    return op != nullptr && op->has_trait(kiln::kTraitElementwise);
  }
};

class FailingBackend : public PluginBackend {
 public:
  kiln::RunningStatus Run(kiln::BackendGraphId, const std::vector<kiln::Tensor>&,
                          std::vector<kiln::Tensor>*) override {
    return kiln::RunningStatus::kRunningFailure;
  }
};

class ThrowingBackend : public PluginBackend {
 public:
  kiln::RunningStatus Run(kiln::BackendGraphId, const std::vector<kiln::Tensor>&,
                          std::vector<kiln::Tensor>*) override {
    throw std::runtime_error("the accelerator caught fire");
  }
};

// Runs as the reference backend, then changes each result with Mangle.
template <typename Mangle>
class ManglingBackend : public PluginBackend {
 public:
  kiln::RunningStatus Run(kiln::BackendGraphId id, const std::vector<kiln::Tensor>& in,
                          std::vector<kiln::Tensor>* out) override {
    const kiln::RunningStatus status = PluginBackend::Run(id, in, out);
    for (kiln::Tensor& t : *out) t = Mangle()(t);
    return status;
  }
};

struct Flatten {
  kiln::Tensor operator()(const kiln::Tensor& t) const { return kiln::reshape(t, {t.numel()}); }
};
struct Widen {
  kiln::Tensor operator()(const kiln::Tensor& t) const {
    return kiln::to(t, kiln::DType::kFloat64);
  }
};
using FlatteningBackend = ManglingBackend<Flatten>;
using WideningBackend = ManglingBackend<Widen>;

}  // namespace

KILN_REGISTER_BACKEND("jit_plugin_backend", PluginBackend);
KILN_REGISTER_BACKEND("jit_plugin_elementwise", ElementwiseBackend);
KILN_REGISTER_BACKEND("jit_plugin_failing", FailingBackend);
KILN_REGISTER_BACKEND("jit_plugin_throwing", ThrowingBackend);
KILN_REGISTER_BACKEND("jit_plugin_flattening", FlatteningBackend);
KILN_REGISTER_BACKEND("jit_plugin_widening", WideningBackend);
