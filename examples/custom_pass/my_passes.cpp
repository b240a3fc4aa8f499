// my_passes.cpp — a pass plugin with two passes:
//   AddNegFusionPass      Add(x, Neg(y)) -> Sub(x, y)            (DESIGN.md's seed example)
//   MatMulAddReluFusion   Relu(Add(MatMul(x, w), b)) -> MatMulAddRelu(x, w, b)
// MatMulAddRelu is a custom op that matmul_add_relu.cpp registers with m.def_op; load that
// extension before registering the pass (its pattern names the op, which must exist).
#include <kiln/pass.h>

namespace {

kiln::PrimitivePtr op(const char* name) { return std::make_shared<kiln::Primitive>(name); }

class AddNegFusionPass : public kiln::PatternToPatternPass {
 public:
  AddNegFusionPass() : PatternToPatternPass("AddNegFusionPass") {}
  void DefineSrcPattern(kiln::SrcPattern* src) override {
    (*src)
        .AddVar("x")
        .AddVar("y")
        .AddCNode("neg", {op("Neg"), "y"})
        .AddCNode("add", {op("Add"), "x", "neg"});
  }
  void DefineDstPattern(kiln::DstPattern* dst) override {
    (*dst).AddCNode("sub", {op("Sub"), "x", "y"});
  }
};

class MatMulAddReluFusion : public kiln::PatternToPatternPass {
 public:
  MatMulAddReluFusion() : PatternToPatternPass("MatMulAddReluFusion") {}
  void DefineSrcPattern(kiln::SrcPattern* src) override {
    const auto f32 = kiln::pattern::HasDType(kiln::DType::kFloat32);
    (*src)
        .AddVar("x", f32)
        .AddVar("w", f32)
        .AddVar("b", f32)
        .AddCNode("mm", {op("MatMul"), "x", "w"})
        .AddCNode("add", {op("Add"), "mm", "b"})
        .AddCNode("relu", {op("Relu"), "add"});
  }
  void DefineDstPattern(kiln::DstPattern* dst) override {
    (*dst).AddCNode("fused", {op("MatMulAddRelu"), "x", "w", "b"});
  }
  // The fused kernel takes matrices and a bias that broadcasts over rows ([N], [1, N] or
  // [M, N]); other matches (batched matmuls, a bias per row) stay as they are.
  bool CheckMatchedDAG(const kiln::PatternMap& m, const kiln::FuncGraphPtr&,
                       const kiln::NodePtr&) const override {
    const kiln::Shape& x = m.Get("x")->abstract().shape();
    const kiln::Shape& w = m.Get("w")->abstract().shape();
    const kiln::Shape& b = m.Get("b")->abstract().shape();
    if (x.size() != 2 || w.size() != 2) return false;
    const int64_t rows = x[0];
    const int64_t cols = w[1];
    return (b.size() == 1 && b[0] == cols) ||
           (b.size() == 2 && (b[0] == 1 || b[0] == rows) && b[1] == cols);
  }
};

class MyPasses : public kiln::PassPlugin {
 public:
  std::string GetPluginName() const override { return "my_passes"; }
  std::vector<std::string> GetAvailablePassNames() const override {
    return {"AddNegFusionPass", "MatMulAddReluFusion"};
  }
  std::shared_ptr<kiln::Pass> CreatePass(const std::string& name) const override {
    if (name == "AddNegFusionPass") return std::make_shared<AddNegFusionPass>();
    if (name == "MatMulAddReluFusion") return std::make_shared<MatMulAddReluFusion>();
    return nullptr;
  }
};

}  // namespace

KILN_EXPORT_PASS_PLUGIN(MyPasses)
