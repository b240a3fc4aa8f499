// A backend plugin built as a user builds one: two backends in one library. Both delegate to the
// built-in "reference" backend; "test_elementwise_backend" accepts only elementwise ops (what a
// young backend that falls back for the rest looks like), "test_second_backend" everything.
#include <kiln/backend.h>

namespace {

kiln::BackendBase* reference() { return kiln::BackendManager::Instance().Get("reference"); }

class ElementwiseBackend : public kiln::BackendBase {
 public:
  kiln::BackendGraphId Build(const kiln::FuncGraphPtr& g,
                             const kiln::BackendJitConfig& c) override {
    return reference()->Build(g, c);
  }
  kiln::RunningStatus Run(kiln::BackendGraphId id, const std::vector<kiln::Tensor>& in,
                          std::vector<kiln::Tensor>* out) override {
    return reference()->Run(id, in, out);
  }
  bool Supports(const kiln::CNodePtr& node) const override {
    const kiln::OpDefPtr op = node->primitive()->op_def();
    return op != nullptr && op->has_trait(kiln::kTraitElementwise);
  }
};

class SecondBackend : public ElementwiseBackend {
 public:
  bool Supports(const kiln::CNodePtr&) const override { return true; }
};

}  // namespace

KILN_REGISTER_BACKEND("test_elementwise_backend", ElementwiseBackend);
KILN_REGISTER_BACKEND("test_second_backend", SecondBackend);
