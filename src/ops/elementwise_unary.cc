// Unary elementwise ops: neg, abs, exp, sqrt, sigmoid, ..., erfinv, lgamma, digamma, plus gelu,
// clamp and polygamma (which take attributes). One table row per op; the loops are in
// ops/elementwise.h, the special functions' scalar math in ops/special_math.h.
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/parallel.h"
#include "ops/elementwise.h"
#include "ops/grad_util.h"
#include "ops/simd/float_kernels.h"
#include "ops/special_math.h"

namespace kiln {
namespace elementwise {
namespace {

using U = simd::UnaryOp;

// Constants of the table's derivatives, which are written with ops (see Note [Gradient rules]).
constexpr double kLn2 = 0.69314718055994530942;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
constexpr double kSqrtPiOverTwo = 0.88622692545275801365;

// x in its compute dtype (float32 for float16 / bfloat16), for derivatives whose x^2 would
// overflow float16 (past |x| = 256) where the derivative itself is representable.
Tensor wide(const Tensor& x) { return to(x, compute_dtype(x.dtype())); }

// Each row: function, primitive, dtype rule, Highway kernel, the result as an expression of `x`
// in the compute type C, the gradient of x as an expression of the tensors x, y (the result) and
// g (y's gradient), and the op's documentation. Rows without a Highway kernel (kNoSimdUnary) run
// the std:: function element by element. Floor, ceil, round, trunc and sign have zero
// gradients (as in PyTorch); abs'(0) = sign(0) = 0.
#define KILN_UNARY_OPS(X)                                                                          \
  X(neg, Neg, kSameNoBool, U::kNeg, wrapping_neg(x), -g, "-x (integers wrap; bool: DTypeError)")   \
  X(abs, Abs, kSame, U::kAbs, abs_value(x), g* sign(x),                                            \
    "|x| (integers wrap around at the minimum)")                                                   \
  X(sign, Sign, kSame, U::kSign, sign_value(x), zeros_like(g),                                     \
    "-1, 0 or 1 by the sign of x; sign(nan) = nan")                                                \
  X(exp, Exp, kFloating, U::kExp, std::exp(x), g* y, "e^x")                                        \
  X(expm1, Expm1, kFloating, U::kExpm1, std::expm1(x), g*(y + 1.0), "e^x - 1, accurate near 0")    \
  X(log, Log, kFloating, U::kLog, std::log(x), g / x, "natural logarithm; nan below 0")            \
  X(log1p, Log1p, kFloating, U::kLog1p, std::log1p(x), g / (x + 1.0),                              \
    "log(1 + x), accurate near 0")                                                                 \
  X(log2, Log2, kFloating, U::kLog2, std::log2(x), g / (x * kLn2), "base-2 logarithm")             \
  X(sqrt, Sqrt, kFloating, U::kSqrt, std::sqrt(x), g / (y * 2.0), "square root; nan below 0")      \
  X(rsqrt, Rsqrt, kFloating, U::kRsqrt, C(1) / std::sqrt(x), g * (y * y * y * -0.5),               \
    "1 / sqrt(x)")                                                                                 \
  X(reciprocal, Reciprocal, kFloating, U::kReciprocal, C(1) / x, -(g * (y * y)), "1 / x")          \
  X(square, Square, kSame, U::kSquare, wrapping_mul(x, x), g*(x * 2.0), "x * x")                   \
  X(sin, Sin, kFloating, U::kSin, std::sin(x), g* cos(x), "sine (radians)")                        \
  X(cos, Cos, kFloating, U::kCos, std::cos(x), -(g * sin(x)), "cosine (radians)")                  \
  X(tan, Tan, kFloating, U::kTan, std::tan(x), g*(y * y + 1.0), "tangent (radians)")               \
  X(tanh, Tanh, kFloating, U::kTanh, std::tanh(x), tanh_backward(g, y), "hyperbolic tangent")      \
  X(sigmoid, Sigmoid, kFloating, U::kSigmoid, C(1) / (C(1) + std::exp(-x)),                        \
    sigmoid_backward(g, y), "1 / (1 + e^-x)")                                                      \
  X(relu, Relu, kSame, U::kRelu, relu_value(x), relu_backward(g, x), "max(x, 0); relu(nan) = nan") \
  X(silu, Silu, kFloating, U::kSilu, x / (C(1) + std::exp(-x)), silu_backward(g, x),               \
    "x * sigmoid(x)")                                                                              \
  X(erf, Erf, kFloating, U::kErf, std::erf(x), g*(exp(-(x * x)) * kTwoOverSqrtPi),                 \
    "the error function")                                                                          \
  X(erfc, Erfc, kFloating, kNoSimdUnary, std::erfc(x), -(g * (exp(-(x * x)) * kTwoOverSqrtPi)),    \
    "the complementary error function 1 - erf(x), accurate where erf(x) is near 1")                \
  X(exp2, Exp2, kFloating, kNoSimdUnary, std::exp2(x), g*(y * kLn2), "2^x")                        \
  X(asin, Asin, kFloating, kNoSimdUnary, std::asin(x), g / sqrt((1.0 - x) * (x + 1.0)),            \
    "arcsine (radians, in [-pi/2, pi/2]); nan outside [-1, 1]")                                    \
  X(acos, Acos, kFloating, kNoSimdUnary, std::acos(x), -(g / sqrt((1.0 - x) * (x + 1.0))),         \
    "arccosine (radians, in [0, pi]); nan outside [-1, 1]")                                        \
  X(atan, Atan, kFloating, kNoSimdUnary, std::atan(x), g / (square(wide(x)) + 1.0),                \
    "arctangent (radians, in [-pi/2, pi/2])")                                                      \
  X(sinh, Sinh, kFloating, kNoSimdUnary, std::sinh(x), g* cosh(x), "hyperbolic sine")              \
  X(cosh, Cosh, kFloating, kNoSimdUnary, std::cosh(x), g* sinh(x), "hyperbolic cosine")            \
  X(asinh, Asinh, kFloating, kNoSimdUnary, std::asinh(x), g / sqrt(square(wide(x)) + 1.0),         \
    "inverse hyperbolic sine")                                                                     \
  X(acosh, Acosh, kFloating, kNoSimdUnary, std::acosh(x), g / (sqrt(x - 1.0) * sqrt(x + 1.0)),     \
    "inverse hyperbolic cosine; nan below 1")                                                      \
  X(atanh, Atanh, kFloating, kNoSimdUnary, std::atanh(x), g / ((1.0 - x) * (x + 1.0)),             \
    "inverse hyperbolic tangent; +-inf at +-1, nan outside [-1, 1]")                               \
  X(erfinv, Erfinv, kFloating, U::kErfinv, C(erfinv_value(x)), g*(exp(y * y) * kSqrtPiOverTwo),    \
    "the inverse error function: erfinv(erf(x)) = x; +-inf at +-1, nan outside [-1, 1]")           \
  X(lgamma, Lgamma, kFloating, kNoSimdUnary, C(lgamma_value(x)), g* digamma(x),                    \
    "log |Gamma(x)|, the log of the gamma function's magnitude; inf at 0 and the negative "        \
    "integers")                                                                                    \
  X(digamma, Digamma, kFloating, kNoSimdUnary, C(digamma_value(x)), g* polygamma(1, x),            \
    "the digamma function Gamma'(x) / Gamma(x), the derivative of lgamma; -inf at 0, +inf at -0 "  \
    "and nan at the negative integers (as PyTorch)")                                               \
  X(floor, Floor, kSame, U::kFloor, floor_value(x), zeros_like(g),                                 \
    "largest integer <= x (integers: x)")                                                          \
  X(ceil, Ceil, kSame, U::kCeil, ceil_value(x), zeros_like(g),                                     \
    "smallest integer >= x (integers: x)")                                                         \
  X(round, Round, kSame, U::kRound, round_value(x), zeros_like(g),                                 \
    "nearest integer, ties to even (as NumPy)")                                                    \
  X(trunc, Trunc, kSame, U::kTrunc, trunc_value(x), zeros_like(g),                                 \
    "x rounded toward zero, its sign kept (trunc(-0.5) = -0; integers: x)")                        \
  X(logical_not, LogicalNot, kPredicate, kNoSimdUnary, !truthy(x), Tensor(), "x == 0, as bool")

#define KILN_UNARY_FUNCTOR(name, Prim, rule, simd_op, expr, dx, doc) \
  struct Prim##Fn {                                              \
    template <typename C>                                        \
    auto operator()(C x) const {                                 \
      return expr;                                               \
    }                                                            \
  };
KILN_UNARY_OPS(KILN_UNARY_FUNCTOR)
#undef KILN_UNARY_FUNCTOR

#define KILN_UNARY_REGISTER(name, Prim, rule, simd_op, expr, dx, doc)                      \
  KILN_REGISTER_OP((unary_def<Prim##Fn, UnaryRule::rule>(                                   \
      #Prim, simd_op, doc, [](const Tensor& x, const Tensor& y, const Tensor& g) -> Tensor { \
        return dx;                                                                          \
      })));
KILN_UNARY_OPS(KILN_UNARY_REGISTER)
#undef KILN_UNARY_REGISTER

// gelu and clamp carry attributes, so their OpDefs are written out; their loops are the same.

struct GeluErfFn {
  template <typename C>
  C operator()(C x) const {
    // erfc(-x / sqrt 2) is 1 + erf(x / sqrt 2) without its cancellation for negative x.
    return C(0.5) * x * std::erfc(-x * C(0.70710678118654752440));
  }
};

struct GeluTanhFn {
  template <typename C>
  C operator()(C x) const {
    const C inner = C(0.79788456080286535588) * (x + C(0.044715) * x * x * x);  // sqrt(2 / pi)
    return C(0.5) * x * (C(1) + std::tanh(inner));
  }
};

// d^2 gelu / dx^2 for the tanh form, with t = tanh(u), u = sqrt(2 / pi) (x + 0.044715 x^3):
// (1 - t^2) (u' + 0.5 x (u'' - 2 t u'^2)). Past |x| = 20 it is 0 to within 1e-250; clamping there
// keeps 0 * inf out of large and infinite x. Computed in float32 at least: x u'^2 reaches 76,000
// at the clamp, past float16's range.
Tensor gelu_tanh_second_derivative(const Tensor& x) {
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  const Tensor xc = clamp(to(x, compute_dtype(x.dtype())), Scalar(-20.0), Scalar(20.0));
  const Tensor x2 = xc * xc;
  const Tensor t = tanh((xc + x2 * xc * 0.044715) * kSqrt2OverPi);
  const Tensor du = (x2 * (3 * 0.044715) + 1.0) * kSqrt2OverPi;
  const Tensor ddu = xc * (6 * 0.044715 * kSqrt2OverPi);
  return (1.0 - t * t) * (du + xc * (ddu - t * du * du * 2.0) * 0.5);
}

Tensor gelu_backward(const Tensor& grad_output, const Tensor& x, const std::string& approximate) {
  static const OpDefPtr op = OpRegistry::Instance().get("GeluBackward");
  return call_op(*op, {grad_output, x}, {{"approximate", approximate}})[0];
}

// GeluBackward(g, x) = g * gelu'(x) in one pass (simd::gelu_backward, simd::gelu_tanh_backward)
// instead of the dozen ops the formula composes to (the tanh form's took 6 ms for 1M elements,
// the fused pass 0.4); float16/bfloat16 are computed in float32. For the erf form gelu'(x) =
// Phi(x) + x phi(x) (Phi, phi: the standard normal CDF and density). Its own rule: linear in g
// (GeluBackward again), and in x, g gelu''(x), with gelu''(x) = phi(x) (2 - x^2) for the erf form
// and gelu_tanh_second_derivative for the tanh form.
KILN_REGISTER_OP(
    OpDef("GeluBackward")
        .input("grad_output")
        .input("x")
        .attr("approximate", AttrKind::kString, std::string("none"))
        .doc("grad_output * d gelu(x) / dx (approximate: 'none' or 'tanh', as Gelu's): Gelu's "
             "input gradient in one pass")
        .infer([](const InferContext& ctx) {
          const TensorMeta& g = ctx.input(0);
          const TensorMeta& x = ctx.input(1);
          const std::string mode = ctx.attrs.get<std::string>("approximate");
          KILN_CHECK_VALUE(mode == "none" || mode == "tanh")
              << "GeluBackward: expected approximate to be 'none' or 'tanh', got '" << mode << "'";
          KILN_CHECK_SHAPE(g.shape == x.shape)
              << "GeluBackward: expected grad_output of x's shape " << shape_str(x.shape)
              << ", got " << shape_str(g.shape);
          KILN_CHECK_DTYPE(is_floating_point(g.dtype) && is_floating_point(x.dtype))
              << "GeluBackward: expected floating-point grad_output and x, got " << g.dtype
              << " and " << x.dtype;
          return MetaList{{result_type(ctx.inputs), x.shape}};
        })
        .kernel(DeviceType::kCPU,
                [](KernelContext& ctx) {
                  const Tensor& out = ctx.outputs[0];
                  const DType cd = compute_dtype(out.dtype());
                  const Tensor g = as_dtype(ctx.inputs[0], cd).contiguous();
                  const Tensor x = as_dtype(ctx.inputs[1], cd).contiguous();
                  const Tensor y = out.dtype() == cd ? out : Tensor::empty(out.shape(), cd);
                  const bool tanh_form = ctx.attrs.get<std::string>("approximate") == "tanh";
                  visit_compute_float(cd, [&](auto zero) {
                    using C = decltype(zero);
                    const C* pg = g.data<C>();
                    const C* px = x.data<C>();
                    C* py = y.data<C>();
                    parallel_for(0, out.numel(), kElementwiseGrain, [&](int64_t lo, int64_t hi) {
                      if (tanh_form) {
                        simd::gelu_tanh_backward(pg + lo, px + lo, py + lo, hi - lo);
                      } else {
                        simd::gelu_backward(pg + lo, px + lo, py + lo, hi - lo);
                      }
                    });
                  });
                  if (!y.is_same(out)) copy_into(out, y);
                })
        .grad(detail::one_output_rule([](const std::vector<Tensor>& in, const Tensor&,
                                         const Attrs& attrs, const Tensor& gg) {
          constexpr double kInvSqrt2Pi = 0.39894228040143267794;
          const Tensor& g = in[0];
          const Tensor& x = in[1];
          const std::string approximate = attrs.get<std::string>("approximate");
          Tensor second;
          if (approximate == "tanh") {
            second = gelu_tanh_second_derivative(x);
          } else {
            // gelu'' vanishes past |x| = 40 (below 1e-340); clamping keeps 0 * inf out of large
            // and infinite x (and x^2 finite in float16).
            const Tensor x2 = square(clamp(x, Scalar(-40.0), Scalar(40.0)));
            second = exp(x2 * -0.5) * kInvSqrt2Pi * (2.0 - x2);
          }
          // second first: a float16 gg * g could overflow before meeting a zero second.
          return std::vector<Tensor>{detail::input_grad(gelu_backward(gg, x, approximate), g),
                                     detail::input_grad(second * g * gg, x)};
        })));

KILN_REGISTER_OP(
    OpDef("Gelu")
        .input("x")
        .attr("approximate", AttrKind::kString, std::string("none"))
        .traits(kTraitElementwise | kTraitInPlace)
        .grad(detail::one_output_rule([](const std::vector<Tensor>& in, const Tensor&,
                                         const Attrs& attrs, const Tensor& g) {
          const Tensor& x = in[0];
          if (!detail::differentiable(x)) return std::vector<Tensor>{Tensor()};
          return std::vector<Tensor>{
              to(gelu_backward(g, x, attrs.get<std::string>("approximate")), x.dtype())};
        }))
        .doc("Gaussian error linear unit: 0.5 x (1 + erf(x / sqrt 2)); approximate='tanh' uses "
             "0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))")
        .infer([](const InferContext& ctx) {
          const std::string mode = ctx.attrs.get<std::string>("approximate");
          KILN_CHECK_VALUE(mode == "none" || mode == "tanh")
              << "Gelu: expected approximate to be 'none' or 'tanh', got '" << mode << "'";
          return MetaList{{to_floating(ctx.input(0).dtype), ctx.input(0).shape}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const Tensor x = as_dtype(ctx.inputs[0], out.dtype());
          const bool tanh = ctx.attrs.get<std::string>("approximate") == "tanh";
          visit_types<kFloatTypes>(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            if (tanh) {
              launch_unary<T, T>(out, x, GeluTanhFn{}, U::kGeluTanh);
            } else {
              launch_unary<T, T>(out, x, GeluErfFn{}, U::kGeluErf);
            }
          });
        }));

/// min(max(x, lo), hi) with nan kept; lo > hi gives hi; a nan bound gives nan everywhere (as
/// NumPy and PyTorch: the comparisons alone would let x through).
template <typename C>
struct ClampFn {
  C lo;
  C hi;
  C operator()(C x) const {
    const C v = x < lo ? lo : x;
    const C r = v > hi ? hi : v;
    if constexpr (std::is_floating_point_v<C>) {
      if (lo != lo || hi != hi) return std::numeric_limits<C>::quiet_NaN();
    }
    return r;
  }
};

/// A clamp bound in the compute type C; a missing bound is C's lowest / highest value. Integer
/// bounds saturate to C's range (the result dtype is integral only when the bounds are).
template <typename C>
C bound_as(const Attrs& attrs, const char* name, bool upper) {
  if (attrs.is_none(name)) {
    if constexpr (std::is_floating_point_v<C>) {
      return upper ? std::numeric_limits<C>::infinity() : -std::numeric_limits<C>::infinity();
    } else {
      return upper ? std::numeric_limits<C>::max() : std::numeric_limits<C>::lowest();
    }
  }
  const Scalar s = attrs.get<Scalar>(name);
  if constexpr (std::is_floating_point_v<C>) {
    return static_cast<C>(s.to_double());
  } else if constexpr (std::is_same_v<C, bool>) {
    return s.to_bool();
  } else {
    KILN_ASSERT(!s.is_floating_point()) << "Clamp: a float bound with an integer result";
    const int64_t v = s.to_int();
    if (v < static_cast<int64_t>(std::numeric_limits<C>::min()))
      return std::numeric_limits<C>::min();
    if (v > static_cast<int64_t>(std::numeric_limits<C>::max()))
      return std::numeric_limits<C>::max();
    return static_cast<C>(v);
  }
}

TensorMeta bound_meta(const Attrs& attrs, const char* name) {
  TensorMeta m;
  if (attrs.is_none(name)) {
    m.defined = false;
    return m;
  }
  const Scalar s = attrs.get<Scalar>(name);
  m.dtype = s.is_bool() ? DType::kBool : (s.is_integral() ? DType::kInt64 : DType::kFloat64);
  m.weak = true;
  return m;
}

KILN_REGISTER_OP(
    OpDef("Clamp")
        .input("x")
        .attr("min", AttrKind::kScalar, std::monostate{})
        .attr("max", AttrKind::kScalar, std::monostate{})
        .traits(kTraitElementwise | kTraitInPlace)
        // The gradient passes where min < x < max: at a bound it is 0, as PyTorch's (2.x) is, and
        // as hardtanh's and relu's are.
        .grad(detail::one_output_rule([](const std::vector<Tensor>& in, const Tensor&,
                                         const Attrs& attrs, const Tensor& g) {
          const Tensor& x = in[0];
          if (!detail::differentiable(x)) return std::vector<Tensor>{Tensor()};
          Tensor inside;  // min < x < max
          const auto require = [&inside](const Tensor& ok) {
            inside = inside.defined() ? logical_and(inside, ok) : ok;
          };
          if (!attrs.is_none("min")) require(gt(x, Tensor::scalar(attrs.get<Scalar>("min"))));
          if (!attrs.is_none("max")) require(lt(x, Tensor::scalar(attrs.get<Scalar>("max"))));
          return std::vector<Tensor>{to(where(inside, g, Tensor::scalar(0.0)), x.dtype())};
        }))
        .doc(
            "min(max(x, min), max); either bound may be None (not both). The bounds are weak "
            "scalars: an integer tensor with a float bound gives the default floating dtype, as in "
            "PyTorch")
        .infer([](const InferContext& ctx) {
          KILN_CHECK_VALUE(!ctx.attrs.is_none("min") || !ctx.attrs.is_none("max"))
              << "Clamp: expected at least one of min and max, got neither";
          const DType dtype = result_type(
              {ctx.input(0), bound_meta(ctx.attrs, "min"), bound_meta(ctx.attrs, "max")});
          return MetaList{{dtype, ctx.input(0).shape}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const Tensor x = as_dtype(ctx.inputs[0], out.dtype());
          visit_types<kAllTypes>(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            using C = compute_t<T>;
            const ClampFn<C> f{bound_as<C>(ctx.attrs, "min", false),
                               bound_as<C>(ctx.attrs, "max", true)};
            launch_unary<T, T>(out, x, f, kNoSimdUnary);
          });
        }));

/// polygamma(n, x) for the n of the call.
struct PolygammaFn {
  int64_t n;
  template <typename C>
  C operator()(C x) const {
    return C(polygamma_value(n, x));
  }
};

KILN_REGISTER_OP(
    OpDef("Polygamma")
        .input("x")
        .attr("n", AttrKind::kInt)
        .traits(kTraitElementwise | kTraitInPlace)
        .grad(detail::one_output_rule([](const std::vector<Tensor>& in, const Tensor&,
                                         const Attrs& attrs, const Tensor& g) {
          const Tensor& x = in[0];
          if (!detail::differentiable(x)) return std::vector<Tensor>{Tensor()};
          return std::vector<Tensor>{to(g * polygamma(attrs.get<int64_t>("n") + 1, x), x.dtype())};
        }))
        .doc("the n-th derivative of digamma (n >= 0; n = 0 is digamma): (-1)^(n+1) n! "
             "zeta(n + 1, x) with the Hurwitz zeta function; at 0 and the negative integers inf "
             "for odd n and -inf for even n")
        .infer([](const InferContext& ctx) {
          const int64_t n = ctx.attrs.get<int64_t>("n");
          KILN_CHECK_VALUE(n >= 0) << "Polygamma: expected n >= 0, got " << n;
          const TensorMeta& x = ctx.input(0);
          return single_output(unary_result_dtype("Polygamma", UnaryRule::kFloating, x.dtype),
                               x.shape);
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          Tensor converted;
          const Tensor& x = as_dtype(ctx.inputs[0], out.dtype(), converted);
          const PolygammaFn f{ctx.attrs.get<int64_t>("n")};
          visit_types<kFloatTypes>(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            launch_unary<T, T>(out, x, f, kNoSimdUnary);
          });
        }));

}  // namespace
}  // namespace elementwise

#define KILN_UNARY_FUNCTION(name, Prim, rule, simd_op, expr, dx, doc) \
  Tensor name(const Tensor& x, const Tensor& out) {                   \
    static const OpDefPtr op = OpRegistry::Instance().get(#Prim);     \
    return elementwise::call_elementwise(*op, {x}, out);              \
  }
KILN_UNARY_OPS(KILN_UNARY_FUNCTION)
#undef KILN_UNARY_FUNCTION
#undef KILN_UNARY_OPS

Tensor gelu(const Tensor& x, const std::string& approximate, const Tensor& out) {
  static const OpDefPtr op = OpRegistry::Instance().get("Gelu");
  return elementwise::call_elementwise(*op, {x}, out, {{"approximate", approximate}});
}

Tensor polygamma(int64_t n, const Tensor& x, const Tensor& out) {
  static const OpDefPtr op = OpRegistry::Instance().get("Polygamma");
  return elementwise::call_elementwise(*op, {x}, out, {{"n", n}});
}

Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi,
             const Tensor& out) {
  static const OpDefPtr op = OpRegistry::Instance().get("Clamp");
  Attrs attrs;
  if (lo) attrs.set("min", *lo);
  if (hi) attrs.set("max", *hi);
  return elementwise::call_elementwise(*op, {x}, out, attrs);
}

}  // namespace kiln
