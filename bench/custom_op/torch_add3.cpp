// examples/custom_op/add3.cpp written for torch.utils.cpp_extension.load, for the side-by-side
// build and load times in bench/custom_op_bench.py (same loop, same temporary buffer).
#include <torch/extension.h>

torch::Tensor add3(torch::Tensor x, torch::Tensor y, torch::Tensor z) {
  torch::Tensor out = torch::empty_like(x);
  torch::Tensor tmp = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  const float* yp = y.data_ptr<float>();
  const float* zp = z.data_ptr<float>();
  float* t = tmp.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) { t[i] = xp[i] + yp[i]; o[i] = t[i] + zp[i]; }
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add3", &add3, "x + y + z"); }
