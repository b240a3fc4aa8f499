// Abstract, Primitive (registry lookup and its cache) and node basics.
#include <gtest/gtest.h>

#include "kiln/ir.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_error;

TEST(Abstract, ComparesKindDtypeShapeAndWeakness) {
  EXPECT_EQ(Abstract(DType::kFloat32, {2}), Abstract(TensorMeta(DType::kFloat32, {2})));
  EXPECT_NE(Abstract(DType::kFloat32, {2}), Abstract(DType::kFloat32, {2}, /*weak=*/true));
  EXPECT_NE(Abstract(DType::kFloat32, {2}), Abstract(DType::kFloat64, {2}));
  EXPECT_NE(Abstract(DType::kFloat32, {2}), Abstract::tuple({TensorMeta(DType::kFloat32, {2})}));
  EXPECT_NE(Abstract(), Abstract::tuple({}));
  EXPECT_EQ(Abstract().str(), "none");
  EXPECT_EQ(Abstract::tuple({}).str(), "()");
  expect_error([] { Abstract::tuple({}).tensor(); }, ErrorKind::kType,
               "expected a tensor abstract, got ()");
  expect_error([] { Abstract(DType::kBool, {}).elements(); }, ErrorKind::kType,
               "expected a tuple abstract");
}

TEST(Primitive, MakeSharedWorksAndNamesAreTheRegistrys) {
  auto neg = std::make_shared<Primitive>("Neg");
  ASSERT_NE(neg->op_def(), nullptr);
  EXPECT_EQ(neg->op_def()->name(), "Neg");
  // The primitive names DESIGN.md lists are the registry's own (PascalCase) names.
  for (const char* name : {"Add", "Neg", "Sub", "MatMul", "Softmax"}) {
    EXPECT_NE(std::make_shared<Primitive>(name)->op_def(), nullptr) << name;
  }
  EXPECT_EQ(std::make_shared<Primitive>("neg")->op_def(), nullptr);
  expect_error([] { std::make_shared<Primitive>("Negg")->op(); }, ErrorKind::kValue,
               "did you mean: Neg");
  EXPECT_TRUE(Primitive("TupleGetItem").is_builtin());
  EXPECT_TRUE(Primitive("Return").is_builtin());
  EXPECT_EQ(Primitive("TupleGetItem").op_def(), nullptr);
  EXPECT_EQ(Primitive("Add", {{"alpha", 2.0}}), Primitive("Add", {{"alpha", 2.0}}));
  EXPECT_FALSE(Primitive("Add", {{"alpha", 2.0}}) == Primitive("Add"));
}

TEST(Primitive, NoticesRegistryChangesAndAttributeEdits) {
  auto p = std::make_shared<Primitive>("IrTestScale");
  EXPECT_EQ(p->op_def(), nullptr);
  {
    OpRegistration reg(OpDef("IrTestScale")
                           .input("x")
                           .attr("factor", AttrKind::kFloat, 1.0)
                           .infer([](const InferContext& ctx) { return MetaList{ctx.input(0)}; }));
    ASSERT_NE(p->op_def(), nullptr);
    EXPECT_EQ(p->normalized_attrs().get<double>("factor"), 1.0);
    p->set_attr("factor", 3.0);
    EXPECT_EQ(p->normalized_attrs().get<double>("factor"), 3.0);
    p->set_attr("bogus", int64_t{1});
    expect_error([&] { p->normalized_attrs(); }, ErrorKind::kType, "unexpected attribute 'bogus'");
  }
  EXPECT_EQ(p->op_def(), nullptr);
}

TEST(Node, SetInputChecksItsArguments) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2});
  auto neg = g->add_cnode("Neg", {x});
  expect_error([&] { neg->set_input(1, x); }, ErrorKind::kIndex,
               "input 1 is out of range (1 inputs)");
  expect_error([&] { neg->set_input(0, nullptr); }, ErrorKind::kValue, "may not be null");
  auto other = std::make_shared<FuncGraph>("h");
  expect_error([&] { neg->set_input(0, other->add_parameter(DType::kFloat32, {2})); },
               ErrorKind::kValue, "does not belong to this node's graph");
  expect_error([&] { neg->set_primitive(nullptr); }, ErrorKind::kValue, "may not be null");
}

TEST(Node, InferAgainAfterAnEdit) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2});
  auto y = g->add_parameter(DType::kFloat64, {3, 2});
  auto neg = g->add_cnode("Neg", {x});
  neg->set_input(0, y);
  EXPECT_EQ(neg->abstract().str(), "float32[2]");  // stale until infer()
  neg->infer();
  EXPECT_EQ(neg->abstract().str(), "float64[3, 2]");
}

TEST(ValueNode, HoldsAContiguousCopyOfAView) {
  auto g = std::make_shared<FuncGraph>("f");
  Tensor t = Tensor::empty({2, 3}, DType::kInt32);
  for (int i = 0; i < 6; ++i) t.data<int32_t>()[i] = i;
  auto v = g->add_value(t.transpose(0, 1));
  EXPECT_TRUE(v->value().is_contiguous());
  EXPECT_EQ(v->abstract().str(), "int32[3, 2]");
  EXPECT_EQ(v->value().data<int32_t>()[1], 3);
  expect_error([&] { g->add_value(Tensor(DType::kFloat32, {2})); }, ErrorKind::kValue,
               "needs a tensor with memory");
  auto none = g->add_value(Tensor());
  EXPECT_TRUE(none->abstract().is_none());
}

}  // namespace
}  // namespace kiln
