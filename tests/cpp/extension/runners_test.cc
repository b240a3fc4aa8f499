#include "kiln/runners.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kiln/runtime.h"
#include "ops/onednn_util.h"

namespace kiln {
namespace {

Tensor random(const Shape& shape, unsigned seed) {
  Tensor t = Tensor::empty(shape);
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(gen);
  return t;
}

float at(const Tensor& t, std::initializer_list<int64_t> index) {
  int64_t offset = 0, d = 0;
  for (int64_t i : index) offset += i * t.stride(d++);
  return t.data<float>()[offset];
}

// The error `f` raises, by the next sync point at the latest (a runner's kernel runs queued).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
    runtime::synchronize();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(OneDnnOpRunner, MatMulWithBiasAndPostOps_MatchesLoops_OnATransposedView) {
  const Tensor a = random({3, 5}, 1), w = random({4, 5}, 2), bias = random({4}, 3);
  Tensor out(DType::kFloat32, {3, 4});
  std::make_shared<OneDnnOpRunner>(
      "LinearRelu", OneDnnPrimitive::MatMul({{EltwiseKind::kRelu}, {EltwiseKind::kLinear, 2.0f, 1.0f}}))
      ->Run({a, w.transpose(0, 1), bias}, {out});
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      float acc = at(bias, {j});
      for (int64_t k = 0; k < 5; ++k) acc += at(a, {i, k}) * at(w, {j, k});
      EXPECT_NEAR(at(out, {i, j}), 2.0f * std::max(acc, 0.0f) + 1.0f, 1e-4f);
    }
  }
}

// out[b, i, j] = post(bias[j] + sum_k a[b, i, k] * w[b, k, j]) by loops, for 3-d a and w of any
// strides; `post` defaults to the identity.
void expect_batched_matmul(
    const Tensor& out, const Tensor& a, const Tensor& w, const Tensor& bias,
    const std::function<float(float)>& post = [](float v) { return v; }) {
  for (int64_t b = 0; b < a.size(0); ++b) {
    for (int64_t i = 0; i < a.size(1); ++i) {
      for (int64_t j = 0; j < w.size(2); ++j) {
        float acc = bias.defined() ? at(bias, {j}) : 0.0f;
        for (int64_t k = 0; k < a.size(2); ++k) acc += at(a, {b, i, k}) * at(w, {b, k, j});
        EXPECT_NEAR(at(out, {b, i, j}), post(acc), 1e-4f) << b << ", " << i << ", " << j;
      }
    }
  }
}

TEST(OneDnnOpRunner, MatMulCopiesOperands_WhoseMatricesInterleave) {
  // Every other row of each matrix (strides [12, 8, 1]): no oneDNN descriptor takes it as is.
  const Tensor a = random({2, 3, 4}, 20).slice(1, 0, 3, 2), w = random({2, 4, 5}, 21);
  Tensor out(DType::kFloat32, {2, 2, 5});
  std::make_shared<OneDnnOpRunner>("M", OneDnnPrimitive::MatMul())->Run({a, w}, {out});
  runtime::synchronize();
  expect_batched_matmul(out, a, w, Tensor());
  // An output like that is refused, naming its strides.
  const std::string msg = error_of([&] {
    Tensor wide(DType::kFloat32, {2, 3, 5});
    std::make_shared<OneDnnOpRunner>("M", OneDnnPrimitive::MatMul())
        ->Run({random({2, 2, 4}, 22), w}, {wide.slice(1, 0, 3, 2)});
  });
  EXPECT_NE(msg.find("expected an output whose elements do not interleave"), std::string::npos)
      << msg;
}

TEST(OneDnnOpRunner, MatMulOfEmptyShapes_GivesEmptyOrBiasedOutputs) {
  const OneDnnPrimitive relu = OneDnnPrimitive::MatMul({{EltwiseKind::kRelu}});
  for (const auto& [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{0, 4, 3}, {2, 4, 0}}) {
    Tensor out(DType::kFloat32, {1, m, n});
    std::make_shared<OneDnnOpRunner>("M", relu)->Run({random({1, m, k}, 23), random({1, k, n}, 24)},
                                                     {out});
    runtime::synchronize();
    EXPECT_EQ(out.numel(), 0);
  }
  // K = 0: the product is zeros, so the output is relu(bias).
  const Tensor a = Tensor::empty({2, 3, 0}), w = Tensor::empty({2, 0, 4}), bias = random({4}, 25);
  Tensor out(DType::kFloat32, {2, 3, 4});
  std::make_shared<OneDnnOpRunner>("M", relu)->Run({a, w, bias}, {out});
  runtime::synchronize();
  expect_batched_matmul(out, a, w, bias, [](float v) { return std::max(v, 0.0f); });
}

TEST(OneDnnOpRunner, ReusesTheCachedPrimitive_ForTheSameShapes) {
  const Tensor a = random({2, 3}, 4), b = random({3, 2}, 5);
  auto run = [&] {
    Tensor out(DType::kFloat32, {2, 2});
    std::make_shared<OneDnnOpRunner>("M", OneDnnPrimitive::MatMul())->Run({a, b}, {out});
  };
  run();
  runtime::synchronize();
  const int64_t hits = onednn::primitive_cache_stats().hits;
  run();
  runtime::synchronize();
  EXPECT_EQ(onednn::primitive_cache_stats().hits, hits + 1);
}

TEST(OneDnnOpRunner, ConvolutionMatchesLoops) {
  const Tensor x = random({1, 2, 5, 5}, 6), w = random({3, 2, 3, 3}, 7), bias = random({3}, 8);
  Tensor out(DType::kFloat32, {1, 3, 3, 3});  // stride 2, padding 1
  std::make_shared<OneDnnOpRunner>("Conv", OneDnnPrimitive::Convolution({2, 2}, {1, 1}, {1, 1}))
      ->Run({x, w, bias}, {out});
  for (int64_t o = 0; o < 3; ++o) {
    for (int64_t y = 0; y < 3; ++y) {
      for (int64_t z = 0; z < 3; ++z) {
        float acc = at(bias, {o});
        for (int64_t c = 0; c < 2; ++c) {
          for (int64_t ky = 0; ky < 3; ++ky) {
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t iy = y * 2 - 1 + ky, ix = z * 2 - 1 + kx;
              if (iy >= 0 && iy < 5 && ix >= 0 && ix < 5) {
                acc += at(x, {0, c, iy, ix}) * at(w, {o, c, ky, kx});
              }
            }
          }
        }
        EXPECT_NEAR(at(out, {0, o, y, z}), acc, 1e-4f);
      }
    }
  }
}

TEST(OneDnnOpRunner, ConvolutionOfStridedAndEmptyShapes) {
  // Every other row of the image: strides oneDNN cannot describe, copied first.
  const Tensor x = random({2, 1, 6, 3}, 26).slice(2, 0, 6, 2), w = random({1, 1, 1, 1}, 27);
  Tensor out(DType::kFloat32, {2, 1, 3, 3});
  std::make_shared<OneDnnOpRunner>("Conv", OneDnnPrimitive::Convolution())->Run({x, w}, {out});
  runtime::synchronize();
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t y = 0; y < 3; ++y) {
      for (int64_t z = 0; z < 3; ++z) {
        EXPECT_NEAR(at(out, {b, 0, y, z}), at(x, {b, 0, y, z}) * at(w, {0, 0, 0, 0}), 1e-5f);
      }
    }
  }
  // No output channels: nothing to compute. No input channels: the bias.
  Tensor none(DType::kFloat32, {2, 0, 3, 3});
  std::make_shared<OneDnnOpRunner>("Conv", OneDnnPrimitive::Convolution())
      ->Run({x, Tensor::empty({0, 1, 1, 1})}, {none});
  const Tensor bias = random({2}, 28);
  Tensor biased(DType::kFloat32, {1, 2, 2, 2});
  std::make_shared<OneDnnOpRunner>("Conv", OneDnnPrimitive::Convolution())
      ->Run({Tensor::empty({1, 0, 2, 2}), Tensor::empty({2, 0, 1, 1}), bias}, {biased});
  runtime::synchronize();
  for (int64_t o = 0; o < 2; ++o) EXPECT_EQ(at(biased, {0, o, 1, 1}), at(bias, {o}));
}

TEST(OneDnnOpRunner, SoftmaxLayerNormAndEltwiseMatchLoops) {
  const Tensor x = random({2, 6}, 9), gamma = random({6}, 10), beta = random({6}, 11);
  Tensor soft(DType::kFloat32, {2, 6}), norm(DType::kFloat32, {2, 6}), th(DType::kFloat32, {2, 6});
  std::make_shared<OneDnnOpRunner>("Softmax", OneDnnPrimitive::Softmax(-1))->Run({x}, {soft});
  std::make_shared<OneDnnOpRunner>("LayerNorm", OneDnnPrimitive::LayerNorm(1e-5f))
      ->Run({x, gamma, beta}, {norm});
  std::make_shared<OneDnnOpRunner>("Tanh", OneDnnPrimitive::Elementwise({EltwiseKind::kTanh}))
      ->Run({x}, {th});
  for (int64_t r = 0; r < 2; ++r) {
    float max = -INFINITY, sum = 0, mean = 0, var = 0;
    for (int64_t i = 0; i < 6; ++i) max = std::max(max, at(x, {r, i}));
    for (int64_t i = 0; i < 6; ++i) sum += std::exp(at(x, {r, i}) - max);
    for (int64_t i = 0; i < 6; ++i) mean += at(x, {r, i}) / 6;
    for (int64_t i = 0; i < 6; ++i) var += (at(x, {r, i}) - mean) * (at(x, {r, i}) - mean) / 6;
    for (int64_t i = 0; i < 6; ++i) {
      EXPECT_NEAR(at(soft, {r, i}), std::exp(at(x, {r, i}) - max) / sum, 1e-5f);
      const float normed = (at(x, {r, i}) - mean) / std::sqrt(var + 1e-5f);
      EXPECT_NEAR(at(norm, {r, i}), normed * at(gamma, {i}) + at(beta, {i}), 1e-4f);
      EXPECT_NEAR(at(th, {r, i}), std::tanh(at(x, {r, i})), 1e-5f);
    }
  }
}

TEST(OneDnnOpRunner, SaysWhatItExpected_OnBadInputs) {
  auto matmul = [](std::vector<Tensor> in, Tensor out) {
    std::make_shared<OneDnnOpRunner>("M", OneDnnPrimitive::MatMul())->Run(in, {out});
  };
  EXPECT_NE(error_of([&] { matmul({random({2, 3}, 1), random({4, 2}, 2)}, Tensor(DType::kFloat32, {2, 2})); })
                .find("do not fit: a has 3 columns, b has 4 rows"),
            std::string::npos);
  EXPECT_NE(error_of([&] { matmul({random({2, 3}, 1), random({3, 2}, 2)}, Tensor(DType::kFloat32, {3, 3})); })
                .find("expected an output of shape [2, 2], got [3, 3]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              matmul({Tensor::empty({2, 3}, DType::kFloat64), random({3, 2}, 2)},
                     Tensor(DType::kFloat32, {2, 2}));
            }).find("expected a of dtype float32, got float64"),
            std::string::npos);
  const std::string msg = error_of([&] {
    Tensor out(DType::kFloat32, {3, 2});
    std::make_shared<OneDnnOpRunner>("Soft", OneDnnPrimitive::Softmax())
        ->Run({random({2, 3}, 1).transpose(0, 1)}, {out});
  });
  EXPECT_NE(msg.find("expected x to be contiguous"), std::string::npos) << msg;
  EXPECT_NE(msg.find("in Soft(float32[3, 2])"), std::string::npos) << msg;
}

TEST(BlasOpRunner, GemmOnTransposedViews_AndGemv_MatchLoops) {
  const Tensor at_ = random({5, 3}, 12), b = random({5, 4}, 13), c = random({4}, 14);
  const Tensor a = at_.transpose(0, 1);  // [3, 5], column-major
  Tensor out(DType::kFloat32, {3, 4});
  std::make_shared<BlasOpRunner>("Addmm", 2.0f, 0.5f)->Run({a, b, c}, {out});
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < 5; ++k) acc += at(a, {i, k}) * at(b, {k, j});
      EXPECT_NEAR(at(out, {i, j}), 2.0f * acc + 0.5f * at(c, {j}), 1e-4f);
    }
  }
  const Tensor v = random({5}, 15);
  Tensor y(DType::kFloat32, {3});
  std::make_shared<BlasOpRunner>("Gemv")->Run({a, v}, {y});
  for (int64_t i = 0; i < 3; ++i) {
    float acc = 0;
    for (int64_t k = 0; k < 5; ++k) acc += at(a, {i, k}) * at(v, {k});
    EXPECT_NEAR(at(y, {i}), acc, 1e-4f);
  }
}

TEST(BlasOpRunner, SaysWhatItExpected_OnBadInputs) {
  EXPECT_NE(error_of([] {
              std::make_shared<BlasOpRunner>("G", 1.0f, 1.0f)
                  ->Run({random({2, 3}, 1), random({3, 2}, 2)}, {Tensor(DType::kFloat32, {2, 2})});
            }).find("beta is 1 but no input c was given"),
            std::string::npos);
  const Tensor every_other = random({2, 6}, 3).slice(1, 0, 6, 2);  // no unit stride
  EXPECT_NE(error_of([&] {
              std::make_shared<BlasOpRunner>("G")->Run({every_other, random({3, 2}, 2)},
                                                       {Tensor(DType::kFloat32, {2, 2})});
            }).find("is not a BLAS matrix"),
            std::string::npos);
}

TEST(FftOpRunner, RealForwardFindsTheFrequency_AndInverseRoundTrips) {
  const int64_t n = 16;
  Tensor x = Tensor::empty({2, n});
  for (int64_t i = 0; i < n; ++i) {
    x.data<float>()[i] = std::cos(2 * M_PI * 3 * i / n);
    x.data<float>()[n + i] = 1.0f;
  }
  Tensor spectrum(DType::kFloat32, {2, n / 2 + 1, 2});
  std::make_shared<FftOpRunner>("Rfft", FftKind::kRealForward)->Run({x}, {spectrum});
  for (int64_t k = 0; k <= n / 2; ++k) {
    EXPECT_NEAR(at(spectrum, {0, k, 0}), k == 3 ? n / 2.0f : 0.0f, 1e-4f) << k;
    EXPECT_NEAR(at(spectrum, {1, k, 0}), k == 0 ? static_cast<float>(n) : 0.0f, 1e-4f) << k;
  }
  Tensor back(DType::kFloat32, {2, n});
  std::make_shared<FftOpRunner>("Irfft", FftKind::kRealInverse)->Run({spectrum}, {back});
  for (int64_t i = 0; i < 2 * n; ++i) EXPECT_NEAR(back.data<float>()[i], x.data<float>()[i], 1e-5f);
  EXPECT_NEAR(at(spectrum, {0, 3, 0}), n / 2.0f, 1e-4f);  // c2r worked on a copy of its input
}

TEST(FftOpRunner, ComplexRoundTripInDouble_FromSeveralThreads) {
  std::vector<std::thread> threads;
  std::vector<double> errors(4, 0.0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &errors] {
      Tensor x = Tensor::empty({3, 8 + 2 * t, 2}, DType::kFloat64);
      for (int64_t i = 0; i < x.numel(); ++i) x.data<double>()[i] = std::sin(0.7 * i + t);
      for (int rep = 0; rep < 20; ++rep) {
        Tensor f(DType::kFloat64, x.shape()), back(DType::kFloat64, x.shape());
        std::make_shared<FftOpRunner>("F", FftKind::kComplexForward, 1, FftNorm::kOrtho)->Run({x}, {f});
        std::make_shared<FftOpRunner>("I", FftKind::kComplexInverse, 1, FftNorm::kOrtho)->Run({f}, {back});
        for (int64_t i = 0; i < x.numel(); ++i) {
          errors[t] = std::max(errors[t], std::abs(back.data<double>()[i] - x.data<double>()[i]));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (double e : errors) EXPECT_LT(e, 1e-12);
}

TEST(FftOpRunner, SaysWhatItExpected_OnBadShapes) {
  const std::string msg = error_of([] {
    std::make_shared<FftOpRunner>("Rfft", FftKind::kRealForward)
        ->Run({Tensor::empty({2, 8})}, {Tensor(DType::kFloat32, {2, 8, 2})});
  });
  EXPECT_NE(msg.find("expected input [2, 8] and output [2, 5, 2]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("trailing dimension of 2"), std::string::npos) << msg;
  // A signal of no points has no transform (NumPy and PyTorch refuse it too).
  const std::string none = error_of([] {
    std::make_shared<FftOpRunner>("Rfft", FftKind::kRealForward)
        ->Run({Tensor::empty({4, 0})}, {Tensor(DType::kFloat32, {4, 1, 2})});
  });
  EXPECT_NE(none.find("expected a signal of at least one point"), std::string::npos) << none;
  EXPECT_NE(error_of([] {
              std::make_shared<FftOpRunner>("F", FftKind::kComplexForward)
                  ->Run({Tensor::empty({4, 2}, DType::kInt32)}, {Tensor(DType::kInt32, {4, 2})});
            }).find("expected float32 or float64"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
