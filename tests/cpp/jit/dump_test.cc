// IR dumps of the jit pipeline (src/jit/dump.cc): the traced graph and each graph handed to a
// backend, as text that parses back, DOT, and SVG when Graphviz is installed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "jit/dump.h"
#include "jit/jit_testing.h"
#include "kiln/functional.h"
#include "kiln/jit.h"
#include "testing.h"

namespace kiln {
namespace {

// A fresh folder under the test's temporary directory.
std::string temp_dir(const std::string& name) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("kiln_dump_test_" + name + "_" + std::to_string(::getpid())))
                              .string();
  std::filesystem::remove_all(dir);
  return dir;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TEST(IrDump, WritesTheTracedGraphAndEachBuiltPart) {
  testing::register_jit_test_backends();
  const std::string dir = temp_dir("parts");
  JitOptions options;
  options.backend = "jit_plugin_elementwise";
  options.dump_ir = dir + "/nested";  // created
  JitFunction f = jit([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sin(softmax(exp(in[0]), -1))};
  }, options, "Net.forward.<locals>.f");
  f({Tensor::empty({2, 3})});
  const std::vector<std::string> files = files_in(dir + "/nested");
  const bool svg = ir::graphviz_available();
  std::vector<std::string> steps;
  for (const std::string& name : files) {
    if (ends_with(name, ".kir")) steps.push_back(name);
  }
  EXPECT_EQ(files.size(), steps.size() * (svg ? 3 : 2));
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps[0].find("Net.forward._locals_.f."), 0u) << steps[0];
  EXPECT_TRUE(ends_with(steps[0], ".00_traced.kir")) << steps[0];
  EXPECT_TRUE(ends_with(steps[1], ".01_part0_jit_plugin_elementwise.kir")) << steps[1];
  EXPECT_TRUE(ends_with(steps[2], ".02_part1_kiln_cpu.kir")) << steps[2];
  EXPECT_TRUE(ends_with(steps[3], ".03_part2_jit_plugin_elementwise.kir")) << steps[3];
  // The text is the IR format: it parses back to the same graph.
  const std::string traced = read(dir + "/nested/" + steps[0]);
  EXPECT_EQ(ir::print(*ir::parse(traced)), traced);
  EXPECT_NE(traced.find("Softmax"), std::string::npos);
  EXPECT_NE(read(dir + "/nested/" + steps[2]).find("Softmax"), std::string::npos);
  if (svg) {
    const std::string base = steps[0].substr(0, steps[0].size() - 4);
    EXPECT_NE(read(dir + "/nested/" + base + ".svg").find("<svg"), std::string::npos);
  }
  // A recompilation never overwrites: a new shape adds a new set.
  f({Tensor::empty({4})});
  EXPECT_EQ(files_in(dir + "/nested").size(), files.size() * 2);
  std::filesystem::remove_all(dir);
}

TEST(IrDump, TheEnvironmentVariableTurnsDumpsOn) {
  const std::string dir = temp_dir("env");
  ::setenv("KILN_DUMP_IR", dir.c_str(), 1);
  EXPECT_EQ(jit_detail::dump_dir(""), dir);
  EXPECT_EQ(jit_detail::dump_dir("explicit"), "explicit");
  jit([](const std::vector<Tensor>& in) { return std::vector<Tensor>{neg(in[0])}; })(
      {Tensor::empty({1})});
  ::unsetenv("KILN_DUMP_IR");
  EXPECT_EQ(jit_detail::dump_dir(""), "");
  std::vector<std::string> kir;
  for (const std::string& name : files_in(dir)) {
    if (ends_with(name, ".kir")) kir.push_back(name);
  }
  ASSERT_EQ(kir.size(), 2u);
  EXPECT_TRUE(ends_with(kir[1], ".01_kiln_cpu.kir")) << kir[1];
  std::filesystem::remove_all(dir);
}

TEST(IrDump, AnUnwritableFolderIsAClearError) {
  JitOptions options;
  options.dump_ir = "/proc/kiln_cannot_write_here";
  JitFunction f = jit([](const std::vector<Tensor>& in) { return in; }, options);
  testing::expect_error([&] { f({Tensor::empty({1})}); }, ErrorKind::kValue,
                        "cannot create the IR dump folder /proc/kiln_cannot_write_here");
}

}  // namespace
}  // namespace kiln
