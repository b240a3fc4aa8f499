// kiln::jit over C++ callables (src/jit/jit.cc): results equal eager ones on every backend for
// random programs, the cache (hits, misses, constants in the key, a replaced op), options,
// nesting, and errors (unknown backend, a backend whose Run fails or throws).
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <stdexcept>

#include "jit/jit_testing.h"
#include "kiln/functional.h"
#include "kiln/jit.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_error;
using testing::expect_same_values;
using testing::RandomProgram;

JitOptions on(const std::string& backend) {
  JitOptions options;
  options.backend = backend;
  return options;
}

class JitOnEveryBackend : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { testing::register_jit_test_backends(); }
};

TEST_P(JitOnEveryBackend, RandomProgramsGiveTheEagerResults) {
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const RandomProgram program(seed, static_cast<int>(4 + seed % 25));
    JitFunction f = jit(program, on(GetParam()), "random");
    std::mt19937 rng(seed);
    for (int call = 0; call < 2; ++call) {  // a miss, then a hit on new values
      const std::vector<Tensor> inputs = program.inputs(rng);
      const std::vector<Tensor> want = program(inputs);
      const std::vector<Tensor> got = f(inputs);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) expect_same_values(got[i], want[i]);
      if (HasFailure()) return;
    }
    EXPECT_EQ(f.cache_info().misses, 1u);
    EXPECT_EQ(f.cache_info().hits, 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, JitOnEveryBackend,
                         ::testing::Values("reference", "kiln_cpu", "jit_plugin_backend",
                                           "jit_plugin_elementwise"));

TEST(Jit, CachesOneGraphPerSignature) {
  std::atomic<int> traces{0};
  JitFunction f = jit([&](const std::vector<Tensor>& in) {
    ++traces;
    return std::vector<Tensor>{sin(in[0]) * in[1]};
  });
  std::mt19937 rng(4);
  const auto call = [&](const Shape& a, const Shape& b) {
    f({testing::random_input(rng, a), testing::random_input(rng, b)});
  };
  call({2, 3}, {3});
  call({2, 3}, {3});
  call({2, 3}, {2, 3});  // another shape
  call({2, 3}, {3});
  f({testing::random_input(rng, {2, 3}), to(testing::random_input(rng, {3}), DType::kFloat64)});
  const JitCacheInfo info = f.cache_info();
  EXPECT_EQ(info.misses, 3u);
  EXPECT_EQ(info.hits, 2u);
  EXPECT_EQ(info.size, 3u);
  EXPECT_EQ(traces, 3);
  f.clear_cache();
  EXPECT_EQ(f.cache_info().size, 0u);
  call({2, 3}, {3});
  EXPECT_EQ(traces, 4);
}

TEST(Jit, TracesAgainWhenTheDefaultFloatDtypeChanges) {
  // An integer input's sqrt is of the default floating dtype, which the trace bakes in.
  JitFunction f =
      jit([](const std::vector<Tensor>& in) { return std::vector<Tensor>{sqrt(in[0])}; });
  const Tensor x = arange(0, 4);
  EXPECT_EQ(f({x})[0].dtype(), DType::kFloat32);
  set_default_float_dtype(DType::kFloat64);
  const Tensor under_float64 = f({x})[0];
  set_default_float_dtype(DType::kFloat32);
  EXPECT_EQ(under_float64.dtype(), DType::kFloat64);
  EXPECT_EQ(f({x})[0].dtype(), DType::kFloat32);
  EXPECT_EQ(f.cache_info().size, 2u);
}

TEST(Jit, WeakScalarInputsAreConstantsOfTheKey) {
  JitFunction f = jit([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] * in[1] + (in[2].defined() ? 1.0 : 0.0)};
  });
  std::mt19937 rng(8);
  const Tensor x = testing::random_input(rng, {4});
  for (double s : {2.0, 3.0, 2.0, -0.0, 0.0}) {
    const Tensor got = f({x, Tensor::scalar(s), Tensor()})[0];
    expect_same_values(got, x * s + 0.0);
  }
  expect_same_values(f({x, Tensor::scalar(int64_t{2}), Tensor()})[0], x * int64_t{2} + 0.0);
  expect_same_values(f({x, Tensor::scalar(2.0), x})[0], x * 2.0 + 1.0);
  const JitCacheInfo info = f.cache_info();
  EXPECT_EQ(info.misses, 6u);  // 2.0, 3.0, -0.0, 0.0, int 2, a tensor third input
  EXPECT_EQ(info.hits, 1u);
  EXPECT_NE(f.graph({x, Tensor::scalar(2.0), Tensor()}).find("const float64[] weak [2.0]"),
            std::string::npos);
}

TEST(Jit, ReturnsInputsConstantsAndRepeatedOutputs) {
  testing::register_jit_test_backends();
  const Tensor w = Tensor::empty({2});
  w.data<float>()[0] = 4.0f;
  w.data<float>()[1] = 5.0f;
  JitFunction f = jit([&](const std::vector<Tensor>& in) {
    const Tensor y = neg(in[0]);
    return std::vector<Tensor>{in[0], w, y, y};
  }, on("jit_plugin_elementwise"));
  std::mt19937 rng(1);
  const Tensor x = testing::random_input(rng, {2});
  const std::vector<Tensor> out = f({x});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].data_ptr(), x.data_ptr());
  expect_same_values(out[1], w);
  expect_same_values(out[2], neg(x));
  expect_same_values(out[3], neg(x));
}

TEST(Jit, ACallWhileTracingRunsInline) {
  JitFunction inner = jit([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{exp(in[0])};
  });
  JitFunction outer = jit([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{inner({in[0]})[0] + 1.0};
  });
  std::mt19937 rng(3);
  const Tensor x = testing::random_input(rng, {3});
  expect_same_values(outer({x})[0], exp(x) + 1.0);
  EXPECT_EQ(inner.cache_info().misses, 0u);  // never built: its ops are part of outer's graph
  EXPECT_NE(outer.graph({x}).find("Exp(%0)"), std::string::npos);
}

TEST(Jit, ChecksItsOptions) {
  const auto fn = [](const std::vector<Tensor>& in) { return in; };
  JitOptions options;
  options.capture_mode = "ast";
  expect_error([&] { jit(fn, options); }, ErrorKind::kValue, "capture_mode \"ast\"");
  options = {};
  options.jit_level = "O9";
  expect_error([&] { jit(fn, options); }, ErrorKind::kValue, "jit_level");
  options = {};
  options.dynamic = true;  // accepted (tests/cpp/jit/dynamic_test.cc)
  EXPECT_TRUE(jit(fn, options).options().dynamic);
  for (const char* builtin : {"kiln_cpu", "reference"}) {
    options = {};
    options.backend = builtin;
    options.options["tile"] = "64";
    expect_error(
        [&] { jit(fn, options); }, ErrorKind::kValue,
        "the built-in backend \"" + std::string(builtin) + "\" takes no options, got \"tile\"");
  }
}

TEST(Jit, AnUnknownBackendNamesTheRegisteredOnes) {
  JitFunction f = jit([](const std::vector<Tensor>& in) { return in; }, on("no_such_backend"));
  expect_error([&] { f({Tensor::empty({1})}); }, ErrorKind::kValue,
               "unknown backend 'no_such_backend'; registered backends: ");
  expect_error([&] { f({Tensor::empty({1})}); }, ErrorKind::kValue, "kiln_cpu, ");
}

// Builds through "reference"; Run fails as told.
class FailingBackend final : public BackendBase {
 public:
  enum class Mode { kStatus, kKilnError, kStdException };
  explicit FailingBackend(Mode mode) : mode_(mode) {}
  BackendGraphId Build(const FuncGraphPtr& g, const BackendJitConfig& c) override {
    return BackendManager::Instance().Get("reference")->Build(g, c);
  }
  RunningStatus Run(BackendGraphId, const std::vector<Tensor>&, std::vector<Tensor>*) override {
    if (mode_ == Mode::kStatus) return RunningStatus::kRunningFailure;
    KILN_CHECK_VALUE(mode_ != Mode::kKilnError) << "the device is on fire";
    throw std::runtime_error("out of widgets");
  }

 private:
  Mode mode_;
};

TEST(Jit, ABackendWhoseRunFailsRaisesNamingBackendAndGraph) {
  const auto registration = [](const char* name, FailingBackend::Mode mode) {
    return BackendManager::Instance().Register(
        name, [mode] { return std::make_unique<FailingBackend>(mode); });
  };
  BackendRegistration a = registration("jit_test_status", FailingBackend::Mode::kStatus);
  BackendRegistration b = registration("jit_test_error", FailingBackend::Mode::kKilnError);
  BackendRegistration c = registration("jit_test_throw", FailingBackend::Mode::kStdException);
  const auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{neg(in[0])}; };
  const Tensor x = Tensor::empty({2});
  expect_error([&] { jit(fn, on("jit_test_status"), "net")({x}); }, ErrorKind::kGeneric,
               "backend 'jit_test_status' failed running graph \"net\" (id ");
  expect_error([&] { jit(fn, on("jit_test_error"), "net")({x}); }, ErrorKind::kValue,
               "in backend 'jit_test_error' running graph \"net\"");
  const Error thrown = testing::error_of([&] { jit(fn, on("jit_test_throw"), "net")({x}); });
  EXPECT_NE(std::string(thrown.what()).find("backend 'jit_test_throw' failed running graph "
                                            "\"net\" (id "),
            std::string::npos)
      << thrown.what();
  EXPECT_NE(std::string(thrown.what()).find("out of widgets"), std::string::npos);
  // Nothing is left broken: the same function runs on a working backend.
  x.data<float>()[0] = 1.0f;
  x.data<float>()[1] = -2.0f;
  const Tensor y = jit(fn, on("reference"), "net")({x})[0];
  EXPECT_EQ(y.data<float>()[1], 2.0f);
}

// Builds through "reference"; Run hands back `outputs` undefined tensors.
class UndefinedOutputsBackend final : public BackendBase {
 public:
  explicit UndefinedOutputsBackend(size_t outputs) : outputs_(outputs) {}
  BackendGraphId Build(const FuncGraphPtr& g, const BackendJitConfig& c) override {
    return BackendManager::Instance().Get("reference")->Build(g, c);
  }
  RunningStatus Run(BackendGraphId, const std::vector<Tensor>&,
                    std::vector<Tensor>* outputs) override {
    outputs->assign(outputs_, Tensor());
    return RunningStatus::kRunningSuccess;
  }

 private:
  size_t outputs_;
};

TEST(Jit, ABackendThatReturnsTooFewOrUndefinedOutputsRaisesNamingIt) {
  BackendRegistration one = BackendManager::Instance().Register(
      "jit_test_undefined", [] { return std::make_unique<UndefinedOutputsBackend>(1); });
  BackendRegistration none = BackendManager::Instance().Register(
      "jit_test_no_outputs", [] { return std::make_unique<UndefinedOutputsBackend>(0); });
  const auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{neg(in[0])}; };
  const Tensor x = Tensor::empty({2});
  expect_error([&] { jit(fn, on("jit_test_undefined"), "net")({x}); }, ErrorKind::kGeneric,
               "backend 'jit_test_undefined' returned an undefined tensor as output 0 of graph "
               "\"net\"");
  expect_error([&] { jit(fn, on("jit_test_no_outputs"), "net")({x}); }, ErrorKind::kGeneric,
               "backend 'jit_test_no_outputs' returned 0 outputs for graph \"net\", which has 1");
}

// Build throws something that is no std::exception.
class BuildThrowsAnInt final : public BackendBase {
 public:
  BackendGraphId Build(const FuncGraphPtr&, const BackendJitConfig&) override { throw 42; }
  RunningStatus Run(BackendGraphId, const std::vector<Tensor>&, std::vector<Tensor>*) override {
    return RunningStatus::kRunningFailure;
  }
};

TEST(Jit, ABackendWhoseBuildThrowsAnythingRaisesNamingBackendAndGraph) {
  BackendRegistration registration = BackendManager::Instance().Register(
      "jit_test_build_int", [] { return std::make_unique<BuildThrowsAnInt>(); });
  const auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{neg(in[0])}; };
  expect_error([&] { jit(fn, on("jit_test_build_int"), "net")({Tensor::empty({2})}); },
               ErrorKind::kGeneric,
               "backend 'jit_test_build_int' failed to build graph \"net\": an unknown exception");
}

TEST(Jit, ReplacingAnOpRebuildsTheGraphsThatUseIt) {
  const auto scale_op = [](double factor) {
    return OpDef("JitTestScale")
        .input("x")
        .infer([](const InferContext& ctx) { return MetaList{ctx.input(0)}; })
        .kernel(DeviceType::kCPU, [factor](KernelContext& ctx) {
          copy_into(ctx.outputs[0], ctx.inputs[0] * factor);
        });
  };
  JitFunction f = jit([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{call_op("JitTestScale", in)[0]};
  });
  std::mt19937 rng(6);
  const Tensor x = testing::random_input(rng, {3});
  {
    OpRegistration reg(scale_op(2.0));
    expect_same_values(f({x})[0], x * 2.0);
    OpRegistration unrelated(OpDef("JitTestUnrelated").input("x").infer(
        [](const InferContext& ctx) { return MetaList{ctx.input(0)}; }));
    expect_same_values(f({x})[0], x * 2.0);  // an unrelated change keeps the graph
    EXPECT_EQ(f.cache_info().misses, 1u);
  }
  OpRegistration reg(scale_op(3.0));
  expect_same_values(f({x})[0], x * 3.0);
  EXPECT_EQ(f.cache_info().misses, 2u);
}

}  // namespace
}  // namespace kiln
