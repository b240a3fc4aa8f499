// IR dumps of the jit pipeline (src/jit/dump.cc, src/jit/dump_page.cc): the traced graph, each
// pass that changed the graph (before and after, changed nodes highlighted) and each graph handed
// to a backend, as text that parses back, DOT, and SVG when Graphviz is installed; the page that
// steps through them, checked in headless Chromium.
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

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The file in `dir` whose name ends with `suffix`; "" when there is none.
std::string find_file(const std::string& dir, const std::string& suffix) {
  for (const std::string& name : files_in(dir)) {
    if (ends_with(name, suffix)) return name;
  }
  return {};
}

// The op of every highlighted box in DOT text, in order ("  n2 [shape=box, label=\"%2 Neg\\n...
// fillcolor=...").
std::vector<std::string> highlighted_ops(const std::string& dot) {
  std::vector<std::string> ops;
  std::istringstream lines(dot);
  for (std::string line; std::getline(lines, line);) {
    const size_t label = line.find("[shape=box, label=\"%");
    if (label == std::string::npos || !contains(line, "fillcolor")) continue;
    const size_t name = line.find(' ', label + 20) + 1;
    ops.push_back(line.substr(name, line.find('\\', name) - name));
  }
  return ops;
}

// Each element of `html` that starts with `open`, up to the end of its start tag ('>'), or for
// "<mark>", up to the end of its text.
std::vector<std::string> tags(const std::string& html, const std::string& open) {
  std::vector<std::string> found;
  const char end = open == "<mark>" ? '\n' : '>';
  for (size_t at = html.find(open); at != std::string::npos; at = html.find(open, at + 1)) {
    found.push_back(html.substr(at, html.find(end, at) - at));
  }
  return found;
}

// The compilation pages in `dir` (the .html files but index.html).
std::vector<std::string> compilation_pages(const std::string& dir) {
  std::vector<std::string> pages;
  for (const std::string& name : files_in(dir)) {
    if (ends_with(name, ".html") && name != "index.html") pages.push_back(name);
  }
  return pages;
}

// The seed's example pass, registered for the jit under its own name while it lives.
class AddNegFusionPass : public PatternToPatternPass {
 public:
  explicit AddNegFusionPass(std::string name) : PatternToPatternPass(std::move(name)) {}
  void DefineSrcPattern(SrcPattern* src) override {
    (*src).AddVar("x").AddVar("y")
        .AddCNode("neg", {std::make_shared<Primitive>("Neg"), "y"})
        .AddCNode("add", {std::make_shared<Primitive>("Add"), "x", "neg"});
  }
  void DefineDstPattern(DstPattern* dst) override {
    (*dst).AddCNode("sub", {std::make_shared<Primitive>("Sub"), "x", "y"});
  }
};

struct ScopedPass {
  explicit ScopedPass(const std::string& name) : name_(name) {
    register_pass(std::make_shared<AddNegFusionPass>(name));
  }
  ~ScopedPass() { unregister_custom_pass(name_); }
  std::string name_;
};

// Compiles x + neg(y) with the AddNeg pass registered, dumping into `dir`.
void compile_add_neg(const std::string& dir, const std::string& pass_name) {
  ScopedPass pass(pass_name);
  JitOptions options;
  options.dump_ir = dir;
  jit([](const std::vector<Tensor>& in) { return std::vector<Tensor>{add(in[0], neg(in[1]))}; },
      options, "add_neg")({Tensor::empty({2, 3}), Tensor::empty({2, 3})});
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
  // Per step .kir, .dot (and .svg), then the compilation's page and the folder's index.
  EXPECT_EQ(files.size(), steps.size() * (svg ? 3 : 2) + 2);
  EXPECT_EQ(compilation_pages(dir + "/nested").size(), 1u);
  EXPECT_TRUE(std::filesystem::exists(dir + "/nested/index.html"));
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
  // A recompilation never overwrites: a new shape adds a new set (the index is shared).
  f({Tensor::empty({4})});
  EXPECT_EQ(files_in(dir + "/nested").size(), files.size() * 2 - 1);
  EXPECT_EQ(compilation_pages(dir + "/nested").size(), 2u);
  std::filesystem::remove_all(dir);
}

TEST(IrDump, ALongGraphNameIsShortenedInTheFileNames) {
  const std::string dir = temp_dir("long_name");
  JitOptions options;
  options.dump_ir = dir;
  const std::string name(300, 'n');
  jit([](const std::vector<Tensor>& in) { return std::vector<Tensor>{neg(in[0])}; }, options,
      name)({Tensor::empty({2})});
  const std::vector<std::string> pages = compilation_pages(dir);
  ASSERT_EQ(pages.size(), 1u);
  EXPECT_EQ(pages[0].find(std::string(100, 'n') + "."), 0u) << pages[0];
  EXPECT_NE(read(dir + "/" + pages[0]).find(name), std::string::npos);  // the page names it all
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

TEST(IrDump, ChangedNodesAreTheAddedRemovedAndRewiredOnes) {
  auto g = std::make_shared<FuncGraph>("f");
  auto x = g->add_parameter(DType::kFloat32, {3}, "x");
  auto y = g->add_parameter(DType::kFloat32, {3}, "y");
  auto neg = g->add_cnode("Neg", {y});
  auto add_node = g->add_cnode("Add", {x, neg});
  auto keep = g->add_cnode("Mul", {x, y});
  auto user = g->add_cnode("Exp", {add_node});
  g->set_outputs({user, keep});
  const FuncGraphPtr before = ir::parse(ir::print(*g));
  EXPECT_TRUE(jit_detail::changed_nodes(*before, *g).empty());
  auto sub = g->add_cnode("Sub", {x, y});
  g->replace_all_uses_with(add_node, sub);
  g->erase(add_node);
  g->erase(neg);
  // Sub added, Add and Neg removed, Exp rewired; Mul, the parameters and the return unchanged.
  EXPECT_EQ(jit_detail::changed_nodes(*before, *g),
            (ir::NodeIdSet{sub->id(), add_node->id(), neg->id(), user->id()}));
  g->set_outputs({user});
  EXPECT_EQ(jit_detail::changed_nodes(*before, *g).count(Node::kReturnId), 1u);
  // A primitive edited in place counts too.
  const FuncGraphPtr again = ir::parse(ir::print(*g));
  user->set_primitive(std::make_shared<Primitive>("Sin"));
  EXPECT_EQ(jit_detail::changed_nodes(*again, *g), ir::NodeIdSet{user->id()});
}

TEST(IrDump, WritesEachPassThatChangedTheGraphBeforeAndAfter) {
  const std::string dir = temp_dir("pass");
  compile_add_neg(dir, "DumpTestAddNegPass");
  const std::string before = find_file(dir, "_pre_fusion.DumpTestAddNegPass.before.kir");
  const std::string after = find_file(dir, "_pre_fusion.DumpTestAddNegPass.after.kir");
  ASSERT_FALSE(before.empty());
  ASSERT_FALSE(after.empty());
  EXPECT_TRUE(contains(before, "add_neg.")) << before;
  const std::string before_text = read(dir + "/" + before);
  const std::string after_text = read(dir + "/" + after);
  EXPECT_TRUE(contains(before_text, "Neg(") && contains(before_text, "Add(")) << before_text;
  EXPECT_TRUE(contains(after_text, "Sub(") && !contains(after_text, "Neg(")) << after_text;
  EXPECT_EQ(ir::print(*ir::parse(after_text)), after_text);
  // The DOT files highlight what changed: Neg and Add before, Sub and the return after.
  const std::string stem = before.substr(0, before.size() - 4);
  const std::string before_dot = read(dir + "/" + stem + ".dot");
  const std::string after_dot =
      read(dir + "/" + after.substr(0, after.size() - 4) + ".dot");
  EXPECT_EQ(highlighted_ops(before_dot), (std::vector<std::string>{"Neg", "Add"})) << before_dot;
  EXPECT_EQ(highlighted_ops(after_dot), std::vector<std::string>{"Sub"}) << after_dot;
  EXPECT_TRUE(contains(after_dot, "ret [shape=doublecircle, label=\"return\", style=filled"))
      << after_dot;
  if (ir::graphviz_available()) {
    EXPECT_TRUE(contains(read(dir + "/" + stem + ".svg"), "#ffd54f"));
  }
  // The page: every step, the pass with its stage and match count, the changed node ids.
  const std::vector<std::string> pages = compilation_pages(dir);
  ASSERT_EQ(pages.size(), 1u);
  EXPECT_TRUE(contains(before, pages[0].substr(0, pages[0].size() - 4))) << pages[0];
  const std::string page = read(dir + "/" + pages[0]);
  EXPECT_TRUE(contains(page, "\"title\":\"traced\"")) << page;
  EXPECT_TRUE(contains(page, "\"name\":\"DumpTestAddNegPass\"")) << page;
  EXPECT_TRUE(contains(page, "\"stage\":\"pre_fusion\"")) << page;
  EXPECT_TRUE(contains(page, "\"matches\":1,")) << page;
  EXPECT_TRUE(contains(page, "\"title\":\"kiln_cpu\"")) << page;
  EXPECT_TRUE(contains(page, "\"highlight\":[\"2\",\"3\",\"4\",\"ret\"]")) << page;
  EXPECT_TRUE(contains(read(dir + "/index.html"), ".html\">add_neg.")) << read(dir + "/index.html");
  std::filesystem::remove_all(dir);
}

TEST(IrDump, WritesNothingWhenDumpingIsOff) {
  ::unsetenv("KILN_DUMP_IR");
  const std::string dir = temp_dir("off");
  std::filesystem::create_directories(dir);
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);  // where a relative path would land
  {
    jit_detail::IrDump dump(jit_detail::dump_dir(""), "f");
    EXPECT_FALSE(dump.enabled());
    auto g = std::make_shared<FuncGraph>("f");
    g->set_output(g->add_parameter(DType::kFloat32, {1}));
    dump.write("traced", *g);
    compile_add_neg("", "DumpTestOffPass");
  }
  std::filesystem::current_path(cwd);
  EXPECT_TRUE(files_in(dir).empty());
  std::filesystem::remove_all(dir);
}

// Chromium's path, or "" when it is not installed (scripts/install-deps.sh installs it).
std::string find_chromium() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    for (const char* name : {"chromium", "chromium-browser"}) {
      const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return {};
}

size_t count(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

TEST(IrDump, ThePageStepsThroughThePassesInHeadlessChromium) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    GTEST_SKIP() << "chromium is not installed (Debian package chromium; scripts/install-deps.sh "
                    "installs it), so the dump page cannot be loaded";
  }
  const std::string dir = temp_dir("chromium");
  compile_add_neg(dir, "DumpTestChromiumPass");
  const std::vector<std::string> pages = compilation_pages(dir);
  ASSERT_EQ(pages.size(), 1u);
  // The DOM after the page's script ran (a URL fragment selects a step).
  const auto dom = [&](const std::string& url) {
    const std::string out = dir + "/dom.html";
    const std::string command = "timeout 120 '" + chromium +
                                "' --headless --no-sandbox --disable-gpu --user-data-dir='" + dir +
                                "/profile' --dump-dom 'file://" + dir + "/" + url + "' > '" + out +
                                "' 2> '" + dir + "/chromium.log'";
    EXPECT_EQ(std::system(command.c_str()), 0) << command << "\n" << read(dir + "/chromium.log");
    return read(out);
  };
  const bool svg = ir::graphviz_available();

  // Step 1, the traced graph. The list holds every step: traced, the pass, the backend's graph,
  // and the passes that changed nothing (the built-in ones here), listed but not stepped to.
  const std::string first = dom(pages[0]);
  EXPECT_TRUE(contains(first, "<ol id=\"steps\">")) << first;
  const size_t unchanged = count(first, "<li class=\"step unchanged\"");
  size_t other_passes = 0;  // those that ran beside the test's pass, now unregistered
  for (const PassInfo& info : list_passes()) {
    other_passes += info.backend == "all" || info.backend == "kiln_cpu";
  }
  EXPECT_EQ(unchanged, other_passes) << first;
  EXPECT_EQ(count(first, "<li class=\"step") - unchanged, 3u) << first;
  EXPECT_TRUE(contains(first, "DumpTestChromiumPass")) << first;
  EXPECT_TRUE(contains(first, "<span id=\"counter\">step 1 of 3</span>")) << first;
  EXPECT_TRUE(contains(first, "<main id=\"view\" data-step=\"1\">")) << first;
  EXPECT_TRUE(contains(first, "<h2>traced</h2>")) << first;
  if (svg) {  // the SVG beside the page, loaded
    const std::vector<std::string> images = tags(first, "<img class=\"graph\"");
    ASSERT_EQ(images.size(), 1u) << first;
    EXPECT_TRUE(contains(images[0], "00_traced.svg\"")) << images[0];
    EXPECT_TRUE(contains(images[0], "data-loaded=\"1\"")) << images[0];
  } else {
    EXPECT_TRUE(contains(first, "<pre class=\"ir\">")) << first;
  }
  // Step 2: the pass, before and after side by side, the changed nodes marked.
  const std::string second = dom(pages[0] + "#2");
  EXPECT_TRUE(contains(second, "<span id=\"counter\">step 2 of 3</span>")) << second;
  EXPECT_TRUE(contains(second, "<h2>pre_fusion · DumpTestChromiumPass</h2>")) << second;
  EXPECT_TRUE(contains(second, "<h3>before</h3>") && contains(second, "<h3>after</h3>")) << second;
  EXPECT_TRUE(contains(second, "1 match, ")) << second;
  // The marked IR lines, by op: Neg, Add and the return before; Sub and the return after.
  std::vector<std::string> marked;
  for (const std::string& line : tags(second, "<mark>")) {  // "<mark>  %3 = Add(%0, %2) : ..."
    const size_t op = line.find(" = ");
    marked.push_back(op == std::string::npos ? line.substr(8, 6)
                                             : line.substr(op + 3, line.find('(') - op - 3));
  }
  EXPECT_EQ(marked, (std::vector<std::string>{"Neg", "Add", "return", "Sub", "return"}))
      << second;
  if (svg) {
    EXPECT_EQ(count(second, "data-loaded=\"1\""), 2u) << second;
    EXPECT_TRUE(contains(second, ".before.svg")) << second;
  }
  // The folder's index links to the page.
  const std::string index = dom("index.html");
  EXPECT_TRUE(contains(index, "<a href=\"" + pages[0] + "\">")) << index;
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
