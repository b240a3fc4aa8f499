// Graphviz dumps: DOT text always, SVG when Graphviz's dot is installed.
#include <gtest/gtest.h>

#include <chrono>
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
  EXPECT_NE(dot.find("n0 -> n2 [headlabel=\"0\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n1 -> n2 [headlabel=\"1\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n2 -> n3;"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n3 -> ret;"), std::string::npos) << dot;
  EXPECT_EQ(dot.find("fillcolor"), std::string::npos) << dot;  // nothing highlighted
}

TEST(IrDot, HighlightsTheGivenNodesAndTheEdgesIntoThem) {
  const FuncGraphPtr g = sample();
  // Mul (%2) and the return node; id 99 names no node and is ignored.
  const std::string dot = ir::to_dot(*g, {2, Node::kReturnId, 99});
  const std::string marked = ", style=filled, fillcolor=\"#ffd54f\", color=\"#d32f2f\", penwidth=2.5];";
  EXPECT_NE(dot.find("n2 [shape=box, label=\"%2 Mul\\nfloat32[2, 3]\"" + marked), std::string::npos)
      << dot;
  EXPECT_NE(dot.find("ret [shape=doublecircle, label=\"return\"" + marked), std::string::npos)
      << dot;
  EXPECT_NE(dot.find("n3 [shape=box, label=\"%3 ReduceSum\\n{dims=[1]}\\nfloat32[2]\"];"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("n0 -> n2 [headlabel=\"0\", color=\"#d32f2f\", penwidth=2];"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("n3 -> ret [color=\"#d32f2f\", penwidth=2];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n2 -> n3;"), std::string::npos) << dot;
  EXPECT_EQ(ir::to_dot(*g, {}), ir::to_dot(*g));
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

TEST(IrDot, HighlightsInTheSvg) {
  if (!ir::graphviz_available()) GTEST_SKIP() << "Graphviz's dot is not on PATH";
  const std::string path = ::testing::TempDir() + "kiln_ir_dot_test_highlight.svg";
  ir::write_svg(*sample(), path, {3});
  std::ifstream in(path);
  std::stringstream svg;
  svg << in.rdbuf();
  EXPECT_NE(svg.str().find("fill=\"#ffd54f\""), std::string::npos) << svg.str();
  std::remove(path.c_str());
}

// A node used by every step of a long chain: dot's layout takes minutes on a few hundred nodes.
TEST(IrDot, StopsDotAtTheTimeLimit) {
  if (!ir::graphviz_available()) GTEST_SKIP() << "Graphviz's dot is not on PATH";
  auto g = std::make_shared<FuncGraph>("fan");
  auto x = g->add_parameter(DType::kFloat32, {2});
  NodePtr acc = x;
  for (int i = 0; i < 400; ++i) acc = g->add_cnode("Add", {acc, x});
  g->set_output(acc);
  const std::string path = ::testing::TempDir() + "kiln_ir_dot_test_slow.svg";
  const auto start = std::chrono::steady_clock::now();
  testing::expect_error([&] { ir::write_svg(*g, path, {}, 0.3); }, ErrorKind::kValue,
                        "dot did not finish writing " + path + " within 0.3 s (a graph of 402 "
                        "nodes); it was stopped");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10);
  EXPECT_FALSE(std::ifstream(path).good());
}

TEST(IrDot, ReportsDotsErrors) {
  if (!ir::graphviz_available()) GTEST_SKIP() << "Graphviz's dot is not on PATH";
  testing::expect_error([] { ir::write_svg(*sample(), "/nonexistent-dir/x.svg"); },
                        ErrorKind::kValue, "dot failed to write /nonexistent-dir/x.svg");
}

}  // namespace
}  // namespace kiln
