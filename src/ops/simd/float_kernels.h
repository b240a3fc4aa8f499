// Vectorised kernels over contiguous float32/float64 runs, and float16/bfloat16 runs computed in
// float32 (private to libkiln).
//
// The elementwise, reduction and normalisation ops call these on their innermost contiguous runs
// after they have resolved strides, broadcasting and threading. Each call is single-threaded and
// picks the best instruction set of the running CPU once per process (Google Highway dynamic
// dispatch over SSE4 / AVX2 / AVX-512; see Note [SIMD target set] in highway_targets.h).
//
//   std::vector<float> x(n), y(n);
//   kiln::simd::unary(kiln::simd::UnaryOp::kExp, x.data(), y.data(), n);
//   float total = kiln::simd::reduce_sum(x.data(), n);
//
// Common contract for every function here:
//   - n >= 0; n == 0 is a no-op (reductions then return their identity, see below).
//   - Pointers need only element alignment. Inputs and outputs either alias exactly (same pointer,
//     in-place) or do not overlap at all; partial overlap is undefined.
//   - Thread-safe: no shared mutable state besides Highway's one-time CPU detection.
//   - No errors are raised: invalid inputs give IEEE results (nan, inf), as numpy does.
//
// Accuracy against a correctly rounded result is documented per op in unary_kernels.cc (and next
// to the other kernels); every bound holds on all compiled targets.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/export.h"

namespace kiln::simd {

/// Elementwise unary operations. Semantics follow numpy/torch where they differ from C:
/// kSign(+-0) = +0 and kSign(nan) = nan; kRelu(nan) = nan; kRound rounds half to even;
/// kSqrt/kLog of negative numbers give nan; kRsqrt(x) = 1 / sqrt(x).
enum class UnaryOp : int {
  kNeg,
  kAbs,
  kSign,
  kExp,
  kExpm1,
  kLog,
  kLog1p,
  kLog2,
  kSqrt,
  kRsqrt,
  kReciprocal,
  kSquare,
  kSin,
  kCos,
  kTan,
  kTanh,
  kSigmoid,
  kRelu,
  kGeluErf,   ///< 0.5 * x * (1 + erf(x / sqrt(2)))
  kGeluTanh,  ///< 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
  kSilu,      ///< x * sigmoid(x)
  kErf,
  kFloor,
  kCeil,
  kRound,   ///< round half to even, like numpy.round / torch.round
  kTrunc,   ///< toward zero (the sign kept: trunc(-0.5) = -0)
  kErfinv,  ///< the inverse error function: +-inf at +-1, nan outside [-1, 1]
};

/// Elementwise binary operations. kMaximum / kMinimum propagate nan (numpy.maximum, not fmax);
/// kPow follows std::pow (negative base with an integral exponent is fine, pow(x, 0) = 1, ...).
/// The backward ops take a = the output gradient g and b = the forward's result y (relu's: its
/// input x), and round each step as written.
enum class BinaryOp : int {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMaximum,
  kMinimum,
  kPow,
  kFloorDivide,      ///< Python's a // b (rounds toward -inf; a / b where b == 0)
  kRemainder,        ///< Python's a % b (the sign of b)
  kTruncDivide,      ///< a / b rounded toward zero (C's integer division)
  kSigmoidBackward,  ///< g * (y * (1 - y)), y = sigmoid(x)
  kTanhBackward,     ///< g * ((1 - y) * (1 + y)), y = tanh(x)
  kReluBackward,     ///< x <= 0 ? 0 : g (b is relu's input x, not its result; NaN passes g)
  kSiluBackward,     ///< g * s (1 + x (1 - s)), s = sigmoid(x) (b is silu's input x); 1 or 0 at
                     ///< x = +inf or -inf
};

/// How a kernel writes its output. kStream uses non-temporal stores, which bypass the caches
/// and skip reading each output line before overwriting it: for outputs too large to be read back
/// from cache (Note [streaming stores] in simd_loops-inl.h). The values written are the same (the
/// payload of a nan aside).
enum class Store : int { kCached, kStream };

/// The store mode for an op that writes `bytes` of output in total: kStream when that is more
/// than half the last-level cache (32 MiB where its size is unknown). Thread-safe.
KILN_API Store store_for_output(int64_t bytes);

/// y[i] = op(x[i]) for i in [0, n). x and y may alias exactly (in-place).
KILN_API void unary(UnaryOp op, const float* x, float* y, int64_t n, Store store = Store::kCached);
/// Float64 overload of unary().
KILN_API void unary(UnaryOp op, const double* x, double* y, int64_t n,
                    Store store = Store::kCached);
/// Scalar steps that unary() applies to each element before its op, in the same pass: the
/// `x * 2 + 1` of gelu(x * 2 + 1). A step is v = v op s, or s op v (`scalar_first`), for a
/// BinaryOp that one IEEE operation computes (takes()), rounded on its own as binary_scalar_rhs /
/// binary_scalar_lhs round it: so unary(op, steps, x, y, n) writes the values those calls followed
/// by unary(op, ...) write (nan payloads aside), reading x from memory once instead of once per
/// step. That holds on x86 in the default floating-point environment (round to nearest, subnormals
/// kept): a multiply runs as v * s + (-0), which is v * s exactly there.
template <typename T>
class ScalarSteps {
 public:
  static constexpr int kMax = 4;

  /// Appends v = v op scalar (scalar op v when scalar_first). Returns false, changing nothing,
  /// when `op` is not a step (takes(op) is false) or the steps are full (a multiply followed by an
  /// add or a subtraction of the scalar takes one).
  bool push(BinaryOp op, T scalar, bool scalar_first) {
    Step next;
    switch (op) {
      case BinaryOp::kAdd:  // v * 1 is v exactly
        next = {Kind::kAffine, T(1), scalar};
        break;
      case BinaryOp::kSub:  // v - s is v + (-s) exactly; s - v is (-v) + s
        next =
            scalar_first ? Step{Kind::kAffine, T(-1), scalar} : Step{Kind::kAffine, T(1), -scalar};
        break;
      case BinaryOp::kMul:  // x + (-0) is x exactly, whatever x is
        next = {Kind::kAffine, scalar, -T(0)};
        break;
      case BinaryOp::kDiv:
        next = {Kind::kDivide, T(1), scalar, scalar_first};
        break;
      case BinaryOp::kMaximum:  // the operand order picks the sign of a zero result
        next = {Kind::kMaximum, T(1), scalar, scalar_first};
        break;
      case BinaryOp::kMinimum:
        next = {Kind::kMinimum, T(1), scalar, scalar_first};
        break;
      case BinaryOp::kPow:
      case BinaryOp::kFloorDivide:
      case BinaryOp::kRemainder:
      case BinaryOp::kTruncDivide:
      case BinaryOp::kSigmoidBackward:
      case BinaryOp::kTanhBackward:
      case BinaryOp::kReluBackward:
      case BinaryOp::kSiluBackward:
        return false;
    }
    // v * m + (-0) + s is v * m + s exactly: an add after a step that adds nothing joins it.
    if (count_ > 0 && adds_nothing(step_[count_ - 1]) && next.kind == Kind::kAffine &&
        next.scale == T(1)) {
      step_[count_ - 1].offset = next.offset;
      return true;
    }
    if (count_ == kMax) return false;
    step_[count_++] = next;
    return true;
  }

  /// Whether `op` with a scalar operand can be a step: the ops one IEEE operation computes.
  static constexpr bool takes(BinaryOp op) {
    return op == BinaryOp::kAdd || op == BinaryOp::kSub || op == BinaryOp::kMul ||
           op == BinaryOp::kDiv || op == BinaryOp::kMaximum || op == BinaryOp::kMinimum;
  }

  bool empty() const { return count_ == 0; }
  void clear() { count_ = 0; }

  /// How the kernels run the steps: kAffine is v * scale + offset with two roundings (never
  /// fused); the others are their op of v and `offset`, which holds the scalar (offset op v when
  /// scalar_first).
  enum class Kind : uint8_t { kAffine, kDivide, kMaximum, kMinimum };
  struct Step {
    Kind kind = Kind::kAffine;
    T scale = T(1);
    T offset = T(0);
    bool scalar_first = false;
  };
  int size() const { return count_; }
  const Step& operator[](int k) const { return step_[k]; }

 private:
  static bool adds_nothing(const Step& s) {
    return s.kind == Kind::kAffine && s.offset == T(0) && std::signbit(s.offset);
  }

  Step step_[kMax];
  int count_ = 0;
};

/// y[i] = op(steps(x[i])) for i in [0, n) (see ScalarSteps). x and y may alias exactly.
KILN_API void unary(UnaryOp op, const ScalarSteps<float>& steps, const float* x, float* y,
                    int64_t n, Store store = Store::kCached);
/// Float64 overload of unary() with steps.
KILN_API void unary(UnaryOp op, const ScalarSteps<double>& steps, const double* x, double* y,
                    int64_t n, Store store = Store::kCached);

/// unary() on float16 runs, in one pass: each element widened to float, op'd as the float32
/// unary() does, and rounded to nearest even once: the bits of unary() on the widened run followed
/// by narrow_run (Note [16-bit runs in float vectors] in simd_loops-inl.h). kNeg and kAbs flip or
/// clear the sign bit instead: the same bits, except that a signaling NaN stays signaling. x and y
/// may alias exactly.
KILN_API void unary(UnaryOp op, const Half* x, Half* y, int64_t n);
/// The bit kNeg flips and kAbs clears in a float16 or bfloat16 value (both keep the sign on top).
inline constexpr uint16_t kSignBit16 = 0x8000;
/// bfloat16 overload of the 16-bit unary().
KILN_API void unary(UnaryOp op, const BFloat16* x, BFloat16* y, int64_t n);

/// y[i] = g[i] * gelu'(x[i]) for gelu's erf form, gelu'(x) = Phi(x) + x phi(x) (the standard
/// normal CDF and density), for i in [0, n); y may alias g or x exactly. float32 within 4e-7 of
/// max(|g gelu'(x)|, |g|) (tests/cpp/ops/simd_float_kernels_test.cc); float64 lane by lane with
/// std::erfc and std::exp.
KILN_API void gelu_backward(const float* g, const float* x, float* y, int64_t n);
/// Float64 overload of gelu_backward().
KILN_API void gelu_backward(const double* g, const double* x, double* y, int64_t n);
/// y[i] = g[i] * gelu'(x[i]) for gelu's tanh form (UnaryOp::kGeluTanh), computed as
/// s (1 + 2 x (1 - s) u') with s = sigmoid(2u), so nothing cancels; y may alias g or x exactly.
/// float64 lane by lane with std::exp.
KILN_API void gelu_tanh_backward(const float* g, const float* x, float* y, int64_t n);
/// Float64 overload of gelu_tanh_backward().
KILN_API void gelu_tanh_backward(const double* g, const double* x, double* y, int64_t n);

/// y[i] = op(a[i], b[i]) for i in [0, n). Any of a, b, y may alias exactly.
KILN_API void binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n);
/// Float64 overload of binary().
KILN_API void binary(BinaryOp op, const double* a, const double* b, double* y, int64_t n);

/// y[i] = op(a[i], b): the right operand is a broadcast scalar. a and y may alias exactly.
/// kPow has correctly rounded fast paths for b in {0, 0.5, 1, 2, -1} (std::pow's special cases
/// included).
KILN_API void binary_scalar_rhs(BinaryOp op, const float* a, float b, float* y, int64_t n);
/// Float64 overload of binary_scalar_rhs().
KILN_API void binary_scalar_rhs(BinaryOp op, const double* a, double b, double* y, int64_t n);
/// y[i] = op(a, b[i]): the left operand is a broadcast scalar. b and y may alias exactly.
KILN_API void binary_scalar_lhs(BinaryOp op, float a, const float* b, float* y, int64_t n);
/// Float64 overload of binary_scalar_lhs().
KILN_API void binary_scalar_lhs(BinaryOp op, double a, const double* b, double* y, int64_t n);
/// binary() and its scalar forms on float16 / bfloat16 runs, in one pass: a null a (b) stands for
/// the scalar sa (sb), given as float. Each element is widened to float, op'd as the float32
/// binary() does, and rounded to nearest even once: the bits of binary() on the widened runs
/// followed by narrow_run, but for which payload a NaN op NaN carries (Note [16-bit runs in float
/// vectors] in simd_loops-inl.h). Any of a, b, y
/// may alias exactly. Returns false, writing nothing, for kPow (whose float32 fast paths work on
/// float runs): the caller then converts through float buffers.
KILN_API bool binary(BinaryOp op, const Half* a, float sa, const Half* b, float sb, Half* y,
                     int64_t n);
/// bfloat16 overload of the 16-bit binary().
KILN_API bool binary(BinaryOp op, const BFloat16* a, float sa, const BFloat16* b, float sb,
                     BFloat16* y, int64_t n);
/// acc[i] += float(x[i]), the float16 elements widened in registers: a float16 row added into a
/// float32 accumulator row (column sums). x and acc do not overlap.
KILN_API void accumulate(const Half* x, float* acc, int64_t n);
/// y[i] = x[i] * scale where keep[i], else +0: Dropout's forward on x, its backward on the
/// gradient. x and y may alias exactly.
KILN_API void masked_scale(const float* x, const bool* keep, float scale, float* y, int64_t n);
/// Float64 overload of masked_scale().
KILN_API void masked_scale(const double* x, const bool* keep, double scale, double* y, int64_t n);

/// Sum of x[0..n). Blocked: vector accumulators over short blocks, block sums combined in float64
/// with Neumaier compensation, so the error is far below that of numpy's pairwise sum (see
/// Note [blocked summation] in reduce_kernels.cc). Returns 0 for n == 0.
KILN_API float reduce_sum(const float* x, int64_t n);
/// Float64 overload of reduce_sum().
KILN_API double reduce_sum(const double* x, int64_t n);
/// Sum of a float16 run, in float64: the elements widened in registers and summed in float
/// vectors, blocked as the float32 reduce_sum is.
KILN_API double reduce_sum(const Half* x, int64_t n);
/// bfloat16 overload of the 16-bit reduce_sum(). Where a float block sum overflows (bfloat16 has
/// float's range) and the float64 sum would not, the run is added again in float64.
KILN_API double reduce_sum(const BFloat16* x, int64_t n);
/// Largest element; nan if any element is nan (like numpy.max). Returns -inf for n == 0.
KILN_API float reduce_max(const float* x, int64_t n);
/// Float64 overload of reduce_max().
KILN_API double reduce_max(const double* x, int64_t n);
/// Smallest element; nan if any element is nan (like numpy.min). Returns +inf for n == 0.
KILN_API float reduce_min(const float* x, int64_t n);
/// Float64 overload of reduce_min().
KILN_API double reduce_min(const double* x, int64_t n);

/// y = softmax(x) over one contiguous row: exp(x - max(x)) / sum. x and y may alias exactly.
/// A row containing nan, or +inf, or only -inf gives all nan (as torch does).
KILN_API void softmax_row(const float* x, float* y, int64_t n, Store store = Store::kCached);
/// Float64 overload of softmax_row().
KILN_API void softmax_row(const double* x, double* y, int64_t n, Store store = Store::kCached);
/// y = log_softmax(x) = x - max - log(sum(exp(x - max))). x and y may alias exactly.
KILN_API void log_softmax_row(const float* x, float* y, int64_t n, Store store = Store::kCached);
/// Float64 overload of log_softmax_row().
KILN_API void log_softmax_row(const double* x, double* y, int64_t n, Store store = Store::kCached);
/// y = (x - mean) * rstd * gamma + beta with rstd = 1 / sqrt(biased_var + eps), over one row.
/// gamma and beta may be null (treated as 1 and 0). If mean_out / rstd_out are not null they
/// receive the row statistics (for the backward pass). Statistics are accumulated in float64 with
/// two passes (no catastrophic cancellation). For n == 0 the statistics are nan. x and y may alias.
KILN_API void layer_norm_row(const float* x, const float* gamma, const float* beta, float eps,
                             float* y, int64_t n, float* mean_out, float* rstd_out,
                             Store store = Store::kCached);
/// Float64 overload of layer_norm_row().
KILN_API void layer_norm_row(const double* x, const double* gamma, const double* beta, double eps,
                             double* y, int64_t n, double* mean_out, double* rstd_out,
                             Store store = Store::kCached);
/// layer_norm_row on a float16 row, computed in float with gamma, beta and the statistics in float:
/// each element widened in registers and the result rounded to nearest even once, as layer_norm_row
/// on the widened row followed by narrow_run gives (Note [16-bit runs in float vectors] in
/// simd_loops-inl.h). x and y may alias. The row is written through the cache whatever `store`
/// asks (a hint, as everywhere).
KILN_API void layer_norm_row(const Half* x, const float* gamma, const float* beta, float eps,
                             Half* y, int64_t n, float* mean_out, float* rstd_out,
                             Store store = Store::kCached);
/// bfloat16 overload of the 16-bit layer_norm_row().
KILN_API void layer_norm_row(const BFloat16* x, const float* gamma, const float* beta, float eps,
                             BFloat16* y, int64_t n, float* mean_out, float* rstd_out,
                             Store store = Store::kCached);
/// y = x / sqrt(mean(x^2) + eps) * gamma over one row; gamma may be null. x and y may alias.
KILN_API void rms_norm_row(const float* x, const float* gamma, float eps, float* y, int64_t n,
                           Store store = Store::kCached);
/// Float64 overload of rms_norm_row().
KILN_API void rms_norm_row(const double* x, const double* gamma, double eps, double* y, int64_t n,
                           Store store = Store::kCached);
/// rms_norm_row on a float16 row (computed in float, as the 16-bit layer_norm_row).
KILN_API void rms_norm_row(const Half* x, const float* gamma, float eps, Half* y, int64_t n,
                           Store store = Store::kCached);
/// bfloat16 overload of the 16-bit rms_norm_row().
KILN_API void rms_norm_row(const BFloat16* x, const float* gamma, float eps, BFloat16* y, int64_t n,
                           Store store = Store::kCached);
/// Testing hook: names of the SIMD targets compiled into this build that this CPU can run, best
/// first, e.g. {"AVX3", "AVX2", "SSE4", "SCALAR"}. Unaffected by set_target_for_testing().
KILN_API std::vector<std::string> supported_targets();

/// Testing hook: makes every kernel above dispatch to `name` (one of supported_targets()), or to
/// the best target again for "". Process-wide (it also affects other Highway users) and not
/// thread-safe against concurrent kernel calls. Throws std::invalid_argument for another name.
KILN_API void set_target_for_testing(const std::string& name);

}  // namespace kiln::simd
