// Gradient rules of the neural-network ops: LayerNorm, RMSNorm (src/ops/norm.cc), LstmCell
// (src/ops/rnn_cell.cc), CrossEntropy, NLLLoss, MSELoss (src/ops/loss.cc), Dropout
// (src/ops/random.cc), Conv2D and Conv3D (src/ops/conv.cc), MaxPool2D, AvgPool2D (src/ops/pool.cc)
// and Embedding (src/ops/embedding.cc), and of their backward ops, against central finite
// differences in float64 over their shapes and attributes; the backward ops against hand-computed
// results and the adjoint identity; the dtypes and shapes of the gradients of float32 inputs (the
// oneDNN paths) and undefined output gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "grad_rule_checks.h"
#include "grad_testing.h"
#include "kiln/functional.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "kiln/runtime.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::run_rule;

using testing::expect_grad_rule;

Tensor r64(const Shape& shape) { return randn(shape, DType::kFloat64); }

// An integer tensor holding `values`.
Tensor ints(const Shape& shape, const std::vector<int64_t>& values, DType dtype = DType::kInt64) {
  Tensor t = Tensor::empty(shape, DType::kInt64);
  for (size_t i = 0; i < values.size(); ++i) t.data<int64_t>()[i] = values[i];
  return to(t, dtype);
}


// Expects the rule on float32 copies of float64 `inputs` to give float32 gradients close to the
// float64 rule's, for the same output gradients.
void expect_float32_rule(const std::string& name, const std::vector<Tensor>& inputs,
                         const Attrs& attrs = {}) {
  const OpDefPtr op = OpRegistry::Instance().get(name);
  std::vector<Tensor> grads;
  for (const Tensor& y : call_op(*op, inputs, op->normalize_attrs(attrs))) {
    grads.push_back(r64(y.shape()));
  }
  std::vector<Tensor> inputs32, grads32;
  for (const Tensor& x : inputs) {
    inputs32.push_back(x.defined() && is_floating_point(x.dtype()) ? to(x, DType::kFloat32) : x);
  }
  for (const Tensor& g : grads) grads32.push_back(to(g, DType::kFloat32));
  const std::vector<Tensor> want = run_rule(name, inputs, attrs, grads);
  const std::vector<Tensor> got = run_rule(name, inputs32, attrs, grads32);
  ASSERT_EQ(got.size(), inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    SCOPED_TRACE("input " + std::to_string(k));
    ASSERT_EQ(got[k].defined(), want[k].defined());
    if (!got[k].defined()) continue;
    EXPECT_EQ(got[k].dtype(), DType::kFloat32);
    testing::expect_close(got[k], to(want[k], DType::kFloat32), 2e-4);
  }
}

// ---- LayerNorm, RMSNorm ----

TEST(GradLayerNorm, MatchesFiniteDifferences_WithAndWithoutAffine) {
  manual_seed(20);
  expect_grad_rule("LayerNorm", {r64({3, 5}), r64({5}), r64({5})}, {{"normalized_shape", Dims{5}}});
  expect_grad_rule("LayerNorm", {r64({2, 3, 4}), Tensor(), Tensor()},
                   {{"normalized_shape", Dims{4}}});
  expect_grad_rule("LayerNorm", {r64({2, 3, 4}), r64({3, 4}), Tensor()},
                   {{"normalized_shape", Dims{3, 4}}, {"eps", 1e-2}});
  expect_grad_rule("LayerNorm", {r64({6}), Tensor(), r64({6})}, {{"normalized_shape", Dims{6}}});
}

TEST(GradLayerNorm, GradientsAreFloat32_ForFloat32Inputs) {
  manual_seed(21);
  expect_float32_rule("LayerNorm", {r64({4, 8}), r64({8}), r64({8})},
                      {{"normalized_shape", Dims{8}}});
  const std::vector<Tensor> g =
      run_rule("LayerNorm", {r64({2, 3}), Tensor(), Tensor()}, {{"normalized_shape", Dims{3}}});
  EXPECT_EQ(g[0].shape(), (Shape{2, 3}));
  EXPECT_FALSE(g[1].defined());
  EXPECT_FALSE(g[2].defined());
}

TEST(GradRMSNorm, MatchesFiniteDifferences_WithAndWithoutWeight) {
  manual_seed(22);
  expect_grad_rule("RMSNorm", {r64({3, 5}), r64({5})}, {{"normalized_shape", Dims{5}}});
  expect_grad_rule("RMSNorm", {r64({2, 3, 4}), Tensor()}, {{"normalized_shape", Dims{3, 4}}});
  expect_grad_rule("RMSNorm", {r64({4}), r64({4})}, {{"normalized_shape", Dims{4}}, {"eps", 0.1}});
  expect_float32_rule("RMSNorm", {r64({4, 8}), r64({8})}, {{"normalized_shape", Dims{8}}});
}

TEST(GradNorm, GivesZeros_WhenNoGradientFlowsIn) {
  const std::vector<Tensor> g = run_rule("LayerNorm", {r64({2, 3}), r64({3}), r64({3})},
                                         {{"normalized_shape", Dims{3}}}, {Tensor()});
  for (const Tensor& t : g) testing::expect_close(t, zeros(t.shape(), DType::kFloat64), 0);
}

// LayerNormBackward / RMSNormBackward (x, weight, grad_output) -> (dx, d weight[, d bias]): the
// first-order gradients in one kernel, and their own rules (the second order).
TEST(GradNormBackward, RulesMatchFiniteDifferences_WithAndWithoutWeight) {
  manual_seed(23);
  const Attrs row5 = {{"normalized_shape", Dims{5}}};
  expect_grad_rule("LayerNormBackward", {r64({3, 5}), r64({5}), r64({3, 5})}, row5);
  expect_grad_rule("LayerNormBackward", {r64({3, 5}), Tensor(), r64({3, 5})}, row5);
  expect_grad_rule("LayerNormBackward", {r64({2, 3, 4}), r64({3, 4}), r64({2, 3, 4})},
                   {{"normalized_shape", Dims{3, 4}}, {"eps", 1e-2}});
  expect_grad_rule("RMSNormBackward", {r64({3, 5}), r64({5}), r64({3, 5})}, row5);
  expect_grad_rule("RMSNormBackward", {r64({2, 3, 4}), Tensor(), r64({2, 3, 4})},
                   {{"normalized_shape", Dims{3, 4}}, {"eps", 0.1}});
}

// ---- LstmCell ----

TEST(LstmCell, IsTheComposedStep_BitForBit) {
  manual_seed(41);
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    const Tensor z = to(r64({3, 2, 20}), dtype), c = to(r64({3, 2, 5}), dtype);
    const auto [h, c_next] = lstm_cell(z, c);
    const std::vector<Tensor> q = chunk(z, 4, -1);
    const Tensor want_c = sigmoid(q[1]) * c + sigmoid(q[0]) * tanh(q[2]);
    testing::expect_close(c_next, want_c, 0);
    testing::expect_close(h, sigmoid(q[3]) * tanh(want_c), 0);
  }
}

TEST(GradLstmCell, MatchesFiniteDifferences_AndGivesNothingWithoutGradients) {
  manual_seed(42);
  expect_grad_rule("LstmCell", {r64({4, 12}), r64({4, 3})});
  expect_grad_rule("LstmCell", {r64({2, 3, 8}), r64({2, 3, 2})});
  expect_float32_rule("LstmCell", {r64({4, 12}), r64({4, 3})});
  const std::vector<Tensor> none =
      run_rule("LstmCell", {r64({4, 12}), r64({4, 3})}, {}, {Tensor(), Tensor()});
  EXPECT_FALSE(none[0].defined() || none[1].defined());
  // Only c' has a gradient (the last step's cell state): the gates' o quarter gets zeros.
  const std::vector<Tensor> only_c =
      run_rule("LstmCell", {r64({4, 12}), r64({4, 3})}, {}, {Tensor(), r64({4, 3})});
  testing::expect_close(chunk(only_c[0], 4, -1)[3], zeros({4, 3}, DType::kFloat64), 0);
}

TEST(GradLstmCellBackward, MatchesFiniteDifferences_ForSecondDerivatives) {
  manual_seed(43);
  expect_grad_rule("LstmCellBackward", {r64({4, 12}), r64({4, 3}), r64({4, 3}), r64({4, 3})});
  expect_grad_rule("LstmCellBackward",
                   {r64({2, 3, 8}), r64({2, 3, 2}), r64({2, 3, 2}), r64({2, 3, 2})});
  expect_float32_rule("LstmCellBackward", {r64({4, 12}), r64({4, 3}), r64({4, 3}), r64({4, 3})});
}

TEST(GruCell, IsTheComposedStep_BitForBit) {
  manual_seed(44);
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    const Tensor x = to(r64({3, 2, 15}), dtype), hg = to(r64({3, 2, 15}), dtype);
    const Tensor h = to(r64({3, 2, 5}), dtype);
    const std::vector<Tensor> xs = chunk(x, 3, -1), hs = chunk(hg, 3, -1);
    const Tensor z = sigmoid(xs[1] + hs[1]);
    const Tensor n = tanh(xs[2] + sigmoid(xs[0] + hs[0]) * hs[2]);
    testing::expect_close(gru_cell(x, hg, h), n + z * (h - n), 0);
  }
}

TEST(GradGruCell, MatchesFiniteDifferences_OnceAndTwice) {
  manual_seed(45);
  expect_grad_rule("GruCell", {r64({4, 9}), r64({4, 9}), r64({4, 3})});
  expect_grad_rule("GruCell", {r64({2, 3, 6}), r64({2, 3, 6}), r64({2, 3, 2})});
  expect_float32_rule("GruCell", {r64({4, 9}), r64({4, 9}), r64({4, 3})});
  expect_grad_rule("GruCellBackward", {r64({4, 9}), r64({4, 9}), r64({4, 3}), r64({4, 3})});
  expect_grad_rule("GruCellBackward",
                   {r64({2, 3, 6}), r64({2, 3, 6}), r64({2, 3, 2}), r64({2, 3, 2})});
  testing::expect_error(
      [] {
        gru_cell(r64({4, 9}), r64({4, 6}), r64({4, 3}));
      },
      ErrorKind::kShape,
      "gru_cell: expected x and hg [..., 3H] and h [..., H] (and its gradient) "
      "of one dtype, got float64[4, 6] beside h float64[4, 3]");
}

TEST(LstmCell, RefusesGatesThatDoNotFitTheState) {
  testing::expect_error(
      [] {
        lstm_cell(r64({4, 12}), r64({4, 4}));
      },
      ErrorKind::kShape,
      "lstm_cell: expected gates [..., 4H] and c [..., H] with the same "
      "leading dimensions, got [4, 12] and [4, 4]");
  testing::expect_error(
      [] {
        lstm_cell(r64({4, 12}), to(r64({4, 3}), DType::kFloat32));
      },
      ErrorKind::kDType, "expected floating-point gates and c of one dtype");
  testing::expect_error(
      [] {
        lstm_cell_backward(r64({4, 12}), r64({4, 3}), r64({4, 2}), r64({4, 3}));
      },
      ErrorKind::kShape,
      "lstm_cell_backward: expected grad_h and grad_c of c's dtype and shape float64[4, 3], got "
      "float64[4, 2]");
}

TEST(GradNormBackward, RulesGiveZeros_WhenNoGradientFlowsIn) {
  const std::vector<Tensor> g =
      run_rule("LayerNormBackward", {r64({2, 3}), r64({3}), r64({2, 3})},
               {{"normalized_shape", Dims{3}}}, {Tensor(), Tensor(), Tensor()});
  ASSERT_EQ(g.size(), 3u);
  for (const Tensor& t : g) testing::expect_close(t, zeros(t.shape(), DType::kFloat64), 0);
}

// The per-block partial sums of d weight and d bias: many blocks (rows * n well above one block's
// 32768 elements) give the same result for one thread and for several, and match float64 sums.
TEST(GradNormBackward, WeightGradientIsTheSameForAnyThreadCount) {
  manual_seed(24);
  const Tensor x = randn({300, 4, 96}, DType::kFloat32);
  const Tensor w = randn({96}, DType::kFloat32);
  const Tensor g = randn({300, 4, 96}, DType::kFloat32);
  const Attrs attrs = {{"normalized_shape", Dims{96}}};
  const int threads = get_num_threads();
  set_num_threads(1);
  const std::vector<Tensor> one = call_op("LayerNormBackward", {x, w, g}, attrs);
  set_num_threads(std::max(2, threads));
  const std::vector<Tensor> many = call_op("LayerNormBackward", {x, w, g}, attrs);
  set_num_threads(threads);
  for (size_t k = 0; k < 3; ++k) testing::expect_close(many[k], one[k], 0);
  const std::vector<Tensor> want =
      call_op("LayerNormBackward",
              {to(x, DType::kFloat64), to(w, DType::kFloat64), to(g, DType::kFloat64)}, attrs);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(one[k].dtype(), DType::kFloat32);
    testing::expect_close(one[k], to(want[k], DType::kFloat32), 1e-4);
  }
}

// Rows longer than one chunk of the row statistics (256) and a row count that is no multiple of
// the rows summed in float32 before each float64 flush (16): float32 matches float64.
TEST(GradNormBackward, LongRowsInFloat32_MatchFloat64) {
  manual_seed(25);
  const Tensor x = randn({37, 700}, DType::kFloat32) * 3.0 + 1.0;
  const Tensor w = randn({700}, DType::kFloat32);
  const Tensor g = randn({37, 700}, DType::kFloat32);
  const Attrs attrs = {{"normalized_shape", Dims{700}}};
  for (const char* op : {"LayerNormBackward", "RMSNormBackward"}) {
    SCOPED_TRACE(op);
    const std::vector<Tensor> got = call_op(op, {x, w, g}, attrs);
    const std::vector<Tensor> want = call_op(
        op, {to(x, DType::kFloat64), to(w, DType::kFloat64), to(g, DType::kFloat64)}, attrs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      testing::expect_close(got[k], to(want[k], DType::kFloat32), 1e-4);
    }
  }
}

// The kernel against Note [Norm gradients]'s formulas composed of ops, in float64, on rows longer
// than a chunk of the row statistics and more rows than one float32 flush of d weight / d bias.
TEST(GradNormBackward, MatchesTheComposedFormulas_OverChunksAndRowGroups) {
  manual_seed(26);
  const Tensor x = randn({37, 300}, DType::kFloat64) * 2.0 + 0.5;
  const Tensor w = randn({300}, DType::kFloat64);
  const Tensor g = randn({37, 300}, DType::kFloat64);
  const Attrs attrs = {{"normalized_shape", Dims{300}}, {"eps", 1e-5}};
  for (const bool centered : {true, false}) {
    SCOPED_TRACE(centered ? "LayerNorm" : "RMSNorm");
    const auto row_mean = [](const Tensor& t) { return mean(t, {1}, /*keepdim=*/true); };
    const Tensor xm = centered ? x - row_mean(x) : x;
    const Tensor r = rsqrt(row_mean(square(xm)) + 1e-5);
    const Tensor xhat = xm * r;
    const Tensor gh = g * w;
    Tensor projected = gh - xhat * row_mean(gh * xhat);
    if (centered) projected = projected - row_mean(gh);
    const std::vector<Tensor> got =
        call_op(centered ? "LayerNormBackward" : "RMSNormBackward", {x, w, g}, attrs);
    testing::expect_close(got[0], r * projected, 1e-12);
    testing::expect_close(got[1], sum(g * xhat, {0}), 1e-12);
    if (centered) testing::expect_close(got[2], sum(g, {0}), 1e-12);
  }
}

// affine_grads = false (set by the rules when neither weight nor bias needs a gradient): the same
// dx, and d weight / d bias left as zeros.
TEST(GradNormBackward, WithoutAffineGrads_GivesTheSameDxAndZeroSums) {
  manual_seed(27);
  const Tensor x = randn({37, 300}, DType::kFloat32);
  const Tensor w = randn({300}, DType::kFloat32);
  const Tensor g = randn({37, 300}, DType::kFloat32);
  for (const char* op : {"LayerNormBackward", "RMSNormBackward"}) {
    SCOPED_TRACE(op);
    const Attrs all = {{"normalized_shape", Dims{300}}};
    const Attrs dx_only = {{"normalized_shape", Dims{300}}, {"affine_grads", false}};
    const std::vector<Tensor> full = call_op(op, {x, w, g}, all);
    const std::vector<Tensor> partial = call_op(op, {x, w, g}, dx_only);
    testing::expect_close(partial[0], full[0], 0);
    for (size_t k = 1; k < partial.size(); ++k) {
      testing::expect_close(partial[k], zeros({300}, DType::kFloat32), 0);
    }
  }
}

TEST(GradNormBackward, BadInputs_AreClearErrors) {
  const Attrs attrs = {{"normalized_shape", Dims{3}}};
  testing::expect_error(
      [&] {
        call_op("LayerNormBackward", {r64({2, 3}), r64({3}), r64({3, 2})}, attrs);
      },
      ErrorKind::kShape, "layer_norm_backward: expected grad_output of x's shape [2, 3]");
  testing::expect_error(
      [&] {
        call_op("RMSNormBackward", {r64({2, 3}), r64({4}), r64({2, 3})}, attrs);
      },
      ErrorKind::kShape, "expected weight of shape [3] (normalized_shape), got [4]");
  testing::expect_error(
      [&] {
        call_op("RMSNormBackward", {r64({2, 3}), Tensor(), to(r64({2, 3}), DType::kInt64)}, attrs);
      },
      ErrorKind::kDType, "rms_norm_backward: expected a floating-point grad_output, got int64");
}

// ---- CrossEntropy, NLLLoss ----

const char* const kReductions[] = {"mean", "sum", "none"};

TEST(GradCrossEntropy, MatchesFiniteDifferences_ForEveryReduction) {
  manual_seed(23);
  for (const char* reduction : kReductions) {
    SCOPED_TRACE(reduction);
    const Attrs attrs{{"reduction", std::string(reduction)}};
    expect_grad_rule("CrossEntropy", {r64({4, 5}), ints({4}, {0, 3, 4, 3})}, attrs);
    expect_grad_rule("CrossEntropy", {r64({2, 3, 4}), ints({2, 4}, {0, 1, 2, 2, 1, 1, 0, 2})},
                     attrs);
    expect_grad_rule("CrossEntropy", {r64({5}), ints({}, {2})}, attrs);
  }
}

TEST(GradCrossEntropy, MatchesFiniteDifferences_WithIgnoreIndexAndLabelSmoothing) {
  manual_seed(24);
  for (const char* reduction : kReductions) {
    SCOPED_TRACE(reduction);
    const std::string red = reduction;
    const Tensor target = ints({5}, {1, -100, 3, 0, -100});
    expect_grad_rule("CrossEntropy", {r64({5, 4}), target}, {{"reduction", red}});
    expect_grad_rule("CrossEntropy", {r64({5, 4}), target},
                     {{"reduction", red}, {"label_smoothing", 0.2}});
    // ignore_index may name a real class; int32 targets.
    expect_grad_rule("CrossEntropy", {r64({5, 4}), ints({5}, {1, 2, 3, 2, 0}, DType::kInt32)},
                     {{"reduction", red}, {"ignore_index", int64_t{2}}, {"label_smoothing", 0.1}});
    expect_grad_rule("CrossEntropy", {r64({2, 3, 2}), ints({2, 2}, {0, 2, -1, 1})},
                     {{"reduction", red}, {"ignore_index", int64_t{-1}}, {"label_smoothing", 1.0}});
  }
}

TEST(GradCrossEntropy, GradientOfLogitsOnly_AndFloat32) {
  manual_seed(25);
  const std::vector<Tensor> g = run_rule("CrossEntropy", {r64({3, 4}), ints({3}, {0, 1, 2})});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_FALSE(g[1].defined());
  expect_float32_rule("CrossEntropy", {r64({3, 4}), ints({3}, {0, -100, 2})},
                      {{"label_smoothing", 0.1}});
}

TEST(GradNLLLoss, MatchesFiniteDifferences_ForEveryReductionAndIgnoreIndex) {
  manual_seed(26);
  for (const char* reduction : kReductions) {
    SCOPED_TRACE(reduction);
    const std::string red = reduction;
    expect_grad_rule("NLLLoss", {r64({4, 3}), ints({4}, {2, 0, 1, 2})}, {{"reduction", red}});
    expect_grad_rule("NLLLoss", {r64({4, 3}), ints({4}, {2, -100, 1, -100})}, {{"reduction", red}});
    expect_grad_rule("NLLLoss", {r64({2, 3, 2, 2}), ints({2, 2, 2}, {0, 1, 2, 0, 1, 1, 0, 2})},
                     {{"reduction", red}, {"ignore_index", int64_t{0}}});
    expect_grad_rule("NLLLoss", {r64({3}), ints({}, {1})}, {{"reduction", red}});
  }
  expect_float32_rule("NLLLoss", {r64({4, 3}), ints({4}, {2, -100, 1, 0})});
}

// ---- MSELoss ----

TEST(GradMSELoss, MatchesFiniteDifferences_ForEveryReductionAndBroadcast) {
  manual_seed(27);
  for (const char* reduction : kReductions) {
    SCOPED_TRACE(reduction);
    const Attrs attrs{{"reduction", std::string(reduction)}};
    expect_grad_rule("MSELoss", {r64({3, 4}), r64({3, 4})}, attrs);
    expect_grad_rule("MSELoss", {r64({3, 4}), r64({4})}, attrs);
    expect_grad_rule("MSELoss", {r64({1, 4}), r64({3, 1})}, attrs);
    expect_grad_rule("MSELoss", {r64({}), r64({2})}, attrs);
  }
}

TEST(GradMSELoss, IntegerTargetHasNoGradient_AndFloat32) {
  manual_seed(28);
  const std::vector<Tensor> g = run_rule("MSELoss", {r64({2, 3}), ints({3}, {1, 2, 3})});
  EXPECT_EQ(g[0].shape(), (Shape{2, 3}));
  EXPECT_FALSE(g[1].defined());
  expect_float32_rule("MSELoss", {r64({2, 3}), r64({2, 3})}, {{"reduction", std::string("sum")}});
}

// ---- Dropout ----

Attrs dropout_attrs(double p) {
  return {{"p", p}, {"seed", int64_t{1234}}, {"offset", int64_t{64}}};
}

TEST(GradDropout, MatchesFiniteDifferences_WithTheForwardMask) {
  manual_seed(29);
  for (double p : {0.0, 0.3, 0.8, 1.0}) {
    SCOPED_TRACE(p);
    expect_grad_rule("Dropout", {r64({4, 7})}, dropout_attrs(p));
  }
}

TEST(GradDropout, ScalesWhereTheMaskKept_AndTheMaskIsTheKeptElements) {
  manual_seed(30);
  const Tensor x = randn({1000});
  const Attrs attrs = dropout_attrs(0.25);
  const OpDefPtr op = OpRegistry::Instance().get("Dropout");
  const std::vector<Tensor> out = call_op(*op, {x}, op->normalize_attrs(attrs));
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[1].dtype(), DType::kBool);
  const std::vector<Tensor> g = run_rule("Dropout", {x}, attrs, {ones({1000})});
  ASSERT_EQ(g[0].dtype(), DType::kFloat32);
  int64_t dropped = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    const bool kept = out[0].data<float>()[i] != 0.0f;
    EXPECT_EQ(out[1].data<bool>()[i], kept) << i;
    dropped += kept ? 0 : 1;
    EXPECT_FLOAT_EQ(g[0].data<float>()[i], kept ? 1.0f / 0.75f : 0.0f) << i;
  }
  EXPECT_GT(dropped, 150);
  EXPECT_LT(dropped, 350);
}

// A kept element whose value is 0 still passes its gradient: the mask, not the output, decides.
TEST(GradDropout, KeptZerosPassTheirGradient) {
  const Attrs attrs = dropout_attrs(0.5);
  const OpDefPtr op = OpRegistry::Instance().get("Dropout");
  const Tensor x = zeros({256}, DType::kFloat64);
  const std::vector<Tensor> out = call_op(*op, {x}, op->normalize_attrs(attrs));
  const std::vector<Tensor> g = run_rule("Dropout", {x}, attrs, {ones({256}, DType::kFloat64)});
  int64_t kept = 0;
  for (int64_t i = 0; i < 256; ++i) {
    EXPECT_EQ(out[0].data<double>()[i], 0.0);
    kept += out[1].data<bool>()[i] ? 1 : 0;
    EXPECT_EQ(g[0].data<double>()[i], out[1].data<bool>()[i] ? 2.0 : 0.0) << i;
  }
  EXPECT_GT(kept, 64);
  EXPECT_LT(kept, 192);
}

TEST(GradDropout, GivesZeros_WhenNoGradientFlowsIn) {
  const std::vector<Tensor> g = run_rule("Dropout", {r64({3})}, dropout_attrs(0.5), {Tensor()});
  testing::expect_close(g[0], zeros({3}, DType::kFloat64), 0);
}

TEST(GradDropoutBackward, IsLinearInTheGradient_AndTheMaskHasNone) {
  manual_seed(31);
  const Tensor mask = gt(randn({5, 6}), Tensor::scalar(0.0));
  for (double p : {0.0, 0.4, 1.0}) {
    SCOPED_TRACE(p);
    expect_grad_rule("DropoutBackward", {r64({5, 6}), mask}, {{"p", p}});
  }
  const std::vector<Tensor> g = run_rule("DropoutBackward", {r64({5, 6}), mask}, {{"p", 0.4}});
  EXPECT_FALSE(g[1].defined());
}

TEST(GradDropoutBackward, RefusesANonBoolMask_AMaskOfAnotherShape_AndAnIntegerGradient) {
  const OpDefPtr op = OpRegistry::Instance().get("DropoutBackward");
  const Tensor mask = gt(randn({4}), Tensor::scalar(0.0));
  const Attrs attrs{{"p", 0.5}};
  testing::expect_error(
      [&] {
        call_op(*op, {randn({4}), randn({4})}, attrs);
      },
      ErrorKind::kDType, "expected a bool mask, got float32");
  testing::expect_error(
      [&] {
        call_op(*op, {randn({5}), mask}, attrs);
      },
      ErrorKind::kShape, "expected the mask in grad_output's shape");
  testing::expect_error(
      [&] {
        call_op(*op, {ones({4}, DType::kInt64), mask}, attrs);
      },
      ErrorKind::kDType, "expected a floating grad_output, got int64");
  testing::expect_error(
      [&] {
        call_op(*op, {randn({4}), mask}, {{"p", 1.5}});
      },
      ErrorKind::kValue, "expected p in [0, 1], got 1.5");
}

// ---- Conv2D, Conv3D and their backward ops ----

Attrs conv_attrs(std::vector<int64_t> stride, std::vector<int64_t> padding,
                 std::vector<int64_t> dilation, int64_t groups) {
  return {{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}};
}

// (x shape, weight shape, attrs): plain, strided and padded, dilated, grouped (depthwise too),
// and a stride that skips the input's last rows and columns; in 2-d and 3-d (the ops share one
// implementation, the rank is the case's).
struct ConvCase {
  Shape x, w;
  Attrs attrs;

  std::string op(const char* suffix = "") const {
    return std::string(x.size() == 5 ? "Conv3D" : "Conv2D") + suffix;
  }
  Dims stride() const { return attrs.get<Dims>("stride"); }
  Dims padding() const { return attrs.get<Dims>("padding"); }
  Dims dilation() const { return attrs.get<Dims>("dilation"); }
  int64_t groups() const { return attrs.get<int64_t>("groups"); }

  // The public functions of the case's rank.
  Tensor forward(const Tensor& xv, const Tensor& wv) const {
    return (x.size() == 5 ? conv3d : conv2d)(xv, wv, Tensor(), stride(), padding(), dilation(),
                                             groups());
  }
  Tensor backward_input(const Tensor& g, const Tensor& wv) const {
    return (x.size() == 5 ? conv3d_backward_input : conv2d_backward_input)(
        g, wv, x, stride(), padding(), dilation(), groups());
  }
  Tensor backward_weight(const Tensor& g, const Tensor& xv) const {
    return (x.size() == 5 ? conv3d_backward_weight : conv2d_backward_weight)(
        g, xv, w, stride(), padding(), dilation(), groups());
  }
};
std::vector<ConvCase> conv_cases() {
  return {
      {{2, 3, 5, 6}, {4, 3, 3, 3}, conv_attrs({1, 1}, {0, 0}, {1, 1}, 1)},
      {{1, 2, 6, 5}, {3, 2, 3, 2}, conv_attrs({2, 1}, {1, 2}, {1, 1}, 1)},
      {{1, 2, 7, 7}, {2, 2, 2, 3}, conv_attrs({1, 2}, {1, 0}, {2, 2}, 1)},
      {{2, 4, 5, 5}, {6, 2, 3, 1}, conv_attrs({1, 1}, {1, 0}, {1, 1}, 2)},
      {{1, 3, 4, 4}, {3, 1, 2, 2}, conv_attrs({1, 1}, {1, 1}, {1, 1}, 3)},
      {{1, 2, 6, 6}, {2, 2, 3, 3}, conv_attrs({2, 2}, {0, 0}, {1, 1}, 1)},
      {{2, 2, 3, 4, 3}, {3, 2, 2, 3, 2}, conv_attrs({1, 1, 1}, {0, 1, 0}, {1, 1, 1}, 1)},
      {{1, 2, 5, 4, 4}, {2, 2, 2, 2, 3}, conv_attrs({2, 1, 2}, {1, 0, 1}, {2, 1, 1}, 1)},
      {{1, 4, 4, 3, 3}, {4, 2, 3, 1, 2}, conv_attrs({1, 2, 1}, {1, 1, 0}, {1, 1, 2}, 2)},
  };
}

TEST(GradConv, MatchesFiniteDifferences_ForStridePaddingDilationGroups) {
  manual_seed(40);
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(shape_str(c.x) + " " + shape_str(c.w));
    expect_grad_rule(c.op(), {r64(c.x), r64(c.w), r64({c.w[0]})}, c.attrs);
    expect_grad_rule(c.op(), {r64(c.x), r64(c.w), Tensor()}, c.attrs);
  }
}

TEST(GradConv, Float32GradientsOnOneDnnMatchFloat64) {
  manual_seed(41);
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(shape_str(c.x) + " " + shape_str(c.w));
    expect_float32_rule(c.op(), {r64(c.x), r64(c.w), r64({c.w[0]})}, c.attrs);
  }
}

TEST(GradConvBackward, BackwardOpsMatchFiniteDifferences) {
  manual_seed(42);
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(shape_str(c.x) + " " + shape_str(c.w));
    const Tensor y = c.forward(r64(c.x), r64(c.w));
    Attrs input_attrs = c.attrs;
    input_attrs.set("input_size", Dims(c.x.begin(), c.x.end()));
    expect_grad_rule(c.op("BackwardInput"), {r64(y.shape()), r64(c.w)}, input_attrs);
    Attrs weight_attrs = c.attrs;
    weight_attrs.set("weight_size", Dims(c.w.begin(), c.w.end()));
    expect_grad_rule(c.op("BackwardWeight"), {r64(y.shape()), r64(c.x)}, weight_attrs);
  }
}

// <conv(x, w), g> = <x, backward_input(g, w)> = <w, backward_weight(g, x)>.
double dot(const Tensor& a, const Tensor& b) {
  return sum(mul(to(a, DType::kFloat64), to(b, DType::kFloat64))).data<double>()[0];
}

TEST(GradConvBackward, SatisfiesTheAdjointIdentity_InFloat32AndFloat64) {
  manual_seed(43);
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (const ConvCase& c : conv_cases()) {
      SCOPED_TRACE(shape_str(c.x) + " " + shape_str(c.w));
      const Tensor x = randn(c.x, dtype), w = randn(c.w, dtype);
      const Tensor y = c.forward(x, w);
      const Tensor g = randn(y.shape(), dtype);
      const Tensor dx = c.backward_input(g, w);
      const Tensor dw = c.backward_weight(g, x);
      EXPECT_EQ(dx.dtype(), dtype);
      EXPECT_EQ(dw.dtype(), dtype);
      const double tol = dtype == DType::kFloat32 ? 1e-4 : 1e-12;
      const double yg = dot(y, g);
      EXPECT_NEAR(dot(x, dx), yg, tol * (1 + std::abs(yg)));
      EXPECT_NEAR(dot(w, dw), yg, tol * (1 + std::abs(yg)));
    }
  }
}

TEST(GradConvBackward, RejectsAnOutputGradientOfTheWrongShape) {
  testing::expect_error(
      [] {
        conv2d_backward_input(randn({1, 2, 3, 3}), randn({2, 2, 3, 3}), {1, 2, 4, 4});
      },
      ErrorKind::kShape, "expected grad_output of shape [1, 2, 2, 2]");
  testing::expect_error(
      [] {
        conv2d_backward_weight(randn({1, 2, 2, 2}), randn({1, 2, 4, 4}), {2, 2, 3});
      },
      ErrorKind::kShape, "expected weight_size of four non-negative sizes");
  testing::expect_error(
      [] {
        conv3d_backward_input(randn({1, 2, 3, 3, 3}), randn({2, 2, 3, 3, 3}), {1, 2, 4, 4, 4});
      },
      ErrorKind::kShape,
      "conv3d_backward_input: expected grad_output of shape [1, 2, 2, 2, 2] for x [1, 2, 4, 4, 4]");
  testing::expect_error(
      [] {
        conv3d_backward_weight(randn({1, 2, 2, 2, 2}), randn({1, 2, 4, 4, 4}), {2, 2, 3, 3});
      },
      ErrorKind::kShape,
      "conv3d_backward_weight: expected weight_size of five non-negative sizes, got [2, 2, 3, 3]");
}

// ---- MaxPool2D, AvgPool2D and their backward ops ----

Attrs pool_attrs(std::vector<int64_t> kernel, std::vector<int64_t> stride,
                 std::vector<int64_t> padding, bool ceil_mode) {
  return {
      {"kernel_size", kernel}, {"stride", stride}, {"padding", padding}, {"ceil_mode", ceil_mode}};
}

std::vector<Attrs> pool_cases() {
  return {
      pool_attrs({2, 2}, {}, {0, 0}, false),     pool_attrs({3, 3}, {2, 2}, {1, 1}, false),
      pool_attrs({3, 2}, {1, 1}, {1, 0}, false), pool_attrs({3, 3}, {2, 2}, {0, 1}, true),
      pool_attrs({2, 3}, {2, 3}, {1, 1}, true),
  };
}

TEST(GradMaxPool2D, MatchesFiniteDifferences_ForEveryWindowRule) {
  manual_seed(44);
  for (const Attrs& base : pool_cases()) {
    SCOPED_TRACE(attr_str(*base.find("kernel_size")) + " " + attr_str(*base.find("stride")));
    expect_grad_rule("MaxPool2D", {r64({2, 2, 7, 6})}, base);
  }
  Attrs dilated = pool_attrs({2, 2}, {1, 2}, {1, 1}, false);
  dilated.set("dilation", Dims{2, 1});
  expect_grad_rule("MaxPool2D", {r64({1, 2, 6, 6})}, dilated);
  expect_float32_rule("MaxPool2D", {r64({2, 3, 5, 5})}, pool_attrs({3, 3}, {1, 1}, {1, 1}, false));
}

TEST(GradMaxPool2D, BackwardPicksTheForwardsElement_OnTiesAndNan) {
  // Windows of [[1, 3], [3, 2]]: the first maximum; of [[1, nan], [nan, 2]]: the last nan.
  const double nan = std::nan("");
  Tensor x = Tensor::empty({1, 2, 2, 2}, DType::kFloat64);
  const double values[] = {1, 3, 3, 2, 1, nan, nan, 2};
  for (int i = 0; i < 8; ++i) x.data<double>()[i] = values[i];
  const Tensor g = full({1, 2, 1, 1}, 5.0, DType::kFloat64);
  const Tensor dx = max_pool2d_backward(g, x, {2, 2});
  const double want[] = {0, 5, 0, 0, 0, 0, 5, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(dx.data<double>()[i], want[i]) << i;
  // Overlapping windows add up at a shared maximum.
  const Tensor ramp = reshape(arange(0, 9, 1, DType::kFloat64), {1, 1, 3, 3});
  const Tensor d2 = max_pool2d_backward(ones({1, 1, 2, 2}, DType::kFloat64), ramp, {2, 2}, {1, 1});
  const double want2[] = {0, 0, 0, 0, 1, 1, 0, 1, 1};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(d2.data<double>()[i], want2[i]) << i;
}

TEST(GradMaxPool2D, BackwardAndSelectAreEachOthersRule_MatchingFiniteDifferences) {
  manual_seed(46);
  std::vector<Attrs> cases = pool_cases();
  Attrs dilated = pool_attrs({2, 2}, {1, 2}, {1, 1}, false);
  dilated.set("dilation", Dims{2, 1});
  cases.push_back(dilated);
  const OpDefPtr pool = OpRegistry::Instance().get("MaxPool2D");
  for (const Attrs& attrs : cases) {
    SCOPED_TRACE(attr_str(*attrs.find("kernel_size")) + " " + attr_str(*attrs.find("stride")));
    const Tensor x = r64({2, 2, 7, 6});
    const Shape out = call_op(*pool, {x}, pool->normalize_attrs(attrs))[0].shape();
    // Both are linear in their first input; in x they are piecewise constant, and their rules
    // give x no gradient (skipped here: the finite differences are zero but for ties).
    expect_grad_rule("MaxPool2DBackward", {r64(out), x}, attrs, 1e-6, 1e-5, 1e-4, {1});
    expect_grad_rule("MaxPool2DSelect", {r64(x.shape()), x}, attrs, 1e-6, 1e-5, 1e-4, {1});
    EXPECT_FALSE(testing::run_rule("MaxPool2DSelect", {r64(x.shape()), x}, attrs)[1].defined());
    EXPECT_FALSE(testing::run_rule("MaxPool2DBackward", {r64(out), x}, attrs)[1].defined());
  }
}

TEST(GradMaxPool2D, SelectPicksTheSourceAtEachWindowsMaximum) {
  // Overlapping 2x2 windows over a 3x3 ramp have their maxima at 4, 5, 7 and 8.
  const Tensor ramp = reshape(arange(0, 9, 1, DType::kFloat64), {1, 1, 3, 3});
  const Tensor source = reshape(arange(10, 19, 1, DType::kFloat32), {1, 1, 3, 3});
  const Attrs attrs = pool_attrs({2, 2}, {1, 1}, {0, 0}, false);
  const Tensor picked = call_op("MaxPool2DSelect", {source, ramp}, attrs)[0];
  EXPECT_EQ(picked.dtype(), DType::kFloat64);  // promoted, as MaxPool2DBackward's result
  ASSERT_EQ(picked.shape(), (Shape{1, 1, 2, 2}));
  const double want[] = {14, 15, 17, 18};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(picked.data<double>()[i], want[i]) << i;
  // Several planes, 16-bit source and x: each plane's own maxima, the result in float32 (the
  // promoted type) computed through a float buffer. Each window picks one element of source, the
  // one MaxPool2DBackward adds that window's gradient to: sum(select(s)) = sum(s * backward(1)).
  const Tensor x16 = to(r64({2, 3, 4, 5}), DType::kFloat16);
  const Tensor s16 = to(r64({2, 3, 4, 5}), DType::kBFloat16);
  const Attrs strided = pool_attrs({2, 3}, {2, 2}, {1, 1}, true);
  const Tensor got = call_op("MaxPool2DSelect", {s16, x16}, strided)[0];
  EXPECT_EQ(got.dtype(), DType::kFloat32);
  const Tensor dx = max_pool2d_backward(ones(got.shape(), DType::kFloat64), x16, {2, 3}, {2, 2},
                                        {1, 1}, {1, 1}, true);
  const double lhs = to(sum(got), DType::kFloat64).data<double>()[0];
  const double rhs = sum(mul(to(s16, DType::kFloat64), dx)).data<double>()[0];
  EXPECT_NEAR(lhs, rhs, 1e-4 * std::max(1.0, std::abs(rhs)));
  testing::expect_error(
      [&] {
        call_op("MaxPool2DSelect", {ones({1, 1, 3, 2}), ramp}, attrs);
      },
      ErrorKind::kShape, "expected source of x's shape [1, 1, 3, 3]");
  testing::expect_error(
      [&] {
        call_op("MaxPool2DSelect", {ones({1, 1, 3, 3}, DType::kInt64), ramp}, attrs);
      },
      ErrorKind::kDType, "expected floating-point tensors");
}

TEST(GradAvgPool2D, MatchesFiniteDifferences_WithAndWithoutPadInTheCount) {
  manual_seed(45);
  for (bool include_pad : {true, false}) {
    for (Attrs attrs : pool_cases()) {
      SCOPED_TRACE(attr_str(*attrs.find("kernel_size")) + " " + attr_str(*attrs.find("stride")));
      attrs.set("count_include_pad", include_pad);
      expect_grad_rule("AvgPool2D", {r64({2, 2, 7, 6})}, attrs);
      Attrs backward = attrs;
      backward.set("input_size", Dims{2, 2, 7, 6});
      const OpDefPtr op = OpRegistry::Instance().get("AvgPool2D");
      const Shape out = call_op(*op, {r64({2, 2, 7, 6})}, op->normalize_attrs(attrs))[0].shape();
      expect_grad_rule("AvgPool2DBackward", {r64(out)}, backward);
    }
  }
  expect_float32_rule("AvgPool2D", {r64({2, 3, 5, 5})}, pool_attrs({3, 3}, {2, 2}, {1, 1}, true));
}

TEST(GradAvgPool2D, DivisorOverrideDividesForwardAndBackward) {
  manual_seed(47);
  for (int64_t divisor : {int64_t{3}, int64_t{-2}}) {
    Attrs attrs = pool_attrs({3, 3}, {2, 2}, {1, 1}, true);
    attrs.set("divisor_override", divisor);
    expect_grad_rule("AvgPool2D", {r64({2, 2, 7, 6})}, attrs);
    Attrs backward = attrs;
    backward.set("input_size", Dims{2, 2, 7, 6});
    expect_grad_rule("AvgPool2DBackward", {r64({2, 2, 4, 4})}, backward);
  }
  // A 3x3 window at stride 2 with padding 1 over 3x3: every window clipped to 2x2 of ones, so
  // each sum is 4, divided by the override whatever count_include_pad says.
  const Tensor x = ones({1, 1, 3, 3}, DType::kFloat64);
  for (bool include_pad : {true, false}) {
    const Tensor y = avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, false, include_pad, 8);
    for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(y.data<double>()[i], 0.5) << i;
    const Tensor dx = avg_pool2d_backward(ones({1, 1, 2, 2}, DType::kFloat64), {1, 1, 3, 3}, {3, 3},
                                          {2, 2}, {1, 1}, false, include_pad, 8);
    EXPECT_DOUBLE_EQ(dx.data<double>()[4], 4 / 8.0);  // in every window
    EXPECT_DOUBLE_EQ(dx.data<double>()[0], 1 / 8.0);
  }
  // 0 is no override: the six-argument overload's division by the window's size.
  const Tensor r = r64({1, 2, 5, 5});
  testing::expect_close(avg_pool2d(r, {2, 2}, {1, 1}, {1, 1}, false, false, 0),
                        avg_pool2d(r, {2, 2}, {1, 1}, {1, 1}, false, false), 0);
}

TEST(GradAvgPool2D, BackwardSpreadsEachGradientOverItsDivisor) {
  // A 3x3 window at stride 2 with padding 1 over 3x3: four windows, each clipped to 2x2 of x.
  const Tensor g = reshape(arange(1, 5, 1, DType::kFloat64), {1, 1, 2, 2});
  const Tensor with_pad = avg_pool2d_backward(g, {1, 1, 3, 3}, {3, 3}, {2, 2}, {1, 1});
  const Tensor without = avg_pool2d_backward(g, {1, 1, 3, 3}, {3, 3}, {2, 2}, {1, 1}, false, false);
  // x[1][1] is in every window; x[0][0] only in the first.
  EXPECT_DOUBLE_EQ(with_pad.data<double>()[4], (1 + 2 + 3 + 4) / 9.0);
  EXPECT_DOUBLE_EQ(with_pad.data<double>()[0], 1 / 9.0);
  EXPECT_DOUBLE_EQ(without.data<double>()[4], (1 + 2 + 3 + 4) / 4.0);
  EXPECT_DOUBLE_EQ(without.data<double>()[0], 1 / 4.0);
  testing::expect_error(
      [] {
        avg_pool2d_backward(randn({1, 1, 3, 3}), {1, 1, 4, 4}, {2, 2});
      },
      ErrorKind::kShape, "expected grad_output of shape [1, 1, 2, 2]");
}

// ---- Resample ----

// y.select(dim, o) = sum_k w[k, o] x.select(dim, index[k, o]), by loops in double, x [A, B, C].
std::vector<double> naive_resample(const Tensor& x, int64_t dim, const Tensor& index,
                                   const Tensor& weight) {
  const Tensor x64 = to(x, DType::kFloat64), w64 = to(weight, DType::kFloat64);
  const int64_t taps = index.size(0), out = index.size(1);
  Shape shape = x.shape();
  shape[dim] = out;
  std::vector<double> y(static_cast<size_t>(shape_numel(shape)), 0.0);
  const Shape xs = contiguous_strides(x.shape()), ys = contiguous_strides(shape);
  for (int64_t i = 0; i < shape_numel(shape); ++i) {
    int64_t rest = i, x_offset = 0, o = 0;
    for (int64_t d = 0; d < 3; ++d) {
      const int64_t c = rest / ys[d];
      rest %= ys[d];
      if (d == dim) {
        o = c;
      } else {
        x_offset += c * xs[d];
      }
    }
    for (int64_t k = 0; k < taps; ++k) {
      const int64_t at = index.data<int64_t>()[k * out + o];
      y[i] += w64.data<double>()[k * out + o] * x64.data<double>()[x_offset + at * xs[dim]];
    }
  }
  return y;
}

TEST(Resample, MatchesItsDefinitionAlongEveryDim_AndChecksItsIndex) {
  manual_seed(50);
  const Tensor x = randn({3, 4, 5});
  for (int64_t dim : {int64_t{0}, int64_t{1}, int64_t{2}}) {
    SCOPED_TRACE(dim);
    const int64_t len = x.size(dim);
    // Three taps for 6 outputs, positions repeated and out of order.
    std::vector<int64_t> positions;
    for (int64_t i = 0; i < 18; ++i) positions.push_back((i * 7 + 3) % len);
    const Tensor index = ints({3, 6}, positions);
    const Tensor weight = randn({3, 6});
    const Tensor y = resample(x, dim, index, weight);
    const std::vector<double> want = naive_resample(x, dim, index, weight);
    ASSERT_EQ(y.numel(), static_cast<int64_t>(want.size()));
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(y.data<float>()[i], want[i], 1e-5) << i;
    }
    // 16-bit x: computed in float32, rounded once.
    const Tensor half = resample(to(x, DType::kBFloat16), dim, index, to(weight, DType::kBFloat16));
    EXPECT_EQ(half.dtype(), DType::kBFloat16);
  }
  testing::expect_error(
      [&] {
        resample(x, 2, ints({1, 2}, {0, 5}), randn({1, 2}));
      },
      ErrorKind::kIndex,
      "resample: index 5 is out of range for a dimension of "
      "size 5");
  testing::expect_error(
      [&] {
        resample(x, 2, ints({1, 2}, {0, 1}), randn({2, 1}));
      },
      ErrorKind::kShape, "expected index and weight of one shape [taps, out]");
  testing::expect_error(
      [&] {
        resample(ints({2}, {1, 2}), 0, ints({1, 1}, {0}), randn({1, 1}));
      },
      ErrorKind::kDType, "expected a floating-point x");
}

TEST(GradResample, MatchesFiniteDifferences_ForXAndWeight_AndTheBackwardOp) {
  manual_seed(51);
  for (int64_t dim : {int64_t{0}, int64_t{1}, int64_t{2}}) {
    SCOPED_TRACE(dim);
    const Tensor x = r64({3, 4, 5});
    const int64_t len = x.size(dim);
    std::vector<int64_t> positions;
    for (int64_t i = 0; i < 12; ++i) positions.push_back((i * 5 + 1) % len);
    const Tensor index = ints({2, 6}, positions);
    const Attrs attrs{{"dim", dim}};
    expect_grad_rule("Resample", {x, index, r64({2, 6})}, attrs);
    testing::expect_rule_uses_ops("Resample", {x, index, r64({2, 6})}, attrs);
    Shape g = x.shape();
    g[dim] = 6;
    const Attrs back{{"dim", dim}, {"size", len}};
    expect_grad_rule("ResampleBackward", {r64(g), index, r64({2, 6})}, back);
    testing::expect_rule_uses_ops("ResampleBackward", {r64(g), index, r64({2, 6})}, back);
  }
}

// ---- Embedding ----

TEST(GradEmbedding, MatchesFiniteDifferences_WithRepeatedIndices) {
  manual_seed(46);
  expect_grad_rule("Embedding", {ints({4}, {0, 2, 0, 4}), r64({5, 3})});
  expect_grad_rule("Embedding", {ints({2, 3}, {1, 1, 1, 0, 3, 1}, DType::kInt32), r64({4, 2})});
  expect_grad_rule("EmbeddingBackward", {ints({2, 3}, {1, 1, 1, 0, 3, 1}), r64({2, 3, 2})},
                   {{"num_weights", int64_t{4}}});
  const std::vector<Tensor> g = run_rule("Embedding", {ints({3}, {1, 0, 1}), randn({2, 4})});
  EXPECT_FALSE(g[0].defined());
  EXPECT_EQ(g[1].dtype(), DType::kFloat32);
  EXPECT_EQ(g[1].shape(), (Shape{2, 4}));
}

TEST(GradEmbedding, BackwardAddsRowsAtTheirIndices) {
  const Tensor rows = reshape(arange(0, 8, 1, DType::kFloat32), {4, 2});
  const Tensor table = embedding_backward(ints({4}, {3, 0, 3, 3}), rows, 5);
  ASSERT_EQ(table.shape(), (Shape{5, 2}));
  const float want[] = {2, 3, 0, 0, 0, 0, 0 + 4 + 6, 1 + 5 + 7, 0, 0};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(table.data<float>()[i], want[i]) << i;
  testing::expect_error(
      [&] {
        embedding_backward(ints({2}, {0, 5}), randn({2, 2}), 5);
      },
      ErrorKind::kIndex, "index 5 is out of range");
  testing::expect_error(
      [&] {
        embedding_backward(ints({2}, {0, 1}), randn({3, 2}), 5);
      },
      ErrorKind::kShape, "expected grad_output of shape indices.shape + [dim]");
}

}  // namespace
}  // namespace kiln
