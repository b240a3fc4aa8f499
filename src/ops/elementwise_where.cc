// where(cond, a, b): cond ? a : b with all three broadcast; the result dtype is result_type(a, b).
#include "kiln/functional/elementwise.h"
#include "ops/elementwise.h"
#include "ops/grad_util.h"
#include "ops/scalar_range.h"

namespace kiln {
namespace elementwise {
namespace {

// Selecting moves bits, so the kernel is instantiated per element size, not per dtype. The
// condition is read as a byte and tested against 0, so a bool array from outside (NumPy) whose
// bytes are not exactly 0 or 1 is still well defined.
//
// The common layouts (everything contiguous, or a broadcast scalar on either side: masked_fill,
// and the gradients of where and masked_fill) get a loop with both operands loaded
// unconditionally, which the compiler turns into vector blends; the strided loop is ~4x slower on
// a [16, 4, 64, 64] causal-mask fill. Loads and stores go through memcpy (load / store): arrays
// from outside (NumPy) need not be aligned to the element size.
template <typename Bits, int64_t kAStep, int64_t kBStep>
void select_contiguous(char* out, const char* cond, const char* a, const char* b, int64_t n) {
  constexpr int64_t kItem = sizeof(Bits);
  for (int64_t i = 0; i < n; ++i) {
    const Bits if_true = load<Bits>(a + i * kAStep * kItem);
    const Bits if_false = load<Bits>(b + i * kBStep * kItem);
    store<Bits>(out + i * kItem, load<uint8_t>(cond + i) != 0 ? if_true : if_false);
  }
}

template <typename Bits>
void select_run(char* const* p, const int64_t* s, int64_t n) {
  constexpr int64_t kItem = sizeof(Bits);
  const auto unit_or_zero = [](int64_t stride) { return stride == kItem || stride == 0; };
  if (s[0] == kItem && s[1] == 1 && unit_or_zero(s[2]) && unit_or_zero(s[3])) {
    if (s[2] == 0) {
      (s[3] == 0 ? select_contiguous<Bits, 0, 0> : select_contiguous<Bits, 0, 1>)(p[0], p[1], p[2],
                                                                                  p[3], n);
    } else {
      (s[3] == 0 ? select_contiguous<Bits, 1, 0> : select_contiguous<Bits, 1, 1>)(p[0], p[1], p[2],
                                                                                  p[3], n);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const char* src = load<uint8_t>(p[1] + i * s[1]) != 0 ? p[2] + i * s[2] : p[3] + i * s[3];
    store<Bits>(p[0] + i * s[0], load<Bits>(src));
  }
}

}  // namespace

void run_select(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Tensor c = loop_operand(as_dtype(cond, DType::kBool), out);
  const Tensor x = loop_operand(as_dtype(a, out.dtype()), out);
  const Tensor y = loop_operand(as_dtype(b, out.dtype()), out);
  StridedLoop<4> loop(out.shape(), {&out, &c, &x, &y});
  switch (out.itemsize()) {
    case 1:
      loop.parallel_run(kElementwiseGrain, select_run<uint8_t>);
      break;
    case 2:
      loop.parallel_run(kElementwiseGrain, select_run<uint16_t>);
      break;
    case 4:
      loop.parallel_run(kElementwiseGrain, select_run<uint32_t>);
      break;
    case 8:
      loop.parallel_run(kElementwiseGrain, select_run<uint64_t>);
      break;
    default:
      KILN_ASSERT(false) << "select: unexpected item size " << out.itemsize();
  }
}

namespace {

KILN_REGISTER_OP(
    OpDef("Where")
        .input("condition")
        .input("a")
        .input("b")
        .traits(kTraitElementwise | kTraitInPlace)
        // The gradient goes to the selected operand; the condition gets none.
        .grad(detail::one_output_rule([](const std::vector<Tensor>& in, const Tensor&, const Attrs&,
                                         const Tensor& g) {
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
          const DType dtype = ctx.outputs[0].dtype();
          for (const Tensor* t : {&ctx.inputs[1], &ctx.inputs[2]}) {
            // A Python number takes the result type: it must fit (PyTorch raises too).
            if (!t->is_weak_scalar()) continue;
            const Scalar v = detail::scalar_value(*t);
            KILN_CHECK_VALUE(detail::scalar_fits(dtype, v))
                << "Where: the value " << v << " does not fit in " << dtype_name(dtype);
          }
          run_select(ctx.outputs[0], ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]);
        }));

}  // namespace
}  // namespace elementwise

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  static const OpDefPtr op = OpRegistry::Instance().get("Where");
  return elementwise::call_elementwise(*op, {cond, a, b}, out);
}

}  // namespace kiln
