// Tests for the neural-network ops: Conv2D and Conv3D (oneDNN and the direct loop), MaxPool2D,
// AvgPool2D, LayerNorm, RMSNorm, Embedding, CrossEntropy, NLLLoss and MSELoss, with their errors.
#include "kiln/functional/nn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kiln/functional/elementwise.h"
#include "kiln/functional/reduce.h"
#include "kiln/op.h"
#include "kiln/runtime.h"
#include "ops/onednn_util.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::error_of;

Tensor random_floats(const Shape& shape, unsigned seed) {
  Tensor t = Tensor::empty(shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

Tensor int64_tensor(const Shape& shape, const std::vector<int64_t>& values) {
  Tensor t = Tensor::empty(shape, DType::kInt64);
  for (size_t i = 0; i < values.size(); ++i) t.data<int64_t>()[i] = values[i];
  return t;
}

// Direct definition of a 2-d or 3-d convolution, in double: each output element is a sum over
// the group's input channels and the kernel's taps, an n-d index stepped through per tap.
struct Conv {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
};

std::vector<double> reference_conv(const Tensor& x, const Tensor& w, const Conv& p,
                                   const Shape& out) {
  const size_t rank = p.stride.size();
  const int64_t C = x.size(1), O = w.size(0), cg = w.size(1), og = O / p.groups;
  const Shape in_space(x.shape().begin() + 2, x.shape().end());
  const Shape kernel(w.shape().begin() + 2, w.shape().end());
  const Shape out_space(out.begin() + 2, out.end());
  const int64_t taps = shape_numel(kernel), positions = shape_numel(out_space);
  // The row-major coordinates of `offset` in `space`.
  const auto coords = [rank](int64_t offset, const Shape& space) {
    std::vector<int64_t> c(rank);
    for (size_t d = rank; d-- > 0;) {
      c[d] = offset % space[d];
      offset /= space[d];
    }
    return c;
  };
  std::vector<double> y(static_cast<size_t>(shape_numel(out)));
  for (int64_t n = 0; n < out[0]; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t position = 0; position < positions; ++position) {
        const std::vector<int64_t> at = coords(position, out_space);
        double acc = 0;
        for (int64_t tap = 0; tap < taps; ++tap) {
          const std::vector<int64_t> k = coords(tap, kernel);
          int64_t in_offset = 0;
          bool inside = true;
          for (size_t d = 0; d < rank; ++d) {
            const int64_t i = at[d] * p.stride[d] - p.padding[d] + k[d] * p.dilation[d];
            inside = inside && i >= 0 && i < in_space[d];
            in_offset = in_offset * in_space[d] + i;
          }
          if (!inside) continue;
          for (int64_t c = 0; c < cg; ++c) {
            const int64_t ci = (o / og) * cg + c;
            acc += double(x.data<float>()[(n * C + ci) * shape_numel(in_space) + in_offset]) *
                   w.data<float>()[(o * cg + c) * taps + tap];
          }
        }
        y[(n * O + o) * positions + position] = acc;
      }
  return y;
}

// conv2d or conv3d (by the rank of p) in float32 (oneDNN) and float64 (the direct loop) against
// the definition.
void expect_conv_matches_definition(const Tensor& x, const Tensor& w, const Conv& p,
                                    const Shape& expected_shape) {
  const auto conv = p.stride.size() == 3 ? conv3d : conv2d;
  const Tensor out = conv(x, w, {}, p.stride, p.padding, p.dilation, p.groups);
  ASSERT_EQ(out.shape(), expected_shape);
  const std::vector<double> expected = reference_conv(x, w, p, out.shape());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(out.data<float>()[i], expected[i], 1e-4) << "at " << i;
  }
  const Tensor out64 = conv(to(x, DType::kFloat64), to(w, DType::kFloat64), {}, p.stride, p.padding,
                            p.dilation, p.groups);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(out64.data<double>()[i], expected[i], 1e-9) << "at " << i;
  }
}

TEST(Conv2D, MatchesDirectDefinition_WithStridePaddingDilationAndGroups) {
  // H: (9 + 2 - 2*2 - 1) / 2 + 1 = 4; W: (8 + 0 - 1 - 1) / 1 + 1 = 7
  expect_conv_matches_definition(random_floats({2, 4, 9, 8}, 1), random_floats({6, 2, 3, 2}, 2),
                                 {{2, 1}, {1, 0}, {2, 1}, 2}, {2, 6, 4, 7});
}

TEST(Conv3D, MatchesDirectDefinition_WithStridePaddingDilationAndGroups) {
  // D: (7 + 2 - 2*2 - 1) / 2 + 1 = 3; H: (6 - 2) / 1 + 1 = 5; W: (5 + 4 - 3*2 - 1) / 2 + 1 = 2
  expect_conv_matches_definition(random_floats({2, 4, 7, 6, 5}, 6),
                                 random_floats({6, 2, 3, 2, 3}, 7),
                                 {{2, 1, 2}, {1, 0, 2}, {2, 1, 3}, 2}, {2, 6, 3, 5, 2});
  // Depthwise, with a stride that skips the last planes.
  expect_conv_matches_definition(random_floats({1, 3, 6, 5, 6}, 8),
                                 random_floats({3, 1, 2, 2, 2}, 9),
                                 {{3, 2, 4}, {0, 0, 1}, {1, 1, 1}, 3}, {1, 3, 2, 2, 2});
}

// Pointwise convolutions run on plain layouts (Note [Pointwise convolutions on plain layouts]).
TEST(Conv, PointwiseMatchesDirectDefinition_InTwoAndThreeDimensions) {
  expect_conv_matches_definition(random_floats({2, 4, 5, 6}, 15), random_floats({6, 4, 1, 1}, 16),
                                 {{2, 1}, {0, 0}, {1, 1}, 1}, {2, 6, 3, 6});
  expect_conv_matches_definition(random_floats({2, 3, 4, 5, 3}, 17),
                                 random_floats({5, 3, 1, 1, 1}, 18),
                                 {{1, 2, 1}, {0, 0, 0}, {1, 1, 1}, 1}, {2, 5, 4, 3, 3});
}

TEST(Conv2D, AddsBias_AndReusesCachedPrimitive) {
  onednn::clear_primitive_cache();
  const Tensor x = random_floats({1, 3, 5, 5}, 3);
  const Tensor w = random_floats({2, 3, 3, 3}, 4);
  Tensor bias = Tensor::empty({2});
  bias.data<float>()[0] = 10.0f;
  bias.data<float>()[1] = -10.0f;
  const Tensor with = conv2d(x, w, bias);
  const Tensor without = conv2d(x, w);
  for (int64_t i = 0; i < with.numel(); ++i) {
    EXPECT_NEAR(with.data<float>()[i] - without.data<float>()[i], i < 9 ? 10.0f : -10.0f, 1e-4);
  }
  runtime::synchronize();  // the kernels have run, so the cache counters are final
  const int64_t misses = onednn::primitive_cache_stats().misses;
  conv2d(random_floats({1, 3, 5, 5}, 5), w, bias);
  runtime::synchronize();
  EXPECT_EQ(onednn::primitive_cache_stats().misses, misses);
  EXPECT_GE(onednn::primitive_cache_stats().hits, 1);
}

TEST(Conv3D, AddsBias) {
  const Tensor x = random_floats({2, 2, 4, 3, 3}, 10);
  const Tensor w = random_floats({3, 2, 2, 2, 2}, 11);
  Tensor bias = Tensor::empty({3});
  for (int i = 0; i < 3; ++i) bias.data<float>()[i] = 10.0f * float(i + 1);
  const Tensor with = conv3d(x, w, bias), without = conv3d(x, w);
  ASSERT_EQ(with.shape(), (Shape{2, 3, 3, 2, 2}));
  for (int64_t i = 0; i < with.numel(); ++i) {
    const int64_t channel = i / 12 % 3;
    EXPECT_NEAR(with.data<float>()[i] - without.data<float>()[i], 10.0f * float(channel + 1), 1e-4);
  }
}

TEST(Conv2D, NamesBothShapes_WhenChannelsDisagree) {
  const Error e = error_of([] { conv2d(Tensor::empty({1, 4, 5, 5}), Tensor::empty({2, 3, 3, 3})); });
  EXPECT_EQ(e.kind(), ErrorKind::kShape);
  EXPECT_EQ(e.message(),
            "conv2d: x has shape [1, 4, 5, 5] and weight has shape [2, 3, 3, 3]; expected "
            "weight.shape[1] * groups == x.shape[1], got 3 * 1 and 4");
  EXPECT_EQ(error_of([] {
              conv2d(Tensor::empty({1, 3, 5, 5}), Tensor::empty({2, 3, 3, 3}), {}, {0, 1});
            }).kind(),
            ErrorKind::kValue);
}

TEST(Conv3D, RejectsBadShapesAndAttributes_NamingConv3d) {
  const Tensor x = Tensor::empty({1, 2, 4, 4, 4}), w = Tensor::empty({3, 2, 3, 3, 3});
  testing::expect_error(
      [&] {
        conv3d(Tensor::empty({1, 2, 4, 4}), w);
      },
      ErrorKind::kShape, "conv3d: expected x of shape [N, C, D, H, W], got [1, 2, 4, 4]");
  testing::expect_error(
      [&] {
        conv3d(x, Tensor::empty({3, 2, 3, 3}));
      },
      ErrorKind::kShape,
      "conv3d: expected weight of shape [out_channels, in_channels / groups, "
      "kD, kH, kW], got [3, 2, 3, 3]");
  testing::expect_error(
      [&] {
        conv3d(x, w, {}, {1, 1});
      },
      ErrorKind::kValue, "conv3d: expected stride of three integers in [1, 2^31 - 1], got [1, 1]");
  testing::expect_error(
      [&] {
        conv3d(x, w, {}, {1, 1, 1}, {0, -1, 0});
      },
      ErrorKind::kValue, "conv3d: expected padding of three integers");
  testing::expect_error(
      [&] {
        conv3d(x, Tensor::empty({3, 2, 5, 3, 3}));
      },
      ErrorKind::kShape,
      "conv3d: expected the padded input depth (4) to be at least the dilated "
      "kernel depth (5)");
  testing::expect_error([&] { conv3d(x, w, Tensor::empty({2})); }, ErrorKind::kShape,
                        "expected bias of shape [3], got [2]");
  testing::expect_error(
      [&] {
        conv3d(x, Tensor::empty({0, 2, 3, 3, 3}));
      },
      ErrorKind::kShape,
      "conv3d: expected at least one output channel, got weight of shape [0, 2, 3, 3, 3]");
  testing::expect_error(
      [&] {
        conv_transpose3d(x, Tensor::empty({2, 3, 3, 3, 3}), {}, {1, 1, 1}, {0, 0, 0}, {1, 0, 0});
      },
      ErrorKind::kValue, "conv_transpose3d: expected output_padding below stride or dilation");
  testing::expect_error(
      [&] {
        conv_transpose3d(x, Tensor::empty({2, 3, 3, 3}));
      },
      ErrorKind::kShape,
      "conv_transpose3d: expected weight [C_in = 2, C_out / groups, kD, kH, kW]");
}

// conv_transpose3d is the adjoint of conv3d in x: <conv3d(y, w), x> = <y, conv_transpose3d(x, w)>
// for y of the transposed output's shape, including an output_padding (below the stride).
TEST(Conv3D, TransposeIsTheAdjointOfTheConvolution) {
  const Tensor x = to(random_floats({2, 4, 3, 4, 2}, 12), DType::kFloat64);
  const Tensor w = to(random_floats({4, 3, 2, 3, 2}, 13), DType::kFloat64);
  const std::vector<int64_t> stride{2, 1, 2}, padding{1, 1, 0}, dilation{1, 2, 1};
  const Tensor t = conv_transpose3d(x, w, {}, stride, padding, {1, 0, 1}, 1, dilation);
  ASSERT_EQ(t.shape(), (Shape{2, 3, 5, 6, 5}));
  const Tensor y = to(random_floats(t.shape(), 14), DType::kFloat64);
  const Tensor back = conv3d(y, w, {}, stride, padding, dilation);
  ASSERT_EQ(back.shape(), x.shape());
  const double lhs = sum(mul(back, x)).data<double>()[0], rhs = sum(mul(y, t)).data<double>()[0];
  EXPECT_NEAR(lhs, rhs, 1e-9 * (1 + std::abs(lhs)));
}

TEST(MaxPool2D, TakesWindowMaxima_WithPaddingAndCeilMode) {
  Tensor x = Tensor::empty({1, 1, 3, 3});
  for (int i = 0; i < 9; ++i) x.data<float>()[i] = static_cast<float>(i);
  const Tensor out = max_pool2d(x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, /*ceil_mode=*/true);
  ASSERT_EQ(out.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(out.data<float>()[0], 4.0f);
  EXPECT_EQ(out.data<float>()[1], 5.0f);
  EXPECT_EQ(out.data<float>()[2], 7.0f);
  EXPECT_EQ(out.data<float>()[3], 8.0f);
  x.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(max_pool2d(x, {2, 2}).data<float>()[0]));
}

TEST(MaxPool2D, WithIndicesGivesEachMaximumsOffsetInItsPlane) {
  // Two planes of a 3x4 ramp (the second negated), 2x2 windows at stride (1, 2), padding 1.
  Tensor x = Tensor::empty({1, 2, 3, 4});
  for (int i = 0; i < 12; ++i) {
    x.data<float>()[i] = static_cast<float>(i);
    x.data<float>()[12 + i] = -static_cast<float>(i);
  }
  const auto [values, indices] = max_pool2d_with_indices(x, {2, 2}, {1, 2}, {1, 1});
  EXPECT_EQ(indices.dtype(), DType::kInt64);
  ASSERT_EQ(indices.shape(), values.shape());
  ASSERT_EQ(values.shape(), (Shape{1, 2, 4, 3}));
  const Tensor plain = max_pool2d(x, {2, 2}, {1, 2}, {1, 1});
  for (int64_t i = 0; i < values.numel(); ++i) {
    EXPECT_EQ(values.data<float>()[i], plain.data<float>()[i]) << i;
    // Each index, read back in its own plane, is the value pooled.
    const int64_t plane = i / 12, at = indices.data<int64_t>()[i];
    ASSERT_GE(at, 0);
    ASSERT_LT(at, 12);
    EXPECT_EQ(x.data<float>()[plane * 12 + at], values.data<float>()[i]) << i;
  }
  // Row 0 of the first plane: windows over columns [-1, 0], [1, 2], [3, 4] of row 0.
  EXPECT_EQ(indices.data<int64_t>()[0], 0);
  EXPECT_EQ(indices.data<int64_t>()[1], 2);
  EXPECT_EQ(indices.data<int64_t>()[2], 3);
  // Ties take the first maximum in scan order; a nan wins, the last one.
  Tensor ties = zeros({1, 1, 2, 2});
  EXPECT_EQ(max_pool2d_with_indices(ties, {2, 2}).second.data<int64_t>()[0], 0);
  ties.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  ties.data<float>()[2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(max_pool2d_with_indices(ties, {2, 2}).second.data<int64_t>()[0], 2);
  // 16-bit and integer inputs find the same elements.
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kInt32}) {
    const Tensor got = max_pool2d_with_indices(to(x, dtype), {2, 2}, {1, 2}, {1, 1}).second;
    for (int64_t i = 0; i < got.numel(); ++i) {
      EXPECT_EQ(got.data<int64_t>()[i], indices.data<int64_t>()[i]) << dtype << " " << i;
    }
  }
  EXPECT_EQ(error_of([] {
              max_pool2d_with_indices(zeros({1, 1, 2, 2}, DType::kBool), {2, 2});
            }).kind(),
            ErrorKind::kDType);
  EXPECT_EQ(error_of([] {
              max_pool2d_with_indices(zeros({2, 2}), {2, 2});
            }).kind(),
            ErrorKind::kShape);
}

TEST(AvgPool2D, DividesByPaddedOrValidCount) {
  Tensor x = Tensor::empty({1, 1, 2, 2});
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = 1.0f;
  const Tensor incl = avg_pool2d(x, {2, 2}, {1, 1}, {1, 1}, false, true);
  const Tensor excl = avg_pool2d(x, {2, 2}, {1, 1}, {1, 1}, false, false);
  ASSERT_EQ(incl.shape(), (Shape{1, 1, 3, 3}));
  EXPECT_FLOAT_EQ(incl.data<float>()[0], 0.25f);  // one real element of four
  EXPECT_FLOAT_EQ(excl.data<float>()[0], 1.0f);
  EXPECT_EQ(error_of([&] { avg_pool2d(x, {2, 2}, {}, {2, 2}); }).kind(), ErrorKind::kValue);
}

TEST(LayerNorm, NormalizesRows_AndAppliesAffine) {
  const Tensor x = random_floats({3, 4, 5}, 6);
  Tensor w = Tensor::empty({4, 5}), b = Tensor::empty({4, 5});
  for (int i = 0; i < 20; ++i) {
    w.data<float>()[i] = 2.0f;
    b.data<float>()[i] = 1.0f;
  }
  const Tensor out = layer_norm(x, {4, 5}, w, b, 1e-5);
  for (int64_t r = 0; r < 3; ++r) {
    double mean = 0, sq = 0;
    for (int64_t i = 0; i < 20; ++i) mean += x.data<float>()[r * 20 + i];
    mean /= 20;
    for (int64_t i = 0; i < 20; ++i) sq += std::pow(x.data<float>()[r * 20 + i] - mean, 2);
    const double rstd = 1.0 / std::sqrt(sq / 20 + 1e-5);
    for (int64_t i = 0; i < 20; ++i) {
      EXPECT_NEAR(out.data<float>()[r * 20 + i],
                  (x.data<float>()[r * 20 + i] - mean) * rstd * 2.0 + 1.0, 1e-4);
    }
  }
  const Error e = error_of([&] { layer_norm(x, {5, 4}); });
  EXPECT_EQ(e.kind(), ErrorKind::kShape);
  EXPECT_NE(e.message().find("layer_norm: x has shape [3, 4, 5] and normalized_shape is [5, 4]"),
            std::string::npos);
}

TEST(RMSNorm, DividesByRootMeanSquare) {
  Tensor x = Tensor::empty({1, 2});
  x.data<float>()[0] = 3.0f;
  x.data<float>()[1] = 4.0f;
  const Tensor out = rms_norm(x, {2}, {}, 0.0);
  const double rms = std::sqrt((9.0 + 16.0) / 2);
  EXPECT_NEAR(out.data<float>()[0], 3.0 / rms, 1e-6);
  EXPECT_NEAR(out.data<float>()[1], 4.0 / rms, 1e-6);
}

TEST(Embedding, GathersRows_AndNamesTheBadIndex) {
  const Tensor w = random_floats({5, 3}, 7);
  const Tensor out = embedding(int64_tensor({2, 2}, {4, 0, 0, 2}), w);
  ASSERT_EQ(out.shape(), (Shape{2, 2, 3}));
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(out.data<float>()[j], w.data<float>()[12 + j]);
    EXPECT_EQ(out.data<float>()[9 + j], w.data<float>()[6 + j]);
  }
  const Error e = error_of([&] { embedding(int64_tensor({2}, {1, 7}), w); });
  EXPECT_EQ(e.kind(), ErrorKind::kIndex);
  EXPECT_NE(e.message().find("embedding: index 7 is out of range"), std::string::npos);
  EXPECT_EQ(error_of([&] { embedding(w, w); }).kind(), ErrorKind::kDType);
}

TEST(CrossEntropy, MatchesLogSoftmaxDefinition_WithIgnoreIndexAndSmoothing) {
  const Tensor logits = random_floats({3, 4}, 8);
  const Tensor target = int64_tensor({3}, {1, -100, 3});
  const double eps = 0.1;
  double total = 0;
  for (int64_t n : {0, 2}) {
    const float* row = logits.data<float>() + n * 4;
    double mx = row[0], sum = 0;
    for (int c = 1; c < 4; ++c) mx = std::max(mx, double(row[c]));
    for (int c = 0; c < 4; ++c) sum += std::exp(row[c] - mx);
    const double lse = mx + std::log(sum);
    double smooth = 0;
    for (int c = 0; c < 4; ++c) smooth += lse - row[c];
    const int64_t y = target.data<int64_t>()[n];
    total += (1 - eps) * (lse - row[y]) + eps / 4 * smooth;
  }
  const Tensor mean = cross_entropy(logits, target, "mean", -100, eps);
  EXPECT_EQ(mean.shape(), Shape{});
  EXPECT_NEAR(mean.data<float>()[0], total / 2, 1e-5);
  EXPECT_NEAR(cross_entropy(logits, target, "sum", -100, eps).data<float>()[0], total, 1e-5);
  EXPECT_EQ(cross_entropy(logits, target, "none").shape(), (Shape{3}));
}

TEST(CrossEntropy, ThrowsTypedErrors_ForBadTargets) {
  const Tensor logits = random_floats({2, 3}, 9);
  const Error range = error_of([&] { cross_entropy(logits, int64_tensor({2}, {0, 3})); });
  EXPECT_EQ(range.kind(), ErrorKind::kIndex);
  EXPECT_NE(range.message().find("target 3 is out of range for 3 classes"), std::string::npos);
  // A floating target holds class probabilities, of the logits' shape.
  EXPECT_EQ(error_of([&] { cross_entropy(logits, random_floats({2}, 1)); }).kind(),
            ErrorKind::kShape);
  EXPECT_EQ(error_of([&] {
              cross_entropy(logits, gt(random_floats({2}, 1), Tensor::scalar(0.5)));
            }).kind(),
            ErrorKind::kDType);
  EXPECT_EQ(error_of([&] {
              cross_entropy(logits, int64_tensor({3}, {0, 0, 0}));
            }).kind(),
            ErrorKind::kShape);
  EXPECT_EQ(error_of([&] {
              cross_entropy(logits, int64_tensor({2}, {0, 0}), "avg");
            }).kind(),
            ErrorKind::kValue);
}

TEST(NLLLoss, PicksNegatedLogProbability) {
  const Tensor lp = random_floats({2, 3, 2}, 10);  // [N, C, d]
  const Tensor target = int64_tensor({2, 2}, {0, 2, 1, 1});
  const Tensor out = nll_loss(lp, target, "none");
  ASSERT_EQ(out.shape(), (Shape{2, 2}));
  EXPECT_FLOAT_EQ(out.data<float>()[0], -lp.data<float>()[0 * 6 + 0 * 2 + 0]);
  EXPECT_FLOAT_EQ(out.data<float>()[1], -lp.data<float>()[0 * 6 + 2 * 2 + 1]);
  EXPECT_FLOAT_EQ(out.data<float>()[3], -lp.data<float>()[1 * 6 + 1 * 2 + 1]);
}

TEST(MSELoss, AveragesSquaredDifferences_WithBroadcasting) {
  const Tensor a = random_floats({4, 3}, 11);
  const Tensor b = random_floats({3}, 12);
  double total = 0;
  for (int64_t i = 0; i < 12; ++i) {
    total += std::pow(double(a.data<float>()[i]) - b.data<float>()[i % 3], 2);
  }
  EXPECT_NEAR(mse_loss(a, b).data<float>()[0], total / 12, 1e-5);
  EXPECT_NEAR(mse_loss(a, b, "sum").data<float>()[0], total, 1e-4);
  EXPECT_EQ(mse_loss(a, b, "none").shape(), (Shape{4, 3}));
  EXPECT_EQ(error_of([&] { mse_loss(a, random_floats({4}, 1)); }).kind(), ErrorKind::kShape);
}

}  // namespace
}  // namespace kiln
