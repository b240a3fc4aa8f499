// add3.cpp — the tutorial custom operator (DESIGN.md, "The three capabilities"): x + y + z through
// an OpRunner with a workspace. Load it from Python with
//   ops = kiln.ops.CustomOpBuilder("cpu_add", ["add3.cpp"], backend="CPU").load()
//   out = ops.add3(x, y, z)
#include <kiln/extension.h>
class CustomAdd3 : public kiln::OpRunner {
 public:
  using OpRunner::OpRunner;
  size_t CalcWorkspace() override {              // scratch for the sum when out is strided
    return outputs()[0].is_contiguous() ? 0 : outputs()[0].numel() * sizeof(float);
  }
  void LaunchKernel() override {                 // runs as the LaunchTask
    // Kernels receive the tensors given to Run(), which may be strided views (x.T, a slice):
    // contiguous() copies those, so that element i of each is data<float>()[i].
    const kiln::Tensor x = inputs()[0].contiguous(), y = inputs()[1].contiguous(),
                       z = inputs()[2].contiguous();
    const kiln::Tensor& out = outputs()[0];
    const float* px = x.data<float>();           // Tensor is a handle: data<T>() on a const
    const float* py = y.data<float>();           // Tensor gives T*, as in PyTorch, and checks
    const float* pz = z.data<float>();           // that T is the tensor's dtype
    float* sum = out.is_contiguous() ? out.data<float>() : static_cast<float*>(workspace_ptr());
    for (int64_t i = 0; i < x.numel(); ++i) sum[i] = px[i] + py[i] + pz[i];
    if (!out.is_contiguous()) {                  // each element goes where out's strides say
      kiln::copy_into(out, kiln::Tensor::from_blob(sum, out.shape(), out.dtype()));
    }
  }
};
kiln::Tensor add3(const kiln::Tensor& x, const kiln::Tensor& y, const kiln::Tensor& z) {
  // Runs as the FrontendTask: checks the arguments and makes the output's metadata.
  KILN_CHECK_SHAPE(y.shape() == x.shape() && z.shape() == x.shape())
      << "add3: expected x, y and z of one shape, got " << kiln::shape_str(x.shape()) << ", "
      << kiln::shape_str(y.shape()) << " and " << kiln::shape_str(z.shape());
  kiln::Tensor out(x.dtype(), x.shape());
  std::make_shared<CustomAdd3>("Add3")->Run({x, y, z}, {out});
  return out;
}
KILN_EXTENSION(m) { m.def("add3", &add3, {"x", "y", "z"}); }
