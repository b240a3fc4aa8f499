// Library runners: OpRunners that run a well-kept acceleration library on Kiln tensors, so a
// custom op reaches oneDNN, a BLAS GEMM or FFTW with no glue code.
//
//   // out = gelu(x @ w + b), one fused oneDNN primitive (cached by shapes and post-ops):
//   kiln::Tensor out(x.dtype(), {x.size(0), w.size(1)});
//   std::make_shared<kiln::OneDnnOpRunner>(
//       "LinearGelu", kiln::OneDnnPrimitive::MatMul({{kiln::EltwiseKind::kGeluTanh}}))
//       ->Run({x, w, b}, {out});
//
//   // spectrum = rfft(signal) over the last dimension, complex as a trailing dimension of 2:
//   kiln::Tensor spectrum(signal.dtype(), {batch, n / 2 + 1, 2});
//   std::make_shared<kiln::FftOpRunner>("Rfft", kiln::FftKind::kRealForward)
//       ->Run({signal}, {spectrum});
//
// Each runner checks its inputs and the output shapes the caller made, and throws kiln::Error
// (kShape, kDType, kValue) saying what it expected and what came. Library handles (oneDNN
// primitives, FFTW plans) are created once per set of parameters and cached process-wide
// (thread-safe); a BLAS GEMM has no handle to cache.
//
// Complex numbers: Kiln has no complex dtype. A complex tensor is a real tensor (float32 or
// float64) with a trailing dimension of 2 holding (real, imaginary), the layout of FFTW's
// fftw_complex, C's `double _Complex` and NumPy's `x.view(np.float32).reshape(..., 2)`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/extension.h"

namespace kiln {

/// An elementwise function that oneDNN applies, alone (OneDnnPrimitive::Elementwise) or fused
/// after a matmul or convolution. `alpha` and `beta` as oneDNN defines them: kRelu's alpha is
/// the negative slope, kLinear is alpha * x + beta, kClip clamps to [alpha, beta], kElu and
/// kSwish take alpha.
enum class EltwiseKind : uint8_t {
  kRelu, kGeluTanh, kGeluErf, kTanh, kSigmoid, kSwish, kElu, kExp, kLog, kSqrt, kAbs, kSquare,
  kLinear, kClip,
};
struct Eltwise {
  EltwiseKind kind;
  float alpha = 0.0f;
  float beta = 0.0f;
};

/// What a OneDnnOpRunner runs; make one with the static functions. Inputs and outputs, all
/// float32 (an optional input may be an undefined Tensor):
/// - MatMul: {a [..., M, K], b [..., K, N], bias (optional, [N] or broadcastable to the output)}
///   -> [..., M, N]; batch dimensions broadcast (size 1, or missing in one operand); any strides.
/// - Convolution: {x [N, C, H, W], w [O, C, KH, KW], bias [O] (optional)} -> [N, O, OH, OW];
///   any strides.
///   Inputs whose strides oneDNN cannot describe (a batch of every other row) are copied first;
///   the output may be a permutation or slice of a contiguous tensor. An empty output computes
///   nothing; a product over K = 0 (a convolution over C = 0) gives the bias and post-ops of
///   zeros.
/// - Elementwise, Softmax, LogSoftmax: {x} -> the shape of x (contiguous).
/// - LayerNorm: {x [..., C], gamma [C] (optional), beta [C] (optional)} -> the shape of x,
///   normalised over the last dimension (contiguous).
struct KILN_API OneDnnPrimitive {
  enum class Kind : uint8_t { kMatMul, kConvolution, kElementwise, kSoftmax, kLogSoftmax,
                              kLayerNorm };
  Kind kind = Kind::kMatMul;
  std::vector<Eltwise> post_ops;    // matmul, convolution: applied in order; elementwise: one
  std::vector<int64_t> strides;     // convolution {sh, sw}
  std::vector<int64_t> padding;     // convolution {ph, pw}, both sides
  std::vector<int64_t> dilation;    // convolution {dh, dw}, 1 = dense
  int64_t axis = -1;                // softmax
  float epsilon = 1e-5f;            // layer norm

  static OneDnnPrimitive MatMul(std::vector<Eltwise> post_ops = {});
  static OneDnnPrimitive Convolution(std::vector<int64_t> strides = {1, 1},
                                     std::vector<int64_t> padding = {0, 0},
                                     std::vector<int64_t> dilation = {1, 1},
                                     std::vector<Eltwise> post_ops = {});
  static OneDnnPrimitive Elementwise(Eltwise function);
  static OneDnnPrimitive Softmax(int64_t axis = -1);
  static OneDnnPrimitive LogSoftmax(int64_t axis = -1);
  static OneDnnPrimitive LayerNorm(float epsilon = 1e-5f);
};

/// Runs one oneDNN primitive. The primitive for the actual shapes and strides is created on the
/// first Run with them and cached; its scratchpad is the runner's workspace (CalcWorkspace).
class KILN_API OneDnnOpRunner : public OpRunner {
 public:
  OneDnnOpRunner(std::string op_name, OneDnnPrimitive primitive);
  ~OneDnnOpRunner() override;
  size_t CalcWorkspace() override;
  void LaunchKernel() override;

 private:
  OneDnnPrimitive primitive_;
  std::shared_ptr<const void> prepared_;  // the current Run's primitive and operands
};

/// A float32 GEMM or GEMV through oneDNN's sgemm: out = alpha * a @ b + beta * c, with inputs
/// {a [M, K], b [K, N]} (GEMM, out [M, N]) or b [K] (GEMV, out [M]), and c (any shape that
/// broadcasts to out, e.g. a bias row; may be out itself) required when beta != 0. a and b may
/// be transposed views (any 2-d layout with a unit stride along one dimension; no copy).
class KILN_API BlasOpRunner : public OpRunner {
 public:
  explicit BlasOpRunner(std::string op_name, float alpha = 1.0f, float beta = 0.0f);
  void LaunchKernel() override;

 private:
  float alpha_;
  float beta_;
};

/// The transforms of FftOpRunner, over the last `signal_ndim` dimensions (for complex data, the
/// dimensions before the trailing 2). n is the signal length (the product for several dims):
/// - kComplexForward / kComplexInverse: [..., n, 2] -> [..., n, 2] (numpy.fft.fft / ifft)
/// - kRealForward: real [..., n] -> [..., n/2 + 1, 2] (numpy.fft.rfft)
/// - kRealInverse: [..., n/2 + 1, 2] -> real [..., n]; the output's shape gives n (numpy irfft)
enum class FftKind : uint8_t { kComplexForward, kComplexInverse, kRealForward, kRealInverse };
/// Scaling as NumPy's `norm=`: kBackward divides the inverse by n, kForward the forward
/// transform, kOrtho both by sqrt(n).
enum class FftNorm : uint8_t { kBackward, kOrtho, kForward };

/// FFTs through FFTW, float32 (fftwf) or float64 (fftw), contiguous tensors. Plans are created
/// with FFTW_ESTIMATE under one lock (FFTW's planner is not thread-safe) and cached by kind,
/// dtype, shape and alignment; executing a cached plan takes no lock.
class KILN_API FftOpRunner : public OpRunner {
 public:
  FftOpRunner(std::string op_name, FftKind kind, int signal_ndim = 1,
              FftNorm norm = FftNorm::kBackward);
  /// kRealInverse: room for a copy of the input (FFTW's complex-to-real transform overwrites
  /// its input); 0 otherwise.
  size_t CalcWorkspace() override;
  void LaunchKernel() override;

 private:
  FftKind kind_;
  int signal_ndim_;
  FftNorm norm_;
};

}  // namespace kiln
