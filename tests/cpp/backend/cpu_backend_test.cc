// The "kiln_cpu" backend through kiln::jit: what its passes make of a graph at O1 (and not at
// O0), results against the reference backend, the memory plan (its arithmetic, reuse, in-place
// writes, and the memory one call really allocates), input checks on a built graph, concurrent
// calls, and outputs that alias each other or intermediates.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "jit/jit_testing.h"
#include "kiln/backend.h"
#include "kiln/functional.h"
#include "kiln/ir.h"
#include "kiln/ir/text.h"
#include "kiln/jit.h"
#include "kiln/parallel.h"
#include "kiln/runtime.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_close;
using testing::expect_error;
using testing::random_input;

JitOptions options(const std::string& backend, const std::string& level = "O1") {
  JitOptions o;
  o.backend = backend;
  o.jit_level = level;
  return o;
}

size_t count_op(const std::string& graph_text, const std::string& op) {
  const FuncGraphPtr g = ir::parse(graph_text);
  size_t n = 0;
  for (const NodePtr& node : g->nodes()) {
    if (node->is_cnode() && static_cast<const CNode&>(*node).primitive()->name() == op) ++n;
  }
  return n;
}

std::string attr_of(const std::string& graph_text, const std::string& op, const std::string& attr) {
  const FuncGraphPtr g = ir::parse(graph_text);
  for (const NodePtr& node : g->nodes()) {
    if (!node->is_cnode()) continue;
    const Primitive& p = *static_cast<const CNode&>(*node).primitive();
    if (p.name() == op) return p.normalized_attrs().get<std::string>(attr);
  }
  return "";
}


std::vector<Tensor> gelu_affine(const std::vector<Tensor>& in) { return {gelu(in[0] * 2.0 + 1.0)}; }

TEST(CpuBackend, FusesElementwiseChainsAtO1Only) {
  std::mt19937 rng(1);
  const Tensor x = random_input(rng, {33, 70});
  const JitFunction o1 = jit(gelu_affine, options("kiln_cpu", "O1"));
  const JitFunction o0 = jit(gelu_affine, options("kiln_cpu", "O0"));
  const std::string g1 = o1.optimized_graph({x});
  EXPECT_EQ(count_op(g1, "FusedElementwise"), 1u) << g1;
  EXPECT_EQ(count_op(g1, "Gelu"), 0u) << g1;
  EXPECT_EQ(count_op(g1, "Mul") + count_op(g1, "Add"), 0u) << g1;
  const std::string g0 = o0.optimized_graph({x});
  EXPECT_EQ(count_op(g0, "FusedElementwise"), 0u) << g0;
  EXPECT_EQ(count_op(g0, "Gelu"), 1u) << g0;

  const Tensor want = jit(gelu_affine, options("reference"))({x})[0];
  // The tile interpreter runs the eager kernels: bitwise the reference's results.
  expect_close(o1({x})[0], want, 0);
  expect_close(o0({x})[0], want, 0);
}

// out = y, then out += x: elementwise, but wrong when out is x's memory. Planned in place (as
// kTraitElementwise alone allowed), kiln_cpu gave exp(x) + ... with exp(x) overwritten by y.
TEST(CpuBackend, GivesAnInputsBufferOnlyToOpsThatAreInPlace) {
  for (const uint32_t traits : {uint32_t{kTraitElementwise}, kTraitElementwise | kTraitInPlace}) {
    SCOPED_TRACE("traits " + std::to_string(traits));
    const bool in_place = (traits & kTraitInPlace) != 0;
    OpRegistration reg(OpDef("CpuTestCopyThenAdd")
                           .input("x")
                           .input("y")
                           .traits(traits)
                           .infer([](const InferContext& ctx) { return MetaList{ctx.input(0)}; })
                           .kernel(DeviceType::kCPU, [in_place](KernelContext& ctx) {
                             const Tensor x = ctx.inputs[0].contiguous(),
                                          y = ctx.inputs[1].contiguous();
                             float* out = ctx.outputs[0].data<float>();
                             const int64_t n = ctx.outputs[0].numel();
                             if (in_place) {  // reads each element before writing it
                               for (int64_t i = 0; i < n; ++i)
                                 out[i] = x.data<float>()[i] + y.data<float>()[i];
                             } else {
                               std::copy(y.data<float>(), y.data<float>() + n, out);
                               for (int64_t i = 0; i < n; ++i) out[i] += x.data<float>()[i];
                             }
                           }));
    JitFunction f = jit(
        [](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{sqrt(call_op("CpuTestCopyThenAdd", {exp(in[0]), in[1]})[0])};
        },
        options("kiln_cpu"));
    std::mt19937 rng(3);
    const Tensor x = random_input(rng, {4, 8}), y = random_input(rng, {4, 8}) + 10.0;
    expect_close(f({x, y})[0], sqrt(exp(x) + y), 1e-5);
    EXPECT_EQ(f.memory_plan({x, y}).in_place, in_place ? 1u : 0u);  // the op's, on exp's block
  }
}

// A custom kernel's std::exception names the op call and the graph, as eager names the call.
TEST(CpuBackend, NamesTheOpCall_WhenAKernelThrowsAStdException) {
  OpRegistration reg(OpDef("CpuTestThrows")
                         .input("x")
                         .infer([](const InferContext& ctx) { return MetaList{ctx.input(0)}; })
                         .kernel(DeviceType::kCPU, [](KernelContext&) {
                           throw std::runtime_error("kernel exploded");
                         }));
  JitFunction f =
      jit([](const std::vector<Tensor>& in) { return call_op("CpuTestThrows", {exp(in[0])}); },
          options("kiln_cpu"), "exploding");
  expect_error([&] { f({Tensor::empty({2})}); }, ErrorKind::kGeneric,
               "kernel exploded\n  in CpuTestThrows(float32[2]) of graph \"exploding\"");
}

TEST(CpuBackend, FusesLinearAndReluIntoFusedMatMul) {
  const auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{relu(linear(in[0], in[1], in[2]))};
  };
  std::mt19937 rng(2);
  const std::vector<Tensor> in = {random_input(rng, {17, 40}), random_input(rng, {24, 40}),
                                  random_input(rng, {24})};
  const JitFunction f = jit(fn, options("kiln_cpu"));
  const std::string g = f.optimized_graph(in);
  EXPECT_EQ(count_op(g, "FusedMatMul"), 1u) << g;
  EXPECT_EQ(count_op(g, "Linear") + count_op(g, "Relu"), 0u) << g;
  EXPECT_EQ(attr_of(g, "FusedMatMul", "activation"), "Relu") << g;
  expect_close(f(in)[0], jit(fn, options("reference"))(in)[0], 1e-5);
}

TEST(CpuBackend, FusesMatMulBiasAndGeluIntoFusedMatMul) {
  const auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gelu(matmul(in[0], in[1]) + in[2])};
  };
  std::mt19937 rng(3);
  const std::vector<Tensor> in = {random_input(rng, {19, 32}), random_input(rng, {32, 45}),
                                  random_input(rng, {45})};
  const JitFunction f = jit(fn, options("kiln_cpu"));
  const std::string g = f.optimized_graph(in);
  EXPECT_EQ(count_op(g, "FusedMatMul"), 1u) << g;
  EXPECT_EQ(count_op(g, "MatMul") + count_op(g, "Add") + count_op(g, "Gelu"), 0u) << g;
  EXPECT_EQ(attr_of(g, "FusedMatMul", "activation"), "Gelu") << g;
  // oneDNN's gelu post-op is its own erf approximation: close, not bitwise.
  expect_close(f(in)[0], jit(fn, options("reference"))(in)[0], 1e-5);
}

// softmax(x @ w) repeated: nothing fuses, every value is needed once.
std::vector<Tensor> matmul_softmax_chain(const std::vector<Tensor>& in) {
  Tensor y = in[0];
  for (int i = 0; i < 6; ++i) y = softmax(matmul(y, in[1]) * 4.0);
  return {y};
}

std::vector<Tensor> exp_chain(const std::vector<Tensor>& in) {
  Tensor y = in[0];
  for (int i = 0; i < 8; ++i) y = exp(y * -0.5);
  return {y};
}

TEST(CpuBackend, MemoryPlanArithmeticAndReuse) {
  std::mt19937 rng(4);
  const std::vector<Tensor> in = {random_input(rng, {256, 256}), random_input(rng, {256, 256})};
  const size_t block = 256 * 256 * sizeof(float);
  {
    const JitFunction f = jit(matmul_softmax_chain, options("kiln_cpu"));
    const BackendMemoryPlan m = f.memory_plan(in);
    EXPECT_EQ(m.peak_bytes, m.arena_bytes + m.output_bytes);
    EXPECT_GE(m.unshared_bytes, m.arena_bytes);
    EXPECT_EQ(m.output_bytes, block);
    EXPECT_GE(m.buffers, 11u);  // 6 products and 5 softmaxes (one more product's is the output)
    EXPECT_GE(m.unshared_bytes, 11 * block);
    EXPECT_LE(m.arena_bytes, 3 * block) << "unshared " << m.unshared_bytes;
    expect_close(f(in)[0], jit(matmul_softmax_chain, options("reference"))(in)[0], 1e-5);
  }
  {
    // At O0 nothing fuses: 16 elementwise ops, each writing over its dying input.
    const JitFunction f = jit(exp_chain, options("kiln_cpu", "O0"));
    const BackendMemoryPlan m = f.memory_plan({in[0]});
    EXPECT_EQ(m.peak_bytes, m.arena_bytes + m.output_bytes);
    EXPECT_EQ(m.buffers, 15u);
    EXPECT_EQ(m.unshared_bytes, 15 * block);
    EXPECT_GT(m.in_place, 0u);
    EXPECT_EQ(m.arena_bytes, block);
    expect_close(f({in[0]})[0], jit(exp_chain, options("reference"))({in[0]})[0], 0);
  }
  {
    // At O1 the chain is one FusedElementwise writing the output: nothing in the arena.
    const JitFunction f = jit(exp_chain, options("kiln_cpu", "O1"));
    const BackendMemoryPlan m = f.memory_plan({in[0]});
    EXPECT_EQ(m.arena_bytes, 0u);
    EXPECT_EQ(m.peak_bytes, block);
  }
}

TEST(CpuBackend, MeasuredPeakStaysWithinThePlan) {
  // Every size here is below the allocator's huge-page class (2 MiB), where a block is rounded up
  // to one of four steps per power of two (src/runtime/caching_allocator.cc, Note [Size
  // classes]): at most a quarter more than asked, plus 64 bytes of alignment for small ones. One
  // call allocates the arena and each output once; anything else (a per-node temporary) would
  // break the bound.
  std::mt19937 rng(5);
  const std::vector<Tensor> in = {random_input(rng, {128, 128}), random_input(rng, {128, 128})};
  for (const auto& [fn, level] : {std::pair{&matmul_softmax_chain, "O1"},
                                  std::pair{&exp_chain, "O0"}}) {
    SCOPED_TRACE(level);
    const JitFunction f = jit(*fn, options("kiln_cpu", level));
    const std::vector<Tensor> args = fn == &exp_chain ? std::vector<Tensor>{in[0]} : in;
    const BackendMemoryPlan plan = f.memory_plan(args);
    ASSERT_LT(plan.peak_bytes, size_t{2} << 20);
    f(args);  // warm up: built, per-thread buffers grown
    const runtime::MemoryStats before = runtime::memory_stats();
    runtime::reset_peak_memory_stats();
    std::vector<Tensor> out = f(args);
    const runtime::MemoryStats after = runtime::memory_stats();
    const size_t used = after.peak - before.allocated;
    EXPECT_GE(used, plan.output_bytes);
    EXPECT_LE(used, plan.peak_bytes + plan.peak_bytes / 4 + 2 * 64)
        << "planned " << plan.peak_bytes << " (arena " << plan.arena_bytes << ")";
  }
}

TEST(CpuBackend, MemoryPlanOnTheReferenceBackendIsAnError) {
  std::mt19937 rng(6);
  const JitFunction f = jit(gelu_affine, options("reference"));
  expect_error([&] { f.memory_plan({random_input(rng, {4, 4})}); }, ErrorKind::kValue,
               "does not plan memory statically");
}

TEST(CpuBackend, RunChecksInputShapesOfTheBuiltGraph) {
  std::mt19937 rng(7);
  const Tensor x = random_input(rng, {8, 16});
  const JitFunction f = jit(gelu_affine, options("kiln_cpu"));
  const FuncGraphPtr graph = ir::parse(f.optimized_graph({x}));
  BackendManager& m = BackendManager::Instance();
  BackendJitConfig config;
  config.backend = "kiln_cpu";
  const BackendGraphId id = m.Build(graph, config, "kiln_cpu");
  std::vector<Tensor> out;
  m.Run("kiln_cpu", id, {x}, &out);
  ASSERT_EQ(out.size(), 1u);
  expect_close(out[0], f({x})[0], 0);
  const std::string param = graph->parameters()[0]->debug_string();
  expect_error([&] { m.Run("kiln_cpu", id, {random_input(rng, {8, 15})}, &out); },
               ErrorKind::kShape, "input 0 (" + param + ") must have shape [8, 16]");
  expect_error([&] { m.Run("kiln_cpu", id, {}, &out); }, ErrorKind::kValue, "takes 1 inputs");
  m.ClearGraph("kiln_cpu", id);
  expect_error([&] { m.Run("kiln_cpu", id, {x}, &out); }, ErrorKind::kValue, "no graph with id");
}

TEST(CpuBackend, ConcurrentCallsGetTheirOwnResults) {
  const auto fn = [](const std::vector<Tensor>& in) {
    Tensor h = relu(linear(in[0], in[1], in[2]));
    return std::vector<Tensor>{softmax(exp(h * -0.5) + 1.0)};
  };
  std::mt19937 rng(8);
  const Tensor w = random_input(rng, {48, 32});
  const Tensor b = random_input(rng, {48});
  constexpr int kThreads = 4, kCalls = 8;
  std::vector<std::vector<Tensor>> inputs(kThreads * kCalls);
  std::vector<Tensor> want;
  const JitFunction reference = jit(fn, options("reference"));
  for (auto& in : inputs) {
    in = {random_input(rng, {21, 32}), w, b};
    want.push_back(reference(in)[0]);
  }
  const JitFunction f = jit(fn, options("kiln_cpu"));
  f(inputs[0]);  // built once, before the threads
  std::vector<Tensor> got(inputs.size());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int c = 0; c < kCalls; ++c) got[t * kCalls + c] = f(inputs[t * kCalls + c])[0];
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("call " + std::to_string(i));
    expect_close(got[i], want[i], 1e-5);
  }
  EXPECT_EQ(f.cache_info().misses, 1u);
}

TEST(CpuBackend, OutputsThatAliasSurviveTheNextCall) {
  // a is an output and read afterwards; t views an intermediate; a is returned twice.
  const auto fn = [](const std::vector<Tensor>& in) {
    const Tensor a = exp(in[0]) * 0.5;
    const Tensor b = tanh(a + in[0]);
    const Tensor t = (a * 3.0 + 1.0).transpose(0, 1);
    return std::vector<Tensor>{a, b, t, a};
  };
  std::mt19937 rng(9);
  const JitFunction reference = jit(fn, options("reference"));
  for (const char* level : {"O0", "O1"}) {
    SCOPED_TRACE(level);
    const JitFunction f = jit(fn, options("kiln_cpu", level));
    const Tensor x1 = random_input(rng, {37, 50});
    const Tensor x2 = random_input(rng, {37, 50});
    const std::vector<Tensor> want1 = reference({x1});
    const std::vector<Tensor> want2 = reference({x2});
    const std::vector<Tensor> got1 = f({x1});
    const std::vector<Tensor> got2 = f({x2});
    ASSERT_EQ(got1.size(), 4u);
    ASSERT_EQ(got2.size(), 4u);
    for (size_t k = 0; k < 4; ++k) {
      SCOPED_TRACE("output " + std::to_string(k));
      expect_close(got1[k], want1[k], 0);  // call 2 wrote none of call 1's outputs
      expect_close(got2[k], want2[k], 0);
    }
    EXPECT_EQ(got1[2].shape(), (Shape{50, 37}));
  }
}

// A product by a constant weight is packed for the thread count of its Build; called with
// another count it runs the op's own kernel (a oneDNN primitive's scratchpad and work split are
// sized for its thread count), with the same results.
TEST(CpuBackend, APackedProductBuiltForOneThreadCountRunsUnderAnother) {
  std::mt19937 rng(5);
  const Tensor x = random_input(rng, {64, 96});
  const Tensor w = random_input(rng, {48, 96});
  const Tensor b = random_input(rng, {48});
  const TensorFn fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{relu(linear(in[0], w, b))};
  };
  const int threads = get_num_threads();
  set_num_threads(1);
  const JitFunction f = jit(fn, options("kiln_cpu"));
  const Tensor built_single = f({x})[0];  // built and run with one thread
  set_num_threads(2);
  const Tensor run_double = f({x})[0];
  set_num_threads(threads);
  const Tensor want = jit(fn, options("reference"))({x})[0];
  expect_close(built_single, want, 1e-5);
  expect_close(run_double, want, 1e-5);
  EXPECT_EQ(f.cache_info().misses, 1u);
}

}  // namespace
}  // namespace kiln
