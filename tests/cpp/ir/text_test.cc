// The IR text format: printing, parsing, exact round trips and parse errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "ir_testing.h"
#include "kiln/ir.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_error;

TEST(IrText, PrintsTheDocumentedFormat) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {2, 3}, "x");
  auto y = g->add_parameter(DType::kFloat32, {3}, "y");
  auto neg = g->add_cnode(std::make_shared<Primitive>("Neg"), {y});
  auto half = g->add_value(Scalar(0.5));
  auto add = g->add_cnode("Add", {x, neg});
  auto mul = g->add_cnode("Mul", {add, half});
  auto max = g->add_cnode("MaxDim", {mul}, {{"dim", int64_t{1}}, {"keepdim", false}});
  auto values = g->tuple_get_item(max, 0);
  g->set_outputs({mul, values});
  EXPECT_EQ(ir::print(*g),
            "graph \"f\"(%0 \"x\": float32[2, 3], %1 \"y\": float32[3]) {\n"
            "  %2 = Neg(%1) : float32[3]\n"
            "  %3 = const float64[] weak [0.5]\n"
            "  %4 = Add(%0, %2) : float32[2, 3]\n"
            "  %5 = Mul(%4, %3) : float32[2, 3]\n"
            "  %6 = MaxDim(%5) {dim = 1, keepdim = false} : (float32[2], int64[2])\n"
            "  %7 = TupleGetItem(%6) {index = 0} : float32[2]\n"
            "  return %5, %7\n"
            "}\n");
}

TEST(IrText, PrintsEveryAttributeKindDistinctly) {
  auto g = std::make_shared<FuncGraph>("attrs");
  auto x = g->add_parameter(DType::kFloat32, {2});
  auto p = std::make_shared<Primitive>("Anything");
  p->set_attr("none", std::monostate{})
      .set_attr("b", true)
      .set_attr("i", int64_t{-3})
      .set_attr("whole", 2.0)
      .set_attr("big", 1e300)
      .set_attr("s", std::string("a \"b\"\n"))
      .set_attr("ints", std::vector<int64_t>{1, -2})
      .set_attr("empty", std::vector<int64_t>{})
      .set_attr("d", DType::kBFloat16)
      .set_attr("si", Scalar(int64_t{2}))
      .set_attr("sf", Scalar(-0.0))
      .set_attr("sb", Scalar(true));
  g->add_cnode(p, {x}, Abstract(DType::kFloat32, {2}));
  const std::string text = ir::print(*g);
  EXPECT_NE(text.find("Anything(%0) {none = None, b = true, i = -3, whole = 2.0, big = 1e+300, "
                      "s = \"a \\\"b\\\"\\n\", ints = [1, -2], empty = [], d = bfloat16, "
                      "si = scalar(2), sf = scalar(-0.0), sb = scalar(true)} : float32[2]"),
            std::string::npos)
      << text;
  auto again = ir::parse(text);
  EXPECT_EQ(ir::print(*again), text);
  testing::expect_same_structure(*g, *again);
}

// print -> parse -> print gives the same text, and the parsed graph has the same structure.
TEST(IrText, RoundTripsRandomGraphsExactly) {
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    testing::RandomGraphBuilder builder(seed);
    FuncGraphPtr g = builder.build(static_cast<int>(5 + seed % 40));
    ir::verify(*g);
    const std::string text = ir::print(*g);
    FuncGraphPtr parsed = ir::parse(text);
    ASSERT_EQ(ir::print(*parsed), text);
    testing::expect_same_structure(*g, *parsed);
    ir::verify(*parsed);
    EXPECT_LE(parsed->next_id(), g->next_id());  // erased nodes' ids are not in the text
    if (HasFatalFailure()) return;
  }
}

TEST(IrText, KeepsNodeIdsAndCreationOrderIndependentTopologicalOrder) {
  auto g = std::make_shared<FuncGraph>("g");
  auto x = g->add_parameter(DType::kFloat32, {2}, "x");
  auto a = g->add_cnode("Neg", {x});  // %1
  auto b = g->add_cnode("Exp", {x});  // %2
  a->set_input(0, b);                 // now %1 uses %2: %2 prints first
  g->set_output(a);
  const std::string text = ir::print(*g);
  EXPECT_NE(text.find("  %2 = Exp(%0) : float32[2]\n  %1 = Neg(%2) : float32[2]\n"),
            std::string::npos)
      << text;
  auto parsed = ir::parse(text);
  EXPECT_EQ(ir::print(*parsed), text);
  EXPECT_EQ(parsed->next_id(), 3u);
  auto c = parsed->add_cnode("Neg", {parsed->outputs()[0]});
  EXPECT_EQ(c->id(), 3u);
}

TEST(IrText, ParsesCommentsWhitespaceAndQuotedNames) {
  auto g = ir::parse(
      "# a comment\n"
      "graph \"odd name\" ( %7 \"in\\x41\" : float32 [ 4 ] ) {  # body\n"
      "  %9 = \"Neg\" ( %7 ) : float32[4]\n"
      "  return %9 }");
  EXPECT_EQ(g->name(), "odd name");
  EXPECT_EQ(g->parameters()[0]->name(), "inA");
  EXPECT_EQ(g->parameters()[0]->id(), 7u);
  EXPECT_EQ(g->outputs()[0]->id(), 9u);
  ir::verify(*g);
}

TEST(IrText, ParsesANoneConstantAndAnEmptyTuple) {
  const std::string text =
      "graph \"g\"(%0: float32[2, 4]) {\n"
      "  %1 = const None\n"
      "  %2 = LayerNorm(%0, %1, %1) {normalized_shape = [4], eps = 1e-05} : float32[2, 4]\n"
      "  %3 = Split(%0) {sizes = []} : ()\n"
      "  return %2\n"
      "}\n";
  auto g = ir::parse(text);
  EXPECT_EQ(ir::print(*g), text);
}

struct ParseErrorCase {
  const char* text;
  const char* message;
};

// Names the case in test listings by the start of its message (letters and digits only).
void PrintTo(const ParseErrorCase& c, std::ostream* os) {
  std::string name(c.message, std::min<size_t>(std::strlen(c.message), 40));
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  *os << name;
}

class IrParseError : public ::testing::TestWithParam<ParseErrorCase> {};

TEST_P(IrParseError, NamesLineAndColumn) {
  expect_error([&] { ir::parse(GetParam().text); }, ErrorKind::kValue, GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, IrParseError,
    ::testing::Values(
        ParseErrorCase{"grph", "line 1, column 1: expected 'graph', found 'grph'"},
        ParseErrorCase{"graph \"g\"(%0: float32[2]) {\n  %1 = Neg(%5) : float32[2]\n  return %1\n}",
                       "line 2, column 12: use of undefined node %5"},
        ParseErrorCase{"graph \"g\"(%0: float32[2]) {\n  %0 = Neg(%0) : float32[2]\n  return\n}",
                       "line 2, column 3: node %0 is defined twice"},
        ParseErrorCase{
            "graph \"g\"(%0: float33[2]) {\n  return\n}",
            "line 1, column 15: expected a dtype (float32, int64, ...), found 'float33'"},
        ParseErrorCase{"graph \"g\"(%0: float32[2]) {\n  %1 = Neg(%0 : float32[2]\n  return\n}",
                       "line 2, column 15: expected ')' after the inputs, found ':'"},
        ParseErrorCase{"graph \"g\"() {\n  %1 = const int8[2] [1, 300]\n  return\n}",
                       "line 2, column 26: expected a int8 element, found '300'"},
        ParseErrorCase{"graph \"g\"() {\n  %1 = const int8[2] [1]\n  return\n}",
                       "line 2, column 24: expected ',' between elements, found ']'"},
        ParseErrorCase{"graph \"g\"() {\n  %1 = const int8[1] [1, 2]\n  return\n}",
                       "line 2, column 24: expected ']' after 1 elements"},
        ParseErrorCase{"graph \"g\"() {\n  %1 = Full() {x = 1, x = 2} : int64[]\n  return\n}",
                       "line 2, column 23: attribute 'x' is given twice"},
        ParseErrorCase{"graph \"g\"() {\n  %1 = Full() {x = @} : int64[]\n  return\n}",
                       "line 2, column 20: expected an attribute value, found '@'"},
        ParseErrorCase{"graph \"g\"() {\n  %1 = Return() : int64[]\n  return\n}",
                       "line 2, column 8: 'Return' is written as a return statement"},
        ParseErrorCase{
            "graph \"g\"(%0: float32[2]) {\n  return %0\n} extra",
            "line 3, column 3: expected the end of the text after the graph, found 'extra'"},
        ParseErrorCase{
            "graph \"g\"(%0: float32[2]) {\n  %1 = MaxDim(%0) {dim = 0} : (float32[], int64[])\n"
            "  return %1\n}",
            "line 3, column 10: the output %1 = MaxDim(%0) is (float32[], int64[]), not a tensor"},
        ParseErrorCase{"graph \"g\"(%0 \"a\": float32[2], %1 \"a\": float32[2]) {\n  return\n}",
                       "line 1, column 31: two parameters are named \"a\""},
        ParseErrorCase{"graph \"g\"(%0: float32[-2]) {\n  return\n}",
                       "line 1, column 23: a dimension may not be negative"},
        ParseErrorCase{"graph \"g\"(%0: float32[4294967296, 4294967296]) {\n  return\n}",
                       "line 1, column 22: a float32 shape of more than 2^63 - 1 bytes"},
        ParseErrorCase{"graph \"g\"(%0: float32[4611686018427387904]) {\n  return\n}",
                       "line 1, column 22: a float32 shape of more than 2^63 - 1 bytes"},
        ParseErrorCase{"graph \"g\"() {\n  %1 = const float32[1000000000000] [1, 2]\n  return\n}",
                       "line 2, column 37: a constant of shape [1000000000000] has 1000000000000 "
                       "elements, more than the rest of the text holds"},
        ParseErrorCase{"graph \"unterminated", "line 1, column 7: unterminated string"},
        ParseErrorCase{
            "graph \"g\"() {\n  %1 = Neg",
            "line 2, column 11: expected '(' after the op name, found the end of the text"}));

}  // namespace
}  // namespace kiln
