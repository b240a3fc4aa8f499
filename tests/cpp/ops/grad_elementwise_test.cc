// Gradient rules of the elementwise ops (src/ops/elementwise_*.cc, cast.cc)
// against finite differences in float64, their broadcasting and dtype handling,
// and that they are made of ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "grad_rule_checks.h"
#include "grad_testing.h"
#include "kiln/functional.h"
#include "kiln/op.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_grad_rule;
using testing::expect_rule_uses_ops;

constexpr DType f64 = DType::kFloat64;
constexpr DType f32 = DType::kFloat32;

// Where inputs are drawn from, so that finite differences stay away from points
// where an op is not differentiable or not defined.
enum class Domain { kAny, kPositive, kUnit, kAboveOne, kAwayFromZero, kAwayFromIntegers };

Tensor draw(const Shape& shape, Domain domain, DType dtype = f64) {
  switch (domain) {
    case Domain::kAny:
      return randn(shape, dtype);
    case Domain::kPositive:
      return rand(shape, dtype) + 0.5;
    case Domain::kUnit:
      return rand(shape, dtype) * 1.6 - 0.8;
    case Domain::kAboveOne:
      return rand(shape, dtype) * 2.0 + 1.2;
    case Domain::kAwayFromZero:
      return (rand(shape, dtype) + 0.3) *
             where(gt(rand(shape), Tensor::scalar(0.5)), Tensor::scalar(1.0), Tensor::scalar(-1.0));
    case Domain::kAwayFromIntegers:
      // k + 0.1 .. k + 0.9 for integers k in [-3, 3).
      return floor(rand(shape, dtype) * 6.0 - 3.0) + rand(shape, dtype) * 0.8 + 0.1;
  }
  return Tensor();
}

struct UnaryCase {
  const char* op;
  Domain domain;
  Attrs attrs;
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"Neg", Domain::kAny, {}},
      {"Abs", Domain::kAwayFromZero, {}},
      {"Sign", Domain::kAwayFromZero, {}},
      {"Exp", Domain::kAny, {}},
      {"Expm1", Domain::kAny, {}},
      {"Log", Domain::kPositive, {}},
      {"Log1p", Domain::kPositive, {}},
      {"Log2", Domain::kPositive, {}},
      {"Sqrt", Domain::kPositive, {}},
      {"Rsqrt", Domain::kPositive, {}},
      {"Reciprocal", Domain::kAwayFromZero, {}},
      {"Square", Domain::kAny, {}},
      {"Sin", Domain::kAny, {}},
      {"Cos", Domain::kAny, {}},
      {"Tan", Domain::kUnit, {}},
      {"Tanh", Domain::kAny, {}},
      {"Sigmoid", Domain::kAny, {}},
      {"Relu", Domain::kAwayFromZero, {}},
      {"Gelu", Domain::kAny, {{"approximate", std::string("none")}}},
      {"Gelu", Domain::kAny, {{"approximate", std::string("tanh")}}},
      {"Silu", Domain::kAny, {}},
      {"Erf", Domain::kAny, {}},
      {"Erfc", Domain::kAny, {}},
      {"Exp2", Domain::kAny, {}},
      {"Asin", Domain::kUnit, {}},
      {"Acos", Domain::kUnit, {}},
      {"Atan", Domain::kAny, {}},
      {"Sinh", Domain::kAny, {}},
      {"Cosh", Domain::kAny, {}},
      {"Asinh", Domain::kAny, {}},
      {"Acosh", Domain::kAboveOne, {}},
      {"Atanh", Domain::kUnit, {}},
      {"Erfinv", Domain::kUnit, {}},
      {"Lgamma", Domain::kPositive, {}},
      {"Lgamma", Domain::kAwayFromIntegers, {}},
      {"Digamma", Domain::kPositive, {}},
      {"Digamma", Domain::kAwayFromIntegers, {}},
      {"Polygamma", Domain::kPositive, {{"n", int64_t{1}}}},
      {"Polygamma", Domain::kAwayFromIntegers, {{"n", int64_t{2}}}},
      {"Polygamma", Domain::kPositive, {{"n", int64_t{3}}}},
      {"Floor", Domain::kAwayFromIntegers, {}},
      {"Ceil", Domain::kAwayFromIntegers, {}},
      {"Round", Domain::kAwayFromIntegers, {}},
      // The bounds sit between the drawn points' integer parts, away from them.
      {"Clamp", Domain::kAwayFromIntegers, {{"min", -1.0}, {"max", 1.0}}},
      {"Clamp", Domain::kAwayFromIntegers, {{"min", 0.0}}},
      {"Clamp", Domain::kAwayFromIntegers, {{"max", int64_t{-1}}}},
  };
}

TEST(GradElementwise, UnaryRulesMatchFiniteDifferences) {
  manual_seed(1);
  for (const UnaryCase& c : unary_cases()) {
    for (const Shape& shape : {Shape{}, Shape{5}, Shape{2, 3}}) {
      SCOPED_TRACE(std::string(c.op) + " " + shape_str(shape));
      expect_grad_rule(c.op, {draw(shape, c.domain)}, c.attrs);
    }
  }
}

// GeluBackward (g, x) -> g * gelu'(x), Gelu's rule for the erf form: its own rule (the second
// derivative) against finite differences, and the first derivative against the composed formula.
TEST(GradElementwise, GeluBackwardRuleMatchesFiniteDifferences) {
  manual_seed(3);
  for (const Shape& shape : {Shape{}, Shape{5}, Shape{2, 3}}) {
    SCOPED_TRACE(shape_str(shape));
    expect_grad_rule("GeluBackward", {randn(shape, f64), randn(shape, f64) * 3.0});
  }
  const Tensor x = randn({4, 6}, f64) * 3.0;
  const Tensor g = randn({4, 6}, f64);
  const Tensor composed = g * ((erf(x * 0.70710678118654752440) + 1.0) * 0.5 +
                               x * exp(x * x * -0.5) * 0.3989422804014327);
  testing::expect_close(call_op("GeluBackward", {g, x})[0], composed, 1e-13);
  // float32 (through the SIMD kernel, transposed operands) against float64.
  const Tensor got =
      call_op("GeluBackward", {to(g, f32).transpose(0, 1), to(x, f32).transpose(0, 1)})[0];
  testing::expect_close(got, to(composed.transpose(0, 1), f32), 1e-5);
  testing::expect_error(
      [&] {
        call_op("GeluBackward", {randn({2, 3}, f64), randn({3, 2}, f64)});
      },
      ErrorKind::kShape, "GeluBackward: expected grad_output of x's shape [3, 2]");
}

// GeluBackward with approximate="tanh", Gelu's rule for the tanh form: its own rule against finite
// differences, the first derivative against the textbook formula (composed ops, float64), the
// SIMD kernel in float32 and float16 against it, and a bad mode.
TEST(GradElementwise, GeluTanhBackwardRuleMatchesFiniteDifferences) {
  manual_seed(5);
  const Attrs tanh_form{{"approximate", std::string("tanh")}};
  for (const Shape& shape : {Shape{}, Shape{5}, Shape{2, 3}}) {
    SCOPED_TRACE(shape_str(shape));
    expect_grad_rule("GeluBackward", {randn(shape, f64), randn(shape, f64) * 3.0}, tanh_form);
  }
  const Tensor x = randn({4, 6}, f64) * 3.0;
  const Tensor g = randn({4, 6}, f64);
  const Tensor t = tanh((x + x * x * x * 0.044715) * 0.79788456080286535588);
  const Tensor composed =
      g * ((t + 1.0) * 0.5 +
           x * (1.0 - t * t) * ((x * x * (3 * 0.044715) + 1.0) * 0.79788456080286535588) * 0.5);
  testing::expect_close(call_op("GeluBackward", {g, x}, tanh_form)[0], composed, 1e-13);
  const Tensor got = call_op(
      "GeluBackward", {to(g, f32).transpose(0, 1), to(x, f32).transpose(0, 1)}, tanh_form)[0];
  testing::expect_close(got, to(composed.transpose(0, 1), f32), 1e-5);
  const Tensor half =
      call_op("GeluBackward", {to(g, DType::kFloat16), to(x, DType::kFloat16)}, tanh_form)[0];
  EXPECT_EQ(half.dtype(), DType::kFloat16);
  testing::expect_close(to(half, f64), composed, 2e-2);
  testing::expect_error(
      [&] {
        call_op("GeluBackward", {g, x}, {{"approximate", std::string("sigmoid")}});
      },
      ErrorKind::kValue,
      "GeluBackward: expected approximate to be 'none' or 'tanh', got 'sigmoid'");
}

// Sigmoid's, Tanh's and Relu's rules are one SigmoidBackward / TanhBackward of g and y, or
// ReluBackward of g and x: the composed formulas' values, in every floating dtype (float16 computed
// in float32, rounded once), integers promoted to float32, broadcasting, through the SIMD kernel on
// transposed operands.
TEST(GradElementwise, ActivationBackwardOpsAreTheirFormulasInOnePass) {
  manual_seed(4);
  const Tensor g = randn({5, 7}, f64);
  const Tensor x = randn({5, 7}, f64) * 2.0;
  const Tensor s = sigmoid(x), t = tanh(x);
  testing::expect_close(sigmoid_backward(g, s), g * s * (1.0 - s), 1e-15);
  testing::expect_close(tanh_backward(g, t), g * (1.0 - t * t), 1e-14);
  for (DType dtype : {f32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const double tol = dtype == f32 ? 1e-6 : dtype == DType::kFloat16 ? 2e-3 : 1e-2;
    const Tensor gd = to(g, dtype).transpose(0, 1), sd = to(s, dtype).transpose(0, 1);
    const Tensor td = to(t, dtype).transpose(0, 1);
    const Tensor got_s = sigmoid_backward(gd, sd), got_t = tanh_backward(gd, td);
    EXPECT_EQ(got_s.dtype(), dtype);
    const Tensor g64 = to(gd, f64), s64 = to(sd, f64), t64 = to(td, f64);
    testing::expect_close(to(got_s, f64), g64 * s64 * (1.0 - s64), tol);
    testing::expect_close(to(got_t, f64), g64 * (1.0 - t64 * t64), tol);
  }
  // Broadcasting either operand; integer operands compute in float32.
  const Tensor row = randn({7}, f64);
  testing::expect_close(sigmoid_backward(row, s), row * s * (1.0 - s), 1e-15);
  testing::expect_close(tanh_backward(g, tanh(row)), g * (1.0 - square(tanh(row))), 1e-14);
  const Tensor ints = arange(Scalar(int64_t{-2}), Scalar(int64_t{3}));
  EXPECT_EQ(sigmoid_backward(ints, ints).dtype(), f32);
  testing::expect_close(to(tanh_backward(ints, ints), f64), to(ints * (1 - ints * ints), f64), 0.0);
  // relu's: g unless x <= 0, so 0 at 0 and below, g at nan (as PyTorch), in g's dtype.
  const auto values = [](std::initializer_list<double> v) {
    Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, f64);
    std::copy(v.begin(), v.end(), t.data<double>());
    return t;
  };
  const Tensor at = values({-1.0, 0.0, 2.0, std::nan(""), -0.0, 1e-300});
  testing::expect_close(relu_backward(ones({6}, f32) * 3.0, to(at, f32)),
                        to(values({0, 0, 3, 3, 0, 0}), f32), 0.0);  // 1e-300 is 0 in float32
  testing::expect_close(relu_backward(ones({6}, f64), at), values({0, 0, 1, 1, 0, 1}), 0.0);
  testing::expect_close(relu_backward(g, x), where(gt(x, Tensor::scalar(0)), g, zeros_like(g)),
                        0.0);
  // silu's: g s (1 + x (1 - s)), with its limits 1 and 0 at the infinities.
  testing::expect_close(silu_backward(g, x), g * s * (1.0 + x * (1.0 - s)), 1e-15);
  const Tensor limits = values({INFINITY, -INFINITY, 0.0});
  testing::expect_close(silu_backward(ones({3}, f64), limits), values({1, 0, 0.5}), 0.0);
  // The rules of Sigmoid, Tanh, Relu and Silu call exactly these ops.
  for (const char* op : {"Sigmoid", "Tanh", "Relu", "Silu"}) {
    SCOPED_TRACE(op);
    const Tensor y = call_op(op, {x})[0];
    const std::vector<Tensor> dx = testing::run_rule(op, {x}, {}, {g});
    const std::string name = op;
    const Tensor want = name == "Sigmoid" ? sigmoid_backward(g, y)
                        : name == "Tanh"  ? tanh_backward(g, y)
                        : name == "Relu"  ? relu_backward(g, x)
                                          : silu_backward(g, x);
    testing::expect_close(dx[0], want, 0.0);
  }
  testing::expect_error(
      [&] {
        sigmoid_backward(randn({2, 3}), randn({3, 2}));
      },
      ErrorKind::kShape, "broadcast");
}

TEST(GradElementwise, UnaryRulesUseOpsOnly_WhenFloat32AndStrided) {
  manual_seed(2);
  for (const UnaryCase& c : unary_cases()) {
    // A transposed (non-contiguous) float32 input.
    expect_rule_uses_ops(c.op, {draw({4, 3}, c.domain, f32).transpose(0, 1)}, c.attrs);
  }
}

TEST(GradElementwise, PiecewiseConstantOpsHaveZeroGradients) {
  const Tensor x = randn({3, 2}, f64);
  const Tensor g = randn({3, 2}, f64);
  for (const char* name : {"Floor", "Ceil", "Round", "Trunc", "Sign"}) {
    const OpDefPtr op = OpRegistry::Instance().get(name);
    const std::vector<Tensor> gx = op->grad_fn()({x}, call_op(*op, {x}), {}, {g});
    testing::expect_close(gx[0], zeros({3, 2}, f64), 0);
  }
}

TEST(GradElementwise, NonDifferentiablePointsFollowPyTorch) {
  // relu'(0) = 0, abs'(0) = 0; clamp passes no gradient at its bounds (PyTorch 2.x).
  const Tensor x = zeros({2}, f64);
  const Tensor g = ones({2}, f64);
  const OpDefPtr relu = OpRegistry::Instance().get("Relu");
  const OpDefPtr abs = OpRegistry::Instance().get("Abs");
  testing::expect_close(relu->grad_fn()({x}, {kiln::relu(x)}, {}, {g})[0], zeros({2}, f64), 0);
  testing::expect_close(abs->grad_fn()({x}, {kiln::abs(x)}, {}, {g})[0], zeros({2}, f64), 0);
  const OpDefPtr clamp = OpRegistry::Instance().get("Clamp");
  const Attrs bounds = clamp->normalize_attrs({{"min", 0.0}, {"max", 1.0}});
  const Tensor at_bounds = cat({zeros({1}, f64), ones({1}, f64)});
  testing::expect_close(clamp->grad_fn()({at_bounds}, {at_bounds}, bounds, {g})[0], zeros({2}, f64),
                        0);
  const Tensor inside = full({2}, 0.5, f64);
  testing::expect_close(clamp->grad_fn()({inside}, {inside}, bounds, {g})[0], g, 0);
}

struct BinaryCase {
  const char* op;
  Domain a;
  Domain b;
};

const BinaryCase kBinaryCases[] = {
    {"Add", Domain::kAny, Domain::kAny},
    {"Sub", Domain::kAny, Domain::kAny},
    {"Mul", Domain::kAny, Domain::kAny},
    {"Div", Domain::kAny, Domain::kAwayFromZero},
    {"Pow", Domain::kPositive, Domain::kAny},
    {"Maximum", Domain::kAny, Domain::kAny},
    {"Minimum", Domain::kAny, Domain::kAny},
    {"FloorDivide", Domain::kAny, Domain::kAwayFromZero},
    {"Remainder", Domain::kAny, Domain::kAwayFromZero},
    {"TruncDivide", Domain::kAny, Domain::kAwayFromZero},
    {"Fmod", Domain::kAny, Domain::kAwayFromZero},
    {"Atan2", Domain::kAny, Domain::kAwayFromZero},
    {"SigmoidBackward", Domain::kAny, Domain::kUnit},
    {"TanhBackward", Domain::kAny, Domain::kUnit},
    {"ReluBackward", Domain::kAny, Domain::kAwayFromZero},
    {"SiluBackward", Domain::kAny, Domain::kAny},
};

// (shape of a, shape of b): equal, broadcast either way, both broadcast, and
// 0-d.
const std::pair<Shape, Shape> kBroadcastShapes[] = {
    {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{3}, {2, 3}}, {{3, 1}, {1, 4}}, {{}, {2, 2}}, {{4}, {}},
};

TEST(GradElementwise, BinaryRulesMatchFiniteDifferences_WithBroadcasting) {
  manual_seed(3);
  for (const BinaryCase& c : kBinaryCases) {
    for (const auto& [sa, sb] : kBroadcastShapes) {
      SCOPED_TRACE(std::string(c.op) + " " + shape_str(sa) + " " + shape_str(sb));
      expect_grad_rule(c.op, {draw(sa, c.a), draw(sb, c.b)});
    }
  }
}

TEST(GradElementwise, BinaryRulesUseOpsOnly_WhenFloat32AndStrided) {
  manual_seed(4);
  for (const BinaryCase& c : kBinaryCases) {
    expect_rule_uses_ops(c.op, {draw({3, 2}, c.a, f32).transpose(0, 1), draw({3}, c.b, f32)});
  }
}

TEST(GradElementwise, PromotedOperandGetsItsOwnDtype) {
  // float32 * float64 computes in float64; each gradient comes back in its
  // operand's dtype, and an integer operand gets none.
  manual_seed(5);
  for (const char* name : {"Add", "Mul", "Div", "Maximum"}) {
    expect_rule_uses_ops(name, {randn({2, 3}, f32), rand({3}, f64) + 1.0});
    expect_rule_uses_ops(name, {randint(1, 5, {2, 3}), rand({3}, f64) + 1.0});
  }
  expect_grad_rule("Mul", {randint(-3, 3, {2, 3}), randn({3}, f64)});
}

TEST(GradElementwise, WeakScalarOperandGetsNoGradient) {
  const Tensor x = randn({3}, f64);
  const Tensor two = Tensor::scalar(2.0);
  const OpDefPtr mul = OpRegistry::Instance().get("Mul");
  const std::vector<Tensor> gx = mul->grad_fn()({x, two}, {x * 2.0}, {}, {ones({3}, f64)});
  testing::expect_close(gx[0], full({3}, 2.0, f64), 0);
  EXPECT_FALSE(gx[1].defined());
}

TEST(GradElementwise, MaximumAndMinimumSplitTies) {
  const Tensor a = cat({ones({1}, f64), full({1}, 3.0, f64), zeros({1}, f64)});
  const Tensor b = cat({ones({1}, f64), zeros({1}, f64), full({1}, 3.0, f64)});
  const Tensor g = ones({3}, f64);
  const OpDefPtr max = OpRegistry::Instance().get("Maximum");
  const OpDefPtr min = OpRegistry::Instance().get("Minimum");
  const std::vector<Tensor> gmax = max->grad_fn()({a, b}, {maximum(a, b)}, {}, {g});
  const std::vector<Tensor> gmin = min->grad_fn()({a, b}, {minimum(a, b)}, {}, {g});
  const Tensor half = full({1}, 0.5, f64);
  testing::expect_close(gmax[0], cat({half, ones({1}, f64), zeros({1}, f64)}), 0);
  testing::expect_close(gmax[1], cat({half, zeros({1}, f64), ones({1}, f64)}), 0);
  testing::expect_close(gmin[0], cat({half, zeros({1}, f64), ones({1}, f64)}), 0);
  testing::expect_close(gmin[1], cat({half, ones({1}, f64), zeros({1}, f64)}), 0);
}

TEST(GradElementwise, PowIsFiniteAtZeroBaseAndZeroExponent) {
  // d(0 ** b)/db = 0 for b >= 0 and d(a ** 0)/da = 0, as in PyTorch (log(0) and
  // 0 * inf avoided).
  const Tensor a = zeros({2}, f64);
  const Tensor b = cat({zeros({1}, f64), full({1}, 2.0, f64)});
  const OpDefPtr pow_op = OpRegistry::Instance().get("Pow");
  const std::vector<Tensor> g = pow_op->grad_fn()({a, b}, {kiln::pow(a, b)}, {}, {ones({2}, f64)});
  testing::expect_close(g[0], zeros({2}, f64), 0);
  testing::expect_close(g[1], zeros({2}, f64), 0);
}

// atan2's gradients are b / (a^2 + b^2) and -a / (a^2 + b^2) (nan at the origin, as PyTorch's);
// fmod's are g and -g * trunc(a / b). In float16, a^2 + b^2 past float16's range (300^2) still
// gives the representable gradient.
TEST(GradElementwise, Atan2AndFmodGradientsAreTheirFormulas) {
  const auto values = [](std::initializer_list<double> v) {
    Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, f64);
    std::copy(v.begin(), v.end(), t.data<double>());
    return t;
  };
  const Tensor a = values({1.0, -2.0, 0.0, 7.5, -7.5});
  const Tensor b = values({2.0, 0.5, -3.0, -2.0, 2.0});
  const Tensor g = values({1.0, 2.0, 1.0, 1.0, -1.0});
  const OpDefPtr atan2_op = OpRegistry::Instance().get("Atan2");
  const std::vector<Tensor> ga = atan2_op->grad_fn()({a, b}, {kiln::atan2(a, b)}, {}, {g});
  const Tensor r2 = a * a + b * b;
  testing::expect_close(ga[0], g * b / r2, 1e-15);
  testing::expect_close(ga[1], -(g * a) / r2, 1e-15);
  const Tensor origin = zeros({1}, f64);
  const std::vector<Tensor> at_origin =
      atan2_op->grad_fn()({origin, origin}, {kiln::atan2(origin, origin)}, {}, {ones({1}, f64)});
  EXPECT_TRUE(std::isnan(at_origin[0].data<double>()[0]));
  const Tensor big = to(values({300.0, 400.0}), DType::kFloat16);
  const std::vector<Tensor> gh =
      atan2_op->grad_fn()({big, big}, {kiln::atan2(big, big)}, {}, {ones({2}, DType::kFloat16)});
  EXPECT_EQ(gh[0].dtype(), DType::kFloat16);
  testing::expect_close(to(gh[0], f64), values({1.0 / 600, 1.0 / 800}), 1e-5);

  const OpDefPtr fmod_op = OpRegistry::Instance().get("Fmod");
  const std::vector<Tensor> gf = fmod_op->grad_fn()({a, b}, {kiln::fmod(a, b)}, {}, {g});
  testing::expect_close(gf[0], g, 0);
  testing::expect_close(gf[1], values({-0.0, 8.0, 0.0, 3.0, -3.0}), 0);
}

// erfinv' = sqrt(pi) / 2 exp(erfinv(x)^2) (inf at +-1, as PyTorch's), lgamma' = digamma,
// digamma' = polygamma(1, .) and polygamma(n, .)' = polygamma(n + 1, .): the rules are these ops,
// so each rule's own rule gives the next derivative.
TEST(GradElementwise, SpecialFunctionRulesAreTheNextFunction) {
  manual_seed(8);
  const Tensor x = rand({2, 3}, f64) * 3.0 + 0.2;
  const Tensor g = randn({2, 3}, f64);
  const auto rule = [&](const char* op, const Tensor& at, const Attrs& attrs = {}) {
    const OpDefPtr def = OpRegistry::Instance().get(op);
    const Attrs normalized = def->normalize_attrs(attrs);
    return def->grad_fn()({at}, call_op(*def, {at}, normalized), normalized, {g})[0];
  };
  testing::expect_close(rule("Lgamma", x), g * digamma(x), 0);
  testing::expect_close(rule("Digamma", x), g * polygamma(1, x), 0);
  for (int64_t n = 1; n <= 3; ++n) {
    testing::expect_close(rule("Polygamma", x, {{"n", n}}), g * polygamma(n + 1, x), 0);
  }
  const Tensor u = rand({2, 3}, f64) * 1.8 - 0.9;
  const Tensor y = erfinv(u);
  testing::expect_close(rule("Erfinv", u), g * exp(y * y) * 0.88622692545275801365, 1e-15);
  const Tensor edges = cat({full({1}, 1.0, f64), full({1}, -1.0, f64)});
  const OpDefPtr erfinv_op = OpRegistry::Instance().get("Erfinv");
  const Tensor at_edges = erfinv_op->grad_fn()({edges}, {erfinv(edges)}, {}, {ones({2}, f64)})[0];
  EXPECT_EQ(at_edges.data<double>()[0], INFINITY);
  EXPECT_EQ(at_edges.data<double>()[1], INFINITY);
}

TEST(GradElementwise, WhereSendsGradientToTheSelectedOperand) {
  manual_seed(6);
  const Tensor cond = gt(rand({2, 3}), Tensor::scalar(0.5));
  expect_grad_rule("Where", {cond, randn({2, 3}, f64), randn({3}, f64)});
  expect_grad_rule("Where", {cond, randn({}, f64), randn({2, 1}, f64)});
  expect_grad_rule("Where",
                   {gt(rand({3}), Tensor::scalar(0.5)), randn({2, 3}, f64), randn({2, 3}, f64)});
  expect_rule_uses_ops("Where", {cond, randn({3, 2}, f32).transpose(0, 1), randn({3}, f64)});
}

TEST(GradElementwise, CastConvertsTheGradientBack) {
  manual_seed(7);
  // float64 -> float32 -> (gradient) float64: linear, so a large step is exact
  // up to rounding.
  expect_grad_rule("Cast", {randn({2, 3}, f64)}, {{"dtype", f32}}, 1e-2, 1e-4);
  expect_rule_uses_ops("Cast", {randn({2, 3}, f32)}, {{"dtype", f64}});
  expect_rule_uses_ops("Cast", {randn({3, 2}, f64).transpose(0, 1)}, {{"dtype", f32}});
  // An integer result carries no gradient; an integer input gets none.
  const OpDefPtr cast = OpRegistry::Instance().get("Cast");
  const Tensor x = randn({3}, f32);
  const Attrs to_int = cast->normalize_attrs({{"dtype", DType::kInt64}});
  EXPECT_FALSE(cast->grad_fn()({x}, {to(x, DType::kInt64)}, to_int, {Tensor()})[0].defined());
  expect_rule_uses_ops("Cast", {randint(0, 4, {3})}, {{"dtype", f32}});
}

TEST(GradElementwise, UndefinedOutputGradientGivesUndefinedInputGradients) {
  const Tensor x = randn({3}, f64);
  const struct {
    const char* op;
    std::vector<Tensor> inputs;
    Attrs attrs;
  } cases[] = {{"Exp", {x}, {}},
               {"Mul", {x, x}, {}},
               {"Where", {gt(x, Tensor::scalar(0)), x, x}, {}},
               {"Clamp", {x}, {{"min", 0.0}}}};
  for (const auto& c : cases) {
    const OpDefPtr op = OpRegistry::Instance().get(c.op);
    const Attrs attrs = op->normalize_attrs(c.attrs);
    const std::vector<Tensor> grads =
        op->grad_fn()(c.inputs, call_op(*op, c.inputs, attrs), attrs, {Tensor()});
    ASSERT_EQ(grads.size(), c.inputs.size()) << c.op;
    for (const Tensor& g : grads) EXPECT_FALSE(g.defined()) << c.op;
  }
}

TEST(GradElementwise, ComparisonsAndLogicalOpsAreNotDifferentiable) {
  for (const char* name : {"Eq", "Ne", "Lt", "Le", "Gt", "Ge", "LogicalAnd", "LogicalOr",
                           "LogicalXor", "LogicalNot"}) {
    EXPECT_TRUE(testing::not_differentiable(name)) << name;
  }
  EXPECT_FALSE(testing::not_differentiable("Add"));
}

}  // namespace
}  // namespace kiln
