// Tests for src/ops/matmul.cc and src/ops/gemm.cc: MatMul, BatchMatMul, Linear and AddMM against
// a naive triple loop, on strided and broadcast operands, the oneDNN primitive cache, and the
// shape and dtype errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kiln/functional/elementwise.h"
#include "kiln/functional/nn.h"
#include "kiln/op.h"
#include "kiln/runtime.h"
#include "ops/gemm.h"
#include "ops/onednn_util.h"
#include "testing.h"

namespace kiln {
namespace {

template <typename T>
Tensor random_tensor(const Shape& shape, unsigned seed) {
  Tensor t = Tensor::empty(shape, dtype_of<T>());
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-4, 4);
  T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(dist(rng)) / T(2);
  return t;
}

// out[i, j] = sum_k a[i, k] * b[k, j] for 2-d a and b of any strides.
template <typename T>
std::vector<double> naive_matmul(const Tensor& a, const Tensor& b) {
  const int64_t n = a.size(0), k = a.size(1), m = b.size(1);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  const int64_t sa0 = a.stride(0), sa1 = a.stride(1), sb0 = b.stride(0), sb1 = b.stride(1);
  std::vector<double> out(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      double acc = 0;
      for (int64_t l = 0; l < k; ++l) {
        acc +=
            static_cast<double>(pa[i * sa0 + l * sa1]) * static_cast<double>(pb[l * sb0 + j * sb1]);
      }
      out[i * m + j] = acc;
    }
  }
  return out;
}

template <typename T>
void expect_matrix_eq(const Tensor& out, const std::vector<double>& expected, double tol) {
  ASSERT_TRUE(out.is_contiguous());
  ASSERT_EQ(static_cast<size_t>(out.numel()), expected.size());
  const T* p = out.data<T>();
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(static_cast<double>(p[i]), expected[i], tol) << "at " << i;
  }
}

std::string error_message(const std::function<void()>& fn) {
  return testing::error_of(fn).message();
}

TEST(MatMul, MatchesNaiveLoop_WhenFloat32OperandsAreTransposedViews) {
  const Tensor a = random_tensor<float>({37, 19}, 1).transpose(0, 1);  // [19, 37], column-major
  const Tensor b = random_tensor<float>({29, 37}, 2).transpose(0, 1);  // [37, 29]
  ASSERT_FALSE(a.is_contiguous());
  const Tensor out = matmul(a, b);
  EXPECT_EQ(out.shape(), (Shape{19, 29}));
  expect_matrix_eq<float>(out, naive_matmul<float>(a, b), 1e-3);
}

TEST(MatMul, MatchesNaiveLoop_WhenOperandHasNoUnitStride) {
  // Every other column: neither row- nor column-major, so the kernel copies it first.
  const Tensor a = random_tensor<float>({8, 20}, 3).slice(1, 0, 20, 2);
  const Tensor b = random_tensor<float>({10, 6}, 4);
  expect_matrix_eq<float>(matmul(a, b), naive_matmul<float>(a, b), 1e-3);
}

TEST(MatMul, MatchesNaiveLoop_WhenBatchedMatricesInterleave) {
  // Every other row of each matrix: strides [12, 8, 1], whose matrices overlap in address range,
  // which no oneDNN memory descriptor takes (onednn::describable): the kernel copies it first.
  for (const Tensor& a : {random_tensor<float>({2, 3, 4}, 11).slice(1, 0, 3, 2),
                          random_tensor<float>({3, 4, 2}, 12).slice(1, 0, 4, 3).transpose(1, 2)}) {
    const Tensor b = random_tensor<float>({a.size(2), 5}, 13);
    const Tensor out = matmul(a, b);
    for (int64_t i = 0; i < a.size(0); ++i) {
      expect_matrix_eq<float>(out.select(0, i).contiguous(), naive_matmul<float>(a.select(0, i), b),
                              1e-4);
    }
  }
  EXPECT_FALSE(onednn::describable({2, 2, 4}, {12, 8, 1}));
  EXPECT_TRUE(onednn::describable({2, 2, 4}, {16, 8, 1}));  // padded rows nest
  EXPECT_TRUE(onednn::describable({4, 2}, {1, 4}));         // a transposed matrix
  EXPECT_TRUE(onednn::describable({1, 3}, {0, 1}));         // a size-1 dim's stride is unused
  EXPECT_FALSE(onednn::describable({2, 3}, {0, 1}));        // an expanded dim repeats elements
}

TEST(MatMul, BroadcastsBatchDimensions_WhenOneOperandIsExpanded) {
  const Tensor a = random_tensor<float>({1, 5, 7}, 5).expand({4, 5, 7});  // stride 0 batch
  const Tensor b = random_tensor<float>({4, 7, 3}, 6);
  const Tensor out = matmul(a, b);
  ASSERT_EQ(out.shape(), (Shape{4, 5, 3}));
  for (int64_t i = 0; i < 4; ++i) {
    const std::vector<double> expected = naive_matmul<float>(a.select(0, i), b.select(0, i));
    expect_matrix_eq<float>(out.select(0, i).contiguous(), expected, 1e-3);
  }
}

TEST(MatMul, BroadcastsBatchDimensions_WhenBothOperandsAreExpanded) {
  const Tensor a = random_tensor<float>({1, 3, 4}, 7).expand({2, 3, 4});
  const Tensor b = random_tensor<float>({1, 4, 2}, 8).expand({2, 4, 2});
  const Tensor out = matmul(a, b);
  const std::vector<double> expected = naive_matmul<float>(a.select(0, 0), b.select(0, 0));
  for (int64_t i = 0; i < 2; ++i)
    expect_matrix_eq<float>(out.select(0, i).contiguous(), expected, 1e-4);
}

TEST(MatMul, PromotesAndSqueezes_WhenOperandsAreOneDimensional) {
  const Tensor v = random_tensor<float>({6}, 9);
  const Tensor m = random_tensor<float>({6, 4}, 10);
  EXPECT_EQ(matmul(v, m).shape(), (Shape{4}));
  EXPECT_EQ(matmul(m.transpose(0, 1), v).shape(), (Shape{4}));
  const Tensor dot = matmul(v, v);
  EXPECT_EQ(dot.shape(), Shape{});
  double expected = 0;
  for (int64_t i = 0; i < 6; ++i) expected += double(v.data<float>()[i]) * v.data<float>()[i];
  EXPECT_NEAR(dot.data<float>()[0], expected, 1e-4);
}

TEST(MatMul, UsesBlockedLoop_WhenFloat64AndInt32) {
  const Tensor a = random_tensor<double>({33, 300}, 11);
  const Tensor b =
      random_tensor<double>({300, 270}, 12).transpose(0, 1).contiguous().transpose(0, 1);
  expect_matrix_eq<double>(matmul(a, b), naive_matmul<double>(a, b), 1e-9);
  Tensor ai = Tensor::empty({3, 4}, DType::kInt32), bi = Tensor::empty({4, 2}, DType::kInt32);
  for (int i = 0; i < 12; ++i) ai.data<int32_t>()[i] = i - 5;
  for (int i = 0; i < 8; ++i) bi.data<int32_t>()[i] = 2 * i - 7;
  const Tensor out = matmul(ai, bi);
  EXPECT_EQ(out.dtype(), DType::kInt32);
  expect_matrix_eq<int32_t>(out, naive_matmul<int32_t>(ai, bi), 0);
}

TEST(MatMul, GivesZeros_WhenInnerDimensionIsEmpty) {
  const Tensor out = matmul(Tensor::empty({3, 0}), Tensor::empty({0, 2}));
  expect_matrix_eq<float>(out, std::vector<double>(6, 0.0), 0);
  EXPECT_EQ(matmul(Tensor::empty({0, 3}), Tensor::empty({3, 2})).shape(), (Shape{0, 2}));
}

TEST(MatMul, ReusesCachedPrimitive_WhenShapesRepeat) {
  onednn::clear_primitive_cache();
  const Tensor a = random_tensor<float>({12, 8}, 13);
  const Tensor b = random_tensor<float>({8, 5}, 14);
  matmul(a, b);
  runtime::synchronize();  // the kernels have run, so the cache counters are final
  const onednn::PrimitiveCacheStats first = onednn::primitive_cache_stats();
  EXPECT_EQ(first.misses, 1);
  EXPECT_EQ(first.hits, 0);
  matmul(random_tensor<float>({12, 8}, 15), b);
  runtime::synchronize();
  const onednn::PrimitiveCacheStats second = onednn::primitive_cache_stats();
  EXPECT_EQ(second.misses, 1);
  EXPECT_EQ(second.hits, 1);
  matmul(a, random_tensor<float>({8, 6}, 16));  // a new shape: a new primitive
  runtime::synchronize();
  EXPECT_EQ(onednn::primitive_cache_stats().misses, 2);
  EXPECT_EQ(onednn::primitive_cache_stats().size, 2);
}

// Note [Reused memory objects]: a thread keeps the argument memory of its last four primitives.
// Seven products taking turns evict one another's, and a cleared cache makes new entries under
// new ids; every product must still read its own operands and write its own result.
TEST(MatMul, EachProductUsesItsOwnOperands_WhenMoreProductsTakeTurnsThanAThreadKeeps) {
  for (int round = 0; round < 3; ++round) {
    if (round == 2) onednn::clear_primitive_cache();
    for (int64_t i = 0; i < 7; ++i) {
      const Tensor a =
          random_tensor<float>({3 + i, 5}, static_cast<unsigned>(100 + 10 * round + i));
      const Tensor b =
          random_tensor<float>({5, 2 + i}, static_cast<unsigned>(200 + 10 * round + i));
      const Tensor out = matmul(a, b);
      expect_matrix_eq<float>(out, naive_matmul<float>(a, b), 1e-4);
    }
  }
}

bool runs_on_jit_gemm(const Tensor& a, const Tensor& b, const Shape& out_shape,
                      const GemmEpilogue& ep = {}) {
  return gemm_implementation(a, b, Tensor::empty(out_shape), ep).rfind("gemm:jit", 0) == 0;
}

// Note [oneDNN matmul implementation]: products with every dimension >= 256 run on oneDNN's
// gemm:jit rather than its first choice; the same layouts, batching and epilogues as elsewhere.
TEST(MatMul, MatchesNaiveLoop_WhenLargeEnoughForJitGemm) {
  const Tensor a = random_tensor<float>({300, 260}, 23);
  const Tensor b = random_tensor<float>({260, 280}, 24);
  ASSERT_TRUE(runs_on_jit_gemm(a, b, {300, 280}));
  EXPECT_EQ(gemm_implementation(to(a, DType::kFloat64), to(b, DType::kFloat64),
                                Tensor::empty({300, 280}, DType::kFloat64), {}),
            "");
  expect_matrix_eq<float>(matmul(a, b), naive_matmul<float>(a, b), 1e-3);

  // Transposed views (column-major operands), as Linear's weight.
  const Tensor at = random_tensor<float>({260, 300}, 25).transpose(0, 1);
  const Tensor bt = random_tensor<float>({280, 260}, 26).transpose(0, 1);
  ASSERT_TRUE(runs_on_jit_gemm(at, bt, {300, 280}));
  expect_matrix_eq<float>(matmul(at, bt), naive_matmul<float>(at, bt), 1e-3);

  // A batch against one broadcast matrix.
  const Tensor batch = random_tensor<float>({3, 256, 260}, 27);
  ASSERT_TRUE(runs_on_jit_gemm(batch, b, {3, 256, 280}));
  const Tensor out = matmul(batch, b);
  for (int64_t i = 0; i < 3; ++i) {
    expect_matrix_eq<float>(out.select(0, i).contiguous(),
                            naive_matmul<float>(batch.select(0, i), b), 1e-3);
  }
}

TEST(Linear, AddsBias_WhenLargeEnoughForJitGemm) {
  const Tensor x = random_tensor<float>({2, 150, 260}, 28);
  const Tensor w = random_tensor<float>({280, 260}, 29);
  const Tensor bias = random_tensor<float>({280}, 30);
  GemmEpilogue ep;
  ep.bias = bias;
  EXPECT_TRUE(runs_on_jit_gemm(x.reshape({300, 260}), w.transpose(0, 1), {300, 280}, ep));
  const Tensor result = linear(x, w, bias);
  const float* out = result.data<float>();
  const float* pb = bias.data<float>();
  const std::vector<double> prod = naive_matmul<float>(x.reshape({300, 260}), w.transpose(0, 1));
  for (int64_t r = 0; r < 300; ++r) {
    for (int64_t j = 0; j < 280; ++j) {
      ASSERT_NEAR(out[r * 280 + j], prod[r * 280 + j] + pb[j], 1e-3) << r << ", " << j;
    }
  }
}

TEST(AddMM, ScalesProductAndBias_WhenLargeEnoughForJitGemm) {
  const Tensor a = random_tensor<float>({300, 260}, 31);
  const Tensor b = random_tensor<float>({260, 280}, 32);
  const Tensor bias = random_tensor<float>({280}, 33);
  GemmEpilogue ep;
  ep.alpha = 2.0;
  ep.accumulate = true;
  ep.beta = 0.5;
  EXPECT_TRUE(runs_on_jit_gemm(a, b, {300, 280}, ep));
  const Tensor out = addmm(bias, a, b, 0.5, 2.0);
  const std::vector<double> prod = naive_matmul<float>(a, b);
  for (int64_t i = 0; i < 300 * 280; ++i) {
    ASSERT_NEAR(out.data<float>()[i], 2.0 * prod[i] + 0.5 * bias.data<float>()[i % 280], 1e-3) << i;
  }
}

// Note [Single-row products]: one float32 row runs gemv's loops, b by columns or by rows, with
// every epilogue; other layouts and dtypes keep their paths.
TEST(MatMul, MatchesNaiveLoop_WhenOneRowRunsAsGemv) {
  const Tensor row = random_tensor<float>({1, 700}, 40);
  const Tensor by_rows = random_tensor<float>({700, 1300}, 41);                  // rows contiguous
  const Tensor by_cols = random_tensor<float>({1300, 700}, 42).transpose(0, 1);  // Linear's
  for (const Tensor& b : {by_rows, by_cols}) {
    EXPECT_EQ(gemm_implementation(row, b, Tensor::empty({1, 1300}), {}), "gemv");
    expect_matrix_eq<float>(matmul(row, b), naive_matmul<float>(row, b), 1e-3);
    // A strided row, and a batch of one.
    const Tensor strided = random_tensor<float>({700, 2}, 43).transpose(0, 1).narrow(0, 1, 1);
    expect_matrix_eq<float>(matmul(strided, b), naive_matmul<float>(strided, b), 1e-3);
    expect_matrix_eq<float>(matmul(row.reshape({1, 1, 700}), b.unsqueeze(0)),
                            naive_matmul<float>(row, b), 1e-3);
  }
  // Epilogues: Linear's bias, AddMM's alpha and beta.
  const Tensor w = random_tensor<float>({1300, 700}, 44);
  const Tensor bias = random_tensor<float>({1300}, 45);
  const std::vector<double> prod = naive_matmul<float>(row, w.transpose(0, 1));
  const Tensor lin = linear(row, w, bias);
  const Tensor mm = addmm(bias.unsqueeze(0), row, w.transpose(0, 1), 0.5, 2.0);
  for (int64_t j = 0; j < 1300; ++j) {
    ASSERT_NEAR(lin.data<float>()[j], prod[j] + bias.data<float>()[j], 1e-3) << j;
    ASSERT_NEAR(mm.data<float>()[j], 2.0 * prod[j] + 0.5 * bias.data<float>()[j], 1e-3) << j;
  }
  // A dot product (both vectors 1-d), long enough for several float32 blocks: within float32's
  // rounding of the exact sum.
  const Tensor u = random_tensor<float>({100000}, 46), v = random_tensor<float>({100000}, 47);
  const std::vector<double> exact =
      naive_matmul<float>(u.reshape({1, 100000}), v.reshape({100000, 1}));
  EXPECT_NEAR(matmul(u, v).data<float>()[0], exact[0], 1e-6 * std::abs(exact[0]) + 1e-3);
  // Neither rows nor columns contiguous, float64, several rows: not gemv.
  const Tensor neither =
      random_tensor<float>({1400, 2600}, 48).slice(0, 0, 1400, 2).slice(1, 0, 2600, 2);
  EXPECT_NE(gemm_implementation(row, neither, Tensor::empty({1, 1300}), {}), "gemv");
  expect_matrix_eq<float>(matmul(row, neither), naive_matmul<float>(row, neither), 1e-3);
  EXPECT_EQ(gemm_implementation(to(row, DType::kFloat64), to(by_rows, DType::kFloat64),
                                Tensor::empty({1, 1300}, DType::kFloat64), {}),
            "");
  EXPECT_NE(gemm_implementation(random_tensor<float>({2, 700}, 49), by_rows,
                                Tensor::empty({2, 1300}), {}),
            "gemv");
}

TEST(MatMul, GivesEachThreadItsOwnProduct_WhenThreadsRunTheSamePrimitiveAtOnce) {
  // In "sync" mode the kernels run on the callers' threads, all on one cached oneDNN primitive
  // (same shapes and strides). Each execution needs scratchpad memory of its own, or the threads
  // overwrite each other's partial results (Note [Primitive cache]). Half-integer inputs make
  // every product exact, so the comparison is exact.
  const runtime::PipelineMode previous = runtime::get_pipeline();
  runtime::set_pipeline(runtime::PipelineMode::kSync);
  const Tensor b = random_tensor<float>({16, 16}, 99).transpose(0, 1);
  constexpr int kThreads = 4;
  std::vector<Tensor> a;
  std::vector<std::vector<double>> expected;
  for (int i = 0; i < kThreads; ++i) {
    a.push_back(random_tensor<float>({8, 16}, 10 + i));
    expected.push_back(naive_matmul<float>(a[i], b));
  }
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 20000; ++k) {
        const Tensor out = matmul(a[i], b);
        const float* p = out.data<float>();
        for (size_t j = 0; j < expected[i].size(); ++j) {
          if (p[j] != expected[i][j]) {
            ++wrong[i];
            break;
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  runtime::set_pipeline(previous);
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(wrong[i], 0) << "thread " << i;
}

TEST(MatMul, NamesBothShapes_WhenInnerDimensionsDiffer) {
  const std::string msg = error_message([] {
    matmul(Tensor::empty({2, 3}), Tensor::empty({4, 5}));
  });
  EXPECT_EQ(msg,
            "matmul: a has shape [2, 3] and b has shape [4, 5]; expected a.shape[-1] == "
            "b.shape[-2], got 3 and 4");
}

TEST(MatMul, ThrowsShapeError_WhenBatchDimensionsDoNotBroadcast) {
  testing::expect_error(
      [] {
        matmul(Tensor::empty({2, 3, 4}), Tensor::empty({3, 4, 5}));
      },
      ErrorKind::kShape, "batch dimensions that broadcast, got [2] and [3]");
  testing::error_of([] { matmul(Tensor::empty({}), Tensor::empty({3})); });
}

TEST(BatchMatMul, ThrowsShapeError_WhenBatchSizesDiffer) {
  const std::string msg = error_message([] {
    bmm(Tensor::empty({2, 3, 4}), Tensor::empty({3, 4, 5}));
  });
  EXPECT_EQ(msg,
            "bmm: a has shape [2, 3, 4] and b has shape [3, 4, 5]; expected a.shape[0] == "
            "b.shape[0], got 2 and 3");
}

TEST(Linear, AddsBiasToTransposedWeightProduct) {
  const Tensor x = random_tensor<float>({2, 3, 6}, 17);
  const Tensor w = random_tensor<float>({4, 6}, 18);
  const Tensor bias = random_tensor<float>({4}, 19);
  const Tensor out = linear(x, w, bias);
  ASSERT_EQ(out.shape(), (Shape{2, 3, 4}));
  const std::vector<double> prod = naive_matmul<float>(x.reshape({6, 6}), w.transpose(0, 1));
  for (int64_t r = 0; r < 6; ++r) {
    for (int64_t j = 0; j < 4; ++j) {
      EXPECT_NEAR(out.data<float>()[r * 4 + j], prod[r * 4 + j] + bias.data<float>()[j], 1e-4);
    }
  }
}

TEST(AddMM, ScalesProductAndBias_ForFloat32AndFloat64) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    const Tensor a = to(random_tensor<float>({5, 7}, 20), dtype);
    const Tensor b = to(random_tensor<float>({7, 3}, 21), dtype);
    const Tensor bias = to(random_tensor<float>({3}, 22), dtype);
    const Tensor out = to(addmm(bias, a, b, 0.5, 2.0), DType::kFloat64);
    const std::vector<double> prod =
        naive_matmul<double>(to(a, DType::kFloat64), to(b, DType::kFloat64));
    const Tensor bias64 = to(bias, DType::kFloat64);
    for (int64_t i = 0; i < 15; ++i) {
      EXPECT_NEAR(out.data<double>()[i], 2.0 * prod[i] + 0.5 * bias64.data<double>()[i % 3], 1e-4)
          << dtype;
    }
  }
}

TEST(AddMM, ThrowsValueError_WhenIntegerTensorsGetFractionalAlpha) {
  const Tensor t = Tensor::empty({2, 2}, DType::kInt32);
  EXPECT_EQ(testing::error_of([&] { addmm(t, t, t, 1.0, 0.5); }).kind(), ErrorKind::kValue);
}

}  // namespace
}  // namespace kiln
