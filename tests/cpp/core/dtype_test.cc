#include "kiln/dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/dtype_dispatch.h"
#include "kiln/error.h"
#include "kiln/op.h"
#include "kiln/scalar.h"
#include "testing.h"

namespace kiln {
namespace {

using D = DType;
using testing::expect_error;

TEST(DType, ItemsizeAndNames) {
  EXPECT_EQ(itemsize(D::kBool), 1u);
  EXPECT_EQ(itemsize(D::kBFloat16), 2u);
  EXPECT_EQ(itemsize(D::kInt64), 8u);
  EXPECT_STREQ(dtype_name(D::kUInt8), "uint8");
  EXPECT_EQ(dtype_from_name("bfloat16"), D::kBFloat16);
  try {
    dtype_from_name("float128");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDType);
    EXPECT_NE(std::string(e.what()).find("expected one of: bool, int8"), std::string::npos);
  }
}

TEST(DType, PromotionFollowsNumPyForIntegersAndFloats) {
  EXPECT_EQ(promote_types(D::kInt8, D::kUInt8), D::kInt16);
  EXPECT_EQ(promote_types(D::kUInt8, D::kInt32), D::kInt32);
  EXPECT_EQ(promote_types(D::kInt16, D::kInt64), D::kInt64);
  EXPECT_EQ(promote_types(D::kBool, D::kUInt8), D::kUInt8);
  EXPECT_EQ(promote_types(D::kFloat16, D::kFloat32), D::kFloat32);
  EXPECT_EQ(promote_types(D::kFloat64, D::kFloat16), D::kFloat64);
  EXPECT_EQ(promote_types(D::kBool, D::kBool), D::kBool);
}

TEST(DType, PromotionDiffersFromNumPy_ForIntegerWithFloat) {
  // NumPy gives float64 here; Kiln keeps the floating operand's type (see dtype.h).
  EXPECT_EQ(promote_types(D::kInt32, D::kFloat32), D::kFloat32);
  EXPECT_EQ(promote_types(D::kInt64, D::kFloat16), D::kFloat16);
  EXPECT_EQ(promote_types(D::kBFloat16, D::kFloat16), D::kFloat32);
  EXPECT_EQ(promote_types(D::kBFloat16, D::kInt8), D::kBFloat16);
}

TEST(DType, PromotionIsSymmetric) {
  for (int a = 0; a < kNumDTypes; ++a) {
    for (int b = 0; b < kNumDTypes; ++b) {
      EXPECT_EQ(promote_types(D(a), D(b)), promote_types(D(b), D(a)));
    }
  }
}

TEST(Half, RoundTripsEveryHalfValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    Half h;
    h.bits = static_cast<uint16_t>(bits);
    const float f = h;
    const Half back(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(back)));
    } else {
      EXPECT_EQ(back.bits, h.bits) << "bits " << bits;
    }
  }
}

TEST(Half, RoundsToNearestEven_AndOverflowsToInf) {
  EXPECT_EQ(static_cast<float>(Half(1.0f + 1.0f / 2048)), 1.0f);  // tie -> even
  EXPECT_EQ(static_cast<float>(Half(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(70000.0f))));
  EXPECT_EQ(static_cast<float>(Half(65504.0f)), 65504.0f);
  EXPECT_EQ(static_cast<float>(Half(5.96046448e-08f)), 5.96046448e-08f);  // smallest subnormal
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(1.00390625f)), 1.0f);  // tie -> even
  EXPECT_EQ(static_cast<float>(BFloat16(1.01171875f)), 1.015625f);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::numeric_limits<float>::quiet_NaN()))));
}

// Note [Rounding to odd]: every positive finite 16-bit value T below the largest and the next one
// up, with a double just above and just below their midpoint (close enough that float rounds it
// onto the midpoint) and the midpoint itself, each sign: one correct rounding, not two.
template <typename T>
void expect_doubles_round_once(uint32_t last_bits) {
  int wrong = 0;
  for (uint32_t bits = 0; bits < last_bits && wrong < 5; ++bits) {
    T lo, hi;
    lo.bits = static_cast<uint16_t>(bits);
    hi.bits = static_cast<uint16_t>(bits + 1);
    const double mid = (static_cast<double>(static_cast<float>(lo)) + static_cast<float>(hi)) / 2;
    const double nudge = std::max(mid * 0x1p-35, 0x1p-160);
    const uint32_t even = (bits & 1u) == 0 ? bits : bits + 1;
    for (const double sign : {1.0, -1.0}) {
      const uint32_t sign_bit = sign < 0 ? 0x8000u : 0u;
      const std::pair<double, uint32_t> cases[] = {
          {mid + nudge, bits + 1}, {mid - nudge, bits}, {mid, even}};
      for (const auto& [value, want] : cases) {
        const uint32_t got = convert<T>(sign * value).bits;
        if (got != (want | sign_bit)) {
          ADD_FAILURE() << "convert(" << sign * value << "): bits " << got << ", expected "
                        << (want | sign_bit);
          ++wrong;
        }
      }
    }
  }
}

TEST(Convert, DoubleToFloat16RoundsOnce) { expect_doubles_round_once<Half>(0x7bffu); }

TEST(Convert, DoubleToBFloat16RoundsOnce) { expect_doubles_round_once<BFloat16>(0x7f7fu); }

TEST(Convert, DoubleOutOfRangeNanAndTinyGiveInfNanAndZero) {
  EXPECT_EQ(convert<Half>(65519.99).bits, 0x7bffu);  // below the midpoint to 65536: the largest
  EXPECT_EQ(convert<Half>(65520.0).bits, 0x7c00u);   // the midpoint rounds to even: inf
  EXPECT_EQ(convert<Half>(-1e300).bits, 0xfc00u);
  EXPECT_EQ(convert<BFloat16>(1e300).bits, 0x7f80u);
  EXPECT_TRUE(std::isnan(static_cast<float>(convert<Half>(std::nan("")))));
  EXPECT_TRUE(std::isnan(static_cast<float>(convert<BFloat16>(-std::nan("")))));
  EXPECT_EQ(convert<Half>(1e-320).bits, 0u);
  EXPECT_EQ(convert<Half>(-1e-320).bits, 0x8000u);
  EXPECT_EQ(convert<BFloat16>(0x1p-150).bits, 0u);  // half the smallest float: to even, zero
}

// Integers past float's 24 bits, one past a bfloat16 midpoint: through float (2^25 + 2^17 + 1
// rounds to the midpoint 2^25 + 2^17, then to even) they went the wrong way.
TEST(Convert, WideIntegersToBFloat16RoundOnce) {
  EXPECT_EQ(static_cast<float>(convert<BFloat16>(int32_t{(1 << 25) + (1 << 17) + 1})),
            0x1p25f + 0x1p18f);
  EXPECT_EQ(static_cast<float>(convert<BFloat16>(int32_t{(1 << 25) + (1 << 17) - 1})), 0x1p25f);
  EXPECT_EQ(static_cast<float>(convert<BFloat16>(int32_t{-(1 << 25) - (1 << 17) - 1})),
            -0x1p25f - 0x1p18f);
  const int64_t big = (int64_t{1} << 60) + (int64_t{1} << 52);  // a midpoint at 2^60
  EXPECT_EQ(static_cast<float>(convert<BFloat16>(big + 1)), 0x1p60f + 0x1p53f);
  EXPECT_EQ(static_cast<float>(convert<BFloat16>(big - 1)), 0x1p60f);
  EXPECT_EQ(static_cast<float>(convert<BFloat16>(big)), 0x1p60f);  // the tie goes to even
  EXPECT_EQ(static_cast<float>(convert<BFloat16>(std::numeric_limits<int64_t>::min())), -0x1p63f);
  EXPECT_EQ(static_cast<float>(convert<Half>(int64_t{1} << 40)), INFINITY);
  EXPECT_EQ(static_cast<float>(convert<Half>(int32_t{2049})), 2048.0f);  // exact in float: a tie
}

TEST(Scalar, TakesEveryIntegerType) {
  // Scalar(v.size()), Scalar(2LL) and Scalar(1u) were ambiguous among int, int64_t, double, float.
  const std::vector<int> v(3);
  EXPECT_EQ(Scalar(v.size()).to_int(), 3);
  EXPECT_TRUE(Scalar(v.size()).is_integral());
  EXPECT_EQ(Scalar(2LL).to_int(), 2);
  EXPECT_EQ(Scalar(1u).to_int(), 1);
  EXPECT_EQ(Scalar(static_cast<int16_t>(-7)).to_int(), -7);
  EXPECT_TRUE(Scalar(true).is_bool());
}

TEST(Scalar, SameValueComparesNumbersAcrossKinds_IntegersExactly) {
  constexpr int64_t kBig = int64_t{1} << 53;
  EXPECT_TRUE(same_value(Scalar(1), Scalar(1.0)));
  EXPECT_TRUE(same_value(Scalar(true), Scalar(int64_t{1})));
  EXPECT_TRUE(same_value(Scalar(0.5), Scalar(0.5)));
  EXPECT_FALSE(same_value(Scalar(kBig + 1), Scalar(kBig)));  // one double, two integers
  EXPECT_FALSE(same_value(Scalar(kBig + 1), Scalar(static_cast<double>(kBig))));
  EXPECT_TRUE(same_value(Scalar(kBig), Scalar(static_cast<double>(kBig))));
  EXPECT_FALSE(same_value(Scalar(int64_t{1}), Scalar(1.5)));
  EXPECT_FALSE(same_value(Scalar(std::numeric_limits<int64_t>::max()), Scalar(0x1p63)));
  EXPECT_FALSE(same_value(Scalar(std::nan("")), Scalar(std::nan(""))));
}

// Sets the default floating dtype for one test and restores the one before it on the way out, so
// that a failing expectation cannot leave float64 behind for the tests after it.
class DefaultFloatDType {
 public:
  explicit DefaultFloatDType(DType dtype) : saved_(default_float_dtype()) {
    set_default_float_dtype(dtype);
  }
  ~DefaultFloatDType() { set_default_float_dtype(saved_); }
  DefaultFloatDType(const DefaultFloatDType&) = delete;
  DefaultFloatDType& operator=(const DefaultFloatDType&) = delete;

 private:
  DType saved_;
};

// A weak (Python number) operand's metadata.
TensorMeta weak(const Scalar& value) { return TensorMeta::of(Tensor::scalar(value)); }

TEST(DefaultFloatDType, IsFloat32UntilSet) {
  EXPECT_EQ(default_float_dtype(), D::kFloat32);
  EXPECT_EQ(to_floating(D::kInt32), D::kFloat32);
  EXPECT_EQ(Scalar(0.5).default_dtype(), D::kFloat32);
}

TEST(DefaultFloatDType, IsTheFloatingResultOfIntegers_WhenSet) {
  for (const DType d : {D::kFloat64, D::kFloat16, D::kBFloat16}) {
    const DefaultFloatDType scope(d);
    EXPECT_EQ(default_float_dtype(), d);
    EXPECT_EQ(to_floating(D::kInt64), d);
    EXPECT_EQ(to_floating(D::kBool), d);
    EXPECT_EQ(to_floating(D::kFloat32), D::kFloat32);  // a floating type stays itself
    EXPECT_EQ(Scalar(0.5).default_dtype(), d);
    EXPECT_EQ(Scalar(1).default_dtype(), D::kInt64);
    EXPECT_EQ(promote_with_scalar(D::kInt8, Scalar(0.5)), d);
    EXPECT_EQ(promote_with_scalar(D::kFloat16, Scalar(0.5)), D::kFloat16);
  }
}

TEST(DefaultFloatDType, WeakFloatScalarsPromoteToIt_AndTensorsDoNot) {
  const DefaultFloatDType scope(D::kFloat64);
  const TensorMeta ints(D::kInt32, {3});
  EXPECT_EQ(result_type(ints, weak(Scalar(2.5))), D::kFloat64);             // int tensor * 2.5
  EXPECT_EQ(result_type(weak(Scalar(2.5)), weak(Scalar(1))), D::kFloat64);  // numbers alone
  EXPECT_EQ(result_type(TensorMeta(D::kFloat32, {3}), weak(Scalar(2.5))), D::kFloat32);
  EXPECT_EQ(result_type(ints, weak(Scalar(2))), D::kInt32);
  EXPECT_EQ(result_type(ints, TensorMeta(D::kFloat16, {3})), D::kFloat16);
  // Compute types and the table between tensors do not follow the default.
  EXPECT_EQ(compute_dtype(D::kBFloat16), D::kFloat32);
  EXPECT_EQ(promote_types(D::kFloat16, D::kBFloat16), D::kFloat32);
}

TEST(DefaultFloatDType, OpsGiveItForIntegerInputs) {
  const DefaultFloatDType scope(D::kFloat64);
  const Tensor ints = arange(1, 4);  // int64 [1, 2, 3]
  const Tensor quotient = div(ints, ints);
  EXPECT_EQ(quotient.dtype(), D::kFloat64);
  EXPECT_EQ(mean(ints).dtype(), D::kFloat64);
  EXPECT_EQ(mul(ints, Tensor::scalar(Scalar(2.5))).dtype(), D::kFloat64);
  const Tensor range = arange(0.0, 1.0, 0.25);
  EXPECT_EQ(range.dtype(), D::kFloat64);
  EXPECT_EQ(full({2}, Scalar(0.1)).dtype(), D::kFloat64);
  EXPECT_EQ(full({2}, Scalar(0.1)).data<double>()[0], 0.1);  // no float32 rounding on the way
}

TEST(DefaultFloatDType, RefusesNonFloatingTypes_AndKeepsTheOldDefault) {
  const DefaultFloatDType scope(D::kFloat64);
  for (const DType d : {D::kInt64, D::kBool, D::kUInt8}) {
    expect_error([d] { set_default_float_dtype(d); }, ErrorKind::kType,
                 std::string("only floating-point types are supported as the default type "
                             "(float16, bfloat16, float32 or float64), got ") +
                     dtype_name(d));
  }
  EXPECT_EQ(default_float_dtype(), D::kFloat64);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// kiln/dtype_dispatch.h: the custom-op authors' dispatch.
TEST(DtypeDispatch, CallsWithTheElementTypeOfEachDtypeInTheSet) {
  const auto size_of = [](auto tag) { return sizeof(typename decltype(tag)::type); };
  EXPECT_EQ(dispatch_floating(DType::kFloat16, "op", size_of), 2u);
  EXPECT_EQ(dispatch_floating(DType::kBFloat16, "op", size_of), 2u);
  EXPECT_EQ(dispatch_floating(DType::kFloat32, "op", size_of), 4u);
  EXPECT_EQ(dispatch_floating(DType::kFloat64, "op", size_of), 8u);
  EXPECT_EQ(dispatch_integral(DType::kInt16, "op", size_of), 2u);
  EXPECT_EQ(dispatch_numeric(DType::kUInt8, "op", size_of), 1u);
  EXPECT_EQ(dispatch_all(DType::kBool, "op", size_of), sizeof(bool));
  for (DType d :
       {DType::kBool, DType::kInt8, DType::kUInt8, DType::kInt16, DType::kInt32, DType::kInt64,
        DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    EXPECT_EQ(
        dispatch_all(d, "op", [](auto tag) { return dtype_of<typename decltype(tag)::type>(); }),
        d);
  }
  // A void lambda: called once, for the matching type only.
  int calls = 0;
  dispatch_dtype<float, double>(DType::kFloat64, "op", [&](auto tag) {
    EXPECT_TRUE((std::is_same_v<typename decltype(tag)::type, double>));
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(DtypeDispatch, ADtypeOutsideTheSetIsADTypeErrorNamingTheOpAndTheSet) {
  const auto nothing = [](auto) {};
  const auto message = [&](auto dispatch) {
    try {
      dispatch();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kDType);
      return std::string(e.what());
    }
    ADD_FAILURE() << "expected a kDType error";
    return std::string();
  };
  EXPECT_NE(message([&] { dispatch_floating(DType::kInt64, "scale", nothing); })
                .find("scale: expected a tensor of dtype float16, bfloat16, float32 or float64, "
                      "got int64"),
            std::string::npos);
  EXPECT_NE(message([&] { dispatch_numeric(DType::kBool, "count", nothing); })
                .find("count: expected a tensor of dtype int8, uint8, int16, int32, int64, "
                      "float16, bfloat16, float32 or float64, got bool"),
            std::string::npos);
  EXPECT_NE(message([&] {
              dispatch_dtype<float>(DType::kFloat64, "f32_only", [](auto) { return 1; });
            }).find("f32_only: expected a tensor of dtype float32, got float64"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
