// A "new build" of the test extension: FixtureScale multiplies by ten times the factor, so a
// test can tell which build the registry holds.
#include <kiln/extension.h>
#include <kiln/op.h>

KILN_EXTENSION(m) {
  m.def_op(kiln::OpDef("FixtureScale")
               .input("x")
               .attr("factor", kiln::AttrKind::kFloat, 2.0)
               .infer([](const kiln::InferContext& ctx) { return kiln::MetaList{ctx.input(0)}; })
               .kernel(kiln::DeviceType::kCPU, [](kiln::KernelContext& ctx) {
                 const float factor = 10.0f * static_cast<float>(ctx.attrs.get<double>("factor"));
                 const float* in = ctx.inputs[0].data<float>();
                 float* out = ctx.outputs[0].data<float>();
                 for (int64_t i = 0; i < ctx.inputs[0].numel(); ++i) out[i] = in[i] * factor;
               }));
}
