// Cast: dtype conversion (kiln::to), a copy through copy_into.
#include "kiln/functional/elementwise.h"
#include "kiln/op.h"
#include "ops/grad_util.h"

namespace kiln {
namespace {

KILN_REGISTER_OP(OpDef("Cast")
                     .input("x")
                     .attr("dtype", AttrKind::kDType)
                     .traits(kTraitElementwise | kTraitInPlace)
                     // Between floating dtypes the gradient is converted back; an integer or
                     // bool result carries none (its gradient is undefined).
                     .grad(detail::one_output_rule([](const std::vector<Tensor>& in, const Tensor&,
                                                      const Attrs&, const Tensor& g) {
                       return std::vector<Tensor>{detail::input_grad(g, in[0])};
                     }))
                     .doc("x converted to `dtype` (floats to integers truncate toward zero)")
                     .infer([](const InferContext& ctx) {
                       return MetaList{{ctx.attrs.get<DType>("dtype"), ctx.input(0).shape}};
                     })
                     .kernel(DeviceType::kCPU,
                             [](KernelContext& ctx) { copy_into(ctx.outputs[0], ctx.inputs[0]); }));

}  // namespace

Tensor to(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  static const OpDefPtr op = OpRegistry::Instance().get("Cast");
  return call_op(*op, {x}, {{"dtype", dtype}})[0];
}

}  // namespace kiln
