// Tests for src/ops/factory.cc: zeros, ones, full, empty, *_like, arange, linspace, eye.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/dtype_dispatch.h"
#include "kiln/functional/factory.h"
#include "kiln/op.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_error;

constexpr DType kAllDTypes[] = {DType::kBool,    DType::kInt8,     DType::kUInt8,
                                DType::kInt16,   DType::kInt32,    DType::kInt64,
                                DType::kFloat16, DType::kBFloat16, DType::kFloat32,
                                DType::kFloat64};

// Every element of a contiguous tensor as a double.
std::vector<double> values(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(t.data_ptr());
    for (size_t i = 0; i < out.size(); ++i) out[i] = convert<double>(p[i]);
  });
  return out;
}

TEST(Factory, ZerosAndOnes_FillEveryDType) {
  for (DType d : kAllDTypes) {
    Tensor z = zeros({2, 3}, d);
    Tensor o = ones({2, 3}, d);
    EXPECT_EQ(z.dtype(), d);
    EXPECT_EQ(z.shape(), (Shape{2, 3}));
    EXPECT_EQ(values(z), std::vector<double>(6, 0.0)) << d;
    EXPECT_EQ(values(o), std::vector<double>(6, 1.0)) << d;
  }
}

TEST(Factory, Zeros_DefaultsToFloat32_AndHandles0dAndEmpty) {
  EXPECT_EQ(zeros({}).dtype(), DType::kFloat32);
  EXPECT_EQ(zeros({}).numel(), 1);
  EXPECT_EQ(ones({0, 4}).numel(), 0);
  EXPECT_EQ(empty({3, 0}).shape(), (Shape{3, 0}));
}

TEST(Factory, Zeros_FillsTensorsLargerThanOneChunk) {
  const Tensor z = ones({300000}, DType::kInt32);
  const int32_t* p = z.data<int32_t>();
  int64_t sum = 0;
  for (int64_t i = 0; i < z.numel(); ++i) sum += p[i];
  EXPECT_EQ(sum, 300000);
}

TEST(Factory, Empty_HasShapeDTypeAndMemory) {
  const Tensor t = empty({4, 5}, DType::kInt16);
  EXPECT_EQ(t.dtype(), DType::kInt16);
  EXPECT_EQ(t.shape(), (Shape{4, 5}));
  EXPECT_TRUE(t.has_storage());
}

TEST(Factory, Full_DefaultDTypeFollowsTheValue) {
  EXPECT_EQ(full({2}, Scalar(true)).dtype(), DType::kBool);
  EXPECT_EQ(full({2}, Scalar(3)).dtype(), DType::kInt64);
  EXPECT_EQ(full({2}, Scalar(2.5)).dtype(), DType::kFloat32);
  EXPECT_EQ(values(full({2}, Scalar(2.5))), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(values(full({3}, Scalar(-7))), (std::vector<double>{-7, -7, -7}));
}

TEST(Factory, Full_ConvertsToAnExplicitDType) {
  EXPECT_EQ(values(full({2}, Scalar(2.75), DType::kInt32)), (std::vector<double>{2, 2}));
  EXPECT_EQ(values(full({1}, Scalar(-2.75), DType::kInt8)), (std::vector<double>{-2}));
  EXPECT_EQ(values(full({1}, Scalar(5), DType::kBool)), (std::vector<double>{1}));
  EXPECT_EQ(values(full({1}, Scalar(0.1), DType::kFloat64)), (std::vector<double>{0.1}));
  EXPECT_EQ(values(full({1}, Scalar(1e300), DType::kFloat32))[0],
            std::numeric_limits<double>::infinity());
}

TEST(Factory, Full_RejectsValuesOutsideAnIntegerDType) {
  expect_error([] { full({2}, Scalar(300), DType::kInt8); }, ErrorKind::kValue,
               "Full: expected a fill value representable in int8, got 300");
  expect_error([] { full({2}, Scalar(-1), DType::kUInt8); }, ErrorKind::kValue, "uint8");
  expect_error([] { full({2}, Scalar(std::nan("")), DType::kInt64); }, ErrorKind::kValue,
               "int64");
  expect_error([] { full({2}, Scalar(1e19), DType::kInt64); }, ErrorKind::kValue, "int64");
}

TEST(Factory, NegativeSizes_AreShapeErrorsNamingTheOp) {
  expect_error([] { zeros({2, -1}); }, ErrorKind::kShape,
               "Zeros: expected non-negative sizes, got [2, -1]");
  expect_error([] { ones({-3}); }, ErrorKind::kShape, "Ones:");
  expect_error([] { empty({-3}); }, ErrorKind::kShape, "Empty:");
  expect_error([] { full({-3}, Scalar(1)); }, ErrorKind::kShape, "Full:");
  expect_error([] { eye(-1); }, ErrorKind::kShape, "Eye: expected non-negative sizes");
  expect_error([] { eye(2, -2); }, ErrorKind::kShape, "[2, -2]");
}

TEST(Factory, Like_KeepsShapeAndDType_UnlessOverridden) {
  const Tensor x = empty({2, 5}, DType::kFloat16).transpose(0, 1);
  const Tensor z = zeros_like(x);
  EXPECT_EQ(z.shape(), (Shape{5, 2}));
  EXPECT_EQ(z.dtype(), DType::kFloat16);
  EXPECT_TRUE(z.is_contiguous());
  const Tensor o = ones_like(x, DType::kInt64);
  EXPECT_EQ(o.dtype(), DType::kInt64);
  EXPECT_EQ(values(o), std::vector<double>(10, 1.0));
}

TEST(Factory, Arange_IntegersGiveInt64_FloatsGiveFloat32) {
  const Tensor a = arange(0, 5);
  EXPECT_EQ(a.dtype(), DType::kInt64);
  EXPECT_EQ(values(a), (std::vector<double>{0, 1, 2, 3, 4}));
  const Tensor f = arange(0, Scalar(1.0), Scalar(0.25));
  EXPECT_EQ(f.dtype(), DType::kFloat32);
  EXPECT_EQ(values(f), (std::vector<double>{0, 0.25, 0.5, 0.75}));
}

TEST(Factory, Arange_LengthIsCeilOfTheSpanOverTheStep) {
  EXPECT_EQ(values(arange(1, 10, 3)), (std::vector<double>{1, 4, 7}));
  EXPECT_EQ(values(arange(1, 11, 3)), (std::vector<double>{1, 4, 7, 10}));
  EXPECT_EQ(values(arange(5, 0, -2)), (std::vector<double>{5, 3, 1}));
  EXPECT_EQ(arange(5, 5).numel(), 0);
  EXPECT_EQ(arange(5, 0).numel(), 0);
  EXPECT_EQ(arange(0, 5, -1).numel(), 0);
  EXPECT_EQ(arange(Scalar(0.0), Scalar(1.0), Scalar(0.1)).numel(), 10);
  EXPECT_EQ(arange(Scalar(1.0), Scalar(0.0), Scalar(-0.3)).numel(), 4);
}

TEST(Factory, Arange_HonoursAnExplicitDType) {
  const Tensor h = arange(0, 4, 1, DType::kFloat16);
  EXPECT_EQ(h.dtype(), DType::kFloat16);
  EXPECT_EQ(values(h), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(values(arange(Scalar(0.5), Scalar(3.0), Scalar(1.0), DType::kInt32)),
            (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(values(arange(-3, 3, 2, DType::kInt8)), (std::vector<double>{-3, -1, 1}));
}

TEST(Factory, Arange_IsExactAtTheInt64Extremes) {
  const int64_t lo = std::numeric_limits<int64_t>::min();
  const int64_t hi = std::numeric_limits<int64_t>::max();
  const int64_t step = int64_t{1} << 62;
  const Tensor a = arange(lo, hi, step);
  ASSERT_EQ(a.numel(), 4);
  const int64_t* p = a.data<int64_t>();
  EXPECT_EQ(p[0], lo);
  EXPECT_EQ(p[3], int64_t{1} << 62);  // -2^63 + 3 * 2^62
  const Tensor down = arange(hi, lo, -step);
  ASSERT_EQ(down.numel(), 4);
  EXPECT_EQ(down.data<int64_t>()[3], -(int64_t{1} << 62) - 1);  // 2^63 - 1 - 3 * 2^62
}

TEST(Factory, Arange_RejectsBadArguments) {
  expect_error([] { arange(0, 5, 0); }, ErrorKind::kValue, "Arange: expected a nonzero step");
  expect_error([] { arange(Scalar(0.0), Scalar(1.0), Scalar(0.0)); }, ErrorKind::kValue,
               "nonzero step");
  expect_error([] { arange(0, 5, 1, DType::kBool); }, ErrorKind::kDType,
               "Arange: expected a numeric dtype, got bool");
  expect_error([] { arange(0, 300, 1, DType::kInt8); }, ErrorKind::kValue,
               "Arange: expected values representable in int8");
  expect_error([] { arange(Scalar(0.0), Scalar(300.0), Scalar(1.0), DType::kUInt8); },
               ErrorKind::kValue, "uint8");
  expect_error([] { arange(Scalar(0.0), Scalar(std::nan("")), Scalar(1.0)); },
               ErrorKind::kValue, "finite");
  expect_error([] { arange(Scalar(0.0), Scalar(1e300), Scalar(1.0)); }, ErrorKind::kValue,
               "Arange: expected at most");
  expect_error([] { arange(0, std::numeric_limits<int64_t>::max(), 1); }, ErrorKind::kValue,
               "at most");
}

TEST(Factory, Linspace_IncludesBothEnds) {
  EXPECT_EQ(values(linspace(0, 1, 5)), (std::vector<double>{0, 0.25, 0.5, 0.75, 1}));
  EXPECT_EQ(values(linspace(3, -3, 3, DType::kFloat64)), (std::vector<double>{3, 0, -3}));
  EXPECT_EQ(values(linspace(2, 7, 1)), (std::vector<double>{2}));
  EXPECT_EQ(linspace(2, 7, 0).numel(), 0);
  const std::vector<double> v = values(linspace(0.1, 0.7, 7, DType::kFloat64));
  EXPECT_EQ(v.back(), 0.7);  // exactly the end, not an accumulated sum
}

TEST(Factory, Linspace_RoundsDownForIntegerDTypes) {
  EXPECT_EQ(values(linspace(0, 10, 4, DType::kInt64)), (std::vector<double>{0, 3, 6, 10}));
  EXPECT_EQ(values(linspace(-1, 1, 5, DType::kInt32)), (std::vector<double>{-1, -1, 0, 0, 1}));
}

TEST(Factory, Linspace_RejectsBadArguments) {
  expect_error([] { linspace(0, 1, -1); }, ErrorKind::kValue,
               "Linspace: expected steps >= 0, got -1");
  expect_error([] { linspace(0, 1000, 3, DType::kInt8); }, ErrorKind::kValue,
               "Linspace: expected start and end representable in int8");
  expect_error([] { linspace(0, std::nan(""), 3, DType::kInt32); }, ErrorKind::kValue, "int32");
}

TEST(Factory, Eye_PutsOnesOnTheDiagonal) {
  EXPECT_EQ(values(eye(2)), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(values(eye(2, 3, DType::kInt8)), (std::vector<double>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(values(eye(3, 1, DType::kBool)), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(eye(0).shape(), (Shape{0, 0}));
  EXPECT_EQ(eye(2, 0).shape(), (Shape{2, 0}));
}

TEST(Factory, Ops_HaveNoTensorInputs_SoGraphsCanRecordThem) {
  for (const char* name : {"Zeros", "Ones", "Full", "Empty", "Arange", "Linspace", "Eye"}) {
    EXPECT_TRUE(OpRegistry::Instance().get(name)->input_specs().empty()) << name;
  }
  const std::vector<Tensor> out =
      call_op("Full", {}, {{"shape", std::vector<int64_t>{2}}, {"value", Scalar(4)},
                           {"dtype", DType::kInt16}});
  EXPECT_EQ(out[0].dtype(), DType::kInt16);
  EXPECT_EQ(values(out[0]), (std::vector<double>{4, 4}));
}

}  // namespace
}  // namespace kiln
