// LstmCell (kiln::lstm_cell): an LSTM step's pointwise part, from the gates' pre-activations to
// the next hidden and cell states, in one pass, and LstmCellBackward, its gradient, in another;
// GruCell and GruCellBackward, the same for a GRU step (Note [LSTM cell]).
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
// that is ten calls per step (and seventeen for their gradients), and an LSTM's steps are small:
// [batch, hidden] with a batch of 16 and 128 units is 2,048 elements, so the calls' cost, not the
// arithmetic, set the pace (eager LSTM forward 1.8x PyTorch's time). LstmCell is one call:
// each row's activations go through the same SIMD kernels as the sigmoid and tanh ops (so the
// values are the composed ops', bit for bit), the cell update and the output in the same pass
// over the row. Its gradient is LstmCellBackward, one call too, which recomputes the activations
// from the gates rather than keeping them (four rows of H per step that a long sequence would
// hold until its backward). LstmCellBackward's own rule, for second derivatives (meta-learning
// through an LSTM), is written with ops: reverse mode through its formulas by hand
// (lstm_cell_backward_grad), each step commented, checked against finite differences. A GRU
// step is the same story with three gates (r, z, n; n = tanh(x_n + r hg_n) takes the state's
// projection of n inside the product, so GruCell takes the two projections apart): GruCell,
// GruCellBackward and gru_cell_backward_grad.

using simd::UnaryOp;

// A row's activations i, f, g, o (each H long) from its gates' pre-activations z [4H], through
// the sigmoid and tanh ops' kernels.
template <typename C>
class Activations {
 public:
  explicit Activations(int64_t hidden) : hidden_(hidden), act_(static_cast<size_t>(4 * hidden)) {}
  void compute(const C* z) {
    simd::unary(UnaryOp::kSigmoid, z, act_.data(), 2 * hidden_);  // i and f
    simd::unary(UnaryOp::kTanh, z + 2 * hidden_, g(), hidden_);
    simd::unary(UnaryOp::kSigmoid, z + 3 * hidden_, o(), hidden_);
  }
  C* i() { return act_.data(); }
  C* f() { return act_.data() + hidden_; }
  C* g() { return act_.data() + 2 * hidden_; }
  C* o() { return act_.data() + 3 * hidden_; }

 private:
  int64_t hidden_;
  std::vector<C> act_;
};

// Rows [lo, hi) of z [rows, 4H] and c [rows, H] to h and c_next [rows, H], in C (float or
// double).
template <typename C>
void lstm_rows(const C* z, const C* c, C* h, C* c_next, int64_t lo, int64_t hi, int64_t hidden) {
  Activations<C> a(hidden);
  const C *i = a.i(), *f = a.f(), *g = a.g(), *o = a.o();
  for (int64_t r = lo; r < hi; ++r) {
    const C* cr = c + r * hidden;
    C* hr = h + r * hidden;
    C* cn = c_next + r * hidden;
    a.compute(z + r * 4 * hidden);
    for (int64_t j = 0; j < hidden; ++j) cn[j] = f[j] * cr[j] + i[j] * g[j];
    simd::unary(UnaryOp::kTanh, cn, hr, hidden);  // tanh(c'), then times o in place
    for (int64_t j = 0; j < hidden; ++j) hr[j] = o[j] * hr[j];
  }
}

// Rows [lo, hi) of LstmCellBackward: z [rows, 4H], c, gh and gc [rows, H] (the gradients of h'
// and c') to dz [rows, 4H] and dc [rows, H], each product rounded as the composed rule's ops
// (sigmoid_backward(x, y) = x * (y * (1 - y)), tanh_backward(x, y) = x * ((1 - y) * (1 + y))).
template <typename C>
void lstm_backward_rows(const C* z, const C* c, const C* gh, const C* gc, C* dz, C* dc, int64_t lo,
                        int64_t hi, int64_t hidden) {
  Activations<C> a(hidden);
  const C *i = a.i(), *f = a.f(), *g = a.g(), *o = a.o();
  std::vector<C> tanh_c(static_cast<size_t>(hidden));
  C* const tc = tanh_c.data();
  for (int64_t r = lo; r < hi; ++r) {
    const C* cr = c + r * hidden;
    const C* ghr = gh + r * hidden;
    const C* gcr = gc + r * hidden;
    C* dzr = dz + r * 4 * hidden;
    C* dcr = dc + r * hidden;
    a.compute(z + r * 4 * hidden);
    for (int64_t j = 0; j < hidden; ++j) tc[j] = f[j] * cr[j] + i[j] * g[j];  // c'
    simd::unary(UnaryOp::kTanh, tc, tc, hidden);
    for (int64_t j = 0; j < hidden; ++j) {
      const C t = tc[j];
      // The cell state's gradient: from c' itself, and through h' = o tanh(c').
      const C d = gcr[j] + (ghr[j] * o[j]) * ((C(1) - t) * (C(1) + t));
      dzr[j] = (d * g[j]) * (i[j] * (C(1) - i[j]));
      dzr[hidden + j] = (d * cr[j]) * (f[j] * (C(1) - f[j]));
      dzr[2 * hidden + j] = (d * i[j]) * ((C(1) - g[j]) * (C(1) + g[j]));
      dzr[3 * hidden + j] = (ghr[j] * t) * (o[j] * (C(1) - o[j]));
      dcr[j] = d * f[j];
    }
  }
}

// A row's GRU gates r, z and n (each H long) from its projections x and hg [3H] (the input's and
// the state's, gates r, z, n): r, z = sigmoid(x_rz + hg_rz), n = tanh(x_n + r hg_n), each step
// rounded as the composed ops.
template <typename C>
class GruGates {
 public:
  explicit GruGates(int64_t hidden) : hidden_(hidden), act_(static_cast<size_t>(3 * hidden)) {}
  void compute(const C* x, const C* hg) {
    C* const rz = act_.data();
    for (int64_t j = 0; j < 2 * hidden_; ++j) rz[j] = x[j] + hg[j];
    simd::unary(UnaryOp::kSigmoid, rz, rz, 2 * hidden_);
    for (int64_t j = 0; j < hidden_; ++j) n()[j] = x[2 * hidden_ + j] + rz[j] * hg[2 * hidden_ + j];
    simd::unary(UnaryOp::kTanh, n(), n(), hidden_);
  }
  C* r() { return act_.data(); }
  C* z() { return act_.data() + hidden_; }
  C* n() { return act_.data() + 2 * hidden_; }

 private:
  int64_t hidden_;
  std::vector<C> act_;
};

// Rows [lo, hi) of GruCell: x and hg [rows, 3H], h [rows, H] to h' = n + z (h - n).
template <typename C>
void gru_rows(const C* x, const C* hg, const C* h, C* out, int64_t lo, int64_t hi, int64_t hidden) {
  GruGates<C> a(hidden);
  const C *z = a.z(), *n = a.n();
  for (int64_t row = lo; row < hi; ++row) {
    a.compute(x + row * 3 * hidden, hg + row * 3 * hidden);
    const C* hrow = h + row * hidden;
    C* o = out + row * hidden;
    for (int64_t j = 0; j < hidden; ++j) o[j] = n[j] + z[j] * (hrow[j] - n[j]);
  }
}

// Rows [lo, hi) of GruCellBackward: from x, hg [rows, 3H], h and g (h''s gradient) [rows, H] to
// dx, dhg [rows, 3H] and dh [rows, H], the gates recomputed.
template <typename C>
void gru_backward_rows(const C* x, const C* hg, const C* h, const C* g, C* dx, C* dhg, C* dh,
                       int64_t lo, int64_t hi, int64_t hidden) {
  GruGates<C> a(hidden);
  const C *r = a.r(), *z = a.z(), *n = a.n();
  for (int64_t row = lo; row < hi; ++row) {
    const C* hr = hg + row * 3 * hidden;
    a.compute(x + row * 3 * hidden, hr);
    const C* hrow = h + row * hidden;
    const C* grow = g + row * hidden;
    C* dxr = dx + row * 3 * hidden;
    C* dhr = dhg + row * 3 * hidden;
    for (int64_t j = 0; j < hidden; ++j) {
      // h' = n + z (h - n): n's gradient g (1 - z), z's g (h - n), h's g z.
      const C pn = (grow[j] * (C(1) - z[j])) * ((C(1) - n[j]) * (C(1) + n[j]));
      const C pr = (pn * hr[2 * hidden + j]) * (r[j] * (C(1) - r[j]));
      const C pz = (grow[j] * (hrow[j] - n[j])) * (z[j] * (C(1) - z[j]));
      dxr[j] = dhr[j] = pr;
      dxr[hidden + j] = dhr[hidden + j] = pz;
      dxr[2 * hidden + j] = pn;
      dhr[2 * hidden + j] = pn * r[j];
      dh[row * hidden + j] = grow[j] * z[j];
    }
  }
}

// A cell op's kernel: rows_fn(in, out, lo, hi, hidden, C{}) over the rows [0, rows) of its state,
// the output `state` of shape [..., H] (rows = its elements / H; none: nothing to do), on the
// intra-op pool, in the float type C its dtype computes in, with the inputs as contiguous tensors
// of C and the outputs written through scratch tensors of C where theirs differs (16-bit floats:
// computed in float, rounded once).
template <typename F>
void over_rows(const KernelContext& ctx, size_t state, F&& rows_fn) {
  const Tensor& shaped = ctx.outputs[state];
  const int64_t hidden = shaped.size(shaped.ndim() - 1);
  if (shaped.numel() == 0) return;
  const int64_t rows = shaped.numel() / hidden;
  visit_compute_float(shaped.dtype(), [&](auto zero) {
    using C = decltype(zero);
    std::vector<Tensor> in, out;
    for (const Tensor& t : ctx.inputs) in.push_back(contiguous_as(t, dtype_of<C>()));
    for (const Tensor& t : ctx.outputs) {
      out.push_back(t.dtype() == dtype_of<C>() ? t : Tensor::empty(t.shape(), dtype_of<C>()));
    }
    parallel_for(0, rows, std::max<int64_t>(1, (int64_t{1} << 13) / hidden),
                 [&](int64_t lo, int64_t hi) { rows_fn(in, out, lo, hi, hidden, zero); });
    for (size_t k = 0; k < ctx.outputs.size(); ++k) {
      if (!out[k].is_same(ctx.outputs[k])) copy_into(ctx.outputs[k], out[k]);
    }
  });
}

// `g` or, undefined (no gradient reached that output), zeros like `like`.
Tensor or_zeros(const Tensor& g, const Tensor& like) { return g.defined() ? g : zeros_like(like); }

std::vector<Tensor> lstm_cell_grad(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                                   const Attrs&, const std::vector<Tensor>& grads) {
  if (!grads[0].defined() && !grads[1].defined()) return {Tensor(), Tensor()};
  const auto [dz, dc] =
      lstm_cell_backward(in[0], in[1], or_zeros(grads[0], out[0]), or_zeros(grads[1], out[1]));
  return {detail::input_grad(dz, in[0]), detail::input_grad(dc, in[1])};
}

// LstmCellBackward's rule: reverse mode through lstm_backward_rows's formulas, by hand. With s_x =
// a_x (1 - a_x) the sigmoids' derivatives, tg = 1 - g^2, T = 1 - tanh(c')^2, d the cell state's
// gradient (gc + gh o T) and G the upstream gradients of dz's quarters and of dc, each comment
// names the formulas whose terms a line gathers.
std::vector<Tensor> lstm_cell_backward_grad(const std::vector<Tensor>& in,
                                            const std::vector<Tensor>& out, const Attrs&,
                                            const std::vector<Tensor>& grads) {
  if (!grads[0].defined() && !grads[1].defined()) return {Tensor(), Tensor(), Tensor(), Tensor()};
  const Tensor& z = in[0];
  const Tensor& c = in[1];
  const Tensor& gh = in[2];
  const Tensor& gc = in[3];
  const int64_t last = z.ndim() - 1;
  const std::vector<Tensor> G = chunk(or_zeros(grads[0], out[0]), 4, last);
  const Tensor Gc = or_zeros(grads[1], out[1]);
  const std::vector<Tensor> act = chunk(sigmoid(z), 4, last);
  const Tensor& i = act[0];
  const Tensor& f = act[1];
  const Tensor& o = act[3];
  const Tensor g = tanh(chunk(z, 4, last)[2]);
  const Tensor si = i * (1.0 - i), sf = f * (1.0 - f), so = o * (1.0 - o), tg = 1.0 - g * g;
  const Tensor tc = tanh(f * c + i * g);
  const Tensor T = 1.0 - tc * tc;
  const Tensor d = gc + gh * o * T;
  // The gradient of d, from dc = d f, dz_g = d i tg, dz_f = d c s_f and dz_i = d g s_i.
  const Tensor D = Gc * f + G[2] * i * tg + G[1] * c * sf + G[0] * g * si;
  // tanh(c')'s, from dz_o = gh tc s_o and d; then c''s (c' = f c + i g).
  const Tensor dtc = G[3] * gh * so + D * gh * o * (tc * -2.0);
  const Tensor dcn = dtc * T;
  // The activations', from the formulas holding each, and c' = f c + i g.
  const Tensor a_i = G[2] * d * tg + G[0] * d * g * (1.0 - i * 2.0) + dcn * g;
  const Tensor a_f = Gc * d + G[1] * d * c * (1.0 - f * 2.0) + dcn * c;
  const Tensor a_g = G[2] * d * i * (g * -2.0) + G[0] * d * si + dcn * i;
  const Tensor a_o = G[3] * gh * tc * (1.0 - o * 2.0) + D * gh * T;
  const Tensor dz = cat({a_i * si, a_f * sf, a_g * tg, a_o * so}, last);
  const Tensor dc = G[1] * d * sf + dcn * f;      // dz_f = d c s_f; c' = f c + i g
  const Tensor dgh = G[3] * tc * so + D * o * T;  // dz_o = gh tc s_o; d = gc + gh o T
  return {detail::input_grad(dz, z), detail::input_grad(dc, c), detail::input_grad(dgh, gh),
          detail::input_grad(D, gc)};
}

// The checks of gates [..., 4H] and a state [..., H] of one floating dtype.
void check_gates_and_state(const char* op, const TensorMeta& z, const TensorMeta& c) {
  KILN_CHECK_DTYPE(is_floating_point(z.dtype) && z.dtype == c.dtype)
      << op << ": expected floating-point gates and c of one dtype, got " << z.dtype << " and "
      << c.dtype;
  const bool fits = z.ndim() >= 1 && c.ndim() == z.ndim() &&
                    std::equal(c.shape.begin(), c.shape.end() - 1, z.shape.begin()) &&
                    z.shape.back() == 4 * c.shape.back();
  KILN_CHECK_SHAPE(fits) << op << ": expected gates [..., 4H] and c [..., H] with the same "
                         << "leading dimensions, got " << shape_str(z.shape) << " and "
                         << shape_str(c.shape);
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
          check_gates_and_state("lstm_cell", ctx.input(0), ctx.input(1));
          return MetaList{ctx.input(1), ctx.input(1)};
        })
        .grad(lstm_cell_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          over_rows(ctx, 0,
                    [](const std::vector<Tensor>& in, const std::vector<Tensor>& out, int64_t lo,
                       int64_t hi, int64_t hidden, auto zero) {
                      using C = decltype(zero);
                      lstm_rows(in[0].data<C>(), in[1].data<C>(), out[0].data<C>(),
                                out[1].data<C>(), lo, hi, hidden);
                    });
        }));

KILN_REGISTER_OP(
    OpDef("LstmCellBackward")
        .input("gates")
        .input("c")
        .input("grad_h")
        .input("grad_c")
        .outputs(2)
        .doc("LstmCell's gradients (of gates [..., 4H] and of c [..., H]) from those of h' and "
             "c', the activations recomputed from the gates (Note [LSTM cell])")
        .infer([](const InferContext& ctx) {
          check_gates_and_state("lstm_cell_backward", ctx.input(0), ctx.input(1));
          for (size_t k = 2; k < 4; ++k) {
            const TensorMeta& g = ctx.input(k);
            KILN_CHECK_SHAPE(g.dtype == ctx.input(1).dtype && g.shape == ctx.input(1).shape)
                << "lstm_cell_backward: expected grad_h and grad_c of c's dtype and shape "
                << ctx.input(1).dtype << shape_str(ctx.input(1).shape) << ", got " << g.dtype
                << shape_str(g.shape);
          }
          return MetaList{ctx.input(0), ctx.input(1)};
        })
        .grad(lstm_cell_backward_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          over_rows(ctx, 1,
                    [](const std::vector<Tensor>& in, const std::vector<Tensor>& out, int64_t lo,
                       int64_t hi, int64_t hidden, auto zero) {
                      using C = decltype(zero);
                      lstm_backward_rows(in[0].data<C>(), in[1].data<C>(), in[2].data<C>(),
                                         in[3].data<C>(), out[0].data<C>(), out[1].data<C>(), lo,
                                         hi, hidden);
                    });
        }));

std::vector<Tensor> gru_cell_grad(const std::vector<Tensor>& in, const std::vector<Tensor>&,
                                  const Attrs&, const std::vector<Tensor>& grads) {
  if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor()};
  const std::vector<Tensor> d = gru_cell_backward(in[0], in[1], in[2], grads[0]);
  return {detail::input_grad(d[0], in[0]), detail::input_grad(d[1], in[1]),
          detail::input_grad(d[2], in[2])};
}

// GruCellBackward's rule: reverse mode through gru_backward_rows's formulas, by hand. With s_r,
// s_z the sigmoids' derivatives, tn = 1 - n^2, pn = g (1 - z) tn (n's pre-activation's
// gradient), and X, H, K the upstream gradients of dx's and dhg's thirds and of dh, each comment
// names the formulas whose terms a line gathers.
std::vector<Tensor> gru_cell_backward_grad(const std::vector<Tensor>& in,
                                           const std::vector<Tensor>& out, const Attrs&,
                                           const std::vector<Tensor>& grads) {
  if (!grads[0].defined() && !grads[1].defined() && !grads[2].defined()) {
    return {Tensor(), Tensor(), Tensor(), Tensor()};
  }
  const Tensor& x = in[0];
  const Tensor& hg = in[1];
  const Tensor& h = in[2];
  const Tensor& g = in[3];
  const int64_t last = x.ndim() - 1;
  const std::vector<Tensor> X = chunk(or_zeros(grads[0], out[0]), 3, last);
  const std::vector<Tensor> H = chunk(or_zeros(grads[1], out[1]), 3, last);
  const Tensor K = or_zeros(grads[2], out[2]);
  const std::vector<Tensor> xs = chunk(x, 3, last);
  const std::vector<Tensor> hs = chunk(hg, 3, last);
  const Tensor r = sigmoid(xs[0] + hs[0]), z = sigmoid(xs[1] + hs[1]);
  const Tensor n = tanh(xs[2] + r * hs[2]);
  const Tensor sr = r * (1.0 - r), sz = z * (1.0 - z), tn = 1.0 - n * n;
  const Tensor dn = g * (1.0 - z), hmn = h - n;
  const Tensor pn = dn * tn;
  const Tensor Pr = X[0] + H[0], Pz = X[1] + H[1];  // pr and pz are in dx and dhg both
  // pn's gradient: dx_n = pn, dhg_n = pn r, pr = pn hg_n s_r; then dn's (pn = dn tn).
  const Tensor bar_pn = X[2] + H[2] * r + Pr * hs[2] * sr;
  const Tensor bar_dn = bar_pn * tn;
  // n's (pz = g (h - n) s_z, pn = dn tn), z's (dh = g z, pz, dn = g (1 - z)), r's (pr, dhg_n).
  const Tensor bar_n = -(Pz * g * sz) + bar_pn * dn * (n * -2.0);
  const Tensor bar_z = K * g + Pz * g * hmn * (1.0 - z * 2.0) - bar_dn * g;
  const Tensor bar_r = Pr * pn * hs[2] * (1.0 - r * 2.0) + H[2] * pn;
  // Through the recomputed gates: n = tanh(x_n + r hg_n), r and z = sigmoid(x + hg).
  const Tensor an = bar_n * tn;
  const Tensor ar = (bar_r + an * hs[2]) * sr;
  const Tensor az = bar_z * sz;
  const Tensor bar_hn = Pr * pn * sr + an * r;  // pr = pn hg_n s_r; n's pre-activation
  const Tensor bar_g = K * z + Pz * sz * hmn + bar_dn * (1.0 - z);  // dh, pz, dn
  return {detail::input_grad(cat({ar, az, an}, last), x),
          detail::input_grad(cat({ar, az, bar_hn}, last), hg), detail::input_grad(Pz * g * sz, h),
          detail::input_grad(bar_g, g)};
}

// The checks of GRU gates x and hg [..., 3H] and a state h [..., H] of one floating dtype (and,
// for the backward, h''s gradient `g` like h).
void check_gru(const char* op, const InferContext& ctx) {
  const TensorMeta& h = ctx.input(2);
  KILN_CHECK_DTYPE(is_floating_point(h.dtype))
      << op << ": expected a floating-point h, got " << h.dtype;
  for (size_t k = 0; k < ctx.num_inputs(); ++k) {
    const TensorMeta& t = ctx.input(k);
    Shape want = h.shape;
    if (k < 2 && !want.empty()) want.back() *= 3;
    KILN_CHECK_SHAPE(t.dtype == h.dtype && t.shape == want)
        << op << ": expected x and hg [..., 3H] and h [..., H] (and its gradient) of one dtype, "
        << "got " << t.dtype << shape_str(t.shape) << " beside h " << h.dtype << shape_str(h.shape);
  }
}

KILN_REGISTER_OP(
    OpDef("GruCell")
        .input("x")
        .input("hg")
        .input("h")
        .doc("A GRU step's pointwise part: x [..., 3H] and hg [..., 3H] (the input's and the "
             "state's projections, gates r, z, n) and h [..., H] to h' = n + z (h - n), with r, "
             "z = sigmoid(x_rz + hg_rz) and n = tanh(x_n + r hg_n) (Note [LSTM cell])")
        .infer([](const InferContext& ctx) {
          check_gru("gru_cell", ctx);
          return MetaList{ctx.input(2)};
        })
        .grad(gru_cell_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          over_rows(ctx, 0,
                    [](const std::vector<Tensor>& in, const std::vector<Tensor>& out, int64_t lo,
                       int64_t hi, int64_t hidden, auto zero) {
                      using C = decltype(zero);
                      gru_rows(in[0].data<C>(), in[1].data<C>(), in[2].data<C>(), out[0].data<C>(),
                               lo, hi, hidden);
                    });
        }));

KILN_REGISTER_OP(
    OpDef("GruCellBackward")
        .input("x")
        .input("hg")
        .input("h")
        .input("grad_output")
        .outputs(3)
        .doc("GruCell's gradients (of x, hg and h) from that of h', the gates recomputed "
             "(Note [LSTM cell])")
        .infer([](const InferContext& ctx) {
          check_gru("gru_cell_backward", ctx);
          return MetaList{ctx.input(0), ctx.input(1), ctx.input(2)};
        })
        .grad(gru_cell_backward_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          over_rows(ctx, 2,
                    [](const std::vector<Tensor>& in, const std::vector<Tensor>& out, int64_t lo,
                       int64_t hi, int64_t hidden, auto zero) {
                      using C = decltype(zero);
                      gru_backward_rows(in[0].data<C>(), in[1].data<C>(), in[2].data<C>(),
                                        in[3].data<C>(), out[0].data<C>(), out[1].data<C>(),
                                        out[2].data<C>(), lo, hi, hidden);
                    });
        }));

}  // namespace

std::pair<Tensor, Tensor> lstm_cell(const Tensor& gates, const Tensor& c) {
  static const OpDefPtr op = OpRegistry::Instance().get("LstmCell");
  TensorList out = call_op(*op, {gates, c});
  return {std::move(out[0]), std::move(out[1])};
}

std::pair<Tensor, Tensor> lstm_cell_backward(const Tensor& gates, const Tensor& c,
                                             const Tensor& grad_h, const Tensor& grad_c) {
  static const OpDefPtr op = OpRegistry::Instance().get("LstmCellBackward");
  TensorList out = call_op(*op, {gates, c, grad_h, grad_c});
  return {std::move(out[0]), std::move(out[1])};
}

Tensor gru_cell(const Tensor& x, const Tensor& hg, const Tensor& h) {
  static const OpDefPtr op = OpRegistry::Instance().get("GruCell");
  return call_op(*op, {x, hg, h})[0];
}

std::vector<Tensor> gru_cell_backward(const Tensor& x, const Tensor& hg, const Tensor& h,
                                      const Tensor& grad_output) {
  static const OpDefPtr op = OpRegistry::Instance().get("GruCellBackward");
  TensorList out = call_op(*op, {x, hg, h, grad_output});
  return {out.begin(), out.end()};
}

}  // namespace kiln
