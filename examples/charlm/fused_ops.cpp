// fused_ops.cpp — the fused layer of examples/train_charlm.py: BiasGelu(x, b) = gelu(x + b).
//
// A full OpDef registered with m.def_op, so the op is one kernel eagerly, a node like any built-in
// inside kiln.jit graphs (the CharLM's pattern pass rewrites gelu(x + b) into it), and trainable:
// its gradient rule is written with kiln ops (kiln/functional.h), so backward runs those ops
// eagerly and kiln.jit traces them into the training step's graph.
//   ops.bias_gelu(x [..., N], b [N]) -> [..., N]: 0.5 z (1 + erf(z / sqrt 2)), z = x + b;
//   float32 or float64 (float64 for kiln.testing.gradcheck).
// Built with kiln.ops.CustomOpBuilder("charlm_fused_ops", ["fused_ops.cpp"]).
#include <kiln/extension.h>
#include <kiln/functional.h>
#include <kiln/op.h>
#include <kiln/parallel.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace {

kiln::MetaList bias_gelu_infer(const kiln::InferContext& ctx) {
  const kiln::TensorMeta& x = ctx.input(0);
  const kiln::TensorMeta& b = ctx.input(1);
  KILN_CHECK_DTYPE((x.dtype == kiln::DType::kFloat32 || x.dtype == kiln::DType::kFloat64) &&
                   b.dtype == x.dtype)
      << "BiasGelu: expected x and b both float32 or both float64, got " << x.dtype << " and "
      << b.dtype;
  KILN_CHECK_SHAPE(x.ndim() >= 1 && b.ndim() == 1 && b.shape[0] == x.shape.back())
      << "BiasGelu: expected x [..., N] and b [N], got " << kiln::shape_str(x.shape) << " and "
      << kiln::shape_str(b.shape);
  return {x};
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
[[gnu::always_inline]] inline float gelu(float z) {
  float x = z * 0.70710678f;
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
  return 0.5f * z * (1.0f + x * p / q);
}

// Rows [begin, end) of y = gelu(x + b), x and y [rows, n]. The float version is compiled three
// times, for AVX-512, AVX2 and any x86-64, and picked when the library loads (GCC's
// target_clones), so the cached build runs on every machine with the widest vectors it has. The
// loop must be inlined into each clone to be compiled for its target (called, it is the baseline
// SSE2 code for all three: half the speed on AVX2).
template <typename T>
[[gnu::always_inline]] inline void bias_gelu_rows(const T* x, const T* b, T* y, int64_t begin, int64_t end, int64_t n) {
  for (int64_t r = begin; r < end; ++r) {
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = gelu(x[r * n + i] + b[i]);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void bias_gelu_rows_f32(const float* x, const float* b, float* y, int64_t begin, int64_t end,
                        int64_t n) {
  bias_gelu_rows(x, b, y, begin, end, n);
}

template <typename T>
void bias_gelu_loop(const kiln::Tensor& x, const kiln::Tensor& b, const kiln::Tensor& out) {
  const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
  const T* in = x.data<T>();
  const T* bias = b.data<T>();
  T* y = out.data<T>();
  // Rows split across the intra-op pool; about 32k elements per chunk keeps small calls inline.
  kiln::parallel_for(0, rows, std::max<int64_t>(1, 32768 / std::max<int64_t>(n, 1)),
                     [&](int64_t begin, int64_t end) {
                       if constexpr (std::is_same_v<T, float>) {
                         bias_gelu_rows_f32(in, bias, y, begin, end, n);
                       } else {
                         bias_gelu_rows(in, bias, y, begin, end, n);
                       }
                     });
}

void bias_gelu_kernel(kiln::KernelContext& ctx) {
  const kiln::Tensor x = ctx.inputs[0].contiguous();
  const kiln::Tensor b = ctx.inputs[1].contiguous();
  if (x.dtype() == kiln::DType::kFloat64) {
    bias_gelu_loop<double>(x, b, ctx.outputs[0]);
  } else {
    bias_gelu_loop<float>(x, b, ctx.outputs[0]);
  }
}

// d gelu(z) / dz = Phi(z) + z phi(z), with Phi and phi the standard normal CDF and density.
// Written with kiln ops: differentiable again, and traceable into jit graphs.
std::vector<kiln::Tensor> bias_gelu_grad(const std::vector<kiln::Tensor>& inputs,
                                         const std::vector<kiln::Tensor>& /*outputs*/,
                                         const kiln::Attrs& /*attrs*/,
                                         const std::vector<kiln::Tensor>& grad_outputs) {
  const kiln::Tensor& x = inputs[0];
  const kiln::Tensor& b = inputs[1];
  const kiln::Tensor z = x + b;
  const kiln::Tensor cdf = 0.5 * (1.0 + kiln::erf(z * 0.70710678118654752440));
  const kiln::Tensor pdf = kiln::exp(kiln::square(z) * -0.5) * 0.39894228040143267794;  // 1/sqrt(2 pi)
  const kiln::Tensor dz = grad_outputs[0] * (cdf + z * pdf);
  return {dz, kiln::sum_to(dz, b.shape())};
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
}
