// BackendManager: registration, lookup, delegation, errors from backends, and plugin loading with
// each failure it names.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "kiln/backend.h"
#include "kiln/functional.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_error;

std::string plugin_path(const char* name) {
  return std::string(KILN_TEST_PLUGIN_DIR) + "/lib" + name + ".so";
}

// f(x, y) = exp(x) + y
FuncGraphPtr sample_graph() {
  auto g = std::make_shared<FuncGraph>("sample");
  auto x = g->add_parameter(DType::kFloat32, {3}, "x");
  auto y = g->add_parameter(DType::kFloat32, {3}, "y");
  g->set_output(g->add_cnode("Add", {g->add_cnode("Exp", {x}), y}));
  return g;
}

Tensor filled(std::initializer_list<float> values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

// A backend that counts its calls and delegates everything to "reference".
class CountingBackend : public BackendBase {
 public:
  static inline int builds = 0;
  static inline int runs = 0;
  BackendGraphId Build(const FuncGraphPtr& g, const BackendJitConfig& c) override {
    ++builds;
    return BackendManager::Instance().Build(g, c, "reference");
  }
  RunningStatus Run(BackendGraphId id, const std::vector<Tensor>& in,
                    std::vector<Tensor>* out) override {
    ++runs;
    BackendManager::Instance().Run("reference", id, in, out);
    return RunningStatus::kRunningSuccess;
  }
};

template <typename F>
class LambdaBackend : public BackendBase {
 public:
  explicit LambdaBackend(F run) : run_(run) {}
  BackendGraphId Build(const FuncGraphPtr&, const BackendJitConfig&) override { return 7; }
  RunningStatus Run(BackendGraphId, const std::vector<Tensor>&, std::vector<Tensor>*) override {
    return run_();
  }

 private:
  F run_;
};

template <typename F>
BackendRegistration register_lambda(const std::string& name, F run) {
  return BackendManager::Instance().Register(
      name, [run] { return std::make_unique<LambdaBackend<F>>(run); });
}

TEST(BackendManager, ListsGetsAndUnregisters) {
  BackendManager& m = BackendManager::Instance();
  EXPECT_NE(m.Find("reference"), nullptr);
  int made = 0;
  {
    BackendRegistration reg = m.Register("test_listed", [&made] {
      ++made;
      return std::make_unique<CountingBackend>();
    });
    EXPECT_EQ(made, 0);  // made on first use
    const std::vector<std::string> names = m.List();
    EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
    EXPECT_NE(std::find(names.begin(), names.end(), "test_listed"), names.end());
    EXPECT_EQ(m.Get("test_listed"), m.Get("test_listed"));
    EXPECT_EQ(made, 1);
    expect_error(
        [&] { m.Register("test_listed", [] { return std::make_unique<CountingBackend>(); }); },
        ErrorKind::kValue, "backend 'test_listed' is already registered");
  }
  EXPECT_EQ(m.Find("test_listed"), nullptr);
  expect_error([&] { m.Get("test_listed"); }, ErrorKind::kValue,
               "unknown backend 'test_listed'; registered backends: ");
  expect_error([&] { m.Get("nope"); }, ErrorKind::kValue, "reference");
  EXPECT_EQ(list_backends(), m.List());
}

TEST(BackendManager, NamesABackendWhoseConstructorFails_AndTriesAgain) {
  BackendManager& m = BackendManager::Instance();
  int attempts = 0;
  BackendRegistration reg = m.Register("test_ctor_throws", [&attempts] {
    if (++attempts == 1) throw std::runtime_error("ctor exploded");
    return std::make_unique<CountingBackend>();
  });
  expect_error([&] { m.Get("test_ctor_throws"); }, ErrorKind::kGeneric,
               "ctor exploded\n  while making backend 'test_ctor_throws'");
  EXPECT_NE(m.Get("test_ctor_throws"), nullptr);  // made at the next use
  EXPECT_EQ(attempts, 2);
}

TEST(BackendManager, OptionalHooksHaveDefaults) {
  auto reg = register_lambda("test_defaults", [] { return RunningStatus::kRunningSuccess; });
  BackendBase* b = BackendManager::Instance().Get("test_defaults");
  auto g = sample_graph();
  EXPECT_TRUE(b->Supports(std::static_pointer_cast<CNode>(g->outputs()[0])));
  const BackendGraphId id = BackendManager::Instance().Build(g, {}, "test_defaults");
  BackendManager::Instance().ClearGraph("test_defaults", id);  // default ClearGraph: nothing
  b->Clear();
  const BackendJitConfig config;
  EXPECT_EQ(config.jit_level, "O1");
  EXPECT_TRUE(config.options.empty());
}

TEST(BackendManager, DelegatesToAnotherBackend) {
  BackendRegistration reg = BackendManager::Instance().Register(
      "test_counting", [] { return std::make_unique<CountingBackend>(); });
  BackendJitConfig config;
  config.backend = "test_counting";
  const BackendGraphId id =
      BackendManager::Instance().Build(sample_graph(), config, "test_counting");
  std::vector<Tensor> out;
  BackendManager::Instance().Run("test_counting", id, {filled({0, 1, 2}), filled({1, 1, 1})}, &out);
  ASSERT_EQ(out.size(), 1u);
  const Tensor expected = add(exp(filled({0, 1, 2})), filled({1, 1, 1}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[0].data<float>()[i], expected.data<float>()[i]);
  EXPECT_EQ(CountingBackend::builds, 1);
  EXPECT_EQ(CountingBackend::runs, 1);
}

// Note [Backends read contiguous inputs]: a view reaches a custom backend as a dense copy, with
// the view's values; a contiguous input reaches it as it is.
TEST(BackendManager, CustomBackendsGetContiguousInputs) {
  class Recording : public BackendBase {
   public:
    explicit Recording(std::vector<std::vector<float>>* seen) : seen_(seen) {}
    BackendGraphId Build(const FuncGraphPtr&, const BackendJitConfig&) override { return 1; }
    RunningStatus Run(BackendGraphId, const std::vector<Tensor>& in,
                      std::vector<Tensor>* out) override {
      for (const Tensor& t : in) {
        EXPECT_TRUE(t.is_contiguous());
        seen_->emplace_back(t.data<float>(), t.data<float>() + t.numel());  // read flat
      }
      *out = in;
      return RunningStatus::kRunningSuccess;
    }

   private:
    std::vector<std::vector<float>>* seen_;
  };
  std::vector<std::vector<float>> seen;
  BackendRegistration recording = BackendManager::Instance().Register(
      "test_recording", [&seen] { return std::make_unique<Recording>(&seen); });
  Tensor m = Tensor::empty({2, 3});
  for (int i = 0; i < 6; ++i) m.data<float>()[i] = static_cast<float>(i);
  std::vector<Tensor> out;
  BackendManager::Instance().Run("test_recording", 1, {m.transpose(0, 1), m}, &out);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(seen[1], (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(out[1].data_ptr(), m.data_ptr());  // a contiguous input is passed as it is
}

TEST(BackendManager, NamesBackendAndGraphWhenRunFails) {
  BackendManager& m = BackendManager::Instance();
  auto failing = register_lambda("test_failing", [] { return RunningStatus::kRunningFailure; });
  auto throwing = register_lambda(
      "test_throwing", []() -> RunningStatus { throw std::runtime_error("device lost"); });
  auto kiln_error = register_lambda("test_kiln_error", []() -> RunningStatus {
    KILN_FAIL(kShape) << "bad shape inside the backend";
  });
  const BackendGraphId f = m.Build(sample_graph(), {}, "test_failing");
  const BackendGraphId t = m.Build(sample_graph(), {}, "test_throwing");
  const BackendGraphId k = m.Build(sample_graph(), {}, "test_kiln_error");
  std::vector<Tensor> out;
  expect_error([&] { m.Run("test_failing", f, {}, &out); }, ErrorKind::kGeneric,
               "backend 'test_failing' failed running graph \"sample\" (id 7): Run returned "
               "kRunningFailure");
  expect_error([&] { m.Run("test_throwing", t, {}, &out); }, ErrorKind::kGeneric,
               "backend 'test_throwing' failed running graph \"sample\" (id 7): device lost");
  const Error e = testing::error_of([&] { m.Run("test_kiln_error", k, {}, &out); });
  EXPECT_EQ(e.kind(), ErrorKind::kShape);
  EXPECT_NE(std::string(e.what()).find("in backend 'test_kiln_error' running graph \"sample\""),
            std::string::npos)
      << e.what();
  // The process stays usable.
  const BackendGraphId r = m.Build(sample_graph(), {}, "reference");
  m.Run("reference", r, {filled({0, 0, 0}), filled({1, 2, 3})}, &out);
  EXPECT_EQ(out[0].data<float>()[2], 4.0f);
}

TEST(BackendManager, NamesBackendAndGraphWhenBuildFails) {
  auto g = sample_graph();
  g->outputs()[0]->set_abstract(Abstract(DType::kFloat64, {3}));  // the reference verifies
  expect_error([&] { BackendManager::Instance().Build(g, {}, "reference"); }, ErrorKind::kDType,
               "in backend 'reference' building graph \"sample\"");
}

TEST(RegisterCustomBackend, LoadsAPluginAndRunsIt) {
  register_custom_backend("test_elementwise_backend", plugin_path("good_backend"));
  BackendBase* b = BackendManager::Instance().Get("test_elementwise_backend");
  auto g = sample_graph();
  const auto& add = std::static_pointer_cast<CNode>(g->outputs()[0]);
  EXPECT_TRUE(b->Supports(add));
  auto sum = g->add_cnode("ReduceSum", {add});
  EXPECT_FALSE(b->Supports(sum));  // the plugin's own rule: it is the plugin's code that runs
  const BackendGraphId id = BackendManager::Instance().Build(g, {}, "test_elementwise_backend");
  std::vector<Tensor> out;
  BackendManager::Instance().Run("test_elementwise_backend", id,
                                 {filled({0, 0, 0}), filled({1, 2, 3})}, &out);
  EXPECT_EQ(out[0].data<float>()[1], 3.0f);
  // The library's other backend loads from the same file; the first cannot be loaded twice.
  register_custom_backend("test_second_backend", plugin_path("good_backend"));
  EXPECT_TRUE(BackendManager::Instance().Get("test_second_backend")->Supports(sum));
  expect_error(
      [] { register_custom_backend("test_elementwise_backend", plugin_path("good_backend")); },
      ErrorKind::kValue, "backend 'test_elementwise_backend' is already registered");
  // Unregistered, it may be registered again (from a rebuilt library, or the same one); a graph
  // built on the old registration is refused, not run on another instance.
  unregister_custom_backend("test_elementwise_backend");
  EXPECT_EQ(BackendManager::Instance().Find("test_elementwise_backend"), nullptr);
  register_custom_backend("test_elementwise_backend", plugin_path("good_backend"));
  const uint64_t old_registration = 1;  // any registration but the current one
  ASSERT_NE(BackendManager::Instance().RegistrationId("test_elementwise_backend"),
            old_registration);
  expect_error(
      [&] {
        BackendManager::Instance().Run("test_elementwise_backend", old_registration, id,
                                       {filled({0, 0, 0}), filled({1, 2, 3})}, &out);
      },
      ErrorKind::kValue, "was registered again after the graph was built");
}

TEST(RegisterCustomBackend, UnregisterRefusesWhatItDidNotRegister) {
  expect_error([] { unregister_custom_backend("reference"); }, ErrorKind::kValue,
               "unregister_custom_backend: 'reference' is not a backend register_custom_backend "
               "registered");
  expect_error([] { unregister_custom_backend("no_such_backend"); }, ErrorKind::kValue,
               "'no_such_backend' is no registered backend; registered: ");
}

TEST(RegisterCustomBackend, SaysWhichFailure) {
  expect_error([] { register_custom_backend("x", plugin_path("missing_backend")); },
               ErrorKind::kValue,
               "cannot load backend plugin " + plugin_path("missing_backend") + ": no such file");
  const std::string text = ::testing::TempDir() + "kiln_not_a_library.so";
  std::ofstream(text) << "not a library";
  expect_error([&] { register_custom_backend("x", text); }, ErrorKind::kValue,
               "not a shared library");
  std::remove(text.c_str());
  expect_error([] { register_custom_backend("x", plugin_path("no_entry_library")); },
               ErrorKind::kValue, "it has no entry point kiln_plugin_backend_entry");
  expect_error([] { register_custom_backend("x", plugin_path("abi_mismatch_backend")); },
               ErrorKind::kValue,
               "it was built against Kiln ABI version " + std::to_string(KILN_ABI_VERSION + 1));
  expect_error([] { register_custom_backend("x", plugin_path("empty_backend_plugin")); },
               ErrorKind::kValue, "it registers no backend");
  expect_error([] { register_custom_backend("other_name", plugin_path("good_backend")); },
               ErrorKind::kValue,
               "it registers 'test_elementwise_backend', 'test_second_backend', not 'other_name'");
  expect_error([] { register_custom_backend("reference", plugin_path("good_backend")); },
               ErrorKind::kValue,
               "it registers 'test_elementwise_backend', 'test_second_backend', not 'reference'");
  EXPECT_EQ(BackendManager::Instance().Find("other_name"), nullptr);
}

}  // namespace
}  // namespace kiln
