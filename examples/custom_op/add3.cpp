// add3.cpp — the tutorial custom operator (DESIGN.md, "The three capabilities"): x + y + z through
// an OpRunner with a workspace. Load it from Python with
//   ops = kiln.ops.CustomOpBuilder("cpu_add", ["add3.cpp"], backend="CPU").load()
//   out = ops.add3(x, y, z)
#include <kiln/extension.h>
class CustomAdd3 : public kiln::OpRunner {
 public:
  using OpRunner::OpRunner;
  size_t CalcWorkspace() override { return inputs()[0].numel() * sizeof(float); }
  void LaunchKernel() override {                 // runs as the LaunchTask
    const float* x = inputs()[0].data<float>();  // Tensor is a handle: data<T>() on a const
    const float* y = inputs()[1].data<float>();  // Tensor gives T*, as in PyTorch
    const float* z = inputs()[2].data<float>();
    float* tmp = static_cast<float*>(workspace_ptr());
    float* out = outputs()[0].data<float>();
    for (int64_t i = 0; i < inputs()[0].numel(); ++i) { tmp[i] = x[i] + y[i]; out[i] = tmp[i] + z[i]; }
  }
};
kiln::Tensor add3(const kiln::Tensor& x, const kiln::Tensor& y, const kiln::Tensor& z) {
  kiln::Tensor out(x.dtype(), x.shape());        // runs as the FrontendTask
  std::make_shared<CustomAdd3>("Add3")->Run({x, y, z}, {out});
  return out;
}
KILN_EXTENSION(m) { m.def("add3", &add3, {"x", "y", "z"}); }
