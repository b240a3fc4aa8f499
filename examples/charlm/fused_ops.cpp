// fused_ops.cpp — the fused layer of examples/train_charlm.py: BiasGelu(x, b) = gelu(x + b).
//
// Full OpDefs registered with m.def_op, so the op is one kernel eagerly, a node like any built-in
// inside kiln.jit graphs (the CharLM's pattern pass rewrites gelu(x + b) into it), and trainable:
// its gradient rule calls a second fused op, BiasGeluBackward, and kiln ops (kiln/functional.h),
// so backward runs them eagerly and kiln.jit traces them into the training step's graph.
//   ops.bias_gelu(x [..., N], b [N]) -> [..., N]: 0.5 z (1 + erf(z / sqrt 2)), z = x + b;
//   ops.bias_gelu_backward(g, x, b) -> g * gelu'(x + b), gelu'(z) = Phi(z) + z phi(z);
//   float32 or float64 (float64 for kiln.testing.gradcheck).
// Built with kiln.ops.CustomOpBuilder("charlm_fused_ops", ["fused_ops.cpp"]).
#include <kiln/extension.h>
#include <kiln/functional.h>
#include <kiln/op.h>
#include <kiln/parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

// Checks BiasGelu's x and b (`op` names the op in the message); returns the result's metadata.
kiln::MetaList check_bias_gelu(const char* op, const kiln::TensorMeta& x,
                               const kiln::TensorMeta& b) {
  KILN_CHECK_DTYPE((x.dtype == kiln::DType::kFloat32 || x.dtype == kiln::DType::kFloat64) &&
                   b.dtype == x.dtype)
      << op << ": expected x and b both float32 or both float64, got " << x.dtype << " and "
      << b.dtype;
  KILN_CHECK_SHAPE(x.ndim() >= 1 && b.ndim() == 1 && b.shape[0] == x.shape.back())
      << op << ": expected x [..., N] and b [N], got " << kiln::shape_str(x.shape) << " and "
      << kiln::shape_str(b.shape);
  return {x};
}

kiln::MetaList bias_gelu_infer(const kiln::InferContext& ctx) {
  return check_bias_gelu("BiasGelu", ctx.input(0), ctx.input(1));
}

// gelu(z) = 0.5 z (1 + erf(z / sqrt 2)).
inline double gelu(double z) {
  // erfc(-z / sqrt 2) = 1 + erf(z / sqrt 2) without cancellation for negative z (as the built-in
  // Gelu computes it).
  return 0.5 * z * std::erfc(-z * 0.70710678118654752440);
}

// float: erf as the rational approximation x P(x^2) / Q(x^2) on [-4, 4] (the one Eigen and XLA
// use; absolute error about 1e-7, and erf is +-1 in float beyond), only multiplies, adds and one
// divide, so the compiler vectorises the loop (std::erfc costs ~20x more per element). The clamp
// is written as selects, which vectorise under -fno-trapping-math (train_charlm.py's cflags).
[[gnu::always_inline]] inline float erf_rational(float x) {
  x = x < -4.0f ? -4.0f : x;
  x = x > 4.0f ? 4.0f : x;
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  return x * p / q;
}

[[gnu::always_inline]] inline float gelu(float z) {
  return 0.5f * z * (1.0f + erf_rational(z * 0.70710678f));
}

// exp(x) for x <= 0 in float, written so that it vectorises (std::exp does not): x = n ln 2 + r
// with |r| <= ln 2 / 2 (n rounded by the 1.5 * 2^23 trick, ln 2 split in two so that n ln 2 is
// exact), exp(r) by its degree-6 Taylor polynomial (relative error below 2e-7), times 2^n built in
// the exponent bits. Inputs below -87 (and nan) give exp(-87) (~1.6e-38) rather than a denormal
// or 0, so the conversion of n to an integer is always defined; the one caller passes at most
// |z| = 10 (-50), where z phi(z) is below 1e-20.
[[gnu::always_inline]] inline float exp_nonpositive(float x) {
  x = x >= -87.0f ? x : -87.0f;
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693145751953125f) - n * 1.42860677e-06f;
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// d gelu(z) / dz = Phi(z) + z phi(z), with Phi and phi the standard normal CDF and density.
// z phi(z) is below 1e-20 past |z| = 10 and 0 at the infinities (not inf * 0): z is clamped there.
inline double gelu_derivative(double z) {
  const double zc = std::isinf(z) ? 0.0 : z;
  return 0.5 * std::erfc(-z * 0.70710678118654752440) +
         zc * std::exp(-0.5 * zc * zc) * 0.39894228040143267794;
}

[[gnu::always_inline]] inline float gelu_derivative(float z) {
  float zc = z < -10.0f ? -10.0f : z;
  zc = zc > 10.0f ? 10.0f : zc;
  return 0.5f * (1.0f + erf_rational(z * 0.70710678f)) +
         zc * exp_nonpositive(-0.5f * zc * zc) * 0.39894228f;
}

// Rows [begin, end) of y = gelu(x + b) (g == nullptr) or y = g * gelu'(x + b), x, g and y
// [rows, n]. The float version is compiled three times, for AVX-512, AVX2 and any x86-64, and
// picked when the library loads (GCC's target_clones), so the cached build runs on every machine
// with the widest vectors it has. The loops must be inlined into each clone to be compiled for its
// target (called, they are the baseline SSE2 code for all three: half the speed on AVX2).
template <typename T>
[[gnu::always_inline]] inline void bias_gelu_rows(const T* x, const T* b, const T* g, T* y,
                                                  int64_t begin, int64_t end, int64_t n) {
  for (int64_t r = begin; r < end; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    if (g == nullptr) {
      for (int64_t i = 0; i < n; ++i) yr[i] = gelu(xr[i] + b[i]);
    } else {
      const T* gr = g + r * n;
      for (int64_t i = 0; i < n; ++i) yr[i] = gr[i] * gelu_derivative(xr[i] + b[i]);
    }
  }
}

// (Not under ThreadSanitizer: ifunc resolvers run before its runtime is initialised.)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void bias_gelu_rows_f32(const float* x, const float* b, const float* g, float* y, int64_t begin,
                        int64_t end, int64_t n) {
  bias_gelu_rows(x, b, g, y, begin, end, n);
}

template <typename T>
void bias_gelu_loop(const kiln::Tensor& x, const kiln::Tensor& b, const kiln::Tensor& g,
                    const kiln::Tensor& out) {
  const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
  const T* in = x.data<T>();
  const T* bias = b.data<T>();
  const T* grad = g.defined() ? g.data<T>() : nullptr;
  T* y = out.data<T>();
  // Rows split across the intra-op pool; about 32k elements per chunk keeps small calls inline.
  kiln::parallel_for(0, rows, std::max<int64_t>(1, 32768 / std::max<int64_t>(n, 1)),
                     [&](int64_t begin, int64_t end) {
                       if constexpr (std::is_same_v<T, float>) {
                         bias_gelu_rows_f32(in, bias, grad, y, begin, end, n);
                       } else {
                         bias_gelu_rows(in, bias, grad, y, begin, end, n);
                       }
                     });
}

// gelu(x + b), or g * gelu'(x + b) when g is defined.
void run_bias_gelu(const kiln::Tensor& x_in, const kiln::Tensor& b_in, const kiln::Tensor& g_in,
                   const kiln::Tensor& out) {
  const kiln::Tensor x = x_in.contiguous();
  const kiln::Tensor b = b_in.contiguous();
  const kiln::Tensor g = g_in.defined() ? g_in.contiguous() : g_in;
  if (x.dtype() == kiln::DType::kFloat64) {
    bias_gelu_loop<double>(x, b, g, out);
  } else {
    bias_gelu_loop<float>(x, b, g, out);
  }
}

void bias_gelu_kernel(kiln::KernelContext& ctx) {
  run_bias_gelu(ctx.inputs[0], ctx.inputs[1], kiln::Tensor(), ctx.outputs[0]);
}

kiln::MetaList bias_gelu_backward_infer(const kiln::InferContext& ctx) {
  const kiln::TensorMeta& g = ctx.input(0);
  const kiln::TensorMeta& x = ctx.input(1);
  KILN_CHECK_SHAPE(g.shape == x.shape && g.dtype == x.dtype)
      << "BiasGeluBackward: expected g of x's shape and dtype " << kiln::shape_str(x.shape) << " "
      << x.dtype << ", got " << kiln::shape_str(g.shape) << " " << g.dtype;
  return check_bias_gelu("BiasGeluBackward", x, ctx.input(2));
}

void bias_gelu_backward_kernel(kiln::KernelContext& ctx) {
  run_bias_gelu(ctx.inputs[1], ctx.inputs[2], ctx.inputs[0], ctx.outputs[0]);
}

kiln::Tensor bias_gelu_backward(const kiln::Tensor& g, const kiln::Tensor& x,
                                const kiln::Tensor& b) {
  return kiln::call_op("BiasGeluBackward", {g, x, b})[0];
}

// BiasGelu's rule: dz = g * gelu'(x + b) in one kernel, and the bias's gradient is dz summed over
// the rows.
std::vector<kiln::Tensor> bias_gelu_grad(const std::vector<kiln::Tensor>& inputs,
                                         const std::vector<kiln::Tensor>& /*outputs*/,
                                         const kiln::Attrs& /*attrs*/,
                                         const std::vector<kiln::Tensor>& grad_outputs) {
  const kiln::Tensor dz = bias_gelu_backward(grad_outputs[0], inputs[0], inputs[1]);
  return {dz, kiln::sum_to(dz, inputs[1].shape())};
}

// BiasGeluBackward's rule (second derivatives): linear in g, so g's gradient is the op again;
// in z, d(g gelu'(z)) = g gelu''(z) with gelu''(z) = phi(z) (2 - z^2), written with kiln ops.
std::vector<kiln::Tensor> bias_gelu_backward_grad(const std::vector<kiln::Tensor>& inputs,
                                                  const std::vector<kiln::Tensor>& /*outputs*/,
                                                  const kiln::Attrs& /*attrs*/,
                                                  const std::vector<kiln::Tensor>& grad_outputs) {
  const kiln::Tensor& g = inputs[0];
  const kiln::Tensor& x = inputs[1];
  const kiln::Tensor& b = inputs[2];
  const kiln::Tensor& gg = grad_outputs[0];
  // Clamped: gelu'' is below 1e-340 past |z| = 40, and 0 * inf must not reach the product.
  const kiln::Tensor z = kiln::clamp(x + b, kiln::Scalar(-40.0), kiln::Scalar(40.0));
  const kiln::Tensor z2 = kiln::square(z);
  const kiln::Tensor pdf = kiln::exp(z2 * -0.5) * 0.39894228040143267794;
  const kiln::Tensor dz = gg * g * pdf * (2.0 - z2);
  return {bias_gelu_backward(gg, x, b), dz, kiln::sum_to(dz, b.shape())};
}

}  // namespace

KILN_EXTENSION(m) {
  m.def_op(kiln::OpDef("BiasGelu")
               .input("x")
               .input("b")
               .infer(&bias_gelu_infer)
               .kernel(kiln::DeviceType::kCPU, &bias_gelu_kernel)
               .grad(&bias_gelu_grad)
               .doc("gelu(x + b) (the erf form) in one pass over x; b [N] is added to each row "
                    "of x [..., N]. float32 or float64."));
  m.def_op(kiln::OpDef("BiasGeluBackward")
               .input("g")
               .input("x")
               .input("b")
               .infer(&bias_gelu_backward_infer)
               .kernel(kiln::DeviceType::kCPU, &bias_gelu_backward_kernel)
               .grad(&bias_gelu_backward_grad)
               .doc("g * gelu'(x + b), BiasGelu's input gradient, in one pass; g and x [..., N], "
                    "b [N]."));
}
