// PatternToPatternPass: matching, rewriting, refusals, invalid patterns; PassManager's order,
// report and debug-mode verification.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "kiln/ir.h"
#include "kiln/pass.h"
#include "pass_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::BreakingPass;
using testing::expect_error;
using testing::NamedPass;

PrimitivePtr prim(const std::string& name, Attrs attrs = {}) {
  return std::make_shared<Primitive>(name, std::move(attrs));
}

// The seed example, as written in DESIGN.md.
class AddNegFusionPass : public PatternToPatternPass {
 public:
  AddNegFusionPass() : PatternToPatternPass("AddNegFusionPass") {}
  void DefineSrcPattern(SrcPattern* src) override {
    (*src).AddVar("x").AddVar("y")
        .AddCNode("neg", {std::make_shared<Primitive>("Neg"), "y"})
        .AddCNode("add", {std::make_shared<Primitive>("Add"), "x", "neg"});
  }
  void DefineDstPattern(DstPattern* dst) override {
    (*dst).AddCNode("sub", {std::make_shared<Primitive>("Sub"), "x", "y"}, BuildSub);
  }

 private:
  static NodePtr BuildSub(const PatternMap&, const NodePtr& node) { return node; }
};

// A pass whose patterns come from lambdas, for the many small cases below.
class LambdaPass : public PatternToPatternPass {
 public:
  using Define = std::function<void(SrcPattern*, DstPattern*)>;
  LambdaPass(std::string name, Define define,
             std::function<bool(const PatternMap&, const NodePtr&)> check = nullptr)
      : PatternToPatternPass(std::move(name)), define_(std::move(define)),
        check_(std::move(check)) {}
  void DefineSrcPattern(SrcPattern* src) override { define_(src, nullptr); }
  void DefineDstPattern(DstPattern* dst) override { define_(nullptr, dst); }
  bool CheckMatchedDAG(const PatternMap& map, const FuncGraphPtr&,
                       const NodePtr& node) const override {
    return check_ == nullptr || check_(map, node);
  }

 private:
  Define define_;
  std::function<bool(const PatternMap&, const NodePtr&)> check_;
};

// Neg(Neg(x)) -> x.
std::shared_ptr<LambdaPass> neg_neg_pass() {
  return std::make_shared<LambdaPass>("NegNeg", [](SrcPattern* src, DstPattern* dst) {
    if (src) src->AddVar("x").AddCNode("n1", {prim("Neg"), "x"}).AddCNode("n2", {prim("Neg"), "n1"});
    if (dst) dst->SetRoot("x");
  });
}

size_t count_op(const FuncGraph& g, const std::string& op) {
  size_t n = 0;
  for (const NodePtr& node : g.nodes()) {
    if (node->is_cnode() && static_cast<const CNode&>(*node).primitive()->name() == op) ++n;
  }
  return n;
}

TEST(PatternPass, SeedExampleRewritesAddNegToSub) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2, 3}, "x");
  auto y = g->add_parameter(DType::kFloat32, {3}, "y");
  g->set_output(g->add_cnode("Add", {x, g->add_cnode("Neg", {y})}));
  AddNegFusionPass pass;
  EXPECT_TRUE(pass.Run(g));
  ir::verify(*g);
  const auto& out = static_cast<const CNode&>(*g->outputs()[0]);
  EXPECT_EQ(out.primitive()->name(), "Sub");
  EXPECT_EQ(out.input(0), x);
  EXPECT_EQ(out.input(1), y);
  EXPECT_EQ(count_op(*g, "Neg"), 0u);  // the matched interior node had no other user
  EXPECT_EQ(count_op(*g, "Add"), 0u);
  EXPECT_EQ(out.abstract().str(), "float32[2, 3]");
  EXPECT_FALSE(pass.Run(g));  // a fixpoint: nothing left to match
}

TEST(PatternPass, InteriorNodeWithOutsideUsersStays) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {4});
  auto y = g->add_parameter(DType::kFloat32, {4});
  auto neg = g->add_cnode("Neg", {y});
  g->set_outputs({g->add_cnode("Add", {x, neg}), neg});
  EXPECT_TRUE(AddNegFusionPass().Run(g));
  ir::verify(*g);
  EXPECT_EQ(count_op(*g, "Neg"), 1u);
  EXPECT_EQ(count_op(*g, "Sub"), 1u);
  EXPECT_EQ(g->outputs()[1], neg);
}

TEST(PatternPass, SharedSubgraphIsRewrittenAtEveryRoot) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {4});
  auto z = g->add_parameter(DType::kFloat32, {4});
  auto y = g->add_parameter(DType::kFloat32, {4});
  auto neg = g->add_cnode("Neg", {y});
  g->set_outputs({g->add_cnode("Add", {x, neg}), g->add_cnode("Add", {z, neg})});
  EXPECT_TRUE(AddNegFusionPass().Run(g));
  ir::verify(*g);
  EXPECT_EQ(count_op(*g, "Sub"), 2u);
  EXPECT_EQ(count_op(*g, "Neg"), 0u);  // erased once its last user was rewritten
}

TEST(PatternPass, NoMatchLeavesTheGraphAlone) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {4});
  auto y = g->add_parameter(DType::kFloat32, {4});
  g->set_output(g->add_cnode("Add", {x, g->add_cnode("Exp", {y})}));
  const std::string before = ir::print(*g);
  EXPECT_FALSE(AddNegFusionPass().Run(g));
  EXPECT_EQ(ir::print(*g), before);
}

TEST(PatternPass, LongChainIsRewrittenWithoutRecursion) {
  auto g = std::make_shared<FuncGraph>("chain");
  auto y = g->add_parameter(DType::kFloat32, {8});
  NodePtr acc = g->add_parameter(DType::kFloat32, {8});
  constexpr int kLength = 20000;
  for (int i = 0; i < kLength; ++i) acc = g->add_cnode("Add", {acc, g->add_cnode("Neg", {y})});
  g->set_output(acc);
  EXPECT_TRUE(AddNegFusionPass().Run(g));
  ir::verify(*g);
  EXPECT_EQ(count_op(*g, "Sub"), static_cast<size_t>(kLength));
  EXPECT_EQ(g->num_nodes(), static_cast<size_t>(kLength) + 3);  // params, subs, return
}

TEST(PatternPass, OverlappingMatchesReachTheFixpoint) {
  for (int n = 1; n <= 7; ++n) {
    auto g = std::make_shared<FuncGraph>("f");
    NodePtr acc = g->add_parameter(DType::kFloat32, {3}, "x");
    for (int i = 0; i < n; ++i) acc = g->add_cnode("Neg", {acc});
    g->set_output(acc);
    neg_neg_pass()->Run(g);
    ir::verify(*g);
    EXPECT_EQ(count_op(*g, "Neg"), static_cast<size_t>(n % 2)) << n << " negations";
  }
}

TEST(PatternPass, RewriteMatchesNewlyExposedPatterns) {
  // Neg(Neg(Add(a, Neg(b)))): AddNeg first, then the outer pair cancels in a second pass run.
  auto g = std::make_shared<FuncGraph>("f");
  auto a = g->add_parameter(DType::kFloat32, {3});
  auto b = g->add_parameter(DType::kFloat32, {3});
  auto add = g->add_cnode("Add", {a, g->add_cnode("Neg", {b})});
  g->set_output(g->add_cnode("Neg", {g->add_cnode("Neg", {add})}));
  PassManager pm;
  pm.add(std::make_shared<AddNegFusionPass>());
  pm.add(neg_neg_pass());
  PassReport report;
  EXPECT_TRUE(pm.Run(g, &report));
  ir::verify(*g);
  ASSERT_EQ(report.runs.size(), 2u);
  EXPECT_EQ(report.runs[0].matches, 1u);
  EXPECT_EQ(report.runs[1].matches, 1u);
  EXPECT_EQ(static_cast<const CNode&>(*g->outputs()[0]).primitive()->name(), "Sub");
}

TEST(PatternPass, SameNameTwiceMustBeTheSameNode) {
  auto pass = std::make_shared<LambdaPass>("AddSelf", [](SrcPattern* src, DstPattern* dst) {
    if (src) src->AddVar("x").AddCNode("add", {prim("Add"), "x", "x"});
    if (dst) dst->AddValueNode("two", [](const PatternMap&) { return Tensor::scalar(2.0); })
                 .AddCNode("mul", {prim("Mul"), "x", "two"});
  });
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3});
  auto y = g->add_parameter(DType::kFloat32, {3});
  g->set_outputs({g->add_cnode("Add", {x, y}), g->add_cnode("Add", {x, x})});
  EXPECT_TRUE(pass->Run(g));
  ir::verify(*g);
  EXPECT_EQ(count_op(*g, "Add"), 1u);
  EXPECT_EQ(count_op(*g, "Mul"), 1u);
}

TEST(PatternPass, ConditionsMatchConstantsAndAttributes) {
  // x * 1 -> x, only for constants equal to 1.
  auto mul_one = std::make_shared<LambdaPass>("MulOne", [](SrcPattern* src, DstPattern* dst) {
    if (src) src->AddVar("x").AddVar("one", pattern::IsConstantEqual(1.0))
                 .AddCNode("mul", {prim("Mul"), "x", "one"});
    if (dst) dst->SetRoot("x");
  });
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3});
  auto by_one = g->add_cnode("Mul", {x, g->add_value(Scalar(1.0))});
  auto by_two = g->add_cnode("Mul", {x, g->add_value(Scalar(2.0))});
  // keepdim=true sums only.
  auto keep = std::make_shared<LambdaPass>("KeepSum", [](SrcPattern* src, DstPattern* dst) {
    if (src) src->AddVar("x").AddCNode("s", {prim("ReduceSum", {{"keepdim", true}}), "x"});
    if (dst) dst->AddCNode("m", {prim("ReduceMean", {{"keepdim", true}}), "x"});
  });
  auto kept = g->add_cnode("ReduceSum", {x}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", true}});
  auto dropped = g->add_cnode("ReduceSum", {x}, {{"dims", std::vector<int64_t>{0}}});
  g->set_outputs({by_one, by_two, kept, dropped});
  EXPECT_TRUE(mul_one->Run(g));
  EXPECT_EQ(g->outputs()[0], x);
  EXPECT_EQ(g->outputs()[1], by_two);
  EXPECT_TRUE(keep->Run(g));
  ir::verify(*g);
  EXPECT_EQ(static_cast<const CNode&>(*g->outputs()[2]).primitive()->name(), "ReduceMean");
  EXPECT_EQ(g->outputs()[3], dropped);
}

TEST(PatternPass, SeqVarMatchesAnyNumberOfInputs) {
  // Concat(xs..., Neg(y)) -> Concat(xs..., Neg(y)) with the Neg moved to the front.
  auto pass = std::make_shared<LambdaPass>("ConcatNegFirst", [](SrcPattern* src, DstPattern* dst) {
    if (src) src->AddSeqVar("xs", pattern::HasDType(DType::kFloat32)).AddVar("y")
                 .AddCNode("neg", {prim("Neg"), "y"})
                 .AddCNode("cat", {prim("Concat"), "xs", "neg"});
    if (dst) dst->AddCNode("n", {prim("Neg"), "y"}).AddCNode("c", {prim("Concat"), "n", "xs"});
  }, [](const PatternMap& map, const NodePtr&) { return map.GetSeq("xs").size() >= 2; });
  auto g = std::make_shared<FuncGraph>("f");
  auto a = g->add_parameter(DType::kFloat32, {2});
  auto b = g->add_parameter(DType::kFloat32, {2});
  auto y = g->add_parameter(DType::kFloat32, {2});
  auto three = g->add_cnode("Concat", {a, b, g->add_cnode("Neg", {y})});
  auto two = g->add_cnode("Concat", {a, g->add_cnode("Neg", {y})});  // CheckMatchedDAG declines
  g->set_outputs({three, two});
  PassManager pm;
  pm.add(pass);
  PassReport report;
  EXPECT_TRUE(pm.Run(g, &report));
  ir::verify(*g);
  const auto& cat = static_cast<const CNode&>(*g->outputs()[0]);
  ASSERT_EQ(cat.num_inputs(), 3u);
  EXPECT_EQ(static_cast<const CNode&>(*cat.input(0)).primitive()->name(), "Neg");
  EXPECT_EQ(cat.input(1), a);
  EXPECT_EQ(cat.input(2), b);
  EXPECT_EQ(g->outputs()[1], two);
  EXPECT_EQ(report.runs[0].refusals, 1u);
  EXPECT_NE(report.str().find("CheckMatchedDAG returned false"), std::string::npos);
}

TEST(PatternPass, AbstractMismatchIsRefusedNamingThePass) {
  // x * 1 -> x is wrong when the product promotes: int32 * 1.0 is float32.
  auto pass = std::make_shared<LambdaPass>("MulOne", [](SrcPattern* src, DstPattern* dst) {
    if (src) src->AddVar("x").AddVar("one", pattern::IsConstantEqual(1.0))
                 .AddCNode("mul", {prim("Mul"), "x", "one"});
    if (dst) dst->SetRoot("x");
  });
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kInt32, {3});
  auto mul = g->add_cnode("Mul", {x, g->add_value(Scalar(1.0))});
  g->set_output(mul);
  PassManager pm;
  pm.add(pass);
  PassReport report;
  EXPECT_FALSE(pm.Run(g, &report));
  EXPECT_EQ(g->outputs()[0], mul);
  ASSERT_EQ(report.runs[0].reasons.size(), 1u);
  const std::string& reason = report.runs[0].reasons[0];
  EXPECT_NE(reason.find("pass 'MulOne'"), std::string::npos) << reason;
  EXPECT_NE(reason.find("int32[3]"), std::string::npos) << reason;
  EXPECT_NE(reason.find("float32[3]"), std::string::npos) << reason;
}

TEST(PatternPass, CycleIsRefusedAndNewNodesAreRemoved) {
  // Rewriting add to Neg(add) would make the new root use the node it replaces.
  auto pass = std::make_shared<LambdaPass>("Cyclic", [](SrcPattern* src, DstPattern* dst) {
    if (src) src->AddVar("x").AddVar("y").AddCNode("add", {prim("Add"), "x", "y"});
    if (dst) dst->AddCNode("n", {prim("Neg"), "add"}, [](const PatternMap& m, const NodePtr&) {
      return m.Get("add")->graph()->add_cnode("Neg", {m.Get("add")});
    });
  });
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3});
  g->set_output(g->add_cnode("Add", {x, x}));
  const std::string before = ir::print(*g);
  PassManager pm;
  pm.add(pass);
  PassReport report;
  EXPECT_FALSE(pm.Run(g, &report));
  EXPECT_EQ(ir::print(*g), before);
  EXPECT_EQ(report.runs[0].refusals, 1u);
  EXPECT_NE(report.runs[0].reasons[0].find("would depend on the node it replaces"),
            std::string::npos);
}

TEST(PatternPass, FailedInferenceOfADestinationNodeIsARefusal) {
  // Add(x, y) -> MatMul(x, y) infers only for matrices.
  auto pass = std::make_shared<LambdaPass>("AddToMatMul", [](SrcPattern* src, DstPattern* dst) {
    if (src) src->AddVar("x").AddVar("y").AddCNode("add", {prim("Add"), "x", "y"});
    if (dst) dst->AddCNode("mm", {prim("MatMul"), "x", "y"});
  });
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3});
  auto y = g->add_parameter(DType::kFloat32, {2});
  g->set_output(g->add_cnode("Add", {x, g->add_cnode("Neg", {x})}));
  (void)y;
  const std::string before = ir::print(*g);
  PassManager pm;
  pm.add(pass);
  PassReport report;
  pm.Run(g, &report);
  EXPECT_EQ(ir::print(*g), before);
  EXPECT_EQ(report.runs[0].refusals, 1u);
}

TEST(PatternPass, RewritesThatNeverSettleStopWithAnError) {
  auto pass = std::make_shared<LambdaPass>("Swap", [](SrcPattern* src, DstPattern* dst) {
    if (src) src->AddVar("x").AddVar("y").AddCNode("add", {prim("Add"), "x", "y"});
    if (dst) dst->AddCNode("swapped", {prim("Add"), "y", "x"});
  });
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3});
  g->set_output(g->add_cnode("Add", {x, g->add_cnode("Exp", {x})}));
  expect_error([&] { pass->Run(g); }, ErrorKind::kValue, "pass 'Swap' did not reach a fixpoint");
}

TEST(PatternPass, InvalidPatternsFailAtPrepareNamingThePass) {
  const auto expect_invalid = [](LambdaPass::Define define, const std::string& needle) {
    auto pass = std::make_shared<LambdaPass>("Bad", std::move(define));
    expect_error([&] { pass->Prepare(); }, ErrorKind::kValue, needle);
    expect_error([&] { pass->Prepare(); }, ErrorKind::kValue, "pass 'Bad'");  // still invalid
  };
  expect_invalid([](SrcPattern* s, DstPattern* d) {
    if (s) s->AddVar("x").AddCNode("n", {prim("NoSuchOp"), "x"});
    if (d) d->SetRoot("x");
  }, "unknown primitive 'NoSuchOp'");
  expect_invalid([](SrcPattern* s, DstPattern* d) {
    if (s) s->AddVar("x").AddCNode("n", {prim("Neg"), "z"});
    if (d) d->SetRoot("x");
  }, "uses 'z' which is not defined");
  expect_invalid([](SrcPattern* s, DstPattern* d) {
    if (s) s->AddCNode("n", {prim("Neg"), "x"}).AddVar("x");
    if (d) d->SetRoot("x");
  }, "uses 'x' before it is defined");
  expect_invalid([](SrcPattern* s, DstPattern* d) {
    if (s) s->AddVar("x");
    if (d) d->SetRoot("x");
  }, "has no CNode");
  expect_invalid([](SrcPattern* s, DstPattern* d) {
    if (s) s->AddVar("x").AddVar("unused").AddCNode("n", {prim("Neg"), "x"});
    if (d) d->SetRoot("x");
  }, "'unused' is not used by the root 'n'");
  expect_invalid([](SrcPattern* s, DstPattern* d) {
    if (s) s->AddVar("x").AddVar("x").AddCNode("n", {prim("Neg"), "x"});
    if (d) d->SetRoot("x");
  }, "'x' is defined twice");
  expect_invalid([](SrcPattern* s, DstPattern* d) {
    if (s) s->AddVar("x").AddCNode("n", {prim("Neg"), "x"});
    if (d) d->AddCNode("m", {prim("Exp"), "w"});
  }, "destination node 'm' uses 'w' which is not defined");
  expect_invalid([](SrcPattern* s, DstPattern* d) {
    if (s) s->AddVar("x").AddCNode("n", {prim("Neg"), "x"});
  }, "the destination pattern is empty");
  expect_invalid([](SrcPattern* s, DstPattern* d) {
    if (s) s->AddVar("x").AddCNode("n", {"x"});
    if (d) d->SetRoot("x");
  }, "must be a primitive");
  expect_invalid(
      [](SrcPattern* s, DstPattern* d) {
        if (s) s->AddVar("x").AddCNode("n", {prim("Softmax", {{"dimm", int64_t{1}}}), "x"});
        if (d) d->SetRoot("x");
      },
      "source node 'n' gives Softmax the unknown attribute 'dimm' (its attributes: dim)");
  expect_invalid(
      [](SrcPattern* s, DstPattern* d) {
        if (s) s->AddVar("x").AddCNode("n", {prim("Neg"), "x"});
        if (d) d->AddCNode("m", {prim("Softmax", {{"dimm", int64_t{1}}}), "x"});
      },
      "destination node 'm' gives Softmax the unknown attribute 'dimm'");
}

TEST(PatternPass, AnyExceptionOfADefinitionNamesThePass) {
  auto pass = std::make_shared<LambdaPass>(
      "Throws", [](SrcPattern*, DstPattern*) { throw std::runtime_error("define failed"); });
  expect_error([&] { pass->Prepare(); }, ErrorKind::kGeneric,
               "define failed\n  in pass 'Throws' defining its patterns");
}

TEST(PatternPass, PatternMapNamesWhatIsBound) {
  auto pass = std::make_shared<LambdaPass>("Probe", [](SrcPattern* src, DstPattern* dst) {
    if (src) src->AddVar("x").AddVar("y").AddCNode("neg", {prim("Neg"), "y"})
                 .AddCNode("add", {prim("Add"), "x", "neg"});
    if (dst) dst->AddCNode("sub", {prim("Sub"), "x", "y"}, [](const PatternMap& m,
                                                              const NodePtr& node) {
      EXPECT_TRUE(m.Contains("neg"));
      EXPECT_FALSE(m.Contains("sub"));  // bound after its callback returns
      expect_error([&] { m.Get("nope"); }, ErrorKind::kValue, "bound names: 'x', 'y'");
      expect_error([&] { m.GetSeq("x"); }, ErrorKind::kValue, "is not a seq var");
      return node;
    });
  });
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3});
  g->set_output(g->add_cnode("Add", {x, g->add_cnode("Neg", {x})}));
  EXPECT_TRUE(pass->Run(g));
}

TEST(PassManager, RunsByStageThenPriorityThenOrder) {
  std::vector<std::string> log;
  PassManager pm;
  pm.add(std::make_shared<NamedPass>("post", &log), PassStage::kPostFusion);
  pm.add(std::make_shared<NamedPass>("pre_late", &log), PassStage::kPreFusion, 5);
  pm.add(std::make_shared<NamedPass>("pre_a", &log), PassStage::kPreFusion, 0);
  pm.add(std::make_shared<NamedPass>("front", &log), PassStage::kFrontend, 100);
  pm.add(std::make_shared<NamedPass>("pre_b", &log), PassStage::kPreFusion, 0);
  pm.add(std::make_shared<NamedPass>("fusion", &log), PassStage::kFusion, -3);
  auto g = std::make_shared<FuncGraph>("f");
  g->set_output(g->add_parameter(DType::kFloat32, {1}));
  PassReport report;
  EXPECT_FALSE(pm.Run(g, &report));
  EXPECT_EQ(log, (std::vector<std::string>{"front", "pre_a", "pre_b", "pre_late", "fusion",
                                           "post"}));
  ASSERT_EQ(report.runs.size(), 6u);
  EXPECT_EQ(report.runs[0].matches, 2u);
  EXPECT_EQ(report.runs[5].stage, PassStage::kPostFusion);
  EXPECT_NE(report.str().find("post_fusion  post"), std::string::npos) << report.str();
}

TEST(PassManager, DebugModeNamesThePassThatBrokeTheGraph) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3});
  g->set_output(g->add_cnode("Neg", {x}));
  PassManager pm;
  pm.add(std::make_shared<BreakingPass>(), PassStage::kFusion);
  pm.set_verify(true);
  expect_error([&] { pm.Run(g); }, ErrorKind::kDType, "pass 'Breaker' (stage fusion) left graph");
}

TEST(PassManager, PassExceptionsNameThePass) {
  class Throwing : public Pass {
   public:
    Throwing() : Pass("Thrower") {}
    bool Run(const FuncGraphPtr&) override { throw std::runtime_error("boom"); }
  };
  PassManager pm;
  pm.add(std::make_shared<Throwing>());
  auto g = std::make_shared<FuncGraph>("f");
  expect_error([&] { pm.Run(g); }, ErrorKind::kGeneric, "pass 'Thrower' (stage pre_fusion) failed");
  // Something that is no std::exception at all still becomes a kiln::Error naming the pass.
  class ThrowingAnInt : public Pass {
   public:
    ThrowingAnInt() : Pass("IntThrower") {}
    bool Run(const FuncGraphPtr&) override { throw 42; }
  };
  PassManager ints;
  ints.add(std::make_shared<ThrowingAnInt>());
  expect_error([&] { ints.Run(g); }, ErrorKind::kGeneric,
               "pass 'IntThrower' (stage pre_fusion) failed on graph \"f\": an unknown exception");
}

TEST(PassReport, ALongPassNameKeepsItsRowWhole) {
  PassReport report;
  report.runs.push_back({std::string(300, 'P'), PassStage::kFusion, true, 1, 0, {}, 0.0});
  report.runs.push_back({"Short", PassStage::kPostFusion, false, 0, 0, {}, 0.0});
  const std::string text = report.str();
  // The 256-byte line buffer cut the first row before its numbers and its newline.
  EXPECT_NE(text.find(std::string(300, 'P') + " yes            1        0     0.000\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\npost_fusion  Short                             no"), std::string::npos)
      << text;
}

TEST(PassStage, NamesRoundTripAndUnknownNamesAreListed) {
  for (PassStage s : {PassStage::kFrontend, PassStage::kPreFusion, PassStage::kFusion,
                      PassStage::kPostFusion}) {
    EXPECT_EQ(parse_stage(stage_name(s)), s);
  }
  expect_error([] { parse_stage("middle"); }, ErrorKind::kValue,
               "unknown pass stage 'middle'; the stages are frontend, pre_fusion");
}

}  // namespace
}  // namespace kiln
