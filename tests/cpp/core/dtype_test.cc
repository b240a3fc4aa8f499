#include "kiln/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/error.h"

namespace kiln {
namespace {

using D = DType;

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

}  // namespace
}  // namespace kiln
