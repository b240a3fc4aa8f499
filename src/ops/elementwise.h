// The machinery of the elementwise op family (private to libkiln): dtype rules, the scalar math
// of integer and floating ops, the inner loops (Highway kernels where they apply, templated
// functors elsewhere) and the OpDef factories that the family files fill from their op tables.
//
//   struct ExpFn { template <typename C> auto operator()(C x) const { return std::exp(x); } };
//   KILN_REGISTER_OP(unary_def<ExpFn, UnaryRule::kFloating>("Exp", simd::UnaryOp::kExp, "e^x"));
//
// See Note [Elementwise kernels] for how an op call becomes loops.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/strided_loop.h"
#include "kiln/op.h"
#include "ops/dtype_convert.h"
#include "ops/simd/float_kernels.h"

namespace kiln::elementwise {

// Note [Elementwise kernels]
// An op's dtype rule gives two dtypes: the operand dtype (what every input is converted to) and
// the output dtype. Inputs of another dtype are converted first, into a temporary of their own
// (un-broadcast) shape, so a weak Python scalar costs a 0-d conversion and the common case
// (operands already of the operand dtype) converts nothing. Each functor is then instantiated once
// per operand type T: it computes in compute_t<T> (float for float16/bfloat16, which are loaded
// and stored with one rounding) and the result is stored as the output type.
//
// Operands are broadcast with stride-0 views and walked by StridedLoop, which merges contiguous
// dimensions (a contiguous problem of any rank is one flat run) and splits the work across the
// intra-op pool in chunks of kElementwiseGrain. Each run picks the fastest loop its strides allow:
// the Highway kernels of ops/simd/float_kernels.h for float32/float64 runs that are contiguous
// or hold a broadcast scalar, a contiguous typed loop (auto-vectorised) otherwise, and a strided
// loop for everything else (a unary float32/float64 op with a kernel gathers a strided run into
// blocks for it, so its values never depend on the layout). So a contiguous float add into a
// preallocated `out` is one parallel_for over simd::binary, with no conversion, copy or allocation.
//
// float16 and bfloat16 runs go through float32 (run_through_float): blocks of 1024 elements are
// widened into buffers on the stack (F16C for float16 on x86; core/float16_runs.h), the float32
// run computes them, Highway kernels included, and the block is rounded once into the output.
// A loop converting element by element ran a float16 add of 1M elements in 7 ms (0.03x
// PyTorch); in blocks it takes 0.3 ms.

/// Sentinels for ops that have no Highway kernel.
inline constexpr simd::UnaryOp kNoSimdUnary = static_cast<simd::UnaryOp>(-1);
inline constexpr simd::BinaryOp kNoSimdBinary = static_cast<simd::BinaryOp>(-1);

/// How a unary op's dtypes follow from its input's.
enum class UnaryRule {
  kSame,        // output = input dtype, bool included (abs, floor, relu, ...)
  kSameNoBool,  // output = input dtype, bool rejected (neg)
  kFloating,    // operand and output = to_floating(input) (exp, sqrt, sigmoid, ...)
  kPredicate,   // operand = input dtype, output bool (logical_not)
  kIntegral,    // output = input dtype, integers and bool only (bitwise_not)
};

/// How a binary op's dtypes follow from result_type() of its operands.
enum class BinaryRule {
  kPromote,         // output = result_type, bool included (add, mul, maximum, minimum)
  kPromoteNoBool,   // output = result_type, bool rejected (sub, floor_divide, remainder, pow)
  kFloating,        // operand and output = to_floating(result_type) (div)
  kPredicate,       // operand = result_type, output bool (comparisons, logical ops)
  kIntegral,        // output = result_type, integers and bool only (bitwise and / or / xor)
  kIntegralNoBool,  // output = result_type, integers only (shifts)
};

/// Checks a binary op makes on its right operand before computing anything.
enum class OperandCheck {
  kNone,
  kNonzeroIntDivisor,       // integer division by zero is an error, not a crash
  kNonnegativeIntExponent,  // integers to negative integer powers are an error (as in NumPy)
  kNumberFits,  // a Python int beside an integer tensor must fit its dtype (checked by the call)
};

// ---- element types ----------------------------------------------------------------------------

enum TypeSet : unsigned { kBoolType = 1u, kIntTypes = 2u, kFloatTypes = 4u, kAllTypes = 7u };

template <typename T>
constexpr unsigned type_set_of() {
  if constexpr (std::is_same_v<T, bool>) {
    return kBoolType;
  } else if constexpr (std::is_integral_v<T>) {
    return kIntTypes;
  } else {
    return kFloatTypes;
  }
}

/// The arithmetic type of an element type: float for the 16-bit floats, the type itself otherwise.
template <typename T>
using compute_t =
    std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <typename T>
constexpr bool kIsSimdFloat = std::is_same_v<T, float> || std::is_same_v<T, double>;

/// Calls f(TypeTag<T>{}) for `dtype`, instantiated only for the types in `Set` (the dtype rules
/// guarantee that no other dtype reaches a kernel).
template <unsigned Set, typename F>
void visit_types(DType dtype, F&& f) {
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr ((type_set_of<T>() & Set) != 0) {
      f(tag);
    } else {
      KILN_ASSERT(false) << "elementwise kernel reached with dtype " << dtype;
    }
  });
}

constexpr unsigned types_of(UnaryRule rule) {
  switch (rule) {
    case UnaryRule::kFloating:
      return kFloatTypes;
    case UnaryRule::kSameNoBool:
      return kIntTypes | kFloatTypes;
    case UnaryRule::kIntegral:
      return kIntTypes | kBoolType;
    default:
      return kAllTypes;
  }
}
constexpr unsigned types_of(BinaryRule rule) {
  switch (rule) {
    case BinaryRule::kFloating:
      return kFloatTypes;
    case BinaryRule::kPromoteNoBool:
      return kIntTypes | kFloatTypes;
    case BinaryRule::kIntegral:
      return kIntTypes | kBoolType;
    case BinaryRule::kIntegralNoBool:
      return kIntTypes;
    default:
      return kAllTypes;
  }
}

// ---- scalar math shared by the op tables --------------------------------------------------------
// Integer arithmetic wraps around (as NumPy and PyTorch do) without signed overflow: it runs in an
// unsigned type at least as wide as unsigned int, so that narrow types do not promote to int.

template <typename C>
using wide_unsigned_t =
    std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;

template <typename C>
C wrapping_add(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) {
    return a || b;
  } else if constexpr (std::is_integral_v<C>) {
    using W = wide_unsigned_t<C>;
    return static_cast<C>(static_cast<W>(a) + static_cast<W>(b));
  } else {
    return a + b;
  }
}

template <typename C>
C wrapping_sub(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using W = wide_unsigned_t<C>;
    return static_cast<C>(static_cast<W>(a) - static_cast<W>(b));
  } else {
    return a - b;
  }
}

template <typename C>
C wrapping_mul(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) {
    return a && b;
  } else if constexpr (std::is_integral_v<C>) {
    using W = wide_unsigned_t<C>;
    return static_cast<C>(static_cast<W>(a) * static_cast<W>(b));
  } else {
    return a * b;
  }
}

template <typename C>
C wrapping_neg(C x) {
  if constexpr (std::is_integral_v<C>) {
    return wrapping_sub(C(0), x);
  } else {
    return -x;  // flips the sign bit, of zeros too (0 - x would give +0 for +0), as hn::Neg does
  }
}

template <typename C>
C abs_value(C x) {
  if constexpr (std::is_same_v<C, bool> || std::is_unsigned_v<C>) {
    return x;
  } else if constexpr (std::is_integral_v<C>) {
    return x < 0 ? wrapping_neg(x) : x;
  } else {
    return std::abs(x);
  }
}

/// -1, 0 or 1; sign(+-0) = +0 and sign(nan) = nan, as numpy.
template <typename C>
C sign_value(C x) {
  if constexpr (std::is_same_v<C, bool> || std::is_unsigned_v<C>) {
    return static_cast<C>(x > 0);
  } else if constexpr (std::is_integral_v<C>) {
    return static_cast<C>((x > 0) - (x < 0));
  } else {
    return x > 0 ? C(1) : (x < 0 ? C(-1) : (x == x ? C(0) : x));
  }
}

/// max(x, 0) with nan kept.
template <typename C>
C relu_value(C x) {
  if constexpr (std::is_same_v<C, bool> || std::is_unsigned_v<C>) {
    return x;
  } else {
    return x < C(0) ? C(0) : x;
  }
}

/// floor / ceil / round-half-to-even; identities on integers and bools.
template <typename C>
C floor_value(C x) {
  if constexpr (std::is_integral_v<C>) {
    return x;
  } else {
    return std::floor(x);
  }
}
template <typename C>
C ceil_value(C x) {
  if constexpr (std::is_integral_v<C>) {
    return x;
  } else {
    return std::ceil(x);
  }
}
template <typename C>
C trunc_value(C x) {
  if constexpr (std::is_integral_v<C>) {
    return x;
  } else {
    return std::trunc(x);
  }
}
template <typename C>
C round_value(C x) {
  if constexpr (std::is_integral_v<C>) {
    return x;
  } else {
    return std::nearbyint(x);  // the default rounding mode: to nearest, ties to even
  }
}

/// numpy.maximum / minimum: nan if either operand is nan.
template <typename C>
C maximum_value(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a || b != b) return a + b;
  }
  return a > b ? a : b;
}
template <typename C>
C minimum_value(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a || b != b) return a + b;
  }
  return a < b ? a : b;
}

/// d silu / dx = s (1 + x (1 - s)) with s = sigmoid(x), both s and 1 - s from e = exp(-|x|) as
/// the SIMD kernel's silu_grad (so strided and contiguous operands agree): 1 at +inf, 0 at -inf.
template <typename C>
C silu_derivative_value(C x) {
  if (std::isinf(x)) return x > C(0) ? C(1) : C(0);
  const C e = std::exp(-std::abs(x));
  const C s = (x >= C(0) ? C(1) : e) / (C(1) + e);
  const C rest = (x >= C(0) ? e : C(1)) / (C(1) + e);
  return s * (C(1) + x * rest);
}

template <typename C>
bool truthy(C x) {
  return x != C(0);
}

/// Python's a // b (rounds toward -inf). Integers: b != 0 is checked before the kernel runs;
/// b == -1 is a wrapping negation (INT_MIN // -1 would overflow). Floats: NumPy's npy_divmod.
template <typename C>
C floor_divide_value(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    if constexpr (std::is_signed_v<C>) {
      if (b == C(-1)) return wrapping_neg(a);
      C q = static_cast<C>(a / b);
      if (a % b != 0 && ((a < 0) != (b < 0))) --q;
      return q;
    } else {
      return static_cast<C>(a / b);
    }
  } else {
    if (b == C(0)) return a / b;
    const C mod = std::fmod(a, b);
    C div = (a - mod) / b;
    if (mod != C(0) && ((b < C(0)) != (mod < C(0)))) div -= C(1);
    if (div == C(0)) return std::copysign(C(0), a / b);
    C floordiv = std::floor(div);
    if (div - floordiv > C(0.5)) floordiv += C(1);  // snap to the nearest integral value
    return floordiv;
  }
}

/// a / b rounded toward zero (PyTorch's div(rounding_mode="trunc")). Integers: C's division, b != 0
/// checked before the kernel runs, b == -1 a wrapping negation as floor_divide_value's. Floats:
/// the quotient, rounded once, truncated.
template <typename C>
C trunc_divide_value(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    if constexpr (std::is_signed_v<C>) {
      if (b == C(-1)) return wrapping_neg(a);
    }
    return static_cast<C>(a / b);
  } else {
    return std::trunc(a / b);
  }
}

/// Python's a % b (the sign of the divisor). Integers: b != 0 is checked first.
template <typename C>
C remainder_value(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    if constexpr (std::is_signed_v<C>) {
      if (b == C(-1)) return C(0);
      C r = static_cast<C>(a % b);
      if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
      return r;
    } else {
      return static_cast<C>(a % b);
    }
  } else {
    C mod = std::fmod(a, b);
    if (b == C(0)) return mod;
    if (mod != C(0)) {
      if ((b < C(0)) != (mod < C(0))) mod += b;
    } else {
      mod = std::copysign(C(0), b);
    }
    return mod;
  }
}

/// a ** b. Integers: exponentiation by squaring, wrapping; b >= 0 is checked first.
template <typename C>
C power_value(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using W = wide_unsigned_t<C>;
    W result = 1;
    W base = static_cast<W>(a);
    for (auto e = static_cast<std::make_unsigned_t<C>>(b); e != 0; e >>= 1) {
      if (e & 1u) result = static_cast<W>(result * base);
      base = static_cast<W>(base * base);
    }
    return static_cast<C>(result);
  } else {
    return std::pow(a, b);
  }
}

// ---- operands -----------------------------------------------------------------------------------

/// `x` viewed with the output's shape (stride 0 in broadcast dimensions).
inline Tensor broadcast_operand(const Tensor& x, const Shape& shape) {
  return x.shape() == shape ? x : x.expand(shape);
}

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void store(char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

/// The output list call_op takes for an optional `out`.
inline std::vector<Tensor> out_list(const Tensor& out) {
  return out.defined() ? std::vector<Tensor>{out} : std::vector<Tensor>{};
}

/// Runs `op` on `inputs`, writing into `out` when it is defined.
inline Tensor call_elementwise(const OpDef& op, TensorSpan inputs, const Tensor& out,
                               const Attrs& attrs = {}) {
  return std::move(call_op(op, inputs, attrs, out_list(out))[0]);
}

// ---- inner loops ------------------------------------------------------------------------------

/// The element type run_through_float's float run writes for an output of type O: float for a
/// 16-bit float output T, O itself (bool) for a predicate.
template <typename T, typename O>
using float_result_t = std::conditional_t<std::is_same_v<O, T>, float, O>;

/// Runs `float_run` (an inner loop over float operands) on a run of N - 1 float16 / bfloat16
/// operands p[1..] and an output p[0] of type O (the same 16-bit type, or bool): block by block,
/// the operands widened into float buffers (a broadcast one, stride 0, stays one element so that
/// the scalar-operand kernels apply) and the float (or bool) results stored into the output. So
/// every 16-bit op runs the float32 kernels, Highway's included, with one rounding at the store.
/// Contiguous runs of the ops with SIMD kernels skip the buffers: simd::unary and simd::binary
/// convert in registers, to the same bits (Note [16-bit runs in float vectors]). Operand
/// `FloatScalar` (0 for none) is one float already (Note [Scalars of 16-bit ops]).
template <typename T, typename O, int N, int FloatScalar = 0, typename FloatRun>
void run_through_float(char* const* p, const int64_t* s, int64_t n, const FloatRun& float_run) {
  constexpr int64_t kBlock = 1024;
  using ResultT = float_result_t<T, O>;
  float in[N - 1][kBlock];
  ResultT result[kBlock];
  char* block_p[N];
  int64_t block_s[N];
  block_p[0] = reinterpret_cast<char*>(result);
  block_s[0] = sizeof(ResultT);
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t m = std::min(kBlock, n - start);
    for (int k = 1; k < N; ++k) {
      if (k == FloatScalar) {
        block_p[k] = p[k];
        block_s[k] = 0;
        continue;
      }
      float* buffer = in[k - 1];
      const char* x = p[k] + start * s[k];
      block_p[k] = reinterpret_cast<char*>(buffer);
      block_s[k] = s[k] == 0 ? 0 : static_cast<int64_t>(sizeof(float));
      if (s[k] == 0) {
        buffer[0] = convert<float>(load<T>(x));
      } else if (s[k] == static_cast<int64_t>(sizeof(T))) {
        convert_contiguous(reinterpret_cast<const T*>(x), buffer, m);
      } else {
        for (int64_t i = 0; i < m; ++i) buffer[i] = convert<float>(load<T>(x + i * s[k]));
      }
    }
    float_run(block_p, block_s, m);
    char* y = p[0] + start * s[0];
    if (s[0] == static_cast<int64_t>(sizeof(O))) {
      convert_contiguous(result, reinterpret_cast<O*>(y), m);
    } else {
      for (int64_t i = 0; i < m; ++i) store<O>(y + i * s[0], convert<O>(result[i]));
    }
  }
}

/// One run of y = f(x): x has element type T, y type O; byte strides s[0] (y) and s[1] (x).
/// `out_store` is how the SIMD kernels write y (see simd::store_for_output).
template <typename T, typename O, typename F>
void unary_run(const F& f, simd::UnaryOp simd_op, simd::Store out_store, char* const* p,
               const int64_t* s, int64_t n) {
  using C = compute_t<T>;
  if constexpr (kIsFloat16<T> && std::is_same_v<O, T>) {
    // One pass in registers (Note [16-bit runs in float vectors]).
    if (simd_op != kNoSimdUnary && s[0] == sizeof(T) && s[1] == sizeof(T)) {
      return simd::unary(simd_op, reinterpret_cast<const T*>(p[1]), reinterpret_cast<T*>(p[0]), n);
    }
    if (simd_op == simd::UnaryOp::kNeg || simd_op == simd::UnaryOp::kAbs) {
      // On the sign bit, as simd::unary does for these (a signaling NaN stays signaling).
      const uint16_t sign = simd::kSignBit16;
      const uint16_t clear = simd_op == simd::UnaryOp::kAbs ? sign : 0;
      const uint16_t flip = simd_op == simd::UnaryOp::kNeg ? sign : 0;
      for (int64_t i = 0; i < n; ++i) {
        T v = load<T>(p[1] + i * s[1]);
        v.bits = static_cast<uint16_t>((v.bits & ~clear) ^ flip);
        store<T>(p[0] + i * s[0], v);
      }
      return;
    }
  }
  if constexpr (kIsFloat16<T>) {
    return run_through_float<T, O, 2>(p, s, n, [&](char* const* q, const int64_t* qs, int64_t m) {
      unary_run<float, float_result_t<T, O>>(f, simd_op, simd::Store::kCached, q, qs, m);
    });
  }
  if constexpr (kIsSimdFloat<T> && std::is_same_v<O, T>) {
    if (simd_op != kNoSimdUnary && s[0] == sizeof(T) && s[1] == sizeof(T)) {
      simd::unary(simd_op, reinterpret_cast<const T*>(p[1]), reinterpret_cast<T*>(p[0]), n,
                  out_store);
      return;
    }
    if (simd_op != kNoSimdUnary) {
      // Strided: gathered into blocks for the same kernel, so that a value does not depend on its
      // layout. (The scalar formulas of the functors differ in the last bits, and in some tails by
      // far: gelu's tanh form underflowed to -0 from x = -6, where the kernel keeps 1e-7 relative.)
      constexpr int64_t kBlock = 256;
      T in[kBlock], out[kBlock];
      for (int64_t start = 0; start < n; start += kBlock) {
        const int64_t m = std::min(kBlock, n - start);
        for (int64_t i = 0; i < m; ++i) in[i] = load<T>(p[1] + (start + i) * s[1]);
        simd::unary(simd_op, in, out, m);
        for (int64_t i = 0; i < m; ++i) store<T>(p[0] + (start + i) * s[0], out[i]);
      }
      return;
    }
  }
  if (s[0] == sizeof(O) && s[1] == sizeof(T)) {
    O* y = reinterpret_cast<O*>(p[0]);
    const T* x = reinterpret_cast<const T*>(p[1]);
    for (int64_t i = 0; i < n; ++i) y[i] = convert<O>(f(convert<C>(x[i])));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    store<O>(p[0] + i * s[0], convert<O>(f(convert<C>(load<T>(p[1] + i * s[1])))));
  }
}

/// A contiguous y = f(a, b) where an operand with `Step` false is one broadcast element.
template <typename T, typename O, bool StepA, bool StepB, typename F>
void binary_contiguous(const F& f, char* const* p, int64_t n) {
  using C = compute_t<T>;
  O* y = reinterpret_cast<O*>(p[0]);
  const T* a = reinterpret_cast<const T*>(p[1]);
  const T* b = reinterpret_cast<const T*>(p[2]);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = convert<O>(f(convert<C>(a[StepA ? i : 0]), convert<C>(b[StepB ? i : 0])));
  }
}

// Note [Scalars of 16-bit ops]
// A float16 / bfloat16 op with a number (h * 1e5, h / 1e5; a 0-d integer tensor too, where the
// promotion keeps the 16-bit dtype) computes with the number's float32 value, as PyTorch does,
// rather than its 16-bit rounding: 1e5 is inf in float16 (h * 1e5 would overflow where the
// product fits, h / 1e5 would be 0), and bfloat16's 0.1 is off in the third digit. The kernel
// converts such a 0-d operand to float32 instead of the operand dtype (float_scalar_operand) and
// instantiates the 16-bit loops with its index as FloatScalar, which read it as one float.
// Comparisons keep the number's 16-bit rounding (h == 0.1 is true for h = float16(0.1)), as
// PyTorch and NumPy do.

/// The 16-bit binary loops' view of operand k: a float scalar when k == FloatScalar, or else a
/// run of T with byte stride s[k] (one broadcast element when 0).
template <typename T, int FloatScalar>
float scalar_operand(char* const* p, int k) {
  return k == FloatScalar ? load<float>(p[k]) : static_cast<float>(load<T>(p[k]));
}

/// A run of y = op(a, b) on 16-bit floats, each operand contiguous or one broadcast element,
/// computed in one pass by simd::binary. Returns false, writing nothing, for other layouts and
/// for kPow (then run_through_float computes the same bits).
template <typename T, int FloatScalar>
bool binary_16bit_in_registers(simd::BinaryOp op, char* const* p, const int64_t* s, int64_t n) {
  constexpr int64_t kT = sizeof(T);
  const bool a_steps = FloatScalar != 1 && s[1] == kT;
  const bool b_steps = FloatScalar != 2 && s[2] == kT;
  const bool a_fixed = FloatScalar == 1 || s[1] == 0;
  const bool b_fixed = FloatScalar == 2 || s[2] == 0;
  if (s[0] != kT || !(a_steps || a_fixed) || !(b_steps || b_fixed) || !(a_steps || b_steps)) {
    return false;
  }
  const T* a = reinterpret_cast<const T*>(p[1]);
  const T* b = reinterpret_cast<const T*>(p[2]);
  return simd::binary(op, a_steps ? a : nullptr,
                      a_steps ? 0.0f : scalar_operand<T, FloatScalar>(p, 1), b_steps ? b : nullptr,
                      b_steps ? 0.0f : scalar_operand<T, FloatScalar>(p, 2),
                      reinterpret_cast<T*>(p[0]), n);
}

/// One run of y = f(a, b): a and b have element type T, y type O; byte strides s[0..2]. For a
/// 16-bit T, operand FloatScalar (1 or 2; 0 for none) is one float (Note [Scalars of 16-bit ops]).
template <typename T, typename O, int FloatScalar = 0, typename F>
void binary_run(const F& f, simd::BinaryOp simd_op, char* const* p, const int64_t* s, int64_t n) {
  static_assert(FloatScalar == 0 || kIsFloat16<T>, "only 16-bit loops take a float scalar");
  using C = compute_t<T>;
  constexpr int64_t kT = sizeof(T);
  if constexpr (kIsFloat16<T>) {
    if constexpr (std::is_same_v<O, T>) {
      if (simd_op != kNoSimdBinary && binary_16bit_in_registers<T, FloatScalar>(simd_op, p, s, n)) {
        return;
      }
    }
    return run_through_float<T, O, 3, FloatScalar>(
        p, s, n, [&](char* const* q, const int64_t* qs, int64_t m) {
          binary_run<float, float_result_t<T, O>>(f, simd_op, q, qs, m);
        });
  }
  if (s[0] == static_cast<int64_t>(sizeof(O))) {
    if constexpr (kIsSimdFloat<T> && std::is_same_v<O, T>) {
      if (simd_op != kNoSimdBinary) {
        T* y = reinterpret_cast<T*>(p[0]);
        const T* a = reinterpret_cast<const T*>(p[1]);
        const T* b = reinterpret_cast<const T*>(p[2]);
        if (s[1] == kT && s[2] == kT) return simd::binary(simd_op, a, b, y, n);
        if (s[1] == kT && s[2] == 0) return simd::binary_scalar_rhs(simd_op, a, *b, y, n);
        if (s[1] == 0 && s[2] == kT) return simd::binary_scalar_lhs(simd_op, *a, b, y, n);
      }
    }
    if (s[1] == kT && s[2] == kT) return binary_contiguous<T, O, true, true>(f, p, n);
    if (s[1] == kT && s[2] == 0) return binary_contiguous<T, O, true, false>(f, p, n);
    if (s[1] == 0 && s[2] == kT) return binary_contiguous<T, O, false, true>(f, p, n);
    if (s[1] == 0 && s[2] == 0) {  // both broadcast along the run (expand(col) * 3): one value
      const O v = convert<O>(f(convert<C>(load<T>(p[1])), convert<C>(load<T>(p[2]))));
      O* y = reinterpret_cast<O*>(p[0]);
      return std::fill(y, y + n, v);
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const C a = convert<C>(load<T>(p[1] + i * s[1]));
    const C b = convert<C>(load<T>(p[2] + i * s[2]));
    store<O>(p[0] + i * s[0], convert<O>(f(a, b)));
  }
}

/// A type-erased inner loop, so that one instantiation of StridedLoop's driver (and of the
/// parallel_for around it) serves every op and dtype; only the inner runs are per (op, type).
struct InnerLoop {
  void (*fn)(const void* functor, int simd_op, simd::Store out_store, char* const* p,
             const int64_t* s, int64_t n);
  const void* functor;
  int simd_op;
  /// How the unary SIMD kernels write the output; run_loop sets it from the output's size.
  simd::Store out_store = simd::Store::kCached;
  void operator()(char* const* p, const int64_t* s, int64_t n) const {
    fn(functor, simd_op, out_store, p, s, n);
  }
};

/// `x` broadcast to out's shape, ready for a loop writing `out`: a copy when x overlaps out other
/// than as the very same view (so that x += x.T reads x as it was, as NumPy does).
Tensor loop_operand(const Tensor& x, const Tensor& out);
/// Runs `loop` over out and x broadcast to out's shape, in parallel chunks; a large output is
/// streamed past the caches (simd::store_for_output).
void run_loop(const Tensor& out, const Tensor& x, const InnerLoop& loop);
/// Runs `loop` over out, a and b broadcast to out's shape, in parallel chunks.
void run_loop(const Tensor& out, const Tensor& a, const Tensor& b, const InnerLoop& loop);
/// out = cond ? a : b, all three broadcast to out's shape (a and b converted to out's dtype, cond
/// to bool): the kernel of Where and MaskedFill.
void run_select(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);

template <typename T, typename O, typename F>
void erased_unary_run(const void* f, int simd_op, simd::Store out_store, char* const* p,
                      const int64_t* s, int64_t n) {
  unary_run<T, O>(*static_cast<const F*>(f), static_cast<simd::UnaryOp>(simd_op), out_store, p, s,
                  n);
}

/// The binary kernels always write through the cache.
template <typename T, typename O, int FloatScalar, typename F>
void erased_binary_run(const void* f, int simd_op, simd::Store, char* const* p, const int64_t* s,
                       int64_t n) {
  binary_run<T, O, FloatScalar>(*static_cast<const F*>(f), static_cast<simd::BinaryOp>(simd_op), p,
                                s, n);
}

/// out = f(x) over the whole output; x already has element type T and out type O.
template <typename T, typename O, typename F>
void launch_unary(const Tensor& out, const Tensor& x, const F& f, simd::UnaryOp simd_op) {
  run_loop(out, x, InnerLoop{&erased_unary_run<T, O, F>, &f, static_cast<int>(simd_op)});
}

/// out = f(a, b) over the whole output; a and b already have element type T and out type O,
/// except operand FloatScalar (1 = a, 2 = b), a 0-d float32 (Note [Scalars of 16-bit ops]).
template <typename T, typename O, int FloatScalar = 0, typename F>
void launch_binary(const Tensor& out, const Tensor& a, const Tensor& b, const F& f,
                   simd::BinaryOp simd_op) {
  run_loop(out, a, b,
           InnerLoop{&erased_binary_run<T, O, FloatScalar, F>, &f, static_cast<int>(simd_op)});
}

// ---- dtype rules and OpDef factories ----------------------------------------------------------

/// The output dtype of a unary op; throws kDType naming `prim` for a bool input of kSameNoBool.
DType unary_result_dtype(const char* prim, UnaryRule rule, DType input);
/// The dtype a binary op converts its operands to (throws kDType for bool under kPromoteNoBool).
DType binary_operand_dtype(const char* prim, BinaryRule rule, const TensorMeta& a,
                           const TensorMeta& b);
/// The operand dtype of a comparison: `operand`, or int64 when a weak integer scalar among a and b
/// does not fit the integer type `operand` (so that int8 == 1000 is false, not a wrapped compare).
DType predicate_operand_dtype(DType operand, const Tensor& a, const Tensor& b);
/// Which operand of a float16 / bfloat16 op computes as a float32 scalar: 2 for b, 1 for a, when
/// it is 0-d of another dtype than `operand`; 0 for none, and for other operand dtypes (Note
/// [Scalars of 16-bit ops]).
int float_scalar_operand(DType operand, const Tensor& a, const Tensor& b);
/// Throws kValue when `b` (of operand dtype) fails `check`. `given` is b as the op was given it:
/// a Python number exponent must be non-negative and fit an integer operand dtype (uint8 ** -1
/// and uint8 ** 257 would compute with the wrapped 255 and 1), as in PyTorch and NumPy.
void check_operand(const char* prim, OperandCheck check, const Tensor& given, const Tensor& b);
/// OperandCheck::kNumberFits, checked where the op is called (so a traced call checks it too):
/// throws kValue when a or b is a Python int (a weak integer scalar) that the other operand's
/// integer dtype cannot hold; maximum(int8 x, 300) would compare with 300 wrapped to 44.
void check_number_fits(const char* prim, const Tensor& a, const Tensor& b);

/// The derivative of a unary op: the gradient of x (in y's dtype) from the input x, the output y
/// and y's gradient g, written with ops (see Note [Gradient rules] in ops/grad_util.h).
using UnaryDerivative = Tensor (*)(const Tensor& x, const Tensor& y, const Tensor& g);
/// The derivative of a binary op: the gradients of a and b in the output's shape and dtype (the
/// rule sums them to the operands' shapes and converts them to their dtypes), each computed only
/// where `needed` says (detail::differentiable; the other left undefined).
using BinaryDerivative = std::array<Tensor, 2> (*)(const Tensor& a, const Tensor& b,
                                                   const Tensor& y, const Tensor& g,
                                                   std::array<bool, 2> needed);

/// The rule of a unary op with derivative `d`: no gradient for integer and bool inputs.
GradFn unary_grad(UnaryDerivative d);
/// The rule of a binary op with derivative `d`: each operand's gradient summed over the dims it
/// was broadcast along.
GradFn binary_grad(BinaryDerivative d);

/// An elementwise unary op: functor F (a generic callable on the compute type), dtype rule R and
/// derivative `d`. Predicates (bool results) and integral ops are marked kTraitNotDifferentiable;
/// `d` is unused.
template <typename F, UnaryRule R>
OpDef unary_def(const char* prim, simd::UnaryOp simd_op, const char* doc, UnaryDerivative d) {
  OpDef def(prim);
  if constexpr (R == UnaryRule::kPredicate || R == UnaryRule::kIntegral) {
    def.traits(kTraitElementwise | kTraitInPlace | kTraitNotDifferentiable);
  } else {
    def.traits(kTraitElementwise | kTraitInPlace).grad(unary_grad(d));
  }
  return def.input("x")
      .doc(doc)
      .infer([prim](const InferContext& ctx) {
        const TensorMeta& x = ctx.input(0);
        return single_output(unary_result_dtype(prim, R, x.dtype), x.shape);
      })
      .kernel(DeviceType::kCPU, [simd_op](KernelContext& ctx) {
        const Tensor& out = ctx.outputs[0];
        const DType operand = R == UnaryRule::kPredicate ? ctx.inputs[0].dtype() : out.dtype();
        Tensor converted;
        const Tensor& x = as_dtype(ctx.inputs[0], operand, converted);
        visit_types<types_of(R)>(operand, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using O = std::conditional_t<R == UnaryRule::kPredicate, bool, T>;
          launch_unary<T, O>(out, x, F{}, simd_op);
        });
      });
}

/// An elementwise binary op with NumPy broadcasting: functor F, dtype rule R, operand check K and
/// derivative `d`. Predicates (bool results) and integral ops are marked kTraitNotDifferentiable
/// and take no `d`.
template <typename F, BinaryRule R, OperandCheck K>
OpDef binary_def(const char* prim, simd::BinaryOp simd_op, const char* doc,
                 BinaryDerivative d = nullptr) {
  OpDef def(prim);
  if constexpr (R == BinaryRule::kPredicate || R == BinaryRule::kIntegral ||
                R == BinaryRule::kIntegralNoBool) {
    def.traits(kTraitElementwise | kTraitInPlace | kTraitNotDifferentiable);
  } else {
    def.traits(kTraitElementwise | kTraitInPlace).grad(binary_grad(d));
  }
  return def.input("a")
      .input("b")
      .doc(doc)
      .infer([prim](const InferContext& ctx) {
        const TensorMeta& a = ctx.input(0);
        const TensorMeta& b = ctx.input(1);
        const DType operand = binary_operand_dtype(prim, R, a, b);
        return single_output(R == BinaryRule::kPredicate ? DType::kBool : operand,
                             broadcast_shapes(a.shape, b.shape));
      })
      .kernel(DeviceType::kCPU, [prim, simd_op](KernelContext& ctx) {
        const Tensor& out = ctx.outputs[0];
        // The output has the dtype infer gave: the operand dtype, except for predicates (bool).
        DType operand = out.dtype();
        if constexpr (R == BinaryRule::kPredicate) {
          operand = binary_operand_dtype(prim, R, TensorMeta::of(ctx.inputs[0]),
                                         TensorMeta::of(ctx.inputs[1]));
          operand = predicate_operand_dtype(operand, ctx.inputs[0], ctx.inputs[1]);
        }
        const int float_scalar = R == BinaryRule::kPredicate
                                     ? 0
                                     : float_scalar_operand(operand, ctx.inputs[0], ctx.inputs[1]);
        Tensor a_converted, b_converted;
        const Tensor& a =
            as_dtype(ctx.inputs[0], float_scalar == 1 ? DType::kFloat32 : operand, a_converted);
        const Tensor& b =
            as_dtype(ctx.inputs[1], float_scalar == 2 ? DType::kFloat32 : operand, b_converted);
        if constexpr (K != OperandCheck::kNone && K != OperandCheck::kNumberFits) {
          check_operand(prim, K, ctx.inputs[1], b);
        }
        visit_types<types_of(R)>(operand, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using O = std::conditional_t<R == BinaryRule::kPredicate, bool, T>;
          if constexpr (kIsFloat16<T> && R != BinaryRule::kPredicate) {
            if (float_scalar == 1) return launch_binary<T, O, 1>(out, a, b, F{}, simd_op);
            if (float_scalar == 2) return launch_binary<T, O, 2>(out, a, b, F{}, simd_op);
          }
          launch_binary<T, O>(out, a, b, F{}, simd_op);
        });
      });
}

}  // namespace kiln::elementwise
