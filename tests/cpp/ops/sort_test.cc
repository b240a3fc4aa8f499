// Tests for Sort and TopK (src/ops/sort.cc): order against std::stable_sort along every dim of
// strided inputs, NaN placement, stability of ties, k selection, gradients and errors. NumPy and
// PyTorch comparisons across dtypes live in tests/python/test_sort.py.
#include "kiln/functional/sort.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "grad_testing.h"
#include "kiln/functional.h"
#include "kiln/op.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_error;

Tensor floats(const std::vector<float>& values, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::kFloat32);
  std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(float));
  return t;
}

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<T>(c.data<T>(), c.data<T>() + c.numel());
}

// Random values from a few levels, so that slices hold ties.
Tensor tied_values(const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> level(-3, 3);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = static_cast<float>(level(gen)) * 0.5f;
  return floats(v, shape);
}

TEST(Sort, MatchesStableSortAlongEachDim_OfATransposedInput) {
  const Tensor base = tied_values({6, 5, 7}, 1);
  const Tensor x = base.transpose(0, 2);  // [7, 5, 6], strided
  for (int64_t dim = 0; dim < 3; ++dim) {
    for (bool descending : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "dim " << dim << " descending " << descending);
      auto [values, indices] = sort(x, dim, descending);
      ASSERT_EQ(values.shape(), x.shape());
      // Each slice, moved to the last dim, against std::stable_sort of its positions.
      const Tensor xs = x.transpose(dim, 2).contiguous();
      const std::vector<float> in = values_of<float>(xs);
      const std::vector<float> got = values_of<float>(values.transpose(dim, 2));
      const std::vector<int64_t> at = values_of<int64_t>(indices.transpose(dim, 2));
      const int64_t len = x.shape()[dim];
      for (int64_t s = 0; s * len < xs.numel(); ++s) {
        std::vector<int64_t> order(static_cast<size_t>(len));
        std::iota(order.begin(), order.end(), 0);
        const float* slice = in.data() + s * len;
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return descending ? slice[a] > slice[b] : slice[a] < slice[b];
        });
        for (int64_t i = 0; i < len; ++i) {
          ASSERT_EQ(at[s * len + i], order[i]) << "slice " << s << " element " << i;
          ASSERT_EQ(got[s * len + i], slice[order[i]]);
        }
      }
    }
  }
}

TEST(Sort, PlacesNaNAboveEveryNumber) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = floats({nan, 1, -inf, nan, inf, -0.0f, 0.0f}, {7});
  auto [up, up_at] = sort(x);
  EXPECT_EQ(values_of<int64_t>(up_at), (std::vector<int64_t>{2, 5, 6, 1, 4, 0, 3}));
  EXPECT_TRUE(std::isnan(values_of<float>(up)[6]));
  auto [down, down_at] = sort(x, 0, true);
  EXPECT_EQ(values_of<int64_t>(down_at), (std::vector<int64_t>{0, 3, 4, 1, 5, 6, 2}));
  EXPECT_EQ(values_of<int64_t>(argsort(x, -1, true)), values_of<int64_t>(down_at));
}

TEST(Sort, SortsEveryDtype) {
  const Tensor x = floats({3, -1, 2, 0, 2}, {5});
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,
                      DType::kInt32, DType::kInt64, DType::kUInt8, DType::kBool}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor typed = to(dtype == DType::kUInt8 ? abs(x) : x, dtype);
    auto [values, indices] = sort(typed);
    EXPECT_EQ(values.dtype(), dtype);
    const std::vector<double> got = values_of<double>(to(values, DType::kFloat64));
    EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
    // Gathering the input at the indices gives the values.
    EXPECT_EQ(values_of<double>(to(gather(typed, 0, indices), DType::kFloat64)), got);
  }
}

TEST(TopK, KeepsTheKLargestOrSmallestInOrder) {
  const Tensor x = floats({4, 1, 4, 9, 0, 1, 7, 2}, {2, 4});
  auto [values, indices] = topk(x, 2, 1);
  EXPECT_EQ(values_of<float>(values), (std::vector<float>{9, 4, 7, 2}));
  EXPECT_EQ(values_of<int64_t>(indices), (std::vector<int64_t>{3, 0, 2, 3}));
  auto [low, low_at] = topk(x, 1, 0, false);
  EXPECT_EQ(low.shape(), (Shape{1, 4}));
  EXPECT_EQ(values_of<float>(low), (std::vector<float>{0, 1, 4, 2}));
  EXPECT_EQ(values_of<int64_t>(low_at), (std::vector<int64_t>{1, 0, 0, 1}));  // a tie: row 0
  auto [none, none_at] = topk(x, 0, 1);
  EXPECT_EQ(none.shape(), (Shape{2, 0}));
  auto [scalar, scalar_at] = topk(Tensor::scalar(Scalar(2.5)), 1);
  EXPECT_EQ(scalar.shape(), Shape{});
  EXPECT_EQ(scalar_at.data<int64_t>()[0], 0);
}

TEST(TopK, AgreesWithSortOnLongSlices) {
  // Ties, and a NaN every 97 elements.
  std::vector<float> v = values_of<float>(tied_values({3, 1000}, 2));
  for (size_t i = 0; i < v.size(); i += 97) v[i] = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = floats(v, {3, 1000});
  // k = 3 keeps a heap (the slice is over 64 times longer), k = 37 selects with nth_element.
  for (int64_t k : {3, 37}) {
    for (bool largest : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "k " << k << " largest " << largest);
      auto [values, indices] = topk(x, k, 1, largest);
      auto [sorted, order] = sort(x, 1, largest);
      EXPECT_EQ(values_of<int64_t>(indices), values_of<int64_t>(order.narrow(1, 0, k)));
      const std::vector<float> got = values_of<float>(values);
      const std::vector<float> want = values_of<float>(sorted.narrow(1, 0, k));
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);  // NaNs
    }
  }
}

TEST(Sort, GradientsGoToTheSortedPositions) {
  manual_seed(4);
  for (int64_t dim : {0, 1, -1}) {
    testing::expect_grad_rule("Sort", {randn({3, 4}, DType::kFloat64)},
                              {{"dim", dim}, {"descending", dim == 0}});
    testing::expect_grad_rule("TopK", {randn({3, 4}, DType::kFloat64)},
                              {{"k", int64_t{2}}, {"dim", dim}, {"largest", dim != 0}});
  }
  testing::expect_grad_rule("Sort", {randn({}, DType::kFloat64)});
  testing::expect_grad_rule("TopK", {randn({}, DType::kFloat64)}, {{"k", int64_t{1}}});
}

TEST(TopK, RefusesKOutsideTheSlice) {
  const Tensor x = floats({1, 2, 3}, {3});
  expect_error([&] { topk(x, 4); }, ErrorKind::kValue, "expected k in [0, 3]");
  expect_error([&] { topk(x, -1); }, ErrorKind::kValue, "got -1");
  expect_error([&] { topk(Tensor::scalar(Scalar(1.0)), 0); }, ErrorKind::kValue,
               "k = 1 for a 0-d tensor");
  expect_error([&] { sort(x, 1); }, ErrorKind::kIndex, "sort: dim out of range");
  expect_error([&] { topk(x, 1, -2); }, ErrorKind::kIndex, "topk: dim out of range");
}

}  // namespace
}  // namespace kiln
