// Registering passes for the jit: register_custom_pass with DESIGN.md's seed plugin and each
// failure it names, register_pass, unregister_custom_pass, list_passes' order, passes taking
// effect for later builds on their backend only, cache invalidation per backend, the pass report,
// the optimized graph, and debug mode naming a pass that breaks the graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <tuple>

#include "jit/jit_testing.h"
#include "kiln/jit.h"
#include "../pass/pass_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::BreakingPass;
using testing::expect_error;
using testing::NamedPass;
using testing::expect_same_values;
using testing::random_input;

std::string plugin_path(const std::string& name) {
  return std::string(KILN_TEST_PLUGIN_DIR) + "/lib" + name + ".so";
}

const std::string kSeedPlugin = plugin_path("my_passes");

// Unregisters the passes it names when the test ends, passed or failed (the registry is
// process-wide and other tests share it).
class Unregister {
 public:
  explicit Unregister(std::vector<std::string> names) : names_(std::move(names)) {}
  ~Unregister() {
    for (const std::string& name : names_) {
      try {
        unregister_custom_pass(name);
      } catch (const Error&) {  // NOLINT: the test already unregistered it
      }
    }
  }

 private:
  std::vector<std::string> names_;
};

std::vector<std::string> registered_names() {
  std::vector<std::string> names;
  for (const PassInfo& info : list_passes()) names.push_back(info.name);
  return names;
}

const PassInfo* find_info(const std::vector<PassInfo>& infos, const std::string& name) {
  for (const PassInfo& info : infos) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

JitOptions on(const std::string& backend) {
  JitOptions options;
  options.backend = backend;
  return options;
}

// x + neg(y): what the seed pass rewrites to x - y.
std::vector<Tensor> add_neg(const std::vector<Tensor>& in) { return {add(in[0], neg(in[1]))}; }

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(RegisterCustomPass, SeedPluginRewritesAddNegToSubOnItsBackendOnly) {
  register_custom_pass("AddNegFusionPass", kSeedPlugin, "reference");
  Unregister cleanup({"AddNegFusionPass"});
  const std::vector<PassInfo> infos = list_passes();
  const PassInfo* info = find_info(infos, "AddNegFusionPass");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->backend, "reference");
  EXPECT_EQ(info->stage, PassStage::kPreFusion);
  EXPECT_EQ(info->priority, 0);
  EXPECT_EQ(info->source, kSeedPlugin);
  EXPECT_FALSE(info->builtin);

  std::mt19937 rng(3);
  const std::vector<Tensor> in{random_input(rng, {2, 3}), random_input(rng, {3})};
  JitFunction on_reference = jit(add_neg, on("reference"), "add_neg");
  const std::string rewritten = on_reference.optimized_graph(in);
  EXPECT_TRUE(contains(rewritten, "Sub(")) << rewritten;
  EXPECT_FALSE(contains(rewritten, "Neg(")) << rewritten;
  EXPECT_TRUE(contains(on_reference.graph(in), "Neg(")) << "graph() is the traced graph";
  // optimized_graph alone fills the report (it was empty until a call built the graph).
  EXPECT_TRUE(contains(on_reference.pass_report().str(), "AddNegFusionPass"));
  expect_same_values(on_reference(in)[0], add_neg(in)[0]);
  const PassReport report = on_reference.pass_report();
  const auto run = std::find_if(report.runs.begin(), report.runs.end(), [](const PassRunRecord& r) {
    return r.pass == "AddNegFusionPass";
  });
  ASSERT_NE(run, report.runs.end()) << report.str();
  EXPECT_TRUE(run->changed);
  EXPECT_EQ(run->matches, 1u);
  EXPECT_EQ(run->stage, PassStage::kPreFusion);
  EXPECT_TRUE(contains(report.str(), "AddNegFusionPass")) << report.str();

  // A pass for "reference" does not touch a kiln_cpu build.
  JitFunction on_cpu = jit(add_neg, on("kiln_cpu"), "add_neg");
  const std::string untouched = on_cpu.optimized_graph(in);
  EXPECT_TRUE(contains(untouched, "Neg(")) << untouched;
  EXPECT_FALSE(contains(untouched, "Sub(")) << untouched;
  expect_same_values(on_cpu(in)[0], add_neg(in)[0]);
  for (const PassRunRecord& r : on_cpu.pass_report().runs) EXPECT_NE(r.pass, "AddNegFusionPass");
}

TEST(RegisterCustomPass, EachFailureSaysWhatWentWrong) {
  const std::vector<std::string> before = registered_names();
  const std::string missing = plugin_path("no_such_pass_plugin");
  expect_error([&] { register_custom_pass("AddNegFusionPass", missing); }, ErrorKind::kValue,
               "cannot load pass plugin " + missing + ": no such file");
  const std::string text = ::testing::TempDir() + "kiln_not_a_pass_plugin.so";
  std::ofstream(text) << "not a library";
  expect_error([&] { register_custom_pass("AddNegFusionPass", text); }, ErrorKind::kValue,
               "not a shared library");
  std::remove(text.c_str());
  // A backend plugin: no pass entry point.
  expect_error([] { register_custom_pass("AddNegFusionPass", plugin_path("good_backend")); },
               ErrorKind::kValue, "it has no entry point kiln_plugin_pass_entry");
  expect_error(
      [] { register_custom_pass("AddNegFusionPass", plugin_path("backend_kind_pass_plugin")); },
      ErrorKind::kValue, "expected a plugin of kind 'pass', got one of kind 'backend'");
  const Error abi = testing::error_of(
      [] { register_custom_pass("AddNegFusionPass", plugin_path("abi_mismatch_pass_plugin")); });
  EXPECT_TRUE(contains(abi.what(),
                       "built against Kiln ABI version " + std::to_string(KILN_ABI_VERSION + 1)))
      << abi.what();
  EXPECT_TRUE(contains(abi.what(), "this Kiln has ABI version " + std::to_string(KILN_ABI_VERSION)))
      << abi.what();
  expect_error([] { register_custom_pass("NoSuchPass", kSeedPlugin); }, ErrorKind::kValue,
               "pass plugin " + kSeedPlugin +
                   " ('my_passes') has no pass named 'NoSuchPass'; its passes: "
                   "'AddNegFusionPass'");
  expect_error([] { register_custom_pass("AddNegFusionPass", kSeedPlugin, "all", "middle"); },
               ErrorKind::kValue, "unknown pass stage 'middle'; the stages are frontend");
  expect_error([] { register_custom_pass("AddNegFusionPass", kSeedPlugin, "no_such_backend"); },
               ErrorKind::kValue,
               "for the unknown backend 'no_such_backend'; registered backends:");
  EXPECT_EQ(registered_names(), before);  // nothing was half registered

  register_custom_pass("AddNegFusionPass", kSeedPlugin, "kiln_cpu", "fusion");
  Unregister cleanup({"AddNegFusionPass"});
  expect_error([] { register_custom_pass("AddNegFusionPass", kSeedPlugin, "reference"); },
               ErrorKind::kValue,
               "pass 'AddNegFusionPass' is already registered (for backend 'kiln_cpu', stage "
               "fusion); unregister it first");
}

TEST(UnregisterCustomPass, RemovesThePassAndListsRegisteredNamesForAnUnknownOne) {
  std::vector<std::string> log;
  register_pass(std::make_shared<NamedPass>("Probe", &log), "reference");
  Unregister cleanup({"Probe"});
  expect_error([] { unregister_custom_pass("NoSuchPass"); }, ErrorKind::kValue,
               "no pass named 'NoSuchPass' is registered; registered passes: ");
  expect_error([] { unregister_custom_pass("NoSuchPass"); }, ErrorKind::kValue, "'Probe'");
  JitFunction f = jit(add_neg, on("reference"), "add_neg");
  std::mt19937 rng(1);
  f({random_input(rng, {2}), random_input(rng, {2})});
  EXPECT_EQ(log, std::vector<std::string>{"Probe"});
  unregister_custom_pass("Probe");
  EXPECT_EQ(find_info(list_passes(), "Probe"), nullptr);
  f({random_input(rng, {2}), random_input(rng, {2})});  // rebuilt without it
  EXPECT_EQ(f.cache_info().misses, 2u);
  EXPECT_EQ(log, std::vector<std::string>{"Probe"});
  expect_error([] { unregister_custom_pass("Probe"); }, ErrorKind::kValue,
               "no pass named 'Probe' is registered");
}

TEST(ListPasses, RunOrderIsStageThenPriorityThenRegistration) {
  std::vector<std::string> log;
  const std::vector<std::tuple<std::string, std::string, int>> passes{
      {"T_post", "post_fusion", 0}, {"T_pre_late", "pre_fusion", 5}, {"T_pre_a", "pre_fusion", 0},
      {"T_front", "frontend", 100}, {"T_pre_b", "pre_fusion", 0},    {"T_fusion", "fusion", -3}};
  std::vector<std::string> names;
  for (const auto& [name, stage, priority] : passes) {
    register_pass(std::make_shared<NamedPass>(name, &log), "reference", stage, priority);
    names.push_back(name);
  }
  Unregister cleanup(names);
  const std::vector<std::string> order{"T_front",    "T_pre_a",  "T_pre_b",
                                       "T_pre_late", "T_fusion", "T_post"};
  std::vector<std::string> listed;
  for (const std::string& name : registered_names()) {
    if (name.rfind("T_", 0) == 0) listed.push_back(name);
  }
  EXPECT_EQ(listed, order);
  std::mt19937 rng(2);
  jit(add_neg, on("reference"), "add_neg")({random_input(rng, {2}), random_input(rng, {2})});
  EXPECT_EQ(log, order);
  const std::vector<PassInfo> infos = list_passes();
  const PassInfo* front = find_info(infos, "T_front");
  ASSERT_NE(front, nullptr);
  EXPECT_EQ(front->stage, PassStage::kFrontend);
  EXPECT_EQ(front->priority, 100);
  EXPECT_EQ(front->source, "");  // registered in-process
}

TEST(RegisterCustomPass, ChangingRegistrationsRebuildsOnlyTheAffectedBackends) {
  std::mt19937 rng(4);
  const std::vector<Tensor> in{random_input(rng, {3}), random_input(rng, {3})};
  JitFunction on_reference = jit(add_neg, on("reference"), "add_neg");
  JitFunction on_cpu = jit(add_neg, on("kiln_cpu"), "add_neg");
  const auto call_both = [&] {
    expect_same_values(on_reference(in)[0], add_neg(in)[0]);
    expect_same_values(on_cpu(in)[0], add_neg(in)[0]);
  };
  call_both();
  call_both();
  EXPECT_EQ(on_reference.cache_info().misses, 1u);
  EXPECT_EQ(on_cpu.cache_info().misses, 1u);

  register_custom_pass("AddNegFusionPass", kSeedPlugin, "reference");
  Unregister cleanup({"AddNegFusionPass"});
  call_both();
  EXPECT_EQ(on_reference.cache_info().misses, 2u);  // built again, now with the pass
  EXPECT_EQ(on_cpu.cache_info().misses, 1u);        // another backend: still current
  EXPECT_EQ(on_cpu.cache_info().hits, 2u);

  unregister_custom_pass("AddNegFusionPass");
  call_both();
  EXPECT_EQ(on_reference.cache_info().misses, 3u);
  EXPECT_EQ(on_cpu.cache_info().misses, 1u);

  register_custom_pass("AddNegFusionPass", kSeedPlugin, "all");  // every backend
  call_both();
  EXPECT_EQ(on_reference.cache_info().misses, 4u);
  EXPECT_EQ(on_cpu.cache_info().misses, 2u);
  EXPECT_TRUE(contains(on_cpu.optimized_graph(in), "Sub(")) << on_cpu.optimized_graph(in);
}

TEST(RegisterCustomPass, JitLevelO0SkipsOnlyBuiltInPasses) {
  register_custom_pass("AddNegFusionPass", kSeedPlugin, "reference");
  Unregister cleanup({"AddNegFusionPass"});
  JitOptions options = on("reference");
  options.jit_level = "O0";
  std::mt19937 rng(5);
  const std::string ir = jit(add_neg, options, "add_neg")
                             .optimized_graph({random_input(rng, {2}), random_input(rng, {2})});
  EXPECT_TRUE(contains(ir, "Sub(")) << ir;
}

TEST(RegisterPass, SameRulesAsPluginPasses) {
  std::vector<std::string> log;
  expect_error([] { register_pass(nullptr); }, ErrorKind::kValue, "the pass is null");
  expect_error([&] { register_pass(std::make_shared<NamedPass>("P", &log), "nope"); },
               ErrorKind::kValue, "unknown backend 'nope'");
  expect_error([&] { register_pass(std::make_shared<NamedPass>("P", &log), "all", "late"); },
               ErrorKind::kValue, "unknown pass stage 'late'");
  register_pass(std::make_shared<NamedPass>("P", &log));
  Unregister cleanup({"P"});
  expect_error([&] { register_pass(std::make_shared<NamedPass>("P", &log)); }, ErrorKind::kValue,
               "pass 'P' is already registered");
  EXPECT_EQ(PassRegistry::Instance().get("P")->name(), "P");
  expect_error([] { PassRegistry::Instance().get("Q"); }, ErrorKind::kValue,
               "no pass named 'Q' is registered; registered passes: ");
}

// A pass that drops the graph's last output.
class DropLastOutput : public Pass {
 public:
  DropLastOutput() : Pass("DropLastOutput") {}
  bool Run(const FuncGraphPtr& g) override {
    std::vector<NodePtr> outputs(g->outputs().begin(), g->outputs().end() - 1);
    g->set_outputs(outputs);
    return true;
  }
};

TEST(RegisterPass, APassThatChangesTheOutputsIsAClearError) {
  register_pass(std::make_shared<DropLastOutput>(), "all");
  Unregister cleanup({"DropLastOutput"});
  std::mt19937 rng(5);
  const std::vector<Tensor> in{random_input(rng, {3}), random_input(rng, {3})};
  for (const char* backend : {"reference", "kiln_cpu"}) {
    JitFunction f = jit(
        [](const std::vector<Tensor>& x) {
          return std::vector<Tensor>{mul(x[0], x[1]), add(x[0], x[1])};
        },
        on(backend), "two_outputs");
    expect_error([&] { f(in); }, ErrorKind::kValue,
                 "the passes changed the number of outputs of graph \"two_outputs\" (from 2 to 1)");
  }
}

// Sets an environment variable for one scope (restoring what was there).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

TEST(JitDebug, NamesThePassThatBrokeTheGraph) {
  register_pass(std::make_shared<BreakingPass>(), "reference", "fusion");
  Unregister cleanup({"Breaker"});
  std::mt19937 rng(6);
  const std::vector<Tensor> in{random_input(rng, {3}), random_input(rng, {3})};
  JitOptions options = on("reference");
  options.debug = true;
  {
    ScopedEnv env("KILN_DEBUG", nullptr);
    expect_error([&] { jit(add_neg, options, "add_neg")(in); }, ErrorKind::kDType,
                 "pass 'Breaker' (stage fusion) left graph \"add_neg\" broken");
    expect_error([&] { jit(add_neg, options, "add_neg").optimized_graph(in); }, ErrorKind::kDType,
                 "pass 'Breaker' (stage fusion) left graph");
    // Without debug mode the broken graph is not blamed on the pass, but the error says which of
    // the user's passes ran unverified and how to find the one that broke it.
    const Error e = testing::error_of([&] { jit(add_neg, on("reference"), "add_neg")(in); });
    EXPECT_FALSE(contains(e.what(), "pass 'Breaker'")) << e.what();
    EXPECT_TRUE(contains(e.what(),
                         "the graph no longer verifies after your passes ('Breaker') changed it "
                         "unverified: kiln.jit(..., debug=True) or KILN_DEBUG=1 verifies it"))
        << e.what();
    // A failure that is not the passes' (an unknown backend) gets no such hint.
    const Error unknown = testing::error_of([&] { jit(add_neg, on("no_such_backend"), "f")(in); });
    EXPECT_FALSE(contains(unknown.what(), "your passes")) << unknown.what();
  }
  ScopedEnv env("KILN_DEBUG", "1");  // the environment turns it on too
  expect_error([&] { jit(add_neg, on("reference"), "add_neg")(in); }, ErrorKind::kDType,
               "pass 'Breaker' (stage fusion) left graph");
}

}  // namespace
}  // namespace kiln
