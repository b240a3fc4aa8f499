// Cast: dtype conversion (kiln::to), a copy through copy_into.
#include "kiln/functional/elementwise.h"
#include "kiln/op.h"

namespace kiln {
namespace {

KILN_REGISTER_OP(OpDef("Cast")
                     .input("x")
                     .attr("dtype", AttrKind::kDType)
                     .traits(kTraitElementwise)
                     .doc("x converted to `dtype` (floats to integers truncate toward zero)")
                     .infer([](const InferContext& ctx) {
                       return MetaList{{ctx.attrs.get<DType>("dtype"), ctx.input(0).shape}};
                     })
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       copy_into(ctx.outputs[0], ctx.inputs[0]);
                     }));

}  // namespace

Tensor to(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  static const OpDefPtr op = OpRegistry::Instance().get("Cast");
  return call_op(*op, {x}, {{"dtype", dtype}})[0];
}

}  // namespace kiln
