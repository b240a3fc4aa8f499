// FuncGraph and nodes: construction with inference, use lists, replace_all_uses_with, erase,
// topological order, ids, and million-node chains (no recursion anywhere).
#include <gtest/gtest.h>

#include <algorithm>

#include "ir/ir_access.h"
#include "kiln/ir.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_error;

bool has_use(const Node& n, const CNode* user, uint32_t index) {
  return std::find(n.users().begin(), n.users().end(), Use{const_cast<CNode*>(user), index}) !=
         n.users().end();
}

TEST(FuncGraph, MakesNodesWithInferredAbstractsAndIds) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kInt32, {2, 1}, "x");
  auto y = g->add_parameter(DType::kFloat32, {3});
  auto add = g->add_cnode(std::make_shared<Primitive>("Add"), {x, y});
  EXPECT_EQ(add->abstract(), Abstract(DType::kFloat32, {2, 3}));
  auto sum = g->add_cnode("ReduceSum", {add}, {{"dims", std::vector<int64_t>{1}}});
  EXPECT_EQ(sum->abstract().str(), "float32[2]");
  auto weak = g->add_value(Scalar(int64_t{2}));
  EXPECT_EQ(weak->abstract().str(), "int64[] weak");
  auto mul = g->add_cnode("Mul", {x, weak});
  EXPECT_EQ(mul->abstract().str(), "int32[2, 1]");  // a weak int keeps int32
  auto max = g->add_cnode("MaxDim", {add}, {{"dim", int64_t{0}}});
  EXPECT_EQ(max->abstract().str(), "(float32[3], int64[3])");
  EXPECT_EQ(g->tuple_get_item(max, 1)->abstract().str(), "int64[3]");
  EXPECT_EQ(x->id(), 0u);
  EXPECT_EQ(y->id(), 1u);
  EXPECT_EQ(add->id(), 2u);
  EXPECT_EQ(g->next_id(), 8u);
  EXPECT_EQ(g->num_nodes(), 9u);  // eight and the return node
  EXPECT_EQ(add->debug_string(), "%2 = Add(%0, %1)");
  EXPECT_EQ(x->debug_string(), "%0 (parameter x)");
  EXPECT_EQ(g->return_node()->debug_string(), "return");
}

TEST(FuncGraph, RefusesWhatInferRefusesAndForeignInputs) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2});
  auto y = g->add_parameter(DType::kFloat32, {3});
  expect_error(
      [&] {
        g->add_cnode("Add", {x, y});
      },
      ErrorKind::kShape, "in Add(float32[2], float32[3])");
  expect_error([&] { g->add_cnode("Nope", {x}); }, ErrorKind::kValue, "unknown op 'Nope'");
  expect_error([&] { g->add_cnode("Return", {x}); }, ErrorKind::kValue,
               "use FuncGraph::set_outputs");
  auto other = std::make_shared<FuncGraph>("other");
  auto z = other->add_parameter(DType::kFloat32, {2});
  expect_error([&] { g->add_cnode("Neg", {z}); }, ErrorKind::kValue, "belongs to graph \"other\"");
  expect_error(
      [&] {
        g->add_parameter(DType::kFloat32, {1}, "a"), g->add_parameter(DType::kFloat32, {1}, "a");
      },
      ErrorKind::kValue, "already has a parameter named \"a\"");
  auto max = g->add_cnode("MaxDim", {x}, {{"dim", int64_t{0}}});
  expect_error([&] { g->add_cnode("Neg", {max}); }, ErrorKind::kType, "not a tensor");
  expect_error([&] { g->set_output(max); }, ErrorKind::kType,
               "take a tuple apart with TupleGetItem");
  expect_error([&] { g->tuple_get_item(max, 2); }, ErrorKind::kIndex, "index 2 is out of range");
  EXPECT_EQ(g->num_nodes(), 5u);  // nothing half-made was left behind
}

TEST(FuncGraph, UseListsFollowSetInputAndOutputs) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2});
  auto y = g->add_parameter(DType::kFloat32, {2});
  auto add = g->add_cnode("Add", {x, x});
  EXPECT_EQ(x->users().size(), 2u);
  EXPECT_TRUE(has_use(*x, add.get(), 0));
  EXPECT_TRUE(has_use(*x, add.get(), 1));
  add->set_input(0, y);
  EXPECT_EQ(x->users().size(), 1u);
  EXPECT_TRUE(has_use(*x, add.get(), 1));
  EXPECT_TRUE(has_use(*y, add.get(), 0));
  g->set_outputs({add, y});
  EXPECT_TRUE(has_use(*add, g->return_node().get(), 0));
  EXPECT_TRUE(has_use(*y, g->return_node().get(), 1));
  g->set_outputs({x});
  EXPECT_TRUE(add->users().empty());
  EXPECT_EQ(y->users().size(), 1u);
  ir::verify(*g);
}

TEST(FuncGraph, ReplaceAllUsesWithMovesEveryUse) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {4});
  auto neg = g->add_cnode("Neg", {x});
  std::vector<CNodePtr> users;
  for (int i = 0; i < 50; ++i)
    users.push_back(g->add_cnode(
        i % 2 ? "Exp" : "Add", i % 2 ? std::vector<NodePtr>{neg} : std::vector<NodePtr>{neg, neg}));
  g->set_outputs({neg, users.back()});
  auto replacement = g->add_cnode("Abs", {x});
  g->replace_all_uses_with(neg, replacement);
  EXPECT_TRUE(neg->users().empty());
  EXPECT_EQ(replacement->users().size(), 25u * 2 + 25 + 1);
  for (const CNodePtr& u : users) {
    for (size_t i = 0; i < u->num_inputs(); ++i) {
      EXPECT_EQ(u->input(i), replacement);
      EXPECT_TRUE(has_use(*replacement, u.get(), static_cast<uint32_t>(i)));
    }
  }
  EXPECT_EQ(g->outputs()[0], replacement);
  ir::verify(*g);
  // Uses stay exact through later edits (each use's recorded position moved with it).
  users[0]->set_input(1, x);
  g->erase(neg);
  ir::verify(*g);
  EXPECT_EQ(neg->graph(), nullptr);
  expect_error([&] { g->replace_all_uses_with(neg, x); }, ErrorKind::kValue, "is detached");
}

TEST(FuncGraph, EditsAcceptReferencesIntoTheListsTheyRewrite) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2});
  auto y = g->add_parameter(DType::kFloat32, {2});
  auto neg = g->add_cnode("Neg", {x});
  auto exp = g->add_cnode("Exp", {x});
  g->set_outputs({neg, exp});
  g->replace_all_uses_with(neg->input(0), y);  // a reference to the slot being rewritten
  EXPECT_EQ(neg->input(0), y);
  EXPECT_EQ(exp->input(0), y);
  EXPECT_TRUE(x->users().empty());
  EXPECT_EQ(y->users().size(), 2u);
  g->set_outputs(g->outputs());  // a view of the return node's own inputs
  ASSERT_EQ(g->outputs().size(), 2u);
  EXPECT_EQ(g->outputs()[1], exp);
  ir::verify(*g);
}

TEST(FuncGraph, EraseRefusesUsedNodesAndDetaches) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2}, "x");
  auto neg = g->add_cnode("Neg", {x});
  auto exp = g->add_cnode("Exp", {neg});
  expect_error([&] { g->erase(neg); }, ErrorKind::kValue,
               "cannot erase %1 = Neg(%0), it is used by %2 = Exp(%1)");
  expect_error([&] { g->erase(g->return_node()); }, ErrorKind::kValue, "cannot be erased");
  g->erase(exp);
  EXPECT_TRUE(neg->users().empty());
  EXPECT_EQ(exp->graph(), nullptr);
  EXPECT_EQ(exp->num_inputs(), 0u);
  g->erase(neg);
  g->erase(x);
  EXPECT_TRUE(g->parameters().empty());
  EXPECT_EQ(g->num_nodes(), 1u);
  expect_error([&] { g->add_cnode("Neg", {exp}); }, ErrorKind::kValue, "is detached");
}

TEST(FuncGraph, EraseCompactsWithoutChangingOrder) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2});
  std::vector<CNodePtr> kept;
  for (int i = 0; i < 5000; ++i) {
    auto n = g->add_cnode("Neg", {x});
    if (i % 4 == 0) {
      kept.push_back(n);
    } else {
      g->erase(n);
    }
  }
  EXPECT_EQ(g->num_nodes(), 2u + kept.size());
  std::vector<NodePtr> nodes = g->nodes();
  ASSERT_EQ(nodes.size(), 2u + kept.size());
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(nodes[i + 2], kept[i]);
  ir::verify(*g);
}

TEST(FuncGraph, TopologicalOrderPutsInputsFirstAndReportsCycles) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2});
  auto a = g->add_cnode("Neg", {x});
  auto b = g->add_cnode("Exp", {x});
  auto c = g->add_cnode("Add", {a, b});
  g->set_output(c);
  a->set_input(0, b);  // a now comes after b
  std::vector<NodePtr> order = g->topological_order();
  ASSERT_EQ(order.size(), 5u);
  EXPECT_EQ(order[0], x);
  EXPECT_EQ(order[1], b);
  EXPECT_EQ(order[2], a);
  EXPECT_EQ(order[3], c);
  EXPECT_EQ(order[4], g->return_node());
  b->set_input(0, c);  // c -> a -> b -> c
  expect_error([&] { g->topological_order(); }, ErrorKind::kValue, "has a cycle through");
}

TEST(FuncGraph, NodesOutliveTheirGraphDetached) {
  CNodePtr kept;
  {
    auto g = std::make_shared<FuncGraph>("f");
    auto x = g->add_parameter(DType::kFloat32, {2});
    kept = g->add_cnode("Neg", {x});
    g->set_output(kept);
  }
  EXPECT_EQ(kept->graph(), nullptr);
  EXPECT_EQ(kept->num_inputs(), 0u);
  EXPECT_TRUE(kept->users().empty());
  EXPECT_EQ(kept->abstract().str(), "float32[2]");
}

TEST(FuncGraph, BuildsSortsAndDestroysAMillionNodeChain) {
  constexpr int kLength = 1000000;
  auto g = std::make_shared<FuncGraph>("chain");
  NodePtr last = g->add_parameter(DType::kFloat32, {8});
  auto neg = std::make_shared<Primitive>("Neg");
  for (int i = 0; i < kLength; ++i) last = g->add_cnode(neg, {last});
  g->set_output(last);
  std::vector<NodePtr> order = g->topological_order();
  ASSERT_EQ(order.size(), static_cast<size_t>(kLength) + 2);
  for (size_t i = 1; i + 1 < order.size(); ++i) {
    ASSERT_EQ(static_cast<CNode&>(*order[i]).input(0), order[i - 1]);
  }
  ir::verify(*g);
  g.reset();  // destruction walks nothing recursively either
  EXPECT_EQ(last->graph(), nullptr);
}

// A million-node chain whose first-made node is used last: a depth-first walk from the first
// root goes a million deep.
struct BackToFrontChain {
  static constexpr int kLength = 1000000;
  FuncGraphPtr g = std::make_shared<FuncGraph>("reversed");
  ParameterPtr x = g->add_parameter(DType::kFloat32, {8});
  std::vector<CNodePtr> nodes;
  BackToFrontChain() {
    auto neg = std::make_shared<Primitive>("Neg");
    nodes.reserve(kLength);
    for (int i = 0; i < kLength; ++i) nodes.push_back(g->add_cnode(neg, {x}));
    for (int i = 0; i + 1 < kLength; ++i) nodes[i]->set_input(0, nodes[i + 1]);
    g->set_output(nodes.front());
  }
};

TEST(FuncGraph, SortsAMillionNodeChainBuiltBackToFront) {
  BackToFrontChain c;
  std::vector<NodePtr> order = c.g->topological_order();
  ASSERT_EQ(order.size(), static_cast<size_t>(c.kLength) + 2);
  EXPECT_EQ(order[0], c.x);
  EXPECT_EQ(order[1], c.nodes.back());
  EXPECT_EQ(order[c.kLength], c.nodes.front());
  ir::verify(*c.g);  // the use lists after a million set_input calls
}

TEST(FuncGraph, PrintsAndParsesAMillionNodeChainBuiltBackToFront) {
  BackToFrontChain c;
  const std::string text = ir::print(*c.g);
  EXPECT_EQ(ir::print(*ir::parse(text)), text);
}

}  // namespace
}  // namespace kiln
