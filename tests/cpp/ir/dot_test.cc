// Graphviz dumps: DOT text always, SVG when Graphviz's dot is installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "kiln/ir.h"
#include "testing.h"

namespace kiln {
namespace {

FuncGraphPtr sample() {
  auto g = std::make_shared<FuncGraph>("f \"quoted\"");
  auto x = g->add_parameter(DType::kFloat32, {2, 3}, "x");
  auto c = g->add_value(Scalar(2.0));
  auto mul = g->add_cnode("Mul", {x, c});
  auto sum = g->add_cnode("ReduceSum", {mul}, {{"dims", std::vector<int64_t>{1}}});
  g->set_output(sum);
  return g;
}

TEST(IrDot, WritesNodesEdgesAndEscapedLabels) {
  const std::string dot = ir::to_dot(*sample());
  EXPECT_EQ(dot.rfind("digraph \"f \\\"quoted\\\"\" {\n", 0), 0u) << dot;
  EXPECT_NE(dot.find("n0 [shape=ellipse, label=\"%0 x\\nfloat32[2, 3]\"];"), std::string::npos)
      << dot;
  EXPECT_NE(dot.find("n1 [shape=note, label=\"%1 const [2.0]\\nfloat64[] weak\"];"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("n3 [shape=box, label=\"%3 ReduceSum\\n{dims=[1]}\\nfloat32[2]\"];"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("ret [shape=doublecircle, label=\"return\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n0 -> n2 [label=\"0\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n1 -> n2 [label=\"1\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n2 -> n3;"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n3 -> ret;"), std::string::npos) << dot;
}

TEST(IrDot, WritesSvgWhenGraphvizIsInstalled) {
  if (!ir::graphviz_available()) GTEST_SKIP() << "Graphviz's dot is not on PATH";
  const std::string path = ::testing::TempDir() + "kiln_ir_dot_test.svg";
  ir::write_svg(*sample(), path);
  std::ifstream in(path);
  std::stringstream svg;
  svg << in.rdbuf();
  EXPECT_NE(svg.str().find("<svg"), std::string::npos);
  EXPECT_NE(svg.str().find("ReduceSum"), std::string::npos);
  std::remove(path.c_str());
}

TEST(IrDot, ReportsDotsErrors) {
  if (!ir::graphviz_available()) GTEST_SKIP() << "Graphviz's dot is not on PATH";
  testing::expect_error([] { ir::write_svg(*sample(), "/nonexistent-dir/x.svg"); },
                        ErrorKind::kValue, "dot failed to write /nonexistent-dir/x.svg");
}

}  // namespace
}  // namespace kiln
