// LstmCell (kiln::lstm_cell): an LSTM step's pointwise part, from the gates' pre-activations to
// the next hidden and cell states, in one pass (Note [LSTM cell]).
#include <algorithm>
#include <utility>
#include <vector>

#include "core/dtype_dispatch.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/nn.h"
#include "kiln/functional/shape.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/dtype_convert.h"
#include "ops/grad_util.h"
#include "ops/simd/float_kernels.h"

namespace kiln {
namespace {

// Note [LSTM cell]
// An LSTM step is gates = x W_ih^T + h W_hh^T + b (one product per step, and one for the whole
// sequence's inputs), then pointwise: i, f, o = sigmoid of three quarters of the gates, g = tanh
// of the fourth (PyTorch's order i, f, g, o), c' = f c + i g and h' = o tanh(c'). Composed of ops
// that is ten calls per step, and an LSTM's steps are small: [batch, hidden] with a batch of 16
// and 128 units is 2,048 elements, so the calls' cost, not the arithmetic, set the pace (eager
// LSTM forward 1.8x PyTorch's time). LstmCell is one call: each row's activations go through the
// same SIMD kernels as the sigmoid and tanh ops (so the values are the composed ops', bit for
// bit), the cell update and the output in the same pass over the row. Its gradient is written
// with ops (sigmoid_backward and tanh_backward give each activation's derivative in one pass), so
// autograd differentiates it again and the jit traces it.

using simd::UnaryOp;

// Rows [lo, hi) of z [rows, 4H] and c [rows, H] to h and c_next [rows, H], in C (float or
// double), each row's activations in a scratch row of 4H.
template <typename C>
void lstm_rows(const C* z, const C* c, C* h, C* c_next, int64_t lo, int64_t hi, int64_t hidden) {
  std::vector<C> act(static_cast<size_t>(4 * hidden));
  C* const i = act.data();
  C* const f = i + hidden;
  C* const g = f + hidden;
  C* const o = g + hidden;
  for (int64_t r = lo; r < hi; ++r) {
    const C* zr = z + r * 4 * hidden;
    const C* cr = c + r * hidden;
    C* hr = h + r * hidden;
    C* cn = c_next + r * hidden;
    simd::unary(UnaryOp::kSigmoid, zr, i, 2 * hidden);  // i and f
    simd::unary(UnaryOp::kTanh, zr + 2 * hidden, g, hidden);
    simd::unary(UnaryOp::kSigmoid, zr + 3 * hidden, o, hidden);
    for (int64_t j = 0; j < hidden; ++j) cn[j] = f[j] * cr[j] + i[j] * g[j];
    simd::unary(UnaryOp::kTanh, cn, hr, hidden);  // tanh(c'), then times o in place
    for (int64_t j = 0; j < hidden; ++j) hr[j] = o[j] * hr[j];
  }
}

std::vector<Tensor> lstm_cell_grad(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                                   const Attrs&, const std::vector<Tensor>& grads) {
  const Tensor& gh = grads[0];
  const Tensor& gc = grads[1];
  if (!gh.defined() && !gc.defined()) return {Tensor(), Tensor()};
  const Tensor& z = in[0];
  const Tensor& c = in[1];
  const int64_t last = z.ndim() - 1;
  const std::vector<Tensor> act = chunk(sigmoid(z), 4, last);  // i, f, o (and sigmoid(z_g))
  const Tensor& i = act[0];
  const Tensor& f = act[1];
  const Tensor& o = act[3];
  const Tensor g = tanh(chunk(z, 4, last)[2]);
  // dc: the cell state's gradient, from c' itself and through h' = o tanh(c').
  Tensor dc = gc;
  Tensor dzo;
  if (gh.defined()) {
    const Tensor tc = tanh(out[1]);
    const Tensor through_h = tanh_backward(gh * o, tc);
    dc = dc.defined() ? dc + through_h : through_h;
    dzo = sigmoid_backward(gh * tc, o);
  } else {
    dzo = zeros_like(o);
  }
  const Tensor dz =
      cat({sigmoid_backward(dc * g, i), sigmoid_backward(dc * c, f), tanh_backward(dc * i, g), dzo},
          last);
  return {detail::input_grad(dz, z), detail::input_grad(dc * f, c)};
}

KILN_REGISTER_OP(
    OpDef("LstmCell")
        .input("gates")
        .input("c")
        .outputs(2)
        .doc("An LSTM step's pointwise part: gates [..., 4H] (pre-activations in PyTorch's order "
             "i, f, g, o) and c [..., H] to h' = sigmoid(o) tanh(c') and c' = sigmoid(f) c + "
             "sigmoid(i) tanh(g) (Note [LSTM cell])")
        .infer([](const InferContext& ctx) {
          const TensorMeta& z = ctx.input(0);
          const TensorMeta& c = ctx.input(1);
          KILN_CHECK_DTYPE(is_floating_point(z.dtype) && z.dtype == c.dtype)
              << "lstm_cell: expected floating-point gates and c of one dtype, got " << z.dtype
              << " and " << c.dtype;
          const bool fits = z.ndim() >= 1 && c.ndim() == z.ndim() &&
                            std::equal(c.shape.begin(), c.shape.end() - 1, z.shape.begin()) &&
                            z.shape.back() == 4 * c.shape.back();
          KILN_CHECK_SHAPE(fits) << "lstm_cell: expected gates [..., 4H] and c [..., H] with the "
                                 << "same leading dimensions, got " << shape_str(z.shape) << " and "
                                 << shape_str(c.shape);
          return MetaList{c, c};
        })
        .grad(lstm_cell_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& h = ctx.outputs[0];
          const Tensor& c_next = ctx.outputs[1];
          const int64_t hidden = h.ndim() == 0 ? 0 : h.size(h.ndim() - 1);
          if (h.numel() == 0) return;
          const int64_t rows = h.numel() / hidden;
          visit_compute_float(h.dtype(), [&](auto zero) {
            using C = decltype(zero);
            const Tensor z = contiguous_as(ctx.inputs[0], dtype_of<C>());
            const Tensor c = contiguous_as(ctx.inputs[1], dtype_of<C>());
            // 16-bit states are computed in float and rounded once, into scratch outputs.
            const bool own = h.dtype() == dtype_of<C>();
            const Tensor hc = own ? h : Tensor::empty(h.shape(), dtype_of<C>());
            const Tensor cc = own ? c_next : Tensor::empty(h.shape(), dtype_of<C>());
            parallel_for(0, rows, std::max<int64_t>(1, (int64_t{1} << 13) / hidden),
                         [&](int64_t lo, int64_t hi) {
                           lstm_rows(z.data<C>(), c.data<C>(), hc.data<C>(), cc.data<C>(), lo, hi,
                                     hidden);
                         });
            if (!own) {
              copy_into(h, hc);
              copy_into(c_next, cc);
            }
          });
        }));

}  // namespace

std::pair<Tensor, Tensor> lstm_cell(const Tensor& gates, const Tensor& c) {
  static const OpDefPtr op = OpRegistry::Instance().get("LstmCell");
  TensorList out = call_op(*op, {gates, c});
  return {std::move(out[0]), std::move(out[1])};
}

}  // namespace kiln
