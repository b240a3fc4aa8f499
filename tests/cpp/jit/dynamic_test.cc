// JitOptions::dynamic (src/jit/dynamic_graph.cc): one cache entry for every batch size, traced at
// the first two only, results equal to dynamic=false builds on kiln_cpu and reference; inputs
// whose leading dimension is not the batch size stay static; graphs that depend on the batch size
// otherwise fail with kValue naming the node.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "jit/jit_testing.h"
#include "kiln/functional.h"
#include "kiln/jit.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_error;
using testing::expect_same_values;
using testing::random_input;

constexpr int64_t kSeq = 5;
constexpr int64_t kWidth = 8;

JitOptions options_for(const std::string& backend, bool dynamic) {
  JitOptions options;
  options.backend = backend;
  options.dynamic = dynamic;
  return options;
}

// Attention-like: x [B, S, D] through a Reshape to [B * S, D] and back, a matmul with a
// closed-over weight, a broadcast [D] row, softmax over scores plus a [S, S] mask (not batched:
// its leading dimension is S).
struct Block {
  Tensor weight;
  Tensor bias;
  std::atomic<int>* calls;

  std::vector<Tensor> operator()(const std::vector<Tensor>& in) const {
    calls->fetch_add(1);
    const Tensor& x = in[0];
    const int64_t b = x.shape()[0];
    Tensor h = matmul(reshape(x, {b * kSeq, kWidth}), weight) + bias;
    h = reshape(h, {b, kSeq, kWidth});
    const Tensor scores = softmax(matmul(h, transpose(h, 1, 2)) + in[1], -1);
    return {matmul(scores, h), sum(h, {-1})};
  }
};

class DynamicJit : public ::testing::TestWithParam<std::string> {};

TEST_P(DynamicJit, TracesThreeBatchSizesForEveryOtherAndMatchesStaticBuilds) {
  std::mt19937 rng(7);
  std::atomic<int> dynamic_calls{0};
  std::atomic<int> static_calls{0};
  const Tensor weight = random_input(rng, {kWidth, kWidth});
  const Tensor bias = random_input(rng, {kWidth});
  const Tensor mask = random_input(rng, {kSeq, kSeq});
  JitFunction dynamic = jit(Block{weight, bias, &dynamic_calls}, options_for(GetParam(), true));
  JitFunction fixed = jit(Block{weight, bias, &static_calls}, options_for(GetParam(), false));
  const std::vector<int64_t> batches = {8, 4, 1, 3, 8, 0, 6};  // not kSeq: the mask is not batched
  for (int64_t b : batches) {
    SCOPED_TRACE("batch size " + std::to_string(b));
    const Tensor x = random_input(rng, {b, kSeq, kWidth});
    const std::vector<Tensor> got = dynamic({x, mask});
    const std::vector<Tensor> want = fixed({x, mask});
    ASSERT_EQ(got.size(), 2u);
    expect_same_values(got[0], want[0]);
    expect_same_values(got[1], want[1]);
  }
  // Traced at 8, 4 and 3 (verified), and at 1 and 0 on their own; 6 from the template.
  EXPECT_EQ(dynamic_calls.load(), 5);
  EXPECT_EQ(static_calls.load(), 6);
  const JitCacheInfo info = dynamic.cache_info();
  EXPECT_EQ(info.hits, 1u);    // the second call at 8
  EXPECT_EQ(info.misses, 6u);  // every new batch size builds
  EXPECT_EQ(info.size, 6u);
}

INSTANTIATE_TEST_SUITE_P(Backends, DynamicJit, ::testing::Values("kiln_cpu", "reference"));

TEST(DynamicJitKey, AnInputWhoseLeadingDimensionIsNotTheBatchSizeKeepsItsShape) {
  std::mt19937 rng(3);
  std::atomic<int> calls{0};
  JitFunction f = jit(
      [&](const std::vector<Tensor>& in) {
        calls.fetch_add(1);
        return std::vector<Tensor>{matmul(in[0], transpose(in[1], 0, 1))};
      },
      options_for("kiln_cpu", true));
  const auto run = [&](int64_t b, int64_t rows) {
    SCOPED_TRACE("batch size " + std::to_string(b) + ", " + std::to_string(rows) + " rows");
    const Tensor x = random_input(rng, {b, 4});
    const Tensor m = random_input(rng, {rows, 4});
    expect_same_values(f({x, m})[0], matmul(x, transpose(m, 0, 1)));
  };
  run(2, 3);
  run(6, 3);
  run(4, 3);
  run(7, 3);
  EXPECT_EQ(calls.load(), 3);  // 2, 6 and 4 (the template verified); 7 from it
  run(2, 5);                   // another number of rows: another signature, traced again
  EXPECT_EQ(calls.load(), 4);
  run(5, 5);  // rows == batch size: m is batched too, another signature
  EXPECT_EQ(calls.load(), 5);
  EXPECT_EQ(f.cache_info().size, 6u);
}

TEST(DynamicJitKey, ABatchOfOneAndAnEmptyBatchWork) {
  std::mt19937 rng(11);
  std::atomic<int> calls{0};
  JitFunction f = jit(
      [&](const std::vector<Tensor>& in) {
        calls.fetch_add(1);
        return std::vector<Tensor>{exp(in[0]) * 2.0 + in[1]};
      },
      options_for("kiln_cpu", true));
  const Tensor row = random_input(rng, {3});  // its leading dimension is not the batch size
  for (int64_t b : {1, 0, 2, 0, 1, 5, 4, 7}) {
    SCOPED_TRACE("batch size " + std::to_string(b));
    const Tensor x = random_input(rng, {b, 3});
    expect_same_values(f({x, row})[0], exp(x) * 2.0 + row);
  }
  EXPECT_EQ(calls.load(), 5);  // 1 and 0 on their own; 2, 5 and 4 (verified); 7 from the template
  EXPECT_EQ(f.cache_info().hits, 2u);
}

TEST(DynamicJitKey, ThreadsCallingAtManyBatchSizesGetTheirResults) {
  JitFunction f = jit(
      [](const std::vector<Tensor>& in) {
        const int64_t b = in[0].shape()[0];
        return std::vector<Tensor>{reshape(reshape(in[0], {b * 3}) * 2.0, {b, 3})};
      },
      options_for("kiln_cpu", true));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(t));
      for (int64_t b = 1; b <= 6; ++b) {
        const Tensor x = random_input(rng, {(b + t) % 6 + 1, 3});
        const Tensor got = f({x})[0];
        const Tensor want = x * 2.0;
        const float* g = got.data<float>();
        const float* w = want.data<float>();
        for (int64_t i = 0; i < x.numel(); ++i) failures += g[i] != w[i];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(f.cache_info().size, 6u);
}

// A strided piece of the batch: ceil(B / 2) rows, 1 and 2 at batch sizes 2 and 3, which a
// template would take for B - 1 (4 rows at 5); a clamped slice noted by the function
// (note_size_decision): x[:2] is x[:] at batch sizes 1 and 2. Both are traced at every batch size.
TEST(DynamicJit, PiecesOfTheBatchNotLinearInItTraceEachBatchSize) {
  std::mt19937 rng(19);
  std::atomic<int> calls{0};
  JitFunction every_other = jit(
      [&calls](const std::vector<Tensor>& in) {
        calls.fetch_add(1);
        return std::vector<Tensor>{in[0].slice(0, 0, in[0].shape()[0], 2) * 2.0};
      },
      options_for("kiln_cpu", true));
  for (int64_t b : {2, 3, 5, 1}) {
    SCOPED_TRACE("batch size " + std::to_string(b));
    const Tensor x = random_input(rng, {b, 3});
    expect_same_values(every_other({x})[0], x.slice(0, 0, b, 2) * 2.0);
  }
  EXPECT_EQ(calls.exchange(0), 4);
  JitFunction first_two = jit(
      [&calls](const std::vector<Tensor>& in) {
        calls.fetch_add(1);
        if (in[0].shape()[0] <= 2) note_size_decision();  // clamped, or whole: no view at all
        return std::vector<Tensor>{in[0].slice(0, 0, 2) * 2.0};
      },
      options_for("kiln_cpu", true));
  for (int64_t b : {1, 2, 5}) {
    SCOPED_TRACE("batch size " + std::to_string(b));
    const Tensor x = random_input(rng, {b, 3});
    expect_same_values(first_two({x})[0], x.slice(0, 0, 2) * 2.0);
  }
  EXPECT_EQ(calls.load(), 3);
}

TEST(DynamicJitErrors, AConstantComputedFromTheBatchSizeNamesItsNode) {
  std::mt19937 rng(5);
  // Dividing by the batch size as a number: the constant differs between batch sizes.
  JitFunction f = jit(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{in[0] / static_cast<double>(in[0].shape()[0])};
      },
      options_for("kiln_cpu", true), "mean_by_hand");
  f({random_input(rng, {4, 3})});
  expect_error([&] { f({random_input(rng, {2, 3})}); }, ErrorKind::kValue,
               "graph \"mean_by_hand\" does not follow the batch size");
  expect_error([&] { f({random_input(rng, {2, 3})}); }, ErrorKind::kValue, "dynamic=False");
  // dynamic=false traces each batch size instead.
  JitFunction fixed = jit(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{in[0] / static_cast<double>(in[0].shape()[0])};
      },
      options_for("kiln_cpu", false));
  const Tensor x = random_input(rng, {2, 3});
  expect_same_values(fixed({x})[0], x / 2.0);
}

TEST(DynamicJitErrors, AnAttributeThatIsNotLinearFailsAtTheThirdBatchSize) {
  std::mt19937 rng(9);
  // [B * B]: linear through the first two batch sizes (64 and 16: 12 per batch size), not
  // through a third. A factory's size decides its shape alone: no inferred shape disagreed, and
  // batch size 3 gave 7 rows.
  for (const bool factory : {false, true}) {
    SCOPED_TRACE(factory ? "full" : "reshape");
    JitFunction f = jit(
        [&](const std::vector<Tensor>& in) {
          const int64_t b = in[0].shape()[0];
          if (factory) return std::vector<Tensor>{full({b * b, 2}, 1.0) + sum(in[0])};
          return std::vector<Tensor>{reshape(matmul(in[0], transpose(in[0], 0, 1)), {b * b})};
        },
        options_for("kiln_cpu", true), "squared");
    f({random_input(rng, {8, 2})});
    f({random_input(rng, {4, 2})});
    for (int i = 0; i < 2; ++i) {  // the same error each time: nothing was kept
      expect_error(
          [&] {
            f({random_input(rng, {3, 2})});
          },
          ErrorKind::kValue, "graph \"squared\" does not follow the batch size: ");
      expect_error(
          [&] {
            f({random_input(rng, {3, 2})});
          },
          ErrorKind::kValue, "linear through batch sizes 8 and 4 but not at 3");
    }
  }
}

TEST(DynamicJitKey, ABatchOfOneIsTracedOnItsOwn_WhereAShapeStopsFollowingTheBatchSize) {
  std::mt19937 rng(17);
  // squeeze() of every size-1 dimension: [B, 3] at 8 and 4, but [3] at batch size 1, which a
  // graph instantiated from the template refused as a shape not linear in the batch size.
  std::atomic<int> calls{0};
  JitFunction f = jit(
      [&](const std::vector<Tensor>& in) {
        calls.fetch_add(1);
        return std::vector<Tensor>{squeeze(in[0])};
      },
      options_for("kiln_cpu", true), "squeezed");
  for (int64_t b : {8, 4, 2, 1, 5}) {
    SCOPED_TRACE("batch size " + std::to_string(b));
    const Tensor x = random_input(rng, {b, 3, 1});
    const std::vector<Tensor> got = f({x});
    EXPECT_EQ(got[0].shape(), squeeze(x).shape());
    expect_same_values(got[0], squeeze(x));
  }
  EXPECT_EQ(calls.load(), 4);  // 8, 4, 2 (verified) and 1; 5 from the template
}

TEST(DynamicJitErrors, AnAttributeWithAFractionalSlopeNamesItsNode) {
  std::mt19937 rng(13);
  // Reshape to [B / 2, 2 * D]: 4 at batch size 8, 2 at batch size 4: half an element per batch.
  JitFunction f = jit(
      [](const std::vector<Tensor>& in) {
        const int64_t b = in[0].shape()[0];
        return std::vector<Tensor>{reshape(in[0], {b / 2, 6})};
      },
      options_for("kiln_cpu", true), "halves");
  f({random_input(rng, {8, 3})});
  const Error e = testing::error_of([&] { f({random_input(rng, {4, 3})}); });
  EXPECT_EQ(e.kind(), ErrorKind::kValue);
  EXPECT_NE(std::string(e.what()).find("= Reshape("), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("not linear in the batch size"), std::string::npos)
      << e.what();
}

}  // namespace
}  // namespace kiln
