#include "kiln/functional/elementwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/dtype_dispatch.h"
#include "testing.h"

namespace kiln {
namespace {

// A contiguous tensor of `dtype` holding `values` (converted as a cast would).
Tensor make(const Shape& shape, const std::vector<double>& values, DType dtype = DType::kFloat32) {
  Tensor t = Tensor::empty(shape, dtype);
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(t.data_ptr());
    for (size_t i = 0; i < values.size(); ++i) p[i] = convert<T>(values[i]);
  });
  return t;
}

// The elements of any tensor in row-major order, as doubles.
std::vector<double> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<double> out(static_cast<size_t>(c.numel()));
  visit_dtype(c.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(c.data_ptr());
    for (size_t i = 0; i < out.size(); ++i) out[i] = convert<double>(p[i]);
  });
  return out;
}

// The text of the kiln::Error of `kind` that `fn` raises (at the call or the next sync point).
template <typename Fn>
std::string error_of(ErrorKind kind, Fn&& fn) {
  const Error e = testing::error_of(std::forward<Fn>(fn));
  EXPECT_EQ(e.kind(), kind) << e.what();
  return e.what();
}

TEST(Elementwise, BroadcastsColumnAgainstRow) {
  const Tensor a = make({3, 1}, {0, 10, 20});
  const Tensor b = make({1, 4}, {1, 2, 3, 4});
  const Tensor c = add(a, b);
  EXPECT_EQ(c.shape(), (Shape{3, 4}));
  EXPECT_EQ(values(c), (std::vector<double>{1, 2, 3, 4, 11, 12, 13, 14, 21, 22, 23, 24}));
}

TEST(Elementwise, NamesBothShapes_WhenShapesDoNotBroadcast) {
  const std::string what = error_of(ErrorKind::kShape, [] {
    add(make({3}, {1, 2, 3}), make({4}, {1, 2, 3, 4}));
  });
  EXPECT_NE(what.find("[3]"), std::string::npos) << what;
  EXPECT_NE(what.find("[4]"), std::string::npos) << what;
  EXPECT_NE(what.find("Add"), std::string::npos) << what;
}

TEST(Elementwise, PromotesTensorDTypes_WithKilnsTable) {
  EXPECT_EQ(add(make({2}, {1, 2}, DType::kInt32), make({2}, {1, 2})).dtype(), DType::kFloat32);
  EXPECT_EQ(mul(make({1}, {3}, DType::kUInt8), make({1}, {-2}, DType::kInt8)).dtype(),
            DType::kInt16);
  EXPECT_EQ(div(make({1}, {3}, DType::kInt32), make({1}, {2}, DType::kInt32)).dtype(),
            DType::kFloat32);
  EXPECT_EQ(values(div(make({1}, {3}, DType::kInt32), make({1}, {2}, DType::kInt32))),
            (std::vector<double>{1.5}));
  EXPECT_EQ(lt(make({1}, {1}, DType::kInt64), make({1}, {1.5})).dtype(), DType::kBool);
}

TEST(Elementwise, KeepsTensorDType_WhenScalarIsWeak) {
  const Tensor i8 = make({2}, {100, -3}, DType::kInt8);
  EXPECT_EQ(add(i8, Tensor::scalar(1)).dtype(), DType::kInt8);
  EXPECT_EQ((i8 * 2.5).dtype(), DType::kFloat32);
  const Tensor h = make({2}, {1, 2}, DType::kFloat16);
  EXPECT_EQ((h + 1.0).dtype(), DType::kFloat16);
  EXPECT_EQ(values(h + 1.0), (std::vector<double>{2, 3}));
  const Tensor flags = make({2}, {1, 0}, DType::kBool);
  EXPECT_EQ((flags + Scalar(int64_t{1})).dtype(), DType::kInt64);
  EXPECT_EQ(add(flags, flags).dtype(), DType::kBool);
  // A weak integer outside int8's range still compares by value.
  EXPECT_EQ(values(eq(i8, Tensor::scalar(1124))), (std::vector<double>{0, 0}));
}

TEST(Elementwise, WritesIntoOut_WithoutAllocating) {
  const Tensor a = make({2, 2}, {1, 2, 3, 4});
  const Tensor out = Tensor::empty({2, 2});
  const void* before = out.data_ptr();
  const Tensor r = mul(a, a, out);
  EXPECT_TRUE(r.is_same(out));
  EXPECT_EQ(out.data_ptr(), before);
  EXPECT_EQ(values(out), (std::vector<double>{1, 4, 9, 16}));
  // Another dtype converts where PyTorch's rule allows it (int into float, float into float64);
  // a float result into an integer or bool out is a dtype error; another shape a shape error.
  const Tensor ints = to(make({2, 2}, {1, 2, 3, 4}), DType::kInt64);
  const Tensor as_float = Tensor::empty({2, 2}, DType::kFloat64);
  add(ints, ints, as_float);
  EXPECT_EQ(values(as_float), (std::vector<double>{2, 4, 6, 8}));
  const Tensor as_int = Tensor::empty({2, 2}, DType::kInt64);
  error_of(ErrorKind::kDType, [&] { add(a, a, as_int); });
  error_of(ErrorKind::kDType, [&] { add(ints, ints, Tensor::empty({2, 2}, DType::kBool)); });
  error_of(ErrorKind::kShape, [&] { add(a, a, Tensor::empty({4})); });
}

TEST(Elementwise, ReadsStridedInputs) {
  const Tensor base = make({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  const Tensor t = base.transpose(0, 1);    // [4, 3], non-contiguous
  const Tensor s = base.slice(1, 0, 4, 2);  // [3, 2], step 2
  EXPECT_EQ(values(neg(t)), (std::vector<double>{0, -4, -8, -1, -5, -9, -2, -6, -10, -3, -7, -11}));
  EXPECT_EQ(values(sub(s, s.slice(1, 1, 2))), (std::vector<double>{-2, 0, -2, 0, -2, 0}));
  const Tensor in_place = base.clone();
  add(in_place, in_place.transpose(0, 1).transpose(0, 1), in_place);
  EXPECT_EQ(values(in_place)[11], 22);
}

TEST(Elementwise, MatchesScalarPath_OnLargeContiguousAndBroadcastInputs) {
  const int64_t n = (int64_t{1} << 17) + 3;  // several parallel chunks and a ragged tail
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>(i % 97) - 48;
  const Tensor x = make({n}, v);
  const std::vector<double> sum = values(x + x);
  const std::vector<double> shifted = values(x - 1.0);
  const std::vector<double> flipped = values(1.0 - x);
  for (int64_t i = 0; i < n; i += 4099) {
    const double e = v[static_cast<size_t>(i)];
    EXPECT_EQ(sum[static_cast<size_t>(i)], 2 * e);
    EXPECT_EQ(shifted[static_cast<size_t>(i)], e - 1);
    EXPECT_EQ(flipped[static_cast<size_t>(i)], 1 - e);
  }
}

TEST(Elementwise, NegFlipsTheSignOfZeros_AtEverySize) {
  // One element takes the scalar path, 64 the SIMD one: both give IEEE negation (-(+0) is -0),
  // as NumPy does, so rewriting x + neg(y) to x - y keeps the bits.
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    for (int64_t n : {1, 3, 64}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " x " + std::to_string(n));
      for (double zero : {0.0, -0.0}) {
        for (double v : values(neg(make({n}, std::vector<double>(n, zero), dtype)))) {
          EXPECT_EQ(std::signbit(v), !std::signbit(zero));
        }
      }
    }
  }
}

TEST(Elementwise, SupportsCppOperators) {
  const Tensor a = make({3}, {1, 2, 4});
  EXPECT_EQ(values(a + a), (std::vector<double>{2, 4, 8}));
  EXPECT_EQ(values(a - 1.0), (std::vector<double>{0, 1, 3}));
  EXPECT_EQ(values(2.0 * a), (std::vector<double>{2, 4, 8}));
  EXPECT_EQ(values(1.0 / a), (std::vector<double>{1, 0.5, 0.25}));
  EXPECT_EQ(values(-a), (std::vector<double>{-1, -2, -4}));
  EXPECT_EQ(values(a / a - a * a), (std::vector<double>{0, -3, -15}));
}

TEST(Elementwise, WrapsIntegerOverflow_WithoutUndefinedBehaviour) {
  constexpr double kMin = std::numeric_limits<int32_t>::min();
  constexpr double kMax = std::numeric_limits<int32_t>::max();
  const Tensor x = make({2}, {kMax, kMin}, DType::kInt32);
  EXPECT_EQ(values(x + Scalar(1)), (std::vector<double>{kMin, kMin + 1}));
  EXPECT_EQ(values(neg(x)), (std::vector<double>{-kMax, kMin}));
  EXPECT_EQ(values(abs(x)), (std::vector<double>{kMax, kMin}));
  EXPECT_EQ(values(floor_divide(x, Tensor::scalar(-1))), (std::vector<double>{-kMax, kMin}));
  EXPECT_EQ(values(trunc_divide(x, Tensor::scalar(-1))), (std::vector<double>{-kMax, kMin}));
  EXPECT_EQ(values(remainder(x, Tensor::scalar(-1))), (std::vector<double>{0, 0}));
  EXPECT_EQ(values(mul(make({1}, {30000}, DType::kInt16), make({1}, {3}, DType::kInt16)))[0],
            static_cast<int16_t>(static_cast<uint16_t>(90000u & 0xffffu)));
}

// A tensor of shape `shape` holding `v` exactly (make() goes through double, which cannot hold
// every int64).
template <typename T>
Tensor exact(const Shape& shape, const std::vector<T>& v) {
  Tensor t = Tensor::empty(shape, dtype_of<T>());
  std::copy(v.begin(), v.end(), t.data<T>());
  return t;
}

// Every integer kernel on every pair of extreme values: the sanitizer job turns any signed
// overflow or bad shift here into a failure.
TEST(Elementwise, StaysDefined_OnExtremeIntegers) {
  using Binary = Tensor (*)(const Tensor&, const Tensor&, const Tensor&);
  using Unary = Tensor (*)(const Tensor&, const Tensor&);
  const Binary any_b[] = {&add,
                          &sub,
                          &mul,
                          &div,
                          &maximum,
                          &minimum,
                          &eq,
                          &lt,
                          &logical_xor,
                          &bitwise_and,
                          &bitwise_xor,
                          &bitwise_left_shift,
                          &bitwise_right_shift};
  const Binary nonzero_b[] = {&floor_divide, &trunc_divide, &remainder};
  const Unary unary[] = {&neg,   &abs,   &sign, &square,      &relu,       &floor,
                         &round, &trunc, &exp,  &logical_not, &bitwise_not};
  for (DType dtype : {DType::kInt8, DType::kUInt8, DType::kInt16, DType::kInt32, DType::kInt64}) {
    visit_dtype(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        using L = std::numeric_limits<T>;
        const std::vector<T> all{L::min(), static_cast<T>(L::min() + 1), T(0), T(1), L::max()};
        const Tensor a = exact<T>({5, 1}, all);
        const Tensor b = exact<T>({1, 5}, all);
        const T lowest_nonzero = L::min() == 0 ? T(2) : L::min();
        const Tensor nonzero = exact<T>({1, 3}, {lowest_nonzero, T(1), L::max()});
        const Tensor minus_one = Tensor::scalar(-1);
        for (Binary f : any_b) EXPECT_EQ(f(a, b, {}).numel(), 25);
        for (Binary f : nonzero_b) {
          EXPECT_EQ(f(a, nonzero, {}).numel(), 15);
          EXPECT_EQ(f(a, minus_one, {}).numel(), 5);
        }
        EXPECT_EQ(pow(a, exact<T>({1, 3}, {T(0), T(2), L::max()})).numel(), 15);
        for (Unary f : unary) EXPECT_EQ(f(a, {}).numel(), 5);
        EXPECT_EQ(clamp(a, Scalar(int64_t{-1000}), Scalar(int64_t{1000})).numel(), 5);
      }
    });
  }
}

TEST(Elementwise, ComputesBitwiseOps_OnIntegersAndBools) {
  const Tensor a = exact<int8_t>({4}, {0x0F, -128, 5, -1});
  const Tensor b = exact<int8_t>({4}, {0x3C, 1, 3, 7});
  EXPECT_EQ(values(bitwise_and(a, b)), (std::vector<double>{0x0C, 0, 1, 7}));
  EXPECT_EQ(values(bitwise_or(a, b)), (std::vector<double>{0x3F, -127, 7, -1}));
  EXPECT_EQ(values(bitwise_xor(a, b)), (std::vector<double>{0x33, -127, 6, -8}));
  EXPECT_EQ(values(bitwise_not(a)), (std::vector<double>{-16, 127, -6, 0}));
  // Bits shifted past the width are lost; a right shift of a signed value is arithmetic.
  EXPECT_EQ(values(bitwise_left_shift(a, b)), (std::vector<double>{0, 0, 40, -128}));
  EXPECT_EQ(values(bitwise_right_shift(a, b)), (std::vector<double>{0, -64, 0, -1}));
  const Tensor flags = make({2}, {1, 0}, DType::kBool);
  EXPECT_EQ(bitwise_xor(flags, flags).dtype(), DType::kBool);
  EXPECT_EQ(values(bitwise_not(flags)), (std::vector<double>{0, 1}));
  const Tensor or_flags = bitwise_or(flags, exact<int8_t>({2}, {2, 4}));
  EXPECT_EQ(or_flags.dtype(), DType::kInt8);
  EXPECT_EQ(values(or_flags), (std::vector<double>{3, 4}));
}

TEST(Elementwise, ShiftsEveryBitOut_ByNegativeAmountsOrTheWidth) {
  const Tensor a = exact<int32_t>({3}, {-5, 5, std::numeric_limits<int32_t>::min()});
  for (int32_t amount : {32, 33, 1000, -1, std::numeric_limits<int32_t>::min()}) {
    const Tensor b = Tensor::scalar(int64_t{amount});
    EXPECT_EQ(values(bitwise_left_shift(a, b)), (std::vector<double>{0, 0, 0})) << amount;
    EXPECT_EQ(values(bitwise_right_shift(a, b)), (std::vector<double>{-1, 0, -1})) << amount;
  }
  const Tensor u = exact<uint8_t>({2}, {0xFF, 1});
  EXPECT_EQ(values(bitwise_right_shift(u, Tensor::scalar(8))), (std::vector<double>{0, 0}));
  EXPECT_EQ(values(bitwise_left_shift(u, Tensor::scalar(7))), (std::vector<double>{128, 128}));
}

TEST(Elementwise, RefusesFloatingPointBitwiseOps_AndBoolShifts) {
  const Tensor x = make({2}, {1.5, 2});
  const Tensor i = make({2}, {1, 2}, DType::kInt32);
  const Tensor flags = make({2}, {1, 0}, DType::kBool);
  const std::string what = error_of(ErrorKind::kDType, [&] { bitwise_and(x, i); });
  EXPECT_NE(what.find("BitwiseAnd: expected integer or bool operands, got float32 and int32"),
            std::string::npos)
      << what;
  error_of(ErrorKind::kDType, [&] { bitwise_not(x); });
  error_of(ErrorKind::kDType, [&] { bitwise_or(i, Tensor::scalar(0.5)); });
  EXPECT_NE(error_of(ErrorKind::kDType, [&] { bitwise_left_shift(flags, flags); })
                .find("shifting bools has no meaning"),
            std::string::npos);
}

TEST(Elementwise, FollowsPythonRounding_ForFloorDivideAndRemainder) {
  const Tensor a = make({4}, {7, -7, 7, -7}, DType::kInt64);
  const Tensor b = make({4}, {2, 2, -2, -2}, DType::kInt64);
  EXPECT_EQ(values(floor_divide(a, b)), (std::vector<double>{3, -4, -4, 3}));
  EXPECT_EQ(values(remainder(a, b)), (std::vector<double>{1, 1, -1, -1}));
  const Tensor fa = make({2}, {-7.5, 7.5});
  EXPECT_EQ(values(remainder(fa, Tensor::scalar(2.0))), (std::vector<double>{0.5, 1.5}));
  EXPECT_EQ(values(floor_divide(fa, Tensor::scalar(2.0))), (std::vector<double>{-4, 3}));
}

TEST(Elementwise, RoundsTowardZero_ForTruncAndTruncDivide) {
  const Tensor a = make({4}, {7, -7, 7, -7}, DType::kInt64);
  const Tensor b = make({4}, {2, 2, -2, -2}, DType::kInt64);
  EXPECT_EQ(values(trunc_divide(a, b)), (std::vector<double>{3, -3, -3, 3}));
  EXPECT_EQ(trunc_divide(a, b).dtype(), DType::kInt64);
  const Tensor fa = make({3}, {-7.5, 7.5, -1.5});
  EXPECT_EQ(values(trunc_divide(fa, Tensor::scalar(2.0))), (std::vector<double>{-3, 3, -0.0}));
  EXPECT_TRUE(std::signbit(values(trunc_divide(fa, Tensor::scalar(2.0)))[2]));  // -0.75 -> -0
  EXPECT_EQ(values(trunc(fa)), (std::vector<double>{-7, 7, -1}));
  EXPECT_TRUE(std::signbit(values(trunc(make({1}, {-0.5})))[0]));
  EXPECT_EQ(values(trunc(a)), values(a));  // integers: the identity
  error_of(ErrorKind::kValue, [&] { trunc_divide(a, Tensor::scalar(0)); });
  EXPECT_EQ(values(trunc_divide(make({1}, {-1}), Tensor::scalar(0.0)))[0],
            -std::numeric_limits<double>::infinity());
}

TEST(Elementwise, RaisesValueError_WhenIntegerDivisorIsZero) {
  const Tensor a = make({3}, {1, 2, 3}, DType::kInt32);
  const Tensor out = make({3}, {9, 9, 9}, DType::kInt32);
  const std::string what = error_of(ErrorKind::kValue, [&] {
    floor_divide(a, make({3}, {1, 0, 1}, DType::kInt32), out);
  });
  EXPECT_NE(what.find("division by zero"), std::string::npos) << what;
  EXPECT_EQ(values(out), (std::vector<double>{9, 9, 9}));  // untouched
  error_of(ErrorKind::kValue, [&] { remainder(a, Tensor::scalar(0)); });
  // Float division by zero is IEEE.
  EXPECT_EQ(values(floor_divide(make({1}, {1}), Tensor::scalar(0.0)))[0],
            std::numeric_limits<double>::infinity());
}

TEST(Elementwise, RejectsNegativeIntegerPowers) {
  const Tensor a = make({2}, {2, 3}, DType::kInt64);
  EXPECT_EQ(values(pow(a, Tensor::scalar(3))), (std::vector<double>{8, 27}));
  const std::string what = error_of(ErrorKind::kValue, [&] { pow(a, Tensor::scalar(-1)); });
  EXPECT_NE(what.find("negative integer powers"), std::string::npos) << what;
  const Tensor inverse = pow(a, Tensor::scalar(-1.0));  // a float exponent gives float32
  EXPECT_EQ(inverse.dtype(), DType::kFloat32);
  EXPECT_EQ(values(inverse), (std::vector<double>{0.5, static_cast<double>(1.0f / 3.0f)}));
}

TEST(Elementwise, RejectsBoolArithmetic_WhereNumPyDoes) {
  const Tensor flags = make({2}, {1, 0}, DType::kBool);
  EXPECT_NE(error_of(ErrorKind::kDType, [&] { neg(flags); }).find("logical_not"),
            std::string::npos);
  error_of(ErrorKind::kDType, [&] { sub(flags, flags); });
  EXPECT_EQ(values(logical_not(flags)), (std::vector<double>{0, 1}));
  EXPECT_EQ(values(mul(flags, flags)), (std::vector<double>{1, 0}));
}

TEST(Elementwise, ComputesHalfInFloat_AndRoundsOnce) {
  const Tensor h = make({2}, {1, 2049}, DType::kFloat16);  // 2049 rounds to 2048 in float16
  EXPECT_EQ(values(h), (std::vector<double>{1, 2048}));
  EXPECT_EQ(values(add(h, make({2}, {0.25, 1}, DType::kFloat16))),
            (std::vector<double>{1.25, 2048}));
  EXPECT_EQ(exp(make({1}, {0}, DType::kBFloat16)).dtype(), DType::kBFloat16);
  EXPECT_EQ(exp(make({1}, {0}, DType::kInt32)).dtype(), DType::kFloat32);
}

TEST(Elementwise, SelectsWithWhere_BroadcastingAllThree) {
  const Tensor cond = make({2, 1}, {1, 0}, DType::kBool);
  const Tensor a = make({3}, {1, 2, 3}, DType::kInt32);
  const Tensor r = where(cond, a, Tensor::scalar(0.5));
  EXPECT_EQ(r.dtype(), DType::kFloat32);
  EXPECT_EQ(values(r), (std::vector<double>{1, 2, 3, 0.5, 0.5, 0.5}));
  EXPECT_EQ(values(where(make({2}, {0, 2}), a.slice(0, 0, 2), a.slice(0, 1, 3))),
            (std::vector<double>{2, 2}));
}

TEST(Elementwise, ClampsWithOptionalBounds) {
  const Tensor x = make({4}, {-2, 0, 3, 9}, DType::kInt32);
  EXPECT_EQ(values(clamp(x, Scalar(0), Scalar(5))), (std::vector<double>{0, 0, 3, 5}));
  EXPECT_EQ(values(clamp(x, std::nullopt, Scalar(1))), (std::vector<double>{-2, 0, 1, 1}));
  EXPECT_EQ(clamp(x, Scalar(0.5), std::nullopt).dtype(), DType::kFloat32);
  error_of(ErrorKind::kValue, [&] { clamp(x, std::nullopt, std::nullopt); });
}

TEST(Elementwise, ClampsWithTensorBoundsBroadcastAndPromoted) {
  const Tensor x = make({2, 3}, {-2, 0, 3, 9, 1, -7}, DType::kInt32);
  const Tensor lo = make({3}, {0, 1, 2}, DType::kInt64);
  const Tensor hi = make({2, 1}, {2, 5}, DType::kFloat32);
  const Tensor both = clamp(x, lo, hi);
  EXPECT_EQ(both.dtype(), DType::kFloat32);
  EXPECT_EQ(values(both), (std::vector<double>{0, 1, 2, 5, 1, 2}));
  EXPECT_EQ(values(clamp(x, lo, Tensor())), (std::vector<double>{0, 1, 3, 9, 1, 2}));
  EXPECT_EQ(clamp(x, lo, Tensor()).dtype(), DType::kInt64);
  EXPECT_EQ(values(clamp(x, Tensor(), hi)), (std::vector<double>{-2, 0, 2, 5, 1, -7}));
  // lo > hi: hi, as in PyTorch.
  EXPECT_EQ(values(clamp(make({1}, {3}), make({1}, {4}), make({1}, {1}))),
            (std::vector<double>{1}));
  EXPECT_EQ(clamp(make({3}, {1, 2, 3}), Tensor(), make({2, 1}, {0, 9})).shape(), (Shape{2, 3}));
  error_of(ErrorKind::kValue, [&] { clamp(x, Tensor(), Tensor()); });
  error_of(ErrorKind::kShape, [&] { clamp(x, make({2}, {0, 1}), Tensor()); });
  // A weak scalar bound is compared exactly, as in the scalar form: -1 and 300 do not wrap.
  const Tensor u = make({3}, {1, 5, 9}, DType::kUInt8);
  const Tensor four = make({1}, {4}, DType::kUInt8);
  EXPECT_EQ(values(clamp(u, Tensor::scalar(Scalar(-1)), four)), (std::vector<double>{1, 4, 4}));
  EXPECT_EQ(values(clamp(u, four, Tensor::scalar(Scalar(300)))), (std::vector<double>{4, 5, 9}));
  EXPECT_EQ(clamp(u, four, Tensor::scalar(Scalar(300))).dtype(), DType::kUInt8);
}

TEST(Elementwise, ValidatesGeluApproximation) {
  const Tensor x = make({2}, {0, 1});
  EXPECT_NEAR(values(gelu(x))[1], 0.8413447460685429, 1e-6);
  EXPECT_NEAR(values(gelu(x, "tanh"))[1], 0.8411919906082768, 1e-6);
  error_of(ErrorKind::kValue, [&] { gelu(x, "sigmoid"); });
}

}  // namespace
}  // namespace kiln
