// two_outputs.cpp — ops with more than one output.
//   ops.sin_cos(x) -> (sin(x), cos(x)): one OpRunner filling two outputs; the std::tuple return
//     type makes it a Python tuple.
//   ops.split_rows(x, parts) -> [parts tensors]: a std::vector<Tensor> return type is a Python
//     list, of any length (views of x: no copy).
//   ops.row_moments(x, correction=0) -> (mean, variance) over the last dimension: a full OpDef
//     registered with m.def_op, so it is also kiln::call_op("RowMoments", {x}) from C++ and an
//     op like any built-in for the registry (kiln.ops.list_ops()). Its gradient rule (.grad) is
//     written with ops, so it trains eagerly and inside kiln.jit, like a built-in.
// sin_cos is differentiable too: its OpRunner runs inside a kiln::Function whose Backward says
// how (a kernel object made per call cannot be traced, so sin_cos stays eager-only).
#include <kiln/autograd.h>
#include <kiln/extension.h>
#include <kiln/functional.h>
#include <kiln/op.h>

#include <cmath>
#include <tuple>
#include <vector>

namespace {

class SinCos : public kiln::OpRunner {
 public:
  using OpRunner::OpRunner;
  void LaunchKernel() override {
    const kiln::Tensor x = inputs()[0].contiguous();
    const float* in = x.data<float>();
    float* s = outputs()[0].data<float>();
    float* c = outputs()[1].data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      s[i] = std::sin(in[i]);
      c[i] = std::cos(in[i]);
    }
  }
};

void row_moments_kernel(kiln::KernelContext& ctx) {
  const kiln::Tensor x = ctx.inputs[0].contiguous();
  const int64_t correction = ctx.attrs.get<int64_t>("correction");
  const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
  const float* in = x.data<float>();
  float* mean = ctx.outputs[0].data<float>();
  float* var = ctx.outputs[1].data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i) sum += in[r * n + i];
    const double m = sum / static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) sq += (in[r * n + i] - m) * (in[r * n + i] - m);
    mean[r] = static_cast<float>(m);
    var[r] = static_cast<float>(sq / static_cast<double>(n - correction));
  }
}

kiln::OpDef row_moments_op() {
  return kiln::OpDef("RowMoments")
      .input("x")
      .attr("correction", kiln::AttrKind::kInt, int64_t{0})
      .outputs(2)
      .infer([](const kiln::InferContext& ctx) {
        const kiln::TensorMeta& x = ctx.input(0);
        KILN_CHECK_DTYPE(x.dtype == kiln::DType::kFloat32)
            << "RowMoments: expected float32, got " << x.dtype;
        KILN_CHECK_SHAPE(x.ndim() >= 1 && x.shape.back() > 0)
            << "RowMoments: expected a non-empty last dimension, got " << kiln::shape_str(x.shape);
        kiln::Shape rows(x.shape.begin(), x.shape.end() - 1);
        return kiln::MetaList{{x.dtype, rows}, {x.dtype, rows}};
      })
      .kernel(kiln::DeviceType::kCPU, &row_moments_kernel)
      // d mean / dx = 1/n; d var / dx = 2 (x - mean) / (n - correction), both along the row.
      .grad([](const std::vector<kiln::Tensor>& in, const std::vector<kiln::Tensor>& out,
               const kiln::Attrs& attrs, const std::vector<kiln::Tensor>& grads) {
        const kiln::Tensor& x = in[0];
        const int64_t n = x.size(-1);
        kiln::Tensor dx = kiln::zeros_like(x);
        if (grads[0].defined()) dx = dx + kiln::unsqueeze(grads[0], -1) / static_cast<double>(n);
        if (grads[1].defined()) {
          const double scale = 2.0 / static_cast<double>(n - attrs.get<int64_t>("correction"));
          const kiln::Tensor centered = x - kiln::unsqueeze(out[0], -1);
          dx = dx + kiln::unsqueeze(grads[1], -1) * centered * scale;
        }
        return std::vector<kiln::Tensor>{dx};
      })
      .doc("Mean and variance over the last dimension (variance divided by n - correction).");
}

// d/dx: sin' = cos, cos' = -sin.
struct SinCosFunction : kiln::Function<SinCosFunction> {
  static std::tuple<kiln::Tensor, kiln::Tensor> Forward(kiln::AutogradContext* ctx,
                                                        const kiln::Tensor& x) {
    kiln::Tensor s(x.dtype(), x.shape()), c(x.dtype(), x.shape());
    std::make_shared<SinCos>("SinCos")->Run({x}, {s, c});
    ctx->SaveForBackward({s, c});
    return {s, c};
  }
  static std::vector<kiln::Tensor> Backward(kiln::AutogradContext* ctx,
                                            const std::vector<kiln::Tensor>& grads) {
    const kiln::Tensor& s = ctx->GetSavedTensors()[0];
    const kiln::Tensor& c = ctx->GetSavedTensors()[1];
    kiln::Tensor dx = kiln::zeros_like(s);
    if (grads[0].defined()) dx = dx + grads[0] * c;
    if (grads[1].defined()) dx = dx - grads[1] * s;
    return {dx};
  }
};

}  // namespace

std::tuple<kiln::Tensor, kiln::Tensor> sin_cos(const kiln::Tensor& x) {
  KILN_CHECK_DTYPE(x.dtype() == kiln::DType::kFloat32) << "sin_cos: expected float32, got "
                                                       << x.dtype();
  return SinCosFunction::apply(x);
}

std::vector<kiln::Tensor> split_rows(const kiln::Tensor& x, int parts) {
  KILN_CHECK_VALUE(parts >= 1 && x.ndim() >= 1 && x.size(0) % parts == 0)
      << "split_rows: expected a number of parts >= 1 that divides " << x.size(0) << ", got "
      << parts;
  std::vector<kiln::Tensor> pieces;
  const int64_t rows = x.size(0) / parts;
  for (int i = 0; i < parts; ++i) pieces.push_back(x.narrow(0, i * rows, rows));
  return pieces;
}

KILN_EXTENSION(m) {
  m.def("sin_cos", &sin_cos, {"x"}, "(sin(x), cos(x)) from one kernel.");
  m.def("split_rows", &split_rows, {"x", "parts"}, "x split into `parts` equal row blocks.");
  m.def_op(row_moments_op());
}
