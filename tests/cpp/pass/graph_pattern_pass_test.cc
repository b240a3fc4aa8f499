// make_graph_pattern_pass (patterns from two graphs: vars by position, constants by value, all
// attributes matched, the check callback, the errors) and the tools that read a source pattern
// (src_pattern, instantiate_src_pattern).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "kiln/ir.h"
#include "kiln/pass.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_error;

// A graph of `n` float32 [3] parameters named a, b, ... whose output `body` computes.
FuncGraphPtr graph_of(size_t n,
                      const std::function<NodePtr(FuncGraph&, std::vector<NodePtr>)>& body) {
  auto g = std::make_shared<FuncGraph>("pattern");
  std::vector<NodePtr> params;
  for (size_t i = 0; i < n; ++i) {
    params.push_back(
        g->add_parameter(DType::kFloat32, {3}, std::string(1, static_cast<char>('a' + i))));
  }
  g->set_output(body(*g, params));
  return g;
}

const CNode& out_node(const FuncGraphPtr& g) { return static_cast<const CNode&>(*g->outputs()[0]); }

// add(a, neg(b)) -> sub(a, b), as graphs.
std::shared_ptr<PatternToPatternPass> add_neg_to_sub(GraphPatternCheckFunc check = nullptr) {
  return make_graph_pattern_pass(
      "AddNegGraph",
      graph_of(2,
               [](FuncGraph& g, std::vector<NodePtr> p) {
                 return g.add_cnode("Add", {p[0], g.add_cnode("Neg", {p[1]})});
               }),
      graph_of(2,
               [](FuncGraph& g, std::vector<NodePtr> p) {
                 return g.add_cnode("Sub", {p[0], p[1]});
               }),
      std::move(check));
}

TEST(GraphPatternPass, ParametersAreVarsMatchedByPosition) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2, 3}, "x");
  auto y = g->add_parameter(DType::kFloat32, {3}, "y");
  g->set_output(g->add_cnode("Add", {x, g->add_cnode("Neg", {y})}));
  auto pass = add_neg_to_sub();
  EXPECT_TRUE(pass->Run(g));
  ir::verify(*g);
  EXPECT_EQ(out_node(g).primitive()->name(), "Sub");
  EXPECT_EQ(out_node(g).input(0), x);
  EXPECT_EQ(out_node(g).input(1), y);
}

TEST(GraphPatternPass, ConstantsMatchByValue) {
  // a * 2 -> a + a
  auto pass = make_graph_pattern_pass(
      "TwiceGraph",
      graph_of(1,
               [](FuncGraph& g, std::vector<NodePtr> p) {
                 return g.add_cnode("Mul", {p[0], g.add_value(Scalar(2.0))});
               }),
      graph_of(1, [](FuncGraph& g, std::vector<NodePtr> p) {
        return g.add_cnode("Add", {p[0], p[0]});
      }));
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3});
  auto by_two = g->add_cnode("Mul", {x, g->add_value(Scalar(2.0))});
  auto by_three = g->add_cnode("Mul", {x, g->add_value(Scalar(3.0))});
  const auto twos = [] {
    Tensor t = Tensor::empty({3}, DType::kFloat32);
    for (int i = 0; i < 3; ++i) t.data<float>()[i] = 2.0f;
    return t;
  };
  // All elements equal 2, in a tensor only the graph holds (a frozen constant).
  auto by_twos = g->add_cnode("Mul", {x, g->add_value(twos())});
  g->set_outputs({by_two, by_three, by_twos});
  EXPECT_TRUE(pass->Run(g));
  ir::verify(*g);
  EXPECT_EQ(static_cast<const CNode&>(*g->outputs()[0]).primitive()->name(), "Add");
  EXPECT_EQ(g->outputs()[1], by_three);
  EXPECT_EQ(static_cast<const CNode&>(*g->outputs()[2]).primitive()->name(), "Add");
  // verify_pass finds the constant through ExampleConstants.
  const std::vector<Tensor> examples = pass->ExampleConstants(pass->src_pattern()[1].name);
  ASSERT_EQ(examples.size(), 1u);
  EXPECT_TRUE(examples[0].is_weak_scalar());
}

TEST(GraphPatternPass, NonUniformConstantsMatchExactly) {
  Tensor pattern_value = Tensor::empty({3}, DType::kFloat32);
  for (int i = 0; i < 3; ++i) pattern_value.data<float>()[i] = static_cast<float>(i);
  auto pass = make_graph_pattern_pass(
      "AddRamp",
      graph_of(1,
               [&](FuncGraph& g, std::vector<NodePtr> p) {
                 return g.add_cnode("Add", {p[0], g.add_value(pattern_value)});
               }),
      graph_of(1, [&](FuncGraph& g, std::vector<NodePtr> p) {
        return g.add_cnode("Sub", {p[0], g.add_cnode("Neg", {g.add_value(pattern_value)})});
      }));
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3});
  Tensor other = Tensor::empty({3}, DType::kFloat32);
  for (int i = 0; i < 3; ++i) other.data<float>()[i] = static_cast<float>(2 - i);
  // Copies only the graph holds (frozen constants): a tensor the program holds never matches.
  auto same = g->add_cnode("Add", {x, g->add_value(pattern_value.clone())});
  auto held = g->add_cnode("Add", {x, g->add_value(pattern_value)});
  auto different = g->add_cnode("Add", {x, g->add_value(other.clone())});
  g->set_outputs({same, held, different});
  EXPECT_TRUE(pass->Run(g));
  ir::verify(*g);
  EXPECT_EQ(static_cast<const CNode&>(*g->outputs()[0]).primitive()->name(), "Sub");
  EXPECT_EQ(g->outputs()[1], held);
  EXPECT_EQ(g->outputs()[2], different);
}

TEST(GraphPatternPass, EveryAttributeMustMatch) {
  // sum(a, dims=[0], keepdim=true) -> sum(a, dims=[0], keepdim=true) * 1 written as mean * 3
  const Attrs keep{{"dims", std::vector<int64_t>{0}}, {"keepdim", true}};
  auto pass = make_graph_pattern_pass(
      "SumToMean",
      graph_of(1, [&](FuncGraph& g,
                      std::vector<NodePtr> p) { return g.add_cnode("ReduceSum", {p[0]}, keep); }),
      graph_of(1, [&](FuncGraph& g, std::vector<NodePtr> p) {
        return g.add_cnode("Mul",
                           {g.add_cnode("ReduceMean", {p[0]}, keep), g.add_value(Scalar(3.0))});
      }));
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3});
  auto kept = g->add_cnode("ReduceSum", {x}, keep);
  auto dropped = g->add_cnode("ReduceSum", {x}, {{"dims", std::vector<int64_t>{0}}});
  g->set_outputs({kept, dropped});
  EXPECT_TRUE(pass->Run(g));
  ir::verify(*g);
  EXPECT_EQ(static_cast<const CNode&>(*g->outputs()[0]).primitive()->name(), "Mul");
  EXPECT_EQ(g->outputs()[1], dropped);
}

TEST(GraphPatternPass, CheckGetsTheMatchedInputsInOrder) {
  std::vector<std::string> seen;
  auto pass = add_neg_to_sub([&](const std::vector<NodePtr>& vars) {
    EXPECT_EQ(vars.size(), 2u);
    seen.push_back(vars[0]->abstract().str() + " " + vars[1]->abstract().str());
    return vars[0]->abstract().shape() == vars[1]->abstract().shape();
  });
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2, 3});
  auto y = g->add_parameter(DType::kFloat32, {3});
  auto broadcast = g->add_cnode("Add", {x, g->add_cnode("Neg", {y})});
  auto same = g->add_cnode("Add", {y, g->add_cnode("Neg", {y})});
  g->set_outputs({broadcast, same});
  PassManager pm;
  pm.add(pass);
  PassReport report;
  EXPECT_TRUE(pm.Run(g, &report));
  EXPECT_EQ(g->outputs()[0], broadcast);
  EXPECT_EQ(static_cast<const CNode&>(*g->outputs()[1]).primitive()->name(), "Sub");
  EXPECT_EQ(seen, (std::vector<std::string>{"float32[2, 3] float32[3]", "float32[3] float32[3]"}));
  EXPECT_EQ(report.runs[0].refusals, 1u);
}

TEST(GraphPatternPass, DestinationMayBeAnInput) {
  // neg(neg(a)) -> a
  auto pass =
      make_graph_pattern_pass("NegNegGraph",
                              graph_of(1,
                                       [](FuncGraph& g, std::vector<NodePtr> p) {
                                         return g.add_cnode("Neg", {g.add_cnode("Neg", {p[0]})});
                                       }),
                              graph_of(1, [](FuncGraph&, std::vector<NodePtr> p) { return p[0]; }));
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3});
  g->set_output(g->add_cnode("Neg", {g->add_cnode("Neg", {x})}));
  EXPECT_TRUE(pass->Run(g));
  EXPECT_EQ(g->outputs()[0], x);
}

TEST(GraphPatternPass, ErrorsNameThePattern) {
  const auto neg = [](FuncGraph& g, std::vector<NodePtr> p) { return g.add_cnode("Neg", {p[0]}); };
  const auto ident = [](FuncGraph&, std::vector<NodePtr> p) { return p[0]; };
  expect_error([&] { make_graph_pattern_pass("P", graph_of(1, neg), graph_of(2, neg)); },
               ErrorKind::kValue,
               "pattern 'P': the source graph takes 1 inputs but the destination graph takes 2");
  expect_error([&] { make_graph_pattern_pass("P", graph_of(2, neg), graph_of(2, neg)); },
               ErrorKind::kValue, "input 1 ('b') of the source graph is not used by its output");
  expect_error([&] { make_graph_pattern_pass("P", graph_of(1, ident), graph_of(1, neg)); },
               ErrorKind::kValue, "the source graph's output is %0 (parameter a), not an op");
  auto two = graph_of(1, neg);
  two->set_outputs({two->outputs()[0], two->parameters()[0]});
  expect_error([&] { make_graph_pattern_pass("P", two, graph_of(1, neg)); }, ErrorKind::kValue,
               "the source graph \"pattern\" has 2 outputs; a pattern computes one tensor");
  expect_error([&] { make_graph_pattern_pass("P", nullptr, graph_of(1, neg)); }, ErrorKind::kValue,
               "a pattern graph is null");
}

TEST(SrcPattern, ToolsReadItElementByElement) {
  auto pass = add_neg_to_sub();
  const std::vector<SrcPatternElement> src = pass->src_pattern();
  ASSERT_EQ(src.size(), 4u);
  EXPECT_EQ(src[0].name, "a");
  EXPECT_EQ(src[0].kind, SrcPatternElement::Kind::kVar);
  EXPECT_EQ(src[2].kind, SrcPatternElement::Kind::kCNode);
  EXPECT_EQ(src[2].primitive->name(), "Neg");
  EXPECT_EQ(src[2].inputs, std::vector<size_t>{1});
  EXPECT_EQ(src[3].primitive->name(), "Add");
  EXPECT_EQ(src[3].inputs, (std::vector<size_t>{0, 2}));
}

TEST(InstantiateSrcPattern, BuildsTheSourcePatternAsAGraph) {
  auto pass = add_neg_to_sub();
  FuncGraphPtr g = instantiate_src_pattern(
      *pass,
      [](FuncGraph& graph, const SrcPatternElement& var) -> std::vector<NodePtr> {
        return {graph.add_parameter(DType::kFloat64, {2, 2}, var.name)};
      },
      "instance");
  ir::verify(*g);
  EXPECT_EQ(g->name(), "instance");
  EXPECT_EQ(g->parameters().size(), 2u);
  EXPECT_EQ(out_node(g).primitive()->name(), "Add");
  EXPECT_EQ(out_node(g).abstract().str(), "float64[2, 2]");
  EXPECT_TRUE(pass->Run(g));  // the instance is what the pass matches
  EXPECT_EQ(out_node(g).primitive()->name(), "Sub");

  // Inference errors and refused conditions propagate; so does a var that is not one node.
  expect_error(
      [&] {
        int i = 0;
        instantiate_src_pattern(*pass, [&](FuncGraph& graph, const SrcPatternElement&) {
          return std::vector<NodePtr>{graph.add_parameter(DType::kFloat32, {++i + 1})};
        });
      },
      ErrorKind::kShape, "");
  expect_error(
      [&] {
        instantiate_src_pattern(
            *pass, [](FuncGraph&, const SrcPatternElement&) { return std::vector<NodePtr>{}; });
      },
      ErrorKind::kValue, "make_var gave 0 nodes for the var 'a'");
  auto twice = make_graph_pattern_pass(
      "Twice",
      graph_of(1,
               [](FuncGraph& g, std::vector<NodePtr> p) {
                 return g.add_cnode("Mul", {p[0], g.add_value(Scalar(2.0))});
               }),
      graph_of(1, [](FuncGraph& g, std::vector<NodePtr> p) {
        return g.add_cnode("Add", {p[0], p[0]});
      }));
  expect_error(
      [&] {
        instantiate_src_pattern(*twice, [](FuncGraph& graph, const SrcPatternElement& v) {
          return std::vector<NodePtr>{graph.add_parameter(DType::kFloat32, {2}, v.name)};
        });
      },
      ErrorKind::kValue, "fails the condition of '%");
}

}  // namespace
}  // namespace kiln
