// Tests for the reduction, scan and softmax ops (src/ops/reduce*.cc, scan.cc, softmax.cc):
// determinism, accuracy of long float32 sums, layouts, keepdim shapes, dtypes and error messages.
// NumPy comparisons across dtypes and shapes live in tests/python/test_reduce.py.
#include "kiln/functional/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kiln/op.h"
#include "kiln/parallel.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::error_of;

Tensor from_values(const std::vector<float>& values, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::kFloat32);
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(float));
  return t;
}

/// 0, 1, 2, ... as float32 of `shape`.
Tensor iota(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return from_values(v, shape);
}

std::vector<float> values_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  const float* p = c.data<float>();
  return std::vector<float>(p, p + c.numel());
}

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

TEST(ReduceSum, IsAccurate_WhenSummingMillionsOfFloat32) {
  const std::vector<float> v = random_values(size_t{1} << 23, 42);
  double exact = 0;
  for (float x : v) exact += x;
  const float total = sum(from_values(v, {static_cast<int64_t>(v.size())})).data<float>()[0];
  EXPECT_NEAR(total, exact, 1e-6 * exact);
}

TEST(ReduceSum, IsBitIdentical_WhenRunRepeatedlyAndWithAnyThreadCount) {
  const std::vector<float> v = random_values(size_t{1} << 21, 7);
  const Tensor x = from_values(v, {512, 4096});
  const int threads = get_num_threads();
  const std::vector<float> full = values_of(sum(x));
  const std::vector<float> rows = values_of(sum(x, {1}));
  const std::vector<float> cols = values_of(sum(x, {0}));
  for (int n : {1, 2, 3}) {
    set_num_threads(n);
    for (int rep = 0; rep < 3; ++rep) {
      EXPECT_EQ(values_of(sum(x)), full);
      EXPECT_EQ(values_of(sum(x, {1})), rows);
      EXPECT_EQ(values_of(sum(x, {0})), cols);
    }
  }
  set_num_threads(threads);
}

TEST(ReduceSum, KeepsReducedDimsAsOnes_WhenKeepdim) {
  const Tensor x = iota({2, 3, 4});
  EXPECT_EQ(sum(x, {1}, true).shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(sum(x, {0, -1}, true).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(sum(x, {}, true).shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(sum(x, {0, 2}).shape(), (Shape{3}));
  EXPECT_EQ(sum(x).shape(), Shape{});
  EXPECT_EQ(values_of(sum(x, {0, 2})), (std::vector<float>{60, 92, 124}));
}

TEST(ReduceSum, MatchesContiguousResult_WhenInputIsPermuted) {
  const Tensor base = iota({4, 5, 6});
  const Tensor permuted = base.permute({2, 0, 1});  // [6, 4, 5], no copy
  const Tensor copy = permuted.contiguous();
  for (const Dims& dims : {Dims{0}, Dims{1}, Dims{2}, Dims{0, 1}, Dims{1, 2}, Dims{0, 2}}) {
    EXPECT_EQ(values_of(sum(permuted, dims)), values_of(sum(copy, dims)));
    EXPECT_EQ(values_of(amax(permuted, dims, true)), values_of(amax(copy, dims, true)));
  }
}

TEST(ReduceSum, GivesInt64_WhenInputIsIntegerOrBool) {
  Tensor b = Tensor::empty({3}, DType::kBool);
  bool* p = b.data<bool>();
  p[0] = true;
  p[1] = false;
  p[2] = true;
  const Tensor s = sum(b);
  EXPECT_EQ(s.dtype(), DType::kInt64);
  EXPECT_EQ(s.data<int64_t>()[0], 2);
  EXPECT_EQ(cumsum(b, 0).dtype(), DType::kInt64);
  EXPECT_EQ(mean(b).dtype(), DType::kFloat32);
  EXPECT_EQ(sum(b, {}, false, DType::kFloat64).dtype(), DType::kFloat64);
}

TEST(ReduceMean, ConvertsFirst_WhenGivenADtype) {
  const Tensor x = iota({2, 3});
  const Tensor m = mean(x, {1}, false, DType::kFloat64);
  EXPECT_EQ(m.dtype(), DType::kFloat64);
  EXPECT_EQ(m.data<double>()[0], 1.0);
  EXPECT_EQ(m.data<double>()[1], 4.0);
  const Error e = error_of([&] { mean(x, {}, false, DType::kInt32); });
  EXPECT_EQ(e.kind(), ErrorKind::kDType);
  EXPECT_EQ(e.message(), "mean: expected a floating dtype to compute in, got int32");
}

TEST(ReduceMean, GivesNaN_WhenReducingAnEmptyDim) {
  const Tensor x = Tensor::empty({3, 0}, DType::kFloat32);
  const std::vector<float> m = values_of(mean(x, {1}));
  ASSERT_EQ(m.size(), 3u);
  for (float v : m) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(values_of(sum(x, {1})), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(values_of(prod(x, {1})), (std::vector<float>{1, 1, 1}));
}

TEST(Reduce, ThrowsIndexErrorNamingTheDim_WhenDimOutOfRange) {
  const Tensor x = iota({2, 3});
  const Error e = error_of([&] { sum(x, {2}); });
  EXPECT_EQ(e.kind(), ErrorKind::kIndex);
  EXPECT_EQ(e.message(),
            "sum: dim out of range: expected a value in [-2, 1] for a 2-d tensor, got 2");
  EXPECT_EQ(error_of([&] { max(x, -3); }).kind(), ErrorKind::kIndex);
  EXPECT_EQ(error_of([&] { softmax(x, 5); }).kind(), ErrorKind::kIndex);
  EXPECT_EQ(error_of([&] { cumsum(x, 2); }).kind(), ErrorKind::kIndex);
}

TEST(Reduce, ThrowsValueError_WhenDimListedTwice) {
  const Error e = error_of([&] { mean(iota({2, 3}), {1, -1}); });
  EXPECT_EQ(e.kind(), ErrorKind::kValue);
  EXPECT_EQ(e.message(), "mean: expected each dim at most once, got dim -1 twice in dims [1, -1]");
}

TEST(ReduceMax, ThrowsValueError_WhenReducingAnEmptyDim) {
  const Tensor x = Tensor::empty({2, 0}, DType::kFloat32);
  const Error e = error_of([&] { amax(x, {1}); });
  EXPECT_EQ(e.kind(), ErrorKind::kValue);
  EXPECT_EQ(e.message(),
            "amax: cannot reduce over an empty dimension: expected dim 1 of shape [2, 0] to have "
            "a nonzero size, got 0");
  EXPECT_EQ(error_of([&] { argmax(x); }).kind(), ErrorKind::kValue);
  EXPECT_EQ(error_of([&] { min(x, 1); }).kind(), ErrorKind::kValue);
  EXPECT_EQ(amax(x, {0}).shape(), (Shape{0}));  // nothing to reduce over an empty dim
}

TEST(ReduceSum, ThrowsDTypeError_WhenDtypeNarrowsTheKind) {
  const Error e = error_of([&] { sum(iota({3}), {}, false, DType::kInt32); });
  EXPECT_EQ(e.kind(), ErrorKind::kDType);
  EXPECT_NE(e.message().find("got int32"), std::string::npos) << e.message();
  EXPECT_EQ(error_of([&] { cumsum(iota({3}), 0, DType::kBool); }).kind(), ErrorKind::kDType);
}

TEST(MaxDim, ReturnsFirstIndex_WhenValuesTie) {
  const Tensor x = from_values({1, 5, 5, 2, 0, 0, -1, 0}, {2, 4});
  auto [values, indices] = max(x, 1);
  EXPECT_EQ(values_of(values), (std::vector<float>{5, 0}));
  EXPECT_EQ(indices.data<int64_t>()[0], 1);
  EXPECT_EQ(indices.data<int64_t>()[1], 0);
  auto [mins, where] = min(x, 0, true);
  EXPECT_EQ(mins.shape(), (Shape{1, 4}));
  EXPECT_EQ(where.data<int64_t>()[2], 1);  // min(5, -1) is in row 1
}

TEST(ArgMax, IndexesTheRowMajorFlattening_WhenInputIsTransposed) {
  const Tensor base = from_values({0, 9, 1, 2, 3, 4}, {2, 3});
  const Tensor t = base.transpose(0, 1);  // [[0, 2], [9, 3], [1, 4]]
  EXPECT_EQ(argmax(t).data<int64_t>()[0], 2);
  EXPECT_EQ(argmin(t, 1).data<int64_t>()[1], 1);
  EXPECT_EQ(argmax(t, std::nullopt, true).shape(), (Shape{1, 1}));
}

TEST(ArgMax, PicksTheFirstNaN_WhenInputHasNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = from_values({1, nan, 7, nan}, {4});
  EXPECT_EQ(argmax(x).data<int64_t>()[0], 1);
  EXPECT_EQ(argmin(x).data<int64_t>()[0], 1);
  EXPECT_TRUE(std::isnan(max(x).data<float>()[0]));
}

TEST(Var, DividesByCountMinusCorrection_AndGivesInfPastTheCount) {
  const Tensor x = from_values({1, 2, 3, 4}, {4});
  EXPECT_FLOAT_EQ(var(x).data<float>()[0], 5.0f / 3.0f);
  EXPECT_FLOAT_EQ(var(x, {}, 0).data<float>()[0], 1.25f);
  EXPECT_FLOAT_EQ(kiln::std(x, {}, 0).data<float>()[0], std::sqrt(1.25f));
  EXPECT_TRUE(std::isinf(var(x, {}, 4).data<float>()[0]));
  EXPECT_TRUE(std::isinf(var(x, {}, 9).data<float>()[0]));
}

TEST(Var, MatchesTwoPassResult_WhenColumnsAreLong) {
  // A large offset makes a naive sum-of-squares formula lose every digit.
  std::vector<float> v = random_values(40000 * 2, 3);
  for (float& e : v) e += 1e4f;
  const Tensor x = from_values(v, {40000, 2});
  const std::vector<float> got = values_of(var(x, {0}, 0));
  for (int c = 0; c < 2; ++c) {
    double mean = 0;
    for (int r = 0; r < 40000; ++r) mean += v[r * 2 + c];
    mean /= 40000;
    double m2 = 0;
    for (int r = 0; r < 40000; ++r) m2 += (v[r * 2 + c] - mean) * (v[r * 2 + c] - mean);
    EXPECT_NEAR(got[c], m2 / 40000, 1e-5 * m2 / 40000);
  }
}

TEST(LogSumExp, DoesNotOverflow_WhenInputsAreLarge) {
  const Tensor x = from_values({1000, 1000, -1000, -1000}, {2, 2});
  const std::vector<float> rows = values_of(logsumexp(x, {1}));
  EXPECT_FLOAT_EQ(rows[0], 1000.0f + std::log(2.0f));
  EXPECT_FLOAT_EQ(rows[1], -1000.0f + std::log(2.0f));
  EXPECT_EQ(logsumexp(x, {0}, true).shape(), (Shape{1, 2}));
}

TEST(Softmax, SumsToOne_AlongEveryDim) {
  const Tensor x = iota({3, 4, 5});
  for (int64_t dim : {0, 1, 2, -1}) {
    const Tensor y = softmax(x, dim);
    EXPECT_EQ(y.shape(), x.shape());
    const std::vector<float> totals = values_of(sum(y, {dim}));
    for (float t : totals) EXPECT_NEAR(t, 1.0f, 1e-6f) << "dim " << dim;
    const std::vector<float> ls = values_of(log_softmax(x, dim));
    const std::vector<float> s = values_of(y);
    for (size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(std::exp(ls[i]), s[i], 1e-6f);
  }
}

TEST(CumSum, ScansAlongTheGivenDim) {
  const Tensor x = iota({2, 3});
  EXPECT_EQ(values_of(cumsum(x, 1)), (std::vector<float>{0, 1, 3, 3, 7, 12}));
  EXPECT_EQ(values_of(cumsum(x, 0)), (std::vector<float>{0, 1, 2, 3, 5, 7}));
  EXPECT_EQ(values_of(cumsum(x.transpose(0, 1), 1)), (std::vector<float>{0, 3, 1, 5, 2, 7}));
}

// y[k] = a[k] * y[k - 1] + b[k] along dim 1 of [rows, n] (reversed: from the end), in double.
std::vector<double> naive_linear_scan(const std::vector<float>& a, const std::vector<float>& b,
                                      int64_t rows, int64_t n, bool reverse) {
  std::vector<double> y(a.size());
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (int64_t step = 0; step < n; ++step) {
      const int64_t k = r * n + (reverse ? n - 1 - step : step);
      acc = static_cast<double>(a[k]) * acc + b[k];
      y[k] = acc;
    }
  }
  return y;
}

TEST(LinearScan, RunsTheRecurrenceAlongEitherDimAndEitherWay) {
  const std::vector<float> av = random_values(5 * 7, 3), bv = random_values(5 * 7, 4);
  const Tensor a = from_values(av, {5, 7}), b = from_values(bv, {5, 7});
  for (bool reverse : {false, true}) {
    const std::vector<double> want = naive_linear_scan(av, bv, 5, 7, reverse);
    const std::vector<float> rows = values_of(linear_scan(a, b, 1, reverse));
    // Along dim 0 of the transposes: the same scans, read back transposed.
    const std::vector<float> cols = values_of(contiguous(
        transpose(linear_scan(transpose(a, 0, 1), transpose(b, 0, 1), 0, reverse), 0, 1)));
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_FLOAT_EQ(rows[i], static_cast<float>(want[i])) << reverse << " " << i;
      EXPECT_FLOAT_EQ(cols[i], static_cast<float>(want[i])) << reverse << " " << i;
    }
  }
  // Integers wrap as int64's products do: 3^41 overflows.
  const Tensor threes = full({45}, Scalar(int64_t{3}), DType::kInt64);
  const Tensor first =
      scatter(zeros({45}, DType::kInt64), 0, to(from_values({0}, {1}), DType::kInt64),
              Tensor::scalar(Scalar(int64_t{3})));
  const Tensor powers = linear_scan(threes, first, 0);
  uint64_t p = 1;
  for (int64_t k = 0; k < 45; ++k) {
    p *= 3;
    EXPECT_EQ(powers.data<int64_t>()[k], static_cast<int64_t>(p)) << k;
  }
  EXPECT_EQ(linear_scan(a, to(b, DType::kFloat64), 0).dtype(), DType::kFloat64);
  EXPECT_EQ(error_of([&] { linear_scan(a, transpose(b, 0, 1), 0); }).kind(), ErrorKind::kShape);
  EXPECT_EQ(error_of([&] { linear_scan(a, b, 2); }).kind(), ErrorKind::kIndex);
  const Tensor flags = zeros({3}, DType::kBool);
  EXPECT_EQ(error_of([&] { linear_scan(flags, flags, 0); }).kind(), ErrorKind::kDType);
}

/// `x` converted to `dtype` (a contiguous copy).
Tensor as_dtype(const Tensor& x, DType dtype) {
  Tensor out = Tensor::empty(x.shape(), dtype);
  copy_into(out, x);
  return out;
}

// Runs every op on every dtype over the layouts the planner distinguishes (rows, columns, the
// permuted buffer path, the copy path, chunked partials, empty), mainly for the sanitizer job;
// the extremum must not depend on the layout.
TEST(ReduceOps, RunOnEveryDtypeAndLayout) {
  const std::vector<DType> dtypes = {
      DType::kBool,  DType::kInt8,    DType::kUInt8,    DType::kInt16,   DType::kInt32,
      DType::kInt64, DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64};
  std::vector<Tensor> inputs;
  for (const Shape& shape : {Shape{}, Shape{0}, Shape{5}, Shape{2, 0, 3}, Shape{3, 4, 5},
                             Shape{2, 17000}, Shape{4096, 8}}) {
    std::vector<float> v = random_values(static_cast<size_t>(shape_numel(shape)), 11);
    for (float& e : v) e = e * 8 - 4;
    inputs.push_back(from_values(v, shape));
  }
  for (DType dtype : dtypes) {
    std::vector<Tensor> converted;
    for (const Tensor& base : inputs) converted.push_back(as_dtype(base, dtype));
    converted.push_back(converted[4].permute({2, 0, 1}));
    converted.push_back(converted[4].slice(2, 0, 5, 2));
    for (const Tensor& x : converted) {
      SCOPED_TRACE(type_str(x));
      const bool empty = x.numel() == 0;
      for (const Dims& dims : {Dims{}, Dims{0}, Dims{-1}, Dims{0, -1}}) {
        if (x.ndim() < 2 && dims.size() > 1) continue;
        sum(x, dims);
        mean(x, dims, true);
        prod(x, dims);
        var(x, dims, 1, true);
        kiln::std(x, dims);
        logsumexp(x, dims);
        if (!empty) {
          const Tensor m = amax(x, dims);
          EXPECT_EQ(values_of(as_dtype(m, DType::kFloat32)),
                    values_of(as_dtype(amax(x.contiguous(), dims), DType::kFloat32)));
          amin(x, dims, true);
        }
      }
      cumsum(x, -1);
      if (x.dtype() != DType::kBool && x.ndim() > 0) linear_scan(x, x, 0, true);
      softmax(x, 0);
      log_softmax(x, -1);
      if (!empty) {
        max(x, -1);
        min(x, 0, true);
        argmax(x);
        argmin(x, 0);
      }
    }
  }
}

TEST(ReduceOps, AreRegisteredWithTheReductionTrait) {
  for (const char* name : {"ReduceSum", "ReduceMean", "ReduceProd", "ReduceMax", "ReduceMin",
                           "MaxDim", "MinDim", "ArgMax", "ArgMin", "Var", "Std", "LogSumExp"}) {
    const OpDefPtr op = OpRegistry::Instance().get(name);
    EXPECT_TRUE(op->has_trait(kTraitReduction)) << name;
  }
  for (const char* name : {"CumSum", "Softmax", "LogSoftmax"}) {
    EXPECT_NE(OpRegistry::Instance().find(name), nullptr) << name;
  }
  EXPECT_EQ(OpRegistry::Instance().get("MaxDim")->num_outputs(), 2);
}

}  // namespace
}  // namespace kiln
