// linear_gelu.cpp — a fused linear + GELU on oneDNN: gelu(x @ weight.T + bias) as one matmul
// primitive with a bias and a GELU post-op, through kiln::OneDnnOpRunner.
//   ops.linear_gelu(x [N, in], weight [out, in], bias [out] or None) -> [N, out]
#include <kiln/extension.h>
#include <kiln/runners.h>

#include <optional>

kiln::Tensor linear_gelu(const kiln::Tensor& x, const kiln::Tensor& weight,
                         const std::optional<kiln::Tensor>& bias) {
  KILN_CHECK_SHAPE(x.ndim() == 2 && weight.ndim() == 2 && x.size(1) == weight.size(1))
      << "linear_gelu: expected x [N, in] and weight [out, in], got " << kiln::shape_str(x.shape())
      << " and " << kiln::shape_str(weight.shape());
  kiln::Tensor out(x.dtype(), {x.size(0), weight.size(0)});
  // weight.T is a strided view: oneDNN reads it in place, no copy.
  auto runner = std::make_shared<kiln::OneDnnOpRunner>(
      "LinearGelu", kiln::OneDnnPrimitive::MatMul({{kiln::EltwiseKind::kGeluTanh}}));
  runner->Run({x, weight.transpose(0, 1), bias.value_or(kiln::Tensor())}, {out});
  return out;
}

KILN_EXTENSION(m) {
  m.def("linear_gelu", &linear_gelu, {"x", "weight", "bias"},
        "gelu(x @ weight.T + bias) with the tanh approximation, fused in one oneDNN matmul.");
}
