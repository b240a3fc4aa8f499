// fft.cpp — FFTs through kiln::FftOpRunner (FFTW, plans cached). Kiln has no complex dtype: a
// complex tensor is a float tensor with a trailing dimension of 2 (real, imaginary).
//   ops.rfft(x [..., n], norm="backward") -> [..., n/2+1, 2]      (numpy.fft.rfft)
//   ops.irfft(X [..., n/2+1, 2], n, norm="backward") -> [..., n]  (numpy.fft.irfft)
//   ops.fft(X [..., n, 2], inverse=False, norm="backward") -> [..., n, 2]
#include <kiln/extension.h>
#include <kiln/runners.h>

#include <string>

namespace {

kiln::FftNorm parse_norm(const std::string& norm) {
  if (norm == "backward") return kiln::FftNorm::kBackward;
  if (norm == "ortho") return kiln::FftNorm::kOrtho;
  KILN_CHECK_VALUE(norm == "forward")
      << "norm: expected 'backward', 'ortho' or 'forward', got '" << norm << "'";
  return kiln::FftNorm::kForward;
}

kiln::Shape with_last(kiln::Shape shape, std::initializer_list<int64_t> last) {
  shape.pop_back();
  shape.insert(shape.end(), last);
  return shape;
}

}  // namespace

kiln::Tensor rfft(const kiln::Tensor& x, const std::string& norm) {
  KILN_CHECK_SHAPE(x.ndim() >= 1) << "rfft: expected at least one dimension";
  kiln::Tensor out(x.dtype(), with_last(x.shape(), {x.size(-1) / 2 + 1, 2}));
  std::make_shared<kiln::FftOpRunner>("Rfft", kiln::FftKind::kRealForward, 1, parse_norm(norm))
      ->Run({x.contiguous()}, {out});
  return out;
}

kiln::Tensor irfft(const kiln::Tensor& x, int64_t n, const std::string& norm) {
  KILN_CHECK_SHAPE(x.ndim() >= 2 && x.size(-1) == 2)
      << "irfft: expected [..., n/2+1, 2], got " << kiln::shape_str(x.shape());
  kiln::Shape shape(x.shape().begin(), x.shape().end() - 1);
  shape.back() = n;
  kiln::Tensor out(x.dtype(), shape);
  std::make_shared<kiln::FftOpRunner>("Irfft", kiln::FftKind::kRealInverse, 1, parse_norm(norm))
      ->Run({x.contiguous()}, {out});
  return out;
}

kiln::Tensor fft(const kiln::Tensor& x, bool inverse, const std::string& norm) {
  kiln::Tensor out(x.dtype(), x.shape());
  const auto kind = inverse ? kiln::FftKind::kComplexInverse : kiln::FftKind::kComplexForward;
  std::make_shared<kiln::FftOpRunner>("Fft", kind, 1, parse_norm(norm))
      ->Run({x.contiguous()}, {out});
  return out;
}

KILN_EXTENSION(m) {
  m.def("rfft", &rfft, {"x", "norm"}, "Real-to-complex FFT over the last dimension.");
  m.def("irfft", &irfft, {"x", "n", "norm"}, "Complex-to-real inverse FFT of length n.");
  m.def("fft", &fft, {"x", "inverse", "norm"}, "Complex FFT over the dimension before the 2.");
}
