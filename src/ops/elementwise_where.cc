// where(cond, a, b): cond ? a : b with all three broadcast; the result dtype is result_type(a, b).
#include "kiln/functional/elementwise.h"
#include "ops/elementwise.h"
#include "ops/grad_util.h"

namespace kiln {
namespace elementwise {
namespace {

// Selecting moves bits, so the kernel is instantiated per element size, not per dtype. The
// condition is read as a byte and tested against 0, so a bool array from outside (NumPy) whose
// bytes are not exactly 0 or 1 is still well defined.
template <typename Bits>
void where_run(char* const* p, const int64_t* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const char* src = load<uint8_t>(p[1] + i * s[1]) != 0 ? p[2] + i * s[2] : p[3] + i * s[3];
    store<Bits>(p[0] + i * s[0], load<Bits>(src));
  }
}

KILN_REGISTER_OP(
    OpDef("Where")
        .input("condition")
        .input("a")
        .input("b")
        .traits(kTraitElementwise)
        // The gradient goes to the selected operand; the condition gets none.
        .grad(detail::one_output_rule([](const std::vector<Tensor>& in, const Tensor&,
                                         const Attrs&, const Tensor& g) {
          const Tensor zero = Tensor::scalar(0.0);
          const Tensor& cond = in[0];
          const Tensor ga = detail::differentiable(in[1]) ? where(cond, g, zero) : Tensor();
          const Tensor gb = detail::differentiable(in[2]) ? where(cond, zero, g) : Tensor();
          return std::vector<Tensor>{Tensor(), detail::input_grad(ga, in[1]),
                                     detail::input_grad(gb, in[2])};
        }))
        .doc("condition ? a : b, broadcasting all three; condition is converted to bool (nonzero "
             "is true) and the result has result_type(a, b)")
        .infer([](const InferContext& ctx) {
          const Shape shape = broadcast_shapes(
              broadcast_shapes(ctx.input(0).shape, ctx.input(1).shape), ctx.input(2).shape);
          return MetaList{{result_type({ctx.input(1), ctx.input(2)}), shape}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const Shape& shape = out.shape();
          const Tensor cond = loop_operand(as_dtype(ctx.inputs[0], DType::kBool), out);
          const Tensor a = loop_operand(as_dtype(ctx.inputs[1], out.dtype()), out);
          const Tensor b = loop_operand(as_dtype(ctx.inputs[2], out.dtype()), out);
          StridedLoop<4> loop(shape, {&out, &cond, &a, &b});
          switch (out.itemsize()) {
            case 1:
              loop.parallel_run(kElementwiseGrain, where_run<uint8_t>);
              break;
            case 2:
              loop.parallel_run(kElementwiseGrain, where_run<uint16_t>);
              break;
            case 4:
              loop.parallel_run(kElementwiseGrain, where_run<uint32_t>);
              break;
            case 8:
              loop.parallel_run(kElementwiseGrain, where_run<uint64_t>);
              break;
            default:
              KILN_ASSERT(false) << "Where: unexpected item size " << out.itemsize();
          }
        }));

}  // namespace
}  // namespace elementwise

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  static const OpDefPtr op = OpRegistry::Instance().get("Where");
  return elementwise::call_elementwise(*op, {cond, a, b}, out);
}

}  // namespace kiln
