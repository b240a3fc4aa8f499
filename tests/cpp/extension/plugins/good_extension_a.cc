// A test extension made of two sources (this one and good_extension_b.cc), each with a
// KILN_EXTENSION block: the loader must run both, in link order.
#include <kiln/extension.h>
#include <kiln/op.h>

namespace {

kiln::Tensor identity(const kiln::Tensor& x) { return x; }

void scale_kernel(kiln::KernelContext& ctx) {
  const float factor = static_cast<float>(ctx.attrs.get<double>("factor"));
  const float* in = ctx.inputs[0].data<float>();
  float* out = ctx.outputs[0].data<float>();
  for (int64_t i = 0; i < ctx.inputs[0].numel(); ++i) out[i] = in[i] * factor;
}

}  // namespace

KILN_EXTENSION(m) {
  m.def("identity", &identity, {"x"}, "returns x");
  m.def_op(kiln::OpDef("FixtureScale")
               .input("x")
               .attr("factor", kiln::AttrKind::kFloat, 2.0)
               .infer([](const kiln::InferContext& ctx) { return kiln::MetaList{ctx.input(0)}; })
               .kernel(kiln::DeviceType::kCPU, &scale_kernel));
}
