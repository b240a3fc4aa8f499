// Tests for src/ops/random.cc: Philox4x32-10, the global generator, rand / randn / randint /
// randperm / multinomial / dropout.
#include "ops/random.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/dtype_dispatch.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/nn.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "kiln/runtime.h"
#include "ops/simd/float_kernels.h"
#include "ops/simd/philox.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_error;

constexpr int64_t kSamples = 1 << 20;

std::vector<double> values(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(t.data_ptr());
    for (size_t i = 0; i < out.size(); ++i) out[i] = convert<double>(p[i]);
  });
  return out;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double variance(const std::vector<double>& v) {
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size());
}

// Pearson's chi-square of `counts` against equal expected counts.
double chi_square(const std::vector<int64_t>& counts) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const double expected = static_cast<double>(total) / static_cast<double>(counts.size());
  double chi = 0;
  for (int64_t c : counts) chi += (c - expected) * (c - expected) / expected;
  return chi;
}

// Restores the thread count a test changed.
class ThreadCount {
 public:
  ThreadCount() : saved_(get_num_threads()) {}
  ~ThreadCount() { set_num_threads(saved_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_;
};

TEST(Philox, MatchesTheRandom123KnownAnswers) {
  using detail::philox4x32_10;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                          {0xffffffffu, 0xffffffffu}),
            (std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, TheVectorisedRunGivesEachCounterItsOwnWords_OnEveryTarget) {
  // Counters crossing 2^32 carry into the counter's second word; 2^64 wraps to 0.
  for (const std::string& target : simd::supported_targets()) {
    simd::set_target_for_testing(target);
    for (uint64_t first : {uint64_t{0}, uint64_t{12345}, uint64_t{0xfffffff8u}, ~uint64_t{20}}) {
      for (uint64_t seed : {uint64_t{0}, uint64_t{0x0123456789abcdefu}}) {
        for (int64_t count : {1, 5, 16, 64, 100}) {
          std::vector<uint32_t> words(static_cast<size_t>(4 * count));
          simd::philox4x32_10(first, seed, words.data(), count);
          for (int64_t c = 0; c < count; ++c) {
            const auto expected = detail::philox4x32_10(first + static_cast<uint64_t>(c), seed);
            for (int k = 0; k < 4; ++k) {
              ASSERT_EQ(words[static_cast<size_t>(k * count + c)], expected[k])
                  << target << ": counter " << first << " + " << c << ", word " << k;
            }
          }
        }
      }
    }
  }
  simd::set_target_for_testing("");
}

TEST(Philox, ElementIIsLaneIOfItsCounter_AcrossBlocksAndChunks) {
  // Note [Counter-based generator], element by element, against one Philox call per counter:
  // for every op and at indices around the kernels' blocks (256 float lanes) and parallel chunks.
  ThreadCount restore;
  set_num_threads(2);
  const int64_t n = 40003;
  const std::vector<int64_t> indices = {0,     1,     3,     4,     255,   256,   257,
                                        16383, 16384, 16385, 20001, 32768, 40000, 40002};
  manual_seed(99);
  const std::vector<double> u32 = values(rand({n}));
  const std::vector<double> u64 = values(rand({n}, DType::kFloat64));
  const std::vector<double> normals = values(randn({n}));
  const std::vector<double> ints = values(randint(-7, 1000, {n}));
  const std::vector<double> kept = values(dropout(ones({n}), 0.25));
  uint64_t offset = 0;
  const auto words = [&](uint64_t counter) { return detail::philox4x32_10(offset + counter, 99); };
  for (int64_t i : indices) {
    const auto k = static_cast<size_t>(i);
    EXPECT_EQ(u32[k], detail::uniform_float(words(i / 4)[i % 4])) << "rand, element " << i;
  }
  offset += (n + 3) / 4;
  for (int64_t i : indices) {
    const auto w = words(i / 2);
    const auto k = static_cast<size_t>(i);
    EXPECT_EQ(u64[k], detail::uniform_double(w[2 * (i % 2)], w[2 * (i % 2) + 1]))
        << "rand float64, element " << i;
  }
  offset += (n + 1) / 2;
  for (int64_t i : indices) {
    const auto w = words(i / 4);
    const int pair = static_cast<int>(i % 4) / 2;
    const double r = std::sqrt(-2 * std::log(1.0 - detail::uniform_float(w[2 * pair])));
    const double theta = 2 * M_PI * detail::uniform_float(w[2 * pair + 1]);
    const double z = r * (i % 2 == 0 ? std::cos(theta) : std::sin(theta));
    EXPECT_NEAR(normals[static_cast<size_t>(i)], z, 1e-5 * (1 + std::fabs(z)))
        << "randn, element " << i;
  }
  offset += (n + 3) / 4;
  for (int64_t i : indices) {
    const auto w = words(i / 2);
    const uint64_t bits = (static_cast<uint64_t>(w[2 * (i % 2)]) << 32) | w[2 * (i % 2) + 1];
    // floor(bits * 1007 / 2^64), the multiply-shift onto [0, 1007), from 32-bit halves.
    const uint64_t scaled = ((bits >> 32) * 1007 + (((bits & 0xffffffffu) * 1007) >> 32)) >> 32;
    const auto expected = static_cast<double>(-7 + static_cast<int64_t>(scaled));
    EXPECT_EQ(ints[static_cast<size_t>(i)], expected) << "randint, element " << i;
  }
  offset += (n + 1) / 2;
  for (int64_t i : indices) {
    const bool keep = detail::uniform_float(words(i / 4)[i % 4]) >= 0.25f;
    EXPECT_EQ(kept[static_cast<size_t>(i)],
              keep ? static_cast<double>(static_cast<float>(1.0 / 0.75)) : 0.0)
        << "dropout, element " << i;
  }
}

TEST(Philox, UniformConversionsStayBelowOne) {
  EXPECT_EQ(detail::uniform_float(0), 0.0f);
  EXPECT_LT(detail::uniform_float(0xffffffffu), 1.0f);
  EXPECT_EQ(detail::uniform_float(0xffffffffu), 1.0f - 0x1p-24f);
  EXPECT_LT(detail::uniform_double(0xffffffffu, 0xffffffffu), 1.0);
  EXPECT_EQ(detail::uniform_double(0xffffffffu, 0xffffffffu), 1.0 - 0x1p-53);
}

TEST(Generator, ManualSeed_ResetsTheOffset_AndSameSeedRepeats) {
  manual_seed(42);
  EXPECT_EQ(get_rng_state().seed, 42u);
  EXPECT_EQ(get_rng_state().offset, 0u);
  const Tensor a = rand({1000});
  const Tensor b = rand({1000});
  manual_seed(42);
  const Tensor c = rand({1000});
  EXPECT_TRUE(same_bytes(a, c));
  EXPECT_FALSE(same_bytes(a, b));
  manual_seed(43);
  EXPECT_FALSE(same_bytes(a, rand({1000})));
}

TEST(Generator, EachCallReservesOneCounterPerGroupOfElements) {
  manual_seed(7);
  rand({10});  // float32: 4 elements per counter
  EXPECT_EQ(get_rng_state().offset, 3u);
  rand({5}, DType::kFloat64);  // 2 per counter
  EXPECT_EQ(get_rng_state().offset, 6u);
  randn({8}, DType::kBFloat16);
  EXPECT_EQ(get_rng_state().offset, 8u);
  randint(0, 3, {3});
  EXPECT_EQ(get_rng_state().offset, 10u);
  dropout(ones({9}), 0.5);
  EXPECT_EQ(get_rng_state().offset, 13u);
  dropout(ones({9}), 0.5, /*training=*/false);
  dropout(ones({9}), 0.0);
  rand({0});
  EXPECT_EQ(get_rng_state().offset, 13u);
}

TEST(Generator, RejectedCallsLeaveTheGeneratorUntouched) {
  manual_seed(9);
  testing::error_of([] { rand({-1}); });
  testing::error_of([] { rand({4}, DType::kInt32); });
  testing::error_of([] { randint(3, 3, {4}); });
  testing::error_of([] { dropout(ones({4}), 2.0); });
  testing::error_of([] { dropout(ones({4}, DType::kInt32), 0.5); });
  EXPECT_EQ(get_rng_state().offset, 0u);
}

// A Generator of one's own is the default generator's stream under its own seed: it draws what
// the default draws after manual_seed(seed), and leaves the default where it was.
TEST(Generator, AnOwnGeneratorDrawsTheDefaultsStreamForItsSeed_AndLeavesTheDefaultAlone) {
  manual_seed(11);
  const Tensor a = rand({100});
  const Tensor b = randint(0, 1000, {7});
  const Tensor c = randperm(50);
  const Tensor d = multinomial(ones({2, 9}), 4);
  const Tensor e = randn({3, 5}, DType::kFloat64);
  const uint64_t reserved = get_rng_state().offset;
  manual_seed(99);
  const RngState before = get_rng_state();
  Generator g(11);
  EXPECT_TRUE(same_bytes(rand({100}, DType::kFloat32, g), a));
  EXPECT_TRUE(same_bytes(randint(0, 1000, {7}, DType::kInt64, g), b));
  EXPECT_TRUE(same_bytes(randperm(50, DType::kInt64, g), c));
  EXPECT_TRUE(same_bytes(multinomial(ones({2, 9}), 4, false, g), d));
  EXPECT_TRUE(same_bytes(randn({3, 5}, DType::kFloat64, g), e));
  EXPECT_EQ(get_rng_state().seed, before.seed);
  EXPECT_EQ(get_rng_state().offset, before.offset);
  EXPECT_EQ(g.state().offset, reserved);
}

TEST(Generator, CopiesShareOneStream_StateRoundTrips) {
  Generator g(3);
  Generator alias = g;
  EXPECT_TRUE(alias == g);
  EXPECT_TRUE(Generator(3) != g);
  const Tensor first = rand({8}, DType::kFloat32, g);
  EXPECT_EQ(alias.state().offset, 2u);  // the copy saw g's draw
  const RngState saved = alias.state();
  const Tensor second = rand({8}, DType::kFloat32, alias);
  EXPECT_FALSE(same_bytes(first, second));
  g.set_state(saved);
  EXPECT_TRUE(same_bytes(rand({8}, DType::kFloat32, g), second));
  g.manual_seed(3);
  EXPECT_EQ(alias.state().offset, 0u);
  EXPECT_TRUE(same_bytes(rand({8}, DType::kFloat32, alias), first));
  EXPECT_EQ(Generator().state().seed, 67280421310721u);  // PyTorch's default seed
  EXPECT_TRUE(default_generator() == default_generator());
}

TEST(Generator, RejectedCallsLeaveAnOwnGeneratorUntouched) {
  Generator g(4);
  testing::error_of([&] { rand({-1}, DType::kFloat32, g); });
  testing::error_of([&] { randint(3, 3, {4}, DType::kInt64, g); });
  testing::error_of([&] { randperm(300, DType::kInt8, g); });
  EXPECT_EQ(g.state().offset, 0u);
}

TEST(Generator, ElementIDependsOnlyOnSeedOffsetAndI) {
  // A prefix of a longer draw equals a shorter draw from the same state.
  manual_seed(5);
  const std::vector<double> longer = values(rand({1001}));
  manual_seed(5);
  const std::vector<double> shorter = values(rand({17}));
  EXPECT_TRUE(std::equal(shorter.begin(), shorter.end(), longer.begin()));
}

TEST(Generator, ResultsAreIdenticalForOneOrTwoThreads) {
  ThreadCount restore;
  const int64_t n = 100003;  // several parallel chunks, with ragged ends
  const Tensor x = randn({n});
  std::vector<Tensor> results[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    manual_seed(1234);
    std::vector<Tensor>& r = results[threads - 1];
    for (DType d : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
      r.push_back(rand({n}, d));
      r.push_back(randn({n}, d));
      r.push_back(dropout(to(x, d), 0.3));
    }
    r.push_back(randint(-5, 1000, {n}));
    r.push_back(randint(0, 100, {n}, DType::kUInt8));
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) {
    EXPECT_TRUE(same_bytes(results[0][i], results[1][i])) << "result " << i;
  }
}

TEST(RandUniform, Float32_HasUniformMomentsAndHistogram) {
  manual_seed(1);
  const std::vector<double> v = values(rand({kSamples}));
  EXPECT_GE(*std::min_element(v.begin(), v.end()), 0.0);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 1.0);
  EXPECT_NEAR(mean(v), 0.5, 2e-3);
  EXPECT_NEAR(variance(v), 1.0 / 12.0, 2e-3);
  std::vector<int64_t> bins(100, 0);
  for (double x : v) ++bins[static_cast<size_t>(x * 100)];
  EXPECT_LT(chi_square(bins), 200.0);  // 99 degrees of freedom: mean 99, sd 14
}

TEST(Bernoulli, EachDtype_HitsItsProbabilities_AndZeroAndOneAreExact) {
  manual_seed(21);
  for (DType d : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    // Three blocks of probabilities 0, 0.25 and 1, interleaved so that every lane sees each.
    const double probs[] = {0.0, 0.25, 1.0};
    Tensor p = Tensor::empty({3 * kSamples / 4}, DType::kFloat64);
    for (int64_t i = 0; i < p.numel(); ++i) p.data<double>()[i] = probs[i % 3];
    const Tensor b = bernoulli(to(p, d));
    ASSERT_EQ(b.dtype(), d);
    const std::vector<double> v = values(b);
    std::vector<double> quarter;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i % 3 == 1) {
        ASSERT_TRUE(v[i] == 0.0 || v[i] == 1.0) << v[i];
        quarter.push_back(v[i]);
      } else {
        ASSERT_EQ(v[i], i % 3 == 0 ? 0.0 : 1.0) << i;
      }
    }
    // 262144 draws of p = 0.25: sd of the mean 8.5e-4.
    EXPECT_NEAR(mean(quarter), 0.25, 5e-3) << d;
  }
}

TEST(Bernoulli, ReadsStridedProbabilities_AndRepeatsUnderAGenerator) {
  Tensor p = rand({64, 48}).transpose(0, 1);
  ASSERT_FALSE(p.is_contiguous());
  const Tensor a = bernoulli(p, Generator(8));
  EXPECT_TRUE(same_bytes(a, bernoulli(p.contiguous(), Generator(8))));
  const std::vector<double> got = values(a), prob = values(p.contiguous());
  const std::vector<double> u = values(rand({48, 64}, DType::kFloat32, Generator(8)));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], u[i] < prob[i] ? 1.0 : 0.0) << i;
}

TEST(Bernoulli, RefusesIntegerInputs_AndProbabilitiesOutsideZeroToOne) {
  expect_error([] { bernoulli(ones({3}, DType::kInt32)); }, ErrorKind::kDType,
               "bernoulli: expected floating-point probabilities, got int32");
  for (double bad : {-0.5, 1.5, std::nan("")}) {
    expect_error([bad] { bernoulli(full({5}, bad)); }, ErrorKind::kValue,
                 "bernoulli: expected probabilities in [0, 1]");
  }
}

TEST(RandUniform, Float64_HasUniformMoments) {
  manual_seed(2);
  const std::vector<double> v = values(rand({kSamples}, DType::kFloat64));
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 1.0);
  EXPECT_NEAR(mean(v), 0.5, 2e-3);
  EXPECT_NEAR(variance(v), 1.0 / 12.0, 2e-3);
}

TEST(RandUniform, SixteenBitFloats_StayBelowOne) {
  manual_seed(3);
  for (DType d : {DType::kFloat16, DType::kBFloat16}) {
    const std::vector<double> v = values(rand({kSamples}, d));
    const double largest = d == DType::kFloat16 ? 1.0 - 0x1p-11 : 1.0 - 0x1p-8;
    // Values that round up to 1 are clamped to the largest value below it, which then occurs.
    EXPECT_EQ(*std::max_element(v.begin(), v.end()), largest) << d;
    EXPECT_NEAR(mean(v), 0.5, 3e-3) << d;
  }
}

TEST(RandNormal, HasStandardNormalMomentsAndTails) {
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    manual_seed(4);
    const std::vector<double> v = values(randn({kSamples}, d));
    EXPECT_NEAR(mean(v), 0.0, 5e-3) << d;
    EXPECT_NEAR(variance(v), 1.0, 1e-2) << d;
    int64_t within_one = 0, within_two = 0;
    for (double x : v) {
      within_one += std::abs(x) < 1.0;
      within_two += std::abs(x) < 2.0;
      ASSERT_TRUE(std::isfinite(x));
    }
    EXPECT_NEAR(static_cast<double>(within_one) / kSamples, 0.682689, 3e-3) << d;
    EXPECT_NEAR(static_cast<double>(within_two) / kSamples, 0.954500, 2e-3) << d;
  }
}

TEST(RandInt, CoversTheRangeUniformly) {
  manual_seed(5);
  const Tensor t = randint(-3, 7, {kSamples});
  EXPECT_EQ(t.dtype(), DType::kInt64);
  std::vector<int64_t> bins(10, 0);
  const int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    ASSERT_GE(p[i], -3);
    ASSERT_LT(p[i], 7);
    ++bins[static_cast<size_t>(p[i] + 3)];
  }
  EXPECT_LT(chi_square(bins), 40.0);  // 9 degrees of freedom
}

TEST(RandInt, WorksForEveryNumericDType_AndTheWholeInt64Range) {
  manual_seed(6);
  for (DType d : {DType::kInt8, DType::kUInt8, DType::kInt16, DType::kInt32, DType::kFloat16,
                  DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    const std::vector<double> v = values(randint(0, 100, {1000}, d));
    EXPECT_GE(*std::min_element(v.begin(), v.end()), 0.0) << d;
    EXPECT_LE(*std::max_element(v.begin(), v.end()), 99.0) << d;
    for (double x : v) ASSERT_EQ(x, std::floor(x)) << d;
  }
  const Tensor wide = randint(std::numeric_limits<int64_t>::min(),
                              std::numeric_limits<int64_t>::max(), {1000});
  int64_t negative = 0;
  for (int64_t i = 0; i < wide.numel(); ++i) negative += wide.data<int64_t>()[i] < 0;
  EXPECT_GT(negative, 400);
  EXPECT_LT(negative, 600);
  const Tensor one = randint(41, 42, {5});
  EXPECT_EQ(values(one), std::vector<double>(5, 41.0));
}

TEST(RandomOps, RejectBadArguments) {
  expect_error([] { rand({4}, DType::kInt32); }, ErrorKind::kDType,
               "RandUniform: expected a floating dtype, got int32");
  expect_error([] { randn({4}, DType::kBool); }, ErrorKind::kDType, "RandNormal:");
  expect_error([] { rand({2, -1}); }, ErrorKind::kShape,
               "RandUniform: expected non-negative sizes, got [2, -1]");
  expect_error([] { randint(0, 3, {-1}); }, ErrorKind::kShape, "RandInt:");
  expect_error([] { randint(5, 5, {2}); }, ErrorKind::kValue,
               "RandInt: expected high > low, got low = 5, high = 5");
  expect_error([] { randint(0, 2, {2}, DType::kBool); }, ErrorKind::kDType,
               "RandInt: expected a numeric dtype, got bool");
  expect_error([] { randint(0, 300, {2}, DType::kInt8); }, ErrorKind::kValue,
               "RandInt: expected [low, high) within the range of int8");
}

TEST(RandomOps, AreMarkedRandom) {
  for (const char* name : {"RandUniform", "RandNormal", "RandInt", "Dropout"}) {
    EXPECT_TRUE(OpRegistry::Instance().get(name)->has_trait(kTraitRandom)) << name;
  }
}

TEST(RandomOps, RecordedSeedAndOffsetReplayExactly) {
  const Attrs attrs{{"shape", std::vector<int64_t>{64}},
                    {"seed", int64_t{99}},
                    {"offset", int64_t{1000}}};
  const RngState before = get_rng_state();
  const Tensor a = call_op("RandNormal", {}, attrs)[0];
  const Tensor b = call_op("RandNormal", {}, attrs)[0];
  EXPECT_TRUE(same_bytes(a, b));
  EXPECT_EQ(get_rng_state().offset, before.offset);  // nothing reserved
  // The functional call records the same attributes: seed 99 at offset 1000 gives the same draw.
  manual_seed(99);
  rand({4000});  // 1000 counters
  EXPECT_TRUE(same_bytes(a, randn({64})));
}

TEST(RandomOps, WithoutSeedAttributes_ReserveWhenTheKernelRuns) {
  manual_seed(11);
  const Attrs attrs{{"shape", std::vector<int64_t>{8}}};
  const Tensor a = call_op("RandUniform", {}, attrs)[0];
  runtime::synchronize();  // the kernel has run
  EXPECT_EQ(get_rng_state().offset, 2u);
  const Tensor b = call_op("RandUniform", {}, attrs)[0];
  EXPECT_FALSE(same_bytes(a, b));
  manual_seed(11);
  EXPECT_TRUE(same_bytes(a, rand({8})));
}

TEST(Dropout, IsTheIdentity_WhenNotTrainingOrPIsZero) {
  const Tensor x = randn({3, 4});
  EXPECT_TRUE(dropout(x, 0.5, /*training=*/false).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0).is_same(x));
}

TEST(Dropout, PIsOne_GivesZeros) {
  const std::vector<double> v = values(dropout(randn({1000}), 1.0));
  EXPECT_EQ(v, std::vector<double>(1000, 0.0));
}

TEST(Dropout, ScalesKeptValues_AndKeepsTheMean) {
  manual_seed(12);
  const double p = 0.3;
  const Tensor x = rand({kSamples}, DType::kFloat64);
  const std::vector<double> in = values(x);
  const std::vector<double> out = values(dropout(x, p));
  int64_t dropped = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (out[i] == 0.0) {
      ++dropped;
    } else {
      ASSERT_DOUBLE_EQ(out[i], in[i] / (1.0 - p));
    }
  }
  EXPECT_NEAR(static_cast<double>(dropped) / kSamples, p, 3e-3);
  EXPECT_NEAR(mean(values(dropout(ones({kSamples}), p))), 1.0, 5e-3);
}

TEST(Dropout, SupportsSixteenBitFloats) {
  for (DType d : {DType::kFloat16, DType::kBFloat16}) {
    const Tensor out = dropout(ones({10000}, d), 0.5);
    EXPECT_EQ(out.dtype(), d);
    int64_t kept = 0;
    for (double v : values(out)) {
      ASSERT_TRUE(v == 0.0 || v == 2.0) << v;
      kept += v == 2.0;
    }
    EXPECT_GT(kept, 4500);
    EXPECT_LT(kept, 5500);
  }
}

TEST(Dropout, NonContiguousInput_UsesTheLogicalOrder) {
  const Tensor x = randn({40, 30}).transpose(0, 1);
  manual_seed(13);
  const Tensor a = dropout(x, 0.4);
  manual_seed(13);
  const Tensor b = dropout(x.contiguous(), 0.4);
  EXPECT_TRUE(same_bytes(a, b));
  EXPECT_EQ(a.shape(), (Shape{30, 40}));
}

TEST(Dropout, RejectsBadArguments) {
  expect_error([] { dropout(ones({2}), 1.5); }, ErrorKind::kValue,
               "Dropout: expected p in [0, 1], got 1.5");
  expect_error([] { dropout(ones({2}), -0.1, /*training=*/false); }, ErrorKind::kValue,
               "expected p in [0, 1]");
  expect_error([] { dropout(ones({2}), std::nan("")); }, ErrorKind::kValue, "p in [0, 1]");
  expect_error([] { dropout(ones({2}, DType::kInt64), 0.5); }, ErrorKind::kDType,
               "Dropout: expected a floating input, got int64");
}

TEST(Generator, SetRngState_RepeatsTheDrawsAfterGetRngState) {
  manual_seed(31);
  rand({100});
  const RngState state = get_rng_state();
  EXPECT_EQ(state.seed, 31u);
  EXPECT_EQ(state.offset, 25u);
  const Tensor first = randn({64});
  const Tensor perm = randperm(50);
  rand({1000});  // elsewhere
  set_rng_state(state);
  EXPECT_TRUE(same_bytes(randn({64}), first));
  EXPECT_TRUE(same_bytes(randperm(50), perm));
}

TEST(RandPerm, IsAPermutation_ForEveryIntegerDtype) {
  manual_seed(21);
  for (int64_t n : {0, 1, 2, 257, 10000}) {
    for (DType dtype : {DType::kInt64, DType::kInt32, DType::kInt16}) {
      const Tensor p = randperm(n, dtype);
      ASSERT_EQ(p.shape(), Shape{n});
      ASSERT_EQ(p.dtype(), dtype);
      std::vector<double> v = values(p);
      std::sort(v.begin(), v.end());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[static_cast<size_t>(i)], i) << "n " << n;
    }
  }
  EXPECT_EQ(values(randperm(256, DType::kUInt8)).size(), 256u);
}

TEST(RandPerm, EveryOrderIsEquallyLikely) {
  manual_seed(22);
  // The 3! orders of randperm(3), coded as 3 * p[0] + p[1], and where 0 lands in randperm(10).
  std::vector<int64_t> orders(9, 0), zero_at(10, 0);
  for (int i = 0; i < 60000; ++i) {
    const int64_t* p = randperm(3).data<int64_t>();
    ++orders[static_cast<size_t>(3 * p[0] + p[1])];
    const std::vector<double> q = values(randperm(10));
    ++zero_at[static_cast<size_t>(std::find(q.begin(), q.end(), 0.0) - q.begin())];
  }
  std::vector<int64_t> seen;
  for (int64_t c : orders) {
    if (c > 0) seen.push_back(c);
  }
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_LT(chi_square(seen), 25.0);     // 5 degrees of freedom
  EXPECT_LT(chi_square(zero_at), 35.0);  // 9 degrees of freedom
}

TEST(Multinomial, WithReplacement_FollowsTheWeights_AndNeverDrawsAZeroWeight) {
  manual_seed(23);
  const std::vector<double> w = {0.5, 0.0, 2.0, 1.5};  // not normalised
  Tensor probs = Tensor::empty({2, 4}, DType::kFloat64);
  for (int r = 0; r < 2; ++r) std::copy(w.begin(), w.end(), probs.data<double>() + 4 * r);
  const Tensor s = multinomial(probs, 200000, /*replacement=*/true);
  ASSERT_EQ(s.shape(), (Shape{2, 200000}));
  std::vector<int64_t> counts(4, 0);
  for (int64_t i = 0; i < s.numel(); ++i) ++counts[static_cast<size_t>(s.data<int64_t>()[i])];
  EXPECT_EQ(counts[1], 0);
  for (size_t c : {0u, 2u, 3u}) {
    EXPECT_NEAR(static_cast<double>(counts[c]) / 400000.0, w[c] / 4.0, 0.005) << "category " << c;
  }
}

TEST(Multinomial, WithoutReplacement_DrawsDistinctCategoriesInSequence) {
  manual_seed(24);
  // Weights 0.5, 0.3, 0.2: the first draw is 0 with probability 0.5, then 1 with 0.3 / 0.5.
  Tensor w = Tensor::empty({3}, DType::kFloat32);
  const float weights[] = {0.5f, 0.3f, 0.2f};
  std::memcpy(w.data_ptr(), weights, sizeof(weights));
  const Tensor s = multinomial(expand(w, {40000, 3}).contiguous(), 2);
  int64_t zero_then_one = 0, first_two = 0;
  for (int64_t r = 0; r < 40000; ++r) {
    const int64_t* p = s.data<int64_t>() + 2 * r;
    ASSERT_NE(p[0], p[1]);
    zero_then_one += p[0] == 0 && p[1] == 1;
    first_two += p[0] == 2;
  }
  EXPECT_NEAR(zero_then_one / 40000.0, 0.3, 0.01);
  EXPECT_NEAR(first_two / 40000.0, 0.2, 0.01);
  // Every positive category, in some order, when num_samples is their count.
  const Tensor all = multinomial(w, 3);
  std::vector<double> v = values(all);
  std::sort(v.begin(), v.end());
  EXPECT_EQ(v, (std::vector<double>{0, 1, 2}));
}

TEST(Multinomial, IsIdenticalForOneOrTwoThreads_AndReplaysItsDraw) {
  ThreadCount restore;
  const Tensor probs = rand({3000, 7});
  Tensor results[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    manual_seed(25);
    results[threads - 1] = multinomial(probs, 5);
  }
  EXPECT_TRUE(same_bytes(results[0], results[1]));
  // Without replacement one key per category, two per counter; with it, one value per sample.
  EXPECT_EQ(get_rng_state().offset, 3000u * 7 / 2);
  multinomial(probs, 5, /*replacement=*/true);
  EXPECT_EQ(get_rng_state().offset, 3000u * 7 / 2 + 3000u * 5 / 2);
}

TEST(Multinomial, RejectsBadArguments_AndBadWeightsWhenItRuns) {
  const Tensor w = ones({3});
  expect_error([&] { multinomial(ones({3}, DType::kInt64), 1); }, ErrorKind::kDType,
               "expected floating probabilities, got int64");
  expect_error(
      [&] {
        multinomial(ones({2, 2, 2}), 1);
      },
      ErrorKind::kShape, "expected probabilities of shape [C] or [B, C], got [2, 2, 2]");
  expect_error([&] { multinomial(w, 0); }, ErrorKind::kValue, "expected num_samples > 0");
  expect_error([&] { multinomial(w, 4); }, ErrorKind::kValue,
               "cannot draw 4 samples without replacement from 3 categories");
  expect_error(
      [&] {
        multinomial(ones({2, 0}), 1, true);
      },
      ErrorKind::kValue, "at least one category");
  expect_error([&] { multinomial(neg(w), 1); }, ErrorKind::kValue,
               "expected finite non-negative probabilities, got -1 in row 0, category 0");
  expect_error(
      [&] {
        multinomial(zeros({2, 3}), 1);
      },
      ErrorKind::kValue, "row 0 has no positive probability");
  Tensor two = Tensor::empty({3}, DType::kFloat32);
  const float one_zero_one[] = {1.0f, 0.0f, 1.0f};
  std::memcpy(two.data_ptr(), one_zero_one, sizeof(one_zero_one));
  expect_error([&] { multinomial(two, 3); }, ErrorKind::kValue,
               "which has 2 categories of positive probability");
  expect_error([] { randperm(-1); }, ErrorKind::kValue, "randperm: expected n >= 0, got -1");
  expect_error([] { randperm(300, DType::kInt8); }, ErrorKind::kValue,
               "randperm: n = 300 does not fit in int8");
  expect_error([] { randperm(3, DType::kBool); }, ErrorKind::kDType,
               "randperm: expected a numeric dtype, got bool");
  expect_error([] { randperm(257 + 256, DType::kBFloat16); }, ErrorKind::kValue,
               "randperm: n = 513 does not fit in bfloat16");
  // A floating dtype holds the permutation exactly: PyTorch's randperm(n, dtype=float32).
  Generator g(3);
  const Tensor as_float = randperm(100, DType::kFloat32, g);
  g.manual_seed(3);
  const Tensor as_int = randperm(100, DType::kInt64, g);
  for (int64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(as_float.data<float>()[i], static_cast<float>(as_int.data<int64_t>()[i]));
  }
  EXPECT_TRUE(OpRegistry::Instance().get("RandPerm")->has_trait(kTraitRandom));
  EXPECT_TRUE(OpRegistry::Instance().get("Multinomial")->has_trait(kTraitRandom));
}

}  // namespace
}  // namespace kiln
