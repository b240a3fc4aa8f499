// add_neg_fusion.cpp — a pass plugin
#include <kiln/pass.h>
class AddNegFusionPass : public kiln::PatternToPatternPass {
 public:
  AddNegFusionPass() : PatternToPatternPass("AddNegFusionPass") {}
  void DefineSrcPattern(kiln::SrcPattern* src) override {
    (*src).AddVar("x").AddVar("y")
        .AddCNode("neg", {std::make_shared<kiln::Primitive>("Neg"), "y"})
        .AddCNode("add", {std::make_shared<kiln::Primitive>("Add"), "x", "neg"});
  }
  void DefineDstPattern(kiln::DstPattern* dst) override {
    (*dst).AddCNode("sub", {std::make_shared<kiln::Primitive>("Sub"), "x", "y"}, BuildSub);
  }
 private:
  static kiln::NodePtr BuildSub(const kiln::PatternMap&, const kiln::NodePtr& node) { return node; }
};
class MyPasses : public kiln::PassPlugin {
 public:
  std::string GetPluginName() const override { return "my_passes"; }
  std::vector<std::string> GetAvailablePassNames() const override { return {"AddNegFusionPass"}; }
  std::shared_ptr<kiln::Pass> CreatePass(const std::string& name) const override {
    return name == "AddNegFusionPass" ? std::make_shared<AddNegFusionPass>() : nullptr;
  }
};
KILN_EXPORT_PASS_PLUGIN(MyPasses)
