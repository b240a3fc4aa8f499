// The built-in passes: dead-code elimination, common-subexpression elimination, constant folding
// and algebraic simplification, one by one (what they rewrite and what they must leave alone),
// their registration, and the jit running them at O1 but not at O0.
#include "pass/builtin/builtin_passes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../backend/backend_testing.h"
#include "core/dtype_dispatch.h"
#include "kiln/backend.h"
#include "kiln/functional.h"
#include "kiln/ir.h"
#include "kiln/jit.h"
#include "kiln/pass.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_error;

size_t count_op(const FuncGraph& g, const std::string& op) {
  size_t n = 0;
  for (const NodePtr& node : g.nodes()) {
    if (node->is_cnode() && static_cast<const CNode&>(*node).primitive()->name() == op) ++n;
  }
  return n;
}

size_t count_constants(const FuncGraph& g) {
  size_t n = 0;
  for (const NodePtr& node : g.nodes()) n += node->is_value() ? 1 : 0;
  return n;
}

const CNode& cnode(const NodePtr& n) { return static_cast<const CNode&>(*n); }

// A new tensor of `dtype` and `shape` holding `values` (converted), which nobody else holds.
Tensor make_tensor(DType dtype, const Shape& shape, const std::vector<double>& values) {
  Tensor t = Tensor::empty(shape, dtype);
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = convert<T>(values[i]);
  });
  return t;
}

std::vector<double> values_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<double> out(static_cast<size_t>(c.numel()));
  visit_dtype(c.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = c.data<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = convert<double>(p[i]);
  });
  return out;
}

const Tensor& value_of(const NodePtr& n) {
  EXPECT_TRUE(n->is_value()) << n->debug_string();
  return static_cast<const ValueNode&>(*n).value();
}

// Same dtype, shape and bytes (so -0.0 differs from 0.0), except that NaNs equal NaNs.
void expect_same_bits(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<double> a = values_of(got);
  const std::vector<double> b = values_of(want);
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(b[i])) {
      EXPECT_TRUE(std::isnan(a[i])) << "element " << i;
    } else {
      EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(double)), 0)
          << "element " << i << ": " << a[i] << " vs " << b[i];
    }
  }
}

// Runs `pass` under a PassManager (so that it reports) and verifies the graph.
PassRunRecord run_pass(const PassPtr& pass, const FuncGraphPtr& g) {
  PassManager pm;
  pm.add(pass, PassStage::kFrontend);
  pm.set_verify(true);
  PassReport report;
  pm.Run(g, &report);
  ir::verify(*g);
  return report.runs.at(0);
}

// ---------------------------------------------------------------------------------------------
// DeadCodeElimination

TEST(DeadCodeElimination, RemovesWhatNoOutputNeeds) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3}, "x");
  auto unused = g->add_parameter(DType::kFloat32, {3}, "unused");
  auto live = g->add_cnode("Exp", {x});
  auto dead_constant = g->add_value(Scalar(2.0));
  auto dead = g->add_cnode("Mul", {g->add_cnode("Neg", {x}), dead_constant});
  g->add_cnode("Sin", {dead});
  g->add_value(Tensor());  // an unused None
  auto split = g->add_cnode("Split", {x}, {{"sizes", std::vector<int64_t>{1, 2}}});
  g->tuple_get_item(split, 0);  // the whole multi-output op is dead
  g->set_output(live);
  const PassRunRecord r = run_pass(pass::make_dead_code_elimination(), g);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.matches, 7u);  // Neg, Mul, Sin, 2.0, None, Split, TupleGetItem
  EXPECT_EQ(g->num_nodes(), 4u);  // x, unused (parameters stay), Exp, return
  EXPECT_EQ(g->parameters().size(), 2u);
  EXPECT_EQ(g->outputs()[0], live);
  EXPECT_EQ(unused->graph(), g.get());
  EXPECT_EQ(dead->graph(), nullptr);
  EXPECT_FALSE(pass::make_dead_code_elimination()->Run(g));  // idempotent
}

TEST(DeadCodeElimination, KeepsSideEffectingOpsAndWhatTheyUse) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {4}, "x");
  auto values = g->add_cnode("Exp", {g->add_value(Scalar(1.0))});
  auto index = g->add_value(make_tensor(DType::kInt64, {1}, {2}));
  auto put = g->add_cnode("IndexPut", {x, values, index});  // nothing reads its result
  auto dead = g->add_cnode("Neg", {x});
  g->set_output(g->add_cnode("Abs", {x}));
  EXPECT_TRUE(pass::make_dead_code_elimination()->Run(g));
  ir::verify(*g);
  EXPECT_EQ(put->graph(), g.get());
  EXPECT_EQ(values->graph(), g.get());
  EXPECT_EQ(index->graph(), g.get());
  EXPECT_EQ(dead->graph(), nullptr);
}

TEST(DeadCodeElimination, NothingDeadIsNoChange) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3}, "x");
  g->set_outputs({g->add_cnode("Add", {x, g->add_value(Scalar(1.0))}), x});
  const std::string before = ir::print(*g);
  EXPECT_FALSE(pass::make_dead_code_elimination()->Run(g));
  EXPECT_EQ(ir::print(*g), before);
}

TEST(DeadCodeElimination, MillionNodeDeadChainWithoutRecursion) {
  auto g = std::make_shared<FuncGraph>("chain");
  auto x = g->add_parameter(DType::kFloat32, {2}, "x");
  NodePtr acc = x;
  constexpr int kLength = 1000000;
  for (int i = 0; i < kLength; ++i) acc = g->add_cnode("Neg", {acc});
  g->set_output(g->add_cnode("Exp", {x}));
  acc.reset();
  EXPECT_TRUE(pass::make_dead_code_elimination()->Run(g));
  EXPECT_EQ(g->num_nodes(), 3u);  // x, Exp, return
  ir::verify(*g);
}

// ---------------------------------------------------------------------------------------------
// CommonSubexpressionElimination

TEST(CommonSubexpressionElimination, MergesEqualNodesAndRewiresTheirUsers) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2, 3}, "x");
  auto y = g->add_parameter(DType::kFloat32, {3}, "y");
  auto a1 = g->add_cnode("Add", {x, y});
  auto a2 = g->add_cnode("Add", {x, y});
  auto e1 = g->add_cnode("Exp", {a1});
  auto e2 = g->add_cnode("Exp", {a2});  // equal once a2 is a1
  auto swapped = g->add_cnode("Add", {y, x});  // other inputs: stays
  g->set_output(g->add_cnode("Mul", {g->add_cnode("Sub", {e1, e2}), swapped}));
  const PassRunRecord r = run_pass(pass::make_common_subexpression_elimination(), g);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.matches, 2u);
  EXPECT_EQ(count_op(*g, "Add"), 2u);
  EXPECT_EQ(count_op(*g, "Exp"), 1u);
  const CNode& sub = cnode(cnode(g->outputs()[0]).input(0));
  EXPECT_EQ(sub.input(0), e1);
  EXPECT_EQ(sub.input(1), e1);
  EXPECT_FALSE(pass::make_common_subexpression_elimination()->Run(g));  // idempotent
}

TEST(CommonSubexpressionElimination, ComparesAttributesWithDefaultsAndBits) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2, 3}, "x");
  auto sum0 = g->add_cnode("ReduceSum", {x}, {{"dims", std::vector<int64_t>{0}}});
  auto sum0_default = g->add_cnode(
      "ReduceSum", {x}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", false}});  // same
  auto sum1 = g->add_cnode("ReduceSum", {x}, {{"dims", std::vector<int64_t>{1}}});
  auto clamp_pos = g->add_cnode("Clamp", {x}, {{"min", Scalar(0.0)}});
  auto clamp_neg = g->add_cnode("Clamp", {x}, {{"min", Scalar(-0.0)}});  // another attribute
  auto clamp_pos2 = g->add_cnode("Clamp", {x}, {{"min", Scalar(0.0)}});
  std::vector<NodePtr> outputs;
  for (const NodePtr& n : std::vector<NodePtr>{sum0, sum0_default, sum1, clamp_pos, clamp_neg,
                                              clamp_pos2}) {
    outputs.push_back(g->add_cnode("Neg", {n}));
  }
  g->set_outputs(outputs);
  EXPECT_TRUE(pass::make_common_subexpression_elimination()->Run(g));
  ir::verify(*g);
  EXPECT_EQ(sum0_default->graph(), nullptr);
  EXPECT_EQ(sum1->graph(), g.get());
  EXPECT_EQ(clamp_neg->graph(), g.get());
  EXPECT_EQ(clamp_pos2->graph(), nullptr);
  EXPECT_EQ(count_op(*g, "Clamp"), 2u);
}

TEST(CommonSubexpressionElimination, LeavesRandomAndSideEffectingOpsAlone) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {4}, "x");
  const Attrs rand_attrs{{"shape", std::vector<int64_t>{4}}};
  auto r1 = g->add_cnode("RandUniform", {}, rand_attrs);
  auto r2 = g->add_cnode("RandUniform", {}, rand_attrs);
  auto v = g->add_value(Scalar(1.0));
  auto i = g->add_value(make_tensor(DType::kInt64, {1}, {0}));
  auto p1 = g->add_cnode("IndexPut", {x, v, i});
  auto p2 = g->add_cnode("IndexPut", {x, v, i});
  g->set_output(g->add_cnode(
      "Add", {g->add_cnode("Add", {r1, r2}), g->add_cnode("Add", {p1, p2})}));
  EXPECT_FALSE(pass::make_common_subexpression_elimination()->Run(g));
  EXPECT_EQ(count_op(*g, "RandUniform"), 2u);
  EXPECT_EQ(count_op(*g, "IndexPut"), 2u);
}

TEST(CommonSubexpressionElimination, MergesEqualSmallFrozenConstants) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3}, "x");
  std::vector<NodePtr> terms;
  const auto use = [&](const NodePtr& c) { terms.push_back(g->add_cnode("Mul", {x, c})); };
  auto weak_one = g->add_value(Scalar(1.0));
  use(weak_one);
  use(g->add_value(Scalar(1.0)));                                 // merged into weak_one
  use(g->add_value(make_tensor(DType::kFloat64, {}, {1.0})));    // strong: another constant
  use(g->add_value(Scalar(-0.0)));                                // other bytes than 0.0
  use(g->add_value(Scalar(0.0)));
  auto f32 = g->add_value(make_tensor(DType::kFloat32, {3}, {1, 2, 3}));
  use(f32);
  use(g->add_value(make_tensor(DType::kFloat32, {3}, {1, 2, 3})));  // merged into f32
  use(g->add_value(make_tensor(DType::kFloat32, {1, 3}, {1, 2, 3})));  // another shape
  use(g->add_value(make_tensor(DType::kInt32, {3}, {1, 2, 3})));       // another dtype
  NodePtr sum = terms[0];
  for (size_t k = 1; k < terms.size(); ++k) sum = g->add_cnode("Add", {sum, terms[k]});
  g->set_output(sum);
  const PassRunRecord r = run_pass(pass::make_common_subexpression_elimination(), g);
  EXPECT_EQ(r.matches, 4u);  // two constants, then the two Muls that became equal
  EXPECT_EQ(count_constants(*g), 7u);
  EXPECT_EQ(count_op(*g, "Mul"), 7u);
}

TEST(CommonSubexpressionElimination, ConstantsTheProgramHoldsAreMergedOnlyWhenTheSame) {
  // Two weights that are equal today may not be tomorrow (Note [Frozen constants]); the same
  // weight read twice is one value for good.
  const Tensor w1 = make_tensor(DType::kFloat32, {2}, {0, 0});
  const Tensor w2 = make_tensor(DType::kFloat32, {2}, {0, 0});
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2}, "x");
  auto a = g->add_cnode("Add", {x, g->add_value(w1)});
  auto b = g->add_cnode("Add", {x, g->add_value(w2)});
  auto c = g->add_cnode("Add", {x, g->add_value(w1)});
  g->set_output(g->add_cnode("Mul", {g->add_cnode("Mul", {a, b}), c}));
  EXPECT_TRUE(pass::make_common_subexpression_elimination()->Run(g));
  ir::verify(*g);
  EXPECT_EQ(count_constants(*g), 2u);
  EXPECT_EQ(count_op(*g, "Add"), 2u);
  EXPECT_EQ(c->graph(), nullptr);
  // Big frozen constants are not compared by value.
  auto h = std::make_shared<FuncGraph>("big");
  const size_t n = pass::kSmallConstantBytes / sizeof(float) + 1;
  auto big1 = h->add_value(make_tensor(DType::kFloat32, {static_cast<int64_t>(n)},
                                       std::vector<double>(n, 1.0)));
  auto big2 = h->add_value(make_tensor(DType::kFloat32, {static_cast<int64_t>(n)},
                                       std::vector<double>(n, 1.0)));
  h->set_output(h->add_cnode("Add", {h->add_cnode("Neg", {big1}), h->add_cnode("Neg", {big2})}));
  EXPECT_FALSE(pass::make_common_subexpression_elimination()->Run(h));
}

TEST(CommonSubexpressionElimination, MergesMultiOutputOpsAndTheirItems) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3, 2}, "x");
  const Attrs split{{"sizes", std::vector<int64_t>{1, 2}}};
  auto s1 = g->add_cnode("Split", {x}, split);
  auto s2 = g->add_cnode("Split", {x}, split);
  auto a = g->tuple_get_item(s1, 1);
  auto b = g->tuple_get_item(s2, 1);
  auto c = g->tuple_get_item(s2, 0);
  g->set_output(g->add_cnode("Add", {g->add_cnode("Add", {a, b}), c}));
  const PassRunRecord r = run_pass(pass::make_common_subexpression_elimination(), g);
  EXPECT_EQ(r.matches, 2u);
  EXPECT_EQ(count_op(*g, "Split"), 1u);
  EXPECT_EQ(count_op(*g, "TupleGetItem"), 2u);
}

TEST(CommonSubexpressionElimination, TwoOutputsStayTwoTensors) {
  // Note [Outputs stay fresh]: the caller may write one result in place.
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3}, "x");
  auto a = g->add_cnode("Exp", {x});
  auto b = g->add_cnode("Exp", {x});
  auto c = g->add_cnode("Exp", {x});  // not an output: merged into a
  g->set_outputs({a, b, g->add_cnode("Neg", {c})});
  EXPECT_TRUE(pass::make_common_subexpression_elimination()->Run(g));
  ir::verify(*g);
  EXPECT_EQ(g->outputs()[0], a);
  EXPECT_EQ(g->outputs()[1], b);
  EXPECT_EQ(cnode(g->outputs()[2]).input(0), a);
}

TEST(CommonSubexpressionElimination, LongDuplicateChainsMergeLinearlyAndDeterministically) {
  const auto build = [] {
    auto g = std::make_shared<FuncGraph>("chains");
    auto x = g->add_parameter(DType::kFloat32, {2}, "x");
    NodePtr a = x;
    NodePtr b = x;
    constexpr int kLength = 300000;
    for (int i = 0; i < kLength; ++i) {
      const char* op = i % 3 == 0 ? "Neg" : (i % 3 == 1 ? "Exp" : "Abs");
      a = g->add_cnode(op, {a});
      b = g->add_cnode(op, {b});
    }
    g->set_output(g->add_cnode("Add", {a, b}));
    return g;
  };
  auto g = build();
  EXPECT_TRUE(pass::make_common_subexpression_elimination()->Run(g));
  EXPECT_EQ(g->num_nodes(), 300000u + 3);  // x, one chain, Add, return
  ir::verify(*g);
  const std::string text = ir::print(*g);
  auto again = build();
  pass::make_common_subexpression_elimination()->Run(again);
  EXPECT_EQ(ir::print(*again), text);
}

// ---------------------------------------------------------------------------------------------
// ConstantFolding

// A test op whose infer keeps its input's weakness (the built-in ops make strong results), to
// check that a folded weak result stays a weak scalar.
KILN_REGISTER_OP(OpDef("BuiltinPassesTestTwice")
                     .input("x")
                     .infer([](const InferContext& ctx) { return MetaList{ctx.input(0)}; })
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       const Tensor& out = ctx.outputs[0];
                       const Tensor& x = ctx.inputs[0];
                       visit_dtype(out.dtype(), [&](auto tag) {
                         using T = typename decltype(tag)::type;
                         for (int64_t i = 0; i < out.numel(); ++i) {
                           out.data<T>()[i] = convert<T>(2 * convert<double>(x.data<T>()[i]));
                         }
                       });
                     }));

TEST(ConstantFolding, FoldsChainsOfConstantOps) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3}, "x");
  auto product = g->add_cnode("Mul", {g->add_value(Scalar(2.0)), g->add_value(Scalar(3.0))});
  auto c = g->add_value(make_tensor(DType::kFloat32, {3}, {1, 2, 3}));
  auto shifted = g->add_cnode("Add", {c, product});
  auto filled =
      g->add_cnode("Full", {}, {{"shape", std::vector<int64_t>{3}}, {"value", Scalar(0.5)}});
  auto folded_input = g->add_cnode("Mul", {shifted, filled});
  const Abstract before = folded_input->abstract();
  auto out = g->add_cnode("Add", {x, folded_input});
  g->set_output(out);
  const PassRunRecord r = run_pass(pass::make_constant_folding(), g);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.matches, 4u);
  ASSERT_TRUE(cnode(out).input(1)->is_value());
  EXPECT_EQ(cnode(out).input(1)->abstract(), before);
  EXPECT_EQ(values_of(value_of(cnode(out).input(1))), (std::vector<double>{3.5, 4, 4.5}));
  EXPECT_EQ(g->num_nodes(), 4u);  // x, the constant, Add, return: the inputs went too
  EXPECT_FALSE(pass::make_constant_folding()->Run(g));  // idempotent
}

TEST(ConstantFolding, KeepsTheNodesAbstractIncludingWeakness) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat16, {2}, "x");
  // Weak in, weak out: the product with x stays float16.
  auto weak = g->add_cnode("BuiltinPassesTestTwice", {g->add_value(Scalar(1.5))});
  ASSERT_TRUE(weak->abstract().tensor().weak);
  // Two weak scalars give a strong float32 (Kiln's promotion), which makes the product float32.
  auto strong = g->add_cnode("Add", {g->add_value(Scalar(1.0)), g->add_value(Scalar(2.0))});
  ASSERT_FALSE(strong->abstract().tensor().weak);
  auto m1 = g->add_cnode("Mul", {x, weak});
  auto m2 = g->add_cnode("Mul", {x, strong});
  g->set_outputs({m1, m2});
  EXPECT_EQ(run_pass(pass::make_constant_folding(), g).matches, 2u);
  const Tensor& w = value_of(cnode(m1).input(1));
  EXPECT_TRUE(w.is_weak_scalar());
  EXPECT_EQ(w.dtype(), DType::kFloat64);
  EXPECT_EQ(values_of(w), std::vector<double>{3.0});
  const Tensor& s = value_of(cnode(m2).input(1));
  EXPECT_FALSE(s.is_weak_scalar());
  EXPECT_EQ(s.dtype(), DType::kFloat32);
  EXPECT_EQ(m1->abstract().str(), "float16[2]");
  EXPECT_EQ(m2->abstract().str(), "float32[2]");
}

TEST(ConstantFolding, LeavesRandomSideEffectingBigAndMultiOutputOpsAlone) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {4}, "x");
  auto rand = g->add_cnode("RandUniform", {}, {{"shape", std::vector<int64_t>{4}}});
  const auto constant = [&] {
    return g->add_value(make_tensor(DType::kFloat32, {4}, {1, 2, 3, 4}));
  };
  auto put = g->add_cnode("IndexPut", {constant(), g->add_value(Scalar(0.0)),
                                       g->add_value(make_tensor(DType::kInt64, {1}, {1}))});
  const int64_t big_side = 200;  // 160,000 bytes of float32: over the limit
  auto big = g->add_cnode("Full", {}, {{"shape", std::vector<int64_t>{big_side, big_side}},
                                       {"value", Scalar(1.0)}});
  auto small = g->add_cnode("Full", {}, {{"shape", std::vector<int64_t>{64, 64}},
                                         {"value", Scalar(1.0)}});  // 16 KiB: folded
  auto split = g->add_cnode("Split", {constant()}, {{"sizes", std::vector<int64_t>{2, 2}}});
  auto empty = g->add_cnode("Empty", {}, {{"shape", std::vector<int64_t>{4}}});
  auto sum = [&](const NodePtr& a, const NodePtr& b) { return g->add_cnode("Add", {a, b}); };
  auto reduce = [&](const NodePtr& t) { return g->add_cnode("ReduceSum", {t}); };
  g->set_output(sum(sum(sum(sum(x, rand), put), empty),
                    sum(sum(reduce(big), reduce(small)), reduce(g->tuple_get_item(split, 0)))));
  EXPECT_EQ(run_pass(pass::make_constant_folding(), g).matches, 2u);  // small, ReduceSum(small)
  for (const NodePtr& kept : std::vector<NodePtr>{rand, put, big, split, empty}) {
    EXPECT_EQ(kept->graph(), g.get()) << kept->debug_string();
  }
  EXPECT_EQ(small->graph(), nullptr);
}

TEST(ConstantFolding, ConstantsTheProgramMayWriteAreNotFolded) {
  // A weight captured by a traced function is a constant holding the program's tensor, and the
  // graph must see its in-place updates (Note [Frozen constants]).
  Tensor weight = make_tensor(DType::kFloat32, {2}, {1, 2});
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2}, "x");
  auto neg = g->add_cnode("Neg", {g->add_value(weight)});
  g->set_output(g->add_cnode("Add", {x, neg}));
  EXPECT_FALSE(pass::make_constant_folding()->Run(g));
  const Tensor input = make_tensor(DType::kFloat32, {2}, {0, 0});
  weight.data<float>()[0] = 5;  // the program writes its weight
  EXPECT_EQ(values_of(testing::run_on_reference(g, {input})[0]), (std::vector<double>{-5, -2}));
  // Memory wrapped from outside (NumPy, DLPack) may be written by its owner, even when only
  // the graph holds the tensor.
  std::vector<float> outside{1, 2};
  auto h = std::make_shared<FuncGraph>("h");
  auto y = h->add_parameter(DType::kFloat32, {2}, "y");
  auto wrapped = h->add_cnode(
      "Neg", {h->add_value(Tensor::from_blob(outside.data(), {2}, DType::kFloat32))});
  h->set_output(h->add_cnode("Add", {y, wrapped}));
  EXPECT_FALSE(pass::make_constant_folding()->Run(h));
  // Once the graph holds the only handle of Kiln-allocated memory, the constant is frozen (the
  // runtime drops its references to the ops it ran at a sync point).
  weight = Tensor();
  runtime::synchronize();
  EXPECT_TRUE(pass::make_constant_folding()->Run(g));
  EXPECT_EQ(neg->graph(), nullptr);
}

TEST(ConstantFolding, OutputsStayComputed) {
  // Note [Outputs stay fresh]: each call returns a new tensor, as eagerly.
  auto g = std::make_shared<FuncGraph>("f");
  auto inner = g->add_cnode("Neg", {g->add_value(Scalar(2.0))});
  auto out = g->add_cnode("Exp", {inner});
  g->set_output(out);
  EXPECT_EQ(run_pass(pass::make_constant_folding(), g).matches, 1u);
  EXPECT_EQ(g->outputs()[0], out);
  EXPECT_TRUE(cnode(out).input(0)->is_value());
}

TEST(ConstantFolding, AFailingOpIsLeftAloneAndReported) {
  // Index's infer accepts any int64 index; its kernel refuses one out of bounds.
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {1}, "x");
  auto bad = g->add_cnode("Index", {g->add_value(make_tensor(DType::kFloat32, {3}, {1, 2, 3})),
                                    g->add_value(make_tensor(DType::kInt64, {1}, {7}))});
  g->set_output(g->add_cnode("Add", {x, bad}));
  const std::string before = ir::print(*g);
  const PassRunRecord r = run_pass(pass::make_constant_folding(), g);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(ir::print(*g), before);
  ASSERT_EQ(r.refusals, 1u);
  ASSERT_EQ(r.reasons.size(), 1u);
  EXPECT_NE(r.reasons[0].find("pass 'ConstantFolding' left %"), std::string::npos) << r.reasons[0];
  EXPECT_NE(r.reasons[0].find("is out of bounds"), std::string::npos) << r.reasons[0];
  runtime::synchronize();  // the failure was raised by the pass's read, not left pending
  // Running the graph raises the op's error where it always would have.
  expect_error([&] { testing::run_on_reference(g, {make_tensor(DType::kFloat32, {1}, {0})}); },
               ErrorKind::kIndex, "index 7 is out of bounds");
}

// A dispatcher that records nothing and fails every call: folding must not reach it.
class RefusingDispatcher final : public Dispatcher {
 public:
  TensorList dispatch(const OpDef& op, TensorSpan, const Attrs&, const std::vector<Tensor>&,
                      const std::shared_ptr<BoundKernel>&) override {
    ADD_FAILURE() << "folding called " << op.name() << " through the thread's dispatcher";
    return {};
  }
};

TEST(ConstantFolding, EvaluatesEagerlyEvenUnderAThreadDispatcher) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {1}, "x");
  g->set_output(g->add_cnode("Add", {x, g->add_cnode("Neg", {g->add_value(Scalar(1.0))})}));
  RefusingDispatcher refusing;
  Dispatcher* previous = set_thread_dispatcher(&refusing);
  const bool changed = pass::make_constant_folding()->Run(g);
  EXPECT_EQ(set_thread_dispatcher(previous), &refusing);  // put back after the pass
  EXPECT_TRUE(changed);
}

// ---------------------------------------------------------------------------------------------
// AlgebraicSimplification

// Makes a node from the graph's parameter x.
using Make = std::function<NodePtr(FuncGraph&, const NodePtr&)>;

// Exp(`make`(x)), so that the simplified node is not itself an output.
FuncGraphPtr inside_exp(DType dtype, const Shape& shape, const Make& make) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(dtype, shape, "x");
  g->set_output(g->add_cnode("Exp", {make(*g, x)}));
  return g;
}

// Whether the graph became Exp(x) (constants the rules no longer use are DCE's to remove).
bool simplified_to_x(const FuncGraph& g) {
  size_t ops = 0;
  for (const NodePtr& n : g.nodes()) ops += n->is_cnode() && n != g.return_node() ? 1 : 0;
  return ops == 1 && cnode(g.outputs()[0]).input(0) == g.parameters()[0];
}

// `op`(x, c), or `op`(c, x) when `constant_first`, with c = `constant`.
Make with_constant(const char* op, std::function<Tensor()> constant, bool constant_first = false) {
  return [=](FuncGraph& g, const NodePtr& x) {
    const NodePtr c = g.add_value(constant());
    return constant_first ? g.add_cnode(op, {c, x}) : g.add_cnode(op, {x, c});
  };
}

std::function<Tensor()> weak(Scalar value) {
  return [value] { return Tensor::scalar(value); };
}

std::function<Tensor()> float32_constant(const Shape& shape, std::vector<double> values) {
  return [shape, values] { return make_tensor(DType::kFloat32, shape, values); };
}

// `op`(x) with `attrs`.
Make unary(const char* op, Attrs attrs = {}) {
  return [=](FuncGraph& g, const NodePtr& x) { return g.add_cnode(op, {x}, attrs); };
}

// `op`(x, x).
Make self(const char* op) {
  return [=](FuncGraph& g, const NodePtr& x) { return g.add_cnode(op, {x, x}); };
}

// outer(inner(x)).
Make nested(const char* outer, const char* inner) {
  return [=](FuncGraph& g, const NodePtr& x) {
    return g.add_cnode(outer, {g.add_cnode(inner, {x})});
  };
}

TEST(AlgebraicSimplification, RemovesIdentities) {
  const std::vector<std::pair<std::string, Make>> cases = {
      {"x * 1", with_constant("Mul", weak(1.0))},
      {"1 * x", with_constant("Mul", weak(1.0), true)},
      {"x * ones", with_constant("Mul", float32_constant({3}, {1, 1, 1}))},
      {"x / 1", with_constant("Div", weak(int64_t{1}))},
      {"x - 0", with_constant("Sub", weak(0.0))},
      {"x - int 0", with_constant("Sub", weak(int64_t{0}))},
      {"x + -0.0", with_constant("Add", weak(-0.0))},
      {"-0.0 + x", with_constant("Add", weak(-0.0), true)},
      {"Neg(Neg(x))", nested("Neg", "Neg")},
      {"Maximum(x, x)", self("Maximum")},
      {"Minimum(x, x)", self("Minimum")},
      {"Reshape to its shape", unary("Reshape", {{"shape", std::vector<int64_t>{-1}}})},
      {"Flatten of 1-d", unary("Flatten")},
      {"Squeeze without size-1 dims", unary("Squeeze")},
      {"Expand to its shape", unary("Expand", {{"shape", std::vector<int64_t>{3}}})},
      {"Contiguous", unary("Contiguous")},
      {"Cast to its dtype", unary("Cast", {{"dtype", DType::kFloat32}})},
      {"Permute by the identity", unary("Permute", {{"dims", std::vector<int64_t>{-1}}})},
      {"Neg(Neg(x) * 1) across rules",
       [](FuncGraph& g, const NodePtr& x) {
         const NodePtr product = with_constant("Mul", weak(1.0))(g, g.add_cnode("Neg", {x}));
         return g.add_cnode("Neg", {product});
       }},
  };
  for (const auto& [what, make] : cases) {
    SCOPED_TRACE(what);
    auto g = inside_exp(DType::kFloat32, {3}, make);
    const PassRunRecord r = run_pass(pass::make_algebraic_simplification(), g);
    EXPECT_TRUE(r.changed);
    EXPECT_TRUE(simplified_to_x(*g)) << ir::print(*g);
    EXPECT_FALSE(pass::make_algebraic_simplification()->Run(g));  // idempotent
  }
}

TEST(AlgebraicSimplification, KeepsWhatIsNotAnIdentityBitForBit) {
  const std::vector<std::pair<std::string, Make>> cases = {
      {"x + 0.0", with_constant("Add", weak(0.0))},  // -0.0 + 0.0 is +0.0
      {"0 + x", with_constant("Add", weak(int64_t{0}), true)},
      {"x - -0.0", with_constant("Sub", weak(-0.0))},  // x + 0.0
      {"x * 0", with_constant("Mul", weak(0.0))},      // NaN * 0 is NaN
      {"x * 2", with_constant("Mul", weak(2.0))},
      {"x * [1, 1, 2]", with_constant("Mul", float32_constant({3}, {1, 1, 2}))},
      {"1 / x", with_constant("Div", weak(1.0), true)},
      {"Neg(x)", unary("Neg")},
      {"Maximum(x, Neg(x))",
       [](FuncGraph& g, const NodePtr& x) {
         return g.add_cnode("Maximum", {x, g.add_cnode("Neg", {x})});
       }},
      {"Reshape to another shape", unary("Reshape", {{"shape", std::vector<int64_t>{3, 1}}})},
      {"Cast to another dtype", unary("Cast", {{"dtype", DType::kFloat64}})},
  };
  for (const auto& [what, make] : cases) {
    SCOPED_TRACE(what);
    auto g = inside_exp(DType::kFloat32, {3}, make);
    const std::string before = ir::print(*g);
    EXPECT_FALSE(pass::make_algebraic_simplification()->Run(g));
    EXPECT_EQ(ir::print(*g), before);
  }
  // Permute by a permutation that keeps the shape reorders the elements.
  auto g = inside_exp(DType::kFloat32, {3, 3},
                      unary("Permute", {{"dims", std::vector<int64_t>{1, 0}}}));
  EXPECT_FALSE(pass::make_algebraic_simplification()->Run(g));
}

TEST(AlgebraicSimplification, IntegerSumsDropZeroAndUnsignedAbsNegStays) {
  auto g = inside_exp(DType::kInt32, {3}, with_constant("Add", weak(int64_t{0})));
  EXPECT_TRUE(pass::make_algebraic_simplification()->Run(g));
  EXPECT_TRUE(simplified_to_x(*g));
  // Abs(Neg(x)) is Abs(x) for signed x only: for uint8, Neg wraps and Abs is the identity.
  for (DType dtype : {DType::kInt32, DType::kFloat32, DType::kUInt8}) {
    auto h = inside_exp(dtype, {3}, nested("Abs", "Neg"));
    const bool changed = pass::make_algebraic_simplification()->Run(h);
    ir::verify(*h);
    EXPECT_EQ(changed, dtype != DType::kUInt8) << dtype_name(dtype);
    EXPECT_EQ(count_op(*h, "Neg"), dtype == DType::kUInt8 ? 1u : 0u);
  }
  // Abs(Abs(x)) keeps the inner Abs.
  auto k = inside_exp(DType::kFloat32, {3}, nested("Abs", "Abs"));
  EXPECT_TRUE(pass::make_algebraic_simplification()->Run(k));
  EXPECT_EQ(count_op(*k, "Abs"), 1u);
}

TEST(AlgebraicSimplification, RewritesThatChangeTheTypeAreRefusedByTheEngine) {
  // int32 * 1.0 is float32, and x * ones[2, 3] broadcasts x[3]: neither is x.
  for (const DType dtype : {DType::kInt32, DType::kFloat32}) {
    const std::function<Tensor()> ones =
        dtype == DType::kInt32 ? weak(1.0) : float32_constant({2, 3}, std::vector<double>(6, 1.0));
    auto g = inside_exp(dtype, {3}, with_constant("Mul", ones));
    const std::string before = ir::print(*g);
    const PassRunRecord r = run_pass(pass::make_algebraic_simplification(), g);
    EXPECT_FALSE(r.changed);
    EXPECT_EQ(ir::print(*g), before);
    ASSERT_EQ(r.reasons.size(), 1u);
    EXPECT_NE(r.reasons[0].find("pass 'AlgebraicSimplification.MulOne' refused"),
              std::string::npos)
        << r.reasons[0];
  }
}

TEST(AlgebraicSimplification, ConstantsTheProgramMayWriteAreNotTrusted) {
  const Tensor weight = make_tensor(DType::kFloat32, {3}, {1, 1, 1});  // ones today
  auto g = inside_exp(DType::kFloat32, {3}, with_constant("Mul", [&] { return weight; }));
  EXPECT_FALSE(pass::make_algebraic_simplification()->Run(g));
}

TEST(AlgebraicSimplification, OutputsDoNotBecomeInputsConstantsOrOtherOutputs) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3}, "x");
  auto one = g->add_value(Scalar(1.0));
  auto to_input = g->add_cnode("Mul", {x, one});
  auto to_constant =
      g->add_cnode("Mul", {g->add_value(make_tensor(DType::kFloat32, {3}, {4, 5, 6})), one});
  auto e = g->add_cnode("Exp", {x});
  auto to_output = g->add_cnode("Mul", {e, one});
  auto sin = g->add_cnode("Sin", {x});
  auto to_inner = g->add_cnode("Mul", {sin, one});  // Sin is no output: this one goes
  g->set_outputs({to_input, to_constant, e, to_output, to_inner});
  EXPECT_TRUE(pass::make_algebraic_simplification()->Run(g));
  ir::verify(*g);
  EXPECT_EQ(g->outputs()[0], to_input);
  EXPECT_EQ(g->outputs()[1], to_constant);
  EXPECT_EQ(g->outputs()[3], to_output);
  EXPECT_EQ(g->outputs()[4], sin);
}

TEST(AlgebraicSimplification, SignedZerosNaNsAndInfinitiesComeOutTheSame) {
  // Each rewrite of the float rules, on values where an inexact rule would show: results of the
  // simplified graph equal the original's bit for bit (Neg around it keeps the sign visible).
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor input = make_tensor(DType::kFloat32, {6}, {-0.0, 0.0, std::nan(""), inf, -inf, 1.5});
  for (double c : {1.0, -0.0, 0.0}) {
    for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
      for (bool constant_first : {false, true}) {
        SCOPED_TRACE(std::string(op) + " with " + std::to_string(c) +
                     (constant_first ? " first" : " second"));
        const auto build = [&] {
          auto g = std::make_shared<FuncGraph>("f");
          auto x = g->add_parameter(DType::kFloat32, {6}, "x");
          auto k = g->add_value(Scalar(c));
          auto r = g->add_cnode(op, constant_first ? std::vector<NodePtr>{k, x}
                                                   : std::vector<NodePtr>{x, k});
          g->set_output(g->add_cnode("Neg", {r}));
          return g;
        };
        const Tensor want = testing::run_on_reference(build(), {input})[0];
        auto g = build();
        pass::make_algebraic_simplification()->Run(g);
        ir::verify(*g);
        expect_same_bits(testing::run_on_reference(g, {input})[0], want);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Registration and the jit

TEST(BuiltinPasses, AreRegisteredInOrderAndCannotBeUnregistered) {
  std::vector<PassInfo> builtins;
  for (const PassInfo& info : list_passes()) {
    if (info.builtin && info.backend == "all") builtins.push_back(info);  // kiln_cpu has its own
  }
  ASSERT_EQ(builtins.size(), 4u);
  const std::vector<std::string> order = {"ConstantFolding", "AlgebraicSimplification",
                                          "CommonSubexpressionElimination",
                                          "DeadCodeElimination"};
  for (size_t i = 0; i < builtins.size(); ++i) {
    EXPECT_EQ(builtins[i].name, order[i]);
    EXPECT_EQ(builtins[i].backend, "all");
    EXPECT_EQ(builtins[i].stage, PassStage::kFrontend);
    EXPECT_EQ(builtins[i].source, "");
  }
  expect_error([] { unregister_custom_pass("DeadCodeElimination"); }, ErrorKind::kValue,
               "built in and cannot be unregistered");
  expect_error([] { register_pass(pass::make_dead_code_elimination()); }, ErrorKind::kValue,
               "already registered (a built-in pass)");
  EXPECT_EQ(PassRegistry::Instance().manager("reference", /*builtins=*/false).size() + 4,
            PassRegistry::Instance().manager("reference", /*builtins=*/true).size());
}

// A pass whose Prepare reads the registry, as a plugin's may.
class ListingPass final : public Pass {
 public:
  ListingPass() : Pass("ListingPass") {}
  void Prepare() override { seen = list_passes().size(); }
  bool Run(const FuncGraphPtr&) override { return false; }
  size_t seen = 0;
};

TEST(PassRegistry, BuildsManagersOutsideItsLock_SoPrepareMayListThePasses) {
  auto pass = std::make_shared<ListingPass>();
  register_pass(pass, "reference");
  // The jit builds a manager per compile; Prepare ran under the registry's lock and deadlocked.
  const PassManager manager = PassRegistry::Instance().manager("reference", /*builtins=*/true);
  EXPECT_EQ(pass->seen, list_passes().size());
  unregister_custom_pass("ListingPass");
  EXPECT_GT(manager.size(), 0u);
}

// A plugin's Prepare that throws a std::exception.
class FailingPreparePass final : public Pass {
 public:
  FailingPreparePass() : Pass("FailingPreparePass") {}
  void Prepare() override { throw std::runtime_error("no patterns today"); }
  bool Run(const FuncGraphPtr&) override { return false; }
};

TEST(PassRegistry, APreparesStdExceptionIsAKilnErrorNamingThePass) {
  const auto pass = std::make_shared<FailingPreparePass>();
  expect_error([&] { register_pass(pass, "reference"); }, ErrorKind::kGeneric, "no patterns today");
  expect_error([&] { register_pass(pass, "reference"); }, ErrorKind::kGeneric,
               "while preparing pass 'FailingPreparePass'");
  PassManager manager;
  expect_error([&] { manager.add(pass, PassStage::kPreFusion); }, ErrorKind::kGeneric,
               "while preparing pass 'FailingPreparePass'");
  const std::vector<PassInfo> passes = list_passes();
  EXPECT_TRUE(std::none_of(passes.begin(), passes.end(),
                           [](const PassInfo& p) { return p.name == "FailingPreparePass"; }));
}

TEST(BuiltinPasses, RewriteAGraphAsTheJitRunsThem) {
  const FuncGraphPtr g = ir::parse(R"(graph "f"(%0 "x": float32[3]) {
  %1 = const float64[] weak [2.0]
  %2 = const float64[] weak [3.0]
  %3 = Mul(%1, %2) : float32[]
  %4 = const float64[] weak [1.0]
  %5 = Mul(%0, %4) : float32[3]
  %6 = Neg(%5) : float32[3]
  %7 = Neg(%6) : float32[3]
  %8 = Exp(%7) : float32[3]
  %9 = Exp(%0) : float32[3]
  %10 = Add(%8, %9) : float32[3]
  %11 = Mul(%10, %3) : float32[3]
  %12 = Sin(%0) : float32[3]
  return %11
}
)");
  PassManager pm = PassRegistry::Instance().manager("reference", /*builtins=*/true);
  pm.set_verify(true);
  PassReport report;
  EXPECT_TRUE(pm.Run(g, &report));
  // 2 * 3 folded; x * 1 and Neg(Neg(.)) gone; the two Exp(x) one; Sin and the constants gone.
  EXPECT_EQ(ir::print(*g), R"(graph "f"(%0 "x": float32[3]) {
  %8 = Exp(%0) : float32[3]
  %10 = Add(%8, %8) : float32[3]
  %13 = const float32[] [6]
  %11 = Mul(%10, %13) : float32[3]
  return %11
}
)");
  ASSERT_EQ(report.runs.size(), 4u);
  // Folding %3 erases %1 and %2; the rules erase what they matched; DCE is left with %12 and %4.
  const std::vector<size_t> matches = {1, 2, 1, 2};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(report.runs[i].matches, matches[i]) << report.str();
}

TEST(BuiltinPasses, RunAtO1AndNotAtO0) {
  const TensorFn fn = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    const Tensor unused = sin(x);  // dead
    (void)unused;
    const Tensor y = exp(neg(neg(x * 1.0)));
    const Tensor z = exp(neg(neg(x)));  // the same as y once simplified
    const Tensor c = full({3}, 2.0) * 3.0;  // folded
    return std::vector<Tensor>{(y + z) * c};
  };
  const Tensor x = make_tensor(DType::kFloat32, {3}, {-1, 0.5, 2});
  JitOptions o1;
  o1.backend = "reference";
  JitOptions o0 = o1;
  o0.jit_level = "O0";
  const std::string optimized = jit(fn, o1, "f").optimized_graph({x});
  const std::string unoptimized = jit(fn, o0, "f").optimized_graph({x});
  EXPECT_EQ(unoptimized, jit(fn, o0, "f").graph({x}));
  for (const char* gone : {"Sin(", "Neg(", "Full("}) {
    EXPECT_EQ(optimized.find(gone), std::string::npos) << gone << " in\n" << optimized;
    EXPECT_NE(unoptimized.find(gone), std::string::npos) << gone << " in\n" << unoptimized;
  }
  const FuncGraphPtr g = ir::parse(optimized);
  EXPECT_EQ(count_op(*g, "Exp"), 1u) << optimized;
  EXPECT_EQ(count_op(*g, "Mul"), 1u) << optimized;  // (y + y) * c; x * 1 is gone
  const JitFunction f1 = jit(fn, o1, "f");
  const Tensor got = f1({x})[0];
  expect_same_bits(got, jit(fn, o0, "f")({x})[0]);
  expect_same_bits(got, fn({x})[0]);
  bool ran_folding = false;
  for (const PassRunRecord& r : f1.pass_report().runs) {
    ran_folding = ran_folding || (r.pass == "ConstantFolding" && r.matches > 0);
  }
  EXPECT_TRUE(ran_folding) << f1.pass_report().str();
}

// An op that multiplies by `k`, registered under one name with different k in turn.
OpDef times(double k) {
  return OpDef("BuiltinPassesTestTimes")
      .input("x")
      .infer([](const InferContext& ctx) { return MetaList{ctx.input(0)}; })
      .kernel(DeviceType::kCPU, [k](KernelContext& ctx) {
        const Tensor& out = ctx.outputs[0];
        for (int64_t i = 0; i < out.numel(); ++i) {
          out.data<float>()[i] = static_cast<float>(k * ctx.inputs[0].data<float>()[i]);
        }
      });
}

TEST(BuiltinPasses, AJitGraphIsRebuiltWhenAFoldedOpIsReplaced) {
  // Folding runs the op at compile time, so the built graph no longer contains it; replacing
  // the op must still rebuild the graph, as for any op the function calls.
  auto registration = std::make_unique<OpRegistration>(times(2));
  JitOptions options;
  options.backend = "reference";
  const JitFunction f = jit(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{in[0] + call_op("BuiltinPassesTestTimes", {full({2}, 1.0)})[0]};
      },
      options, "f");
  const Tensor x = make_tensor(DType::kFloat32, {2}, {0, 1});
  EXPECT_EQ(values_of(f({x})[0]), (std::vector<double>{2, 3}));
  EXPECT_EQ(f.optimized_graph({x}).find("BuiltinPassesTestTimes"), std::string::npos);
  registration.reset();
  registration = std::make_unique<OpRegistration>(times(3));
  EXPECT_EQ(values_of(f({x})[0]), (std::vector<double>{3, 4}));
  EXPECT_EQ(f.cache_info().misses, 2u);
}

}  // namespace
}  // namespace kiln
