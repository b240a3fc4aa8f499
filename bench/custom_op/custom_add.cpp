// A custom op doing exactly what kiln.mint.add does for float32 tensors of one shape, for
// comparing the per-call cost of a custom op with a built-in's (bench/custom_op_bench.py).
#include <kiln/extension.h>

class CustomAdd : public kiln::OpRunner {
 public:
  using OpRunner::OpRunner;
  void LaunchKernel() override {
    const float* x = inputs()[0].data<float>();
    const float* y = inputs()[1].data<float>();
    float* out = outputs()[0].data<float>();
    for (int64_t i = 0; i < inputs()[0].numel(); ++i) out[i] = x[i] + y[i];
  }
};

kiln::Tensor add(const kiln::Tensor& x, const kiln::Tensor& y) {
  kiln::Tensor out(x.dtype(), x.shape());
  std::make_shared<CustomAdd>("CustomAdd")->Run({x, y}, {out});
  return out;
}

KILN_EXTENSION(m) { m.def("add", &add, {"x", "y"}); }
