// ir::verify: each kind of broken graph is caught, with a message that names the node.
#include <gtest/gtest.h>

#include "ir/ir_access.h"
#include "ir_testing.h"
#include "kiln/ir.h"
#include "testing.h"

namespace kiln {
namespace {

using detail::IrAccess;
using testing::expect_error;

struct Small {
  FuncGraphPtr g = std::make_shared<FuncGraph>("f");
  ParameterPtr x = g->add_parameter(DType::kFloat32, {2, 3}, "x");
  CNodePtr neg = g->add_cnode("Neg", {x});
  CNodePtr add = g->add_cnode("Add", {x, neg});
  Small() { g->set_output(add); }
};

TEST(Verify, AcceptsWellFormedGraphs) {
  Small s;
  ir::verify(*s.g);
  for (uint32_t seed = 1; seed <= 50; ++seed) {
    ir::verify(*testing::RandomGraphBuilder(seed).build(30));
  }
}

TEST(Verify, CatchesAWrongDtype) {
  Small s;
  s.neg->set_abstract(Abstract(DType::kFloat64, {2, 3}));
  expect_error([&] { ir::verify(*s.g); }, ErrorKind::kDType,
               "verify: graph \"f\": %1 = Neg(%0) has abstract float64[2, 3], but inference gives "
               "float32[2, 3]");
}

TEST(Verify, CatchesAWrongShape) {
  Small s;
  s.add->set_abstract(Abstract(DType::kFloat32, {3, 2}));
  expect_error([&] { ir::verify(*s.g); }, ErrorKind::kShape,
               "%2 = Add(%0, %1) has abstract float32[3, 2], but inference gives float32[2, 3]");
}

TEST(Verify, CatchesWrongWeaknessAndConstantAbstracts) {
  Small s;
  auto c = s.g->add_value(Scalar(1.0));
  c->set_abstract(Abstract(DType::kFloat64, {}));
  expect_error(
      [&] { ir::verify(*s.g); }, ErrorKind::kDType,
      "%3 (constant float64[]) has abstract float64[], but inference gives float64[] weak");
}

TEST(Verify, CatchesAStaleAbstractAfterAnEdit) {
  Small s;
  auto y = s.g->add_parameter(DType::kInt64, {4}, "y");
  s.neg->set_input(0, y);  // not inferred again
  expect_error([&] { ir::verify(*s.g); }, ErrorKind::kDType,
               "%1 = Neg(%3) has abstract float32[2, 3], but inference gives int64[4]");
}

TEST(Verify, ReportsInferenceFailuresWithTheNode) {
  Small s;
  auto y = s.g->add_parameter(DType::kFloat32, {4}, "y");
  s.add->set_input(1, y);  // Add(float32[2, 3], float32[4]) does not broadcast
  expect_error([&] { ir::verify(*s.g); }, ErrorKind::kShape,
               "verify: graph \"f\": inferring %2 = Add(%0, %3)");
}

TEST(Verify, CatchesAnUnregisteredPrimitive) {
  Small s;
  s.neg->set_primitive(std::make_shared<Primitive>("NoSuchOp"));
  expect_error([&] { ir::verify(*s.g); }, ErrorKind::kValue,
               "%1 = NoSuchOp(%0): primitive 'NoSuchOp' is not a registered op");
}

TEST(Verify, CatchesAPrimitiveUnregisteredAfterBuilding) {
  auto s = std::make_unique<Small>();
  {
    OpRegistration reg(OpDef("IrVerifyTmp").input("x").infer([](const InferContext& ctx) {
      return MetaList{ctx.input(0)};
    }));
    s->g->add_cnode("IrVerifyTmp", {s->x});
    ir::verify(*s->g);
  }
  expect_error([&] { ir::verify(*s->g); }, ErrorKind::kValue,
               "%3 = IrVerifyTmp(%0): primitive 'IrVerifyTmp' is not a registered op");
}

TEST(Verify, CatchesAStrayReturnPrimitive) {
  Small s;
  s.neg->set_primitive(std::make_shared<Primitive>("Return"));
  expect_error([&] { ir::verify(*s.g); }, ErrorKind::kValue, "%1 = Return(%0) uses 'Return'");
}

TEST(Verify, CatchesACycle) {
  Small s;
  s.neg->set_input(0, s.add);  // add -> neg -> add
  expect_error([&] { ir::verify(*s.g); }, ErrorKind::kValue,
               "graph \"f\" has a cycle through %1 = Neg(%2), which %2 = Add(%0, %1) uses");
}

TEST(Verify, CatchesASelfLoop) {
  Small s;
  auto exp = s.g->add_cnode("Exp", {s.x});
  exp->set_input(0, exp);
  expect_error([&] { ir::verify(*s.g); }, ErrorKind::kValue, "has a cycle through %3 = Exp(%3)");
}

TEST(Verify, CatchesADanglingInputFromAnotherGraph) {
  Small s;
  auto other = std::make_shared<FuncGraph>("other");
  auto z = other->add_parameter(DType::kFloat32, {2, 3});
  IrAccess::set_input_unchecked(*s.neg, 0, z);  // bypasses set_input's check
  expect_error(
      [&] { ir::verify(*s.g); }, ErrorKind::kValue,
      "input 0 of %1 = Neg(%0) is a dangling reference (%0 (parameter), not in this graph)");
  IrAccess::set_input_unchecked(*s.neg, 0, s.x);  // restore, so the graphs tear down cleanly
}

TEST(Verify, CatchesADanglingInputToAnErasedNode) {
  Small s;
  auto exp = s.g->add_cnode("Exp", {s.x});
  auto abs = s.g->add_cnode("Abs", {s.x});
  s.g->erase(exp);
  IrAccess::set_input_unchecked(*abs, 0, exp);
  expect_error([&] { ir::verify(*s.g); }, ErrorKind::kValue,
               "input 0 of %4 = Abs(%3) is a dangling reference (%3 = Exp(), not in this graph)");
  IrAccess::set_input_unchecked(*abs, 0, s.x);
}

TEST(Verify, CatchesANullInput) {
  Small s;
  IrAccess::set_input_unchecked(*s.add, 1, nullptr);
  expect_error([&] { ir::verify(*s.g); }, ErrorKind::kValue,
               "input 1 of %2 = Add(%0, null) is a dangling reference (null)");
  IrAccess::set_input_unchecked(*s.add, 1, s.neg);
}

TEST(Verify, CatchesAUseListMissingAUse) {
  Small s;
  Uses saved = s.neg->users();
  IrAccess::users(*s.neg).clear();
  expect_error([&] { ir::verify(*s.g); }, ErrorKind::kValue,
               "input 1 of %2 = Add(%0, %1) is missing from the use list of %1 = Neg(%0)");
  IrAccess::users(*s.neg) = saved;
  ir::verify(*s.g);
}

TEST(Verify, CatchesAUseListWithAFalseUse) {
  Small s;
  IrAccess::users(*s.neg).push_back(Use{s.add.get(), 0});  // input 0 of add is x, not neg
  expect_error([&] { ir::verify(*s.g); }, ErrorKind::kValue,
               "the use list of %1 = Neg(%0) says %2 = Add(%0, %1) uses it as input 0, which it "
               "does not");
  IrAccess::users(*s.neg).pop_back();
}

TEST(Verify, CatchesAUseListedTwice) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2});
  auto add = g->add_cnode("Add", {x, x});
  // x's uses are (add, 0) and (add, 1); make both entries (add, 0) at its recorded position.
  Uses& uses = IrAccess::users(*x);
  ASSERT_EQ(uses.size(), 2u);
  const size_t pos0 = IrAccess::use_position(*add, 0);
  uses[1 - pos0] = Use{add.get(), 0};
  expect_error([&] { ir::verify(*g); }, ErrorKind::kValue, "the use list of %0 (parameter)");
  uses[1 - pos0] = Use{add.get(), 1};
  ir::verify(*g);
}

TEST(Verify, CatchesAUseNamingAForeignUser) {
  Small s;
  auto other = std::make_shared<FuncGraph>("other");
  auto z = other->add_parameter(DType::kFloat32, {2, 3});
  auto foreign = other->add_cnode("Neg", {z});
  IrAccess::users(*s.x).push_back(Use{foreign.get(), 0});
  expect_error([&] { ir::verify(*s.g); }, ErrorKind::kValue,
               "the use list of %0 (parameter x) names a user that is not in this graph");
  IrAccess::users(*s.x).pop_back();
}

TEST(Verify, CatchesBadAttributesAndBadTupleIndices) {
  Small s;
  s.neg->primitive()->set_attr("alpha", 2.0);
  expect_error([&] { ir::verify(*s.g); }, ErrorKind::kType, "Neg: unexpected attribute 'alpha'");
  s.neg->set_primitive(std::make_shared<Primitive>("Neg"));
  auto max = s.g->add_cnode("MaxDim", {s.x}, {{"dim", int64_t{1}}});
  auto item = s.g->tuple_get_item(max, 1);
  item->primitive()->set_attr("index", int64_t{5});
  expect_error([&] { ir::verify(*s.g); }, ErrorKind::kIndex,
               "TupleGetItem: index 5 is out of range");
}

}  // namespace
}  // namespace kiln
