// MatMul, BatchMatMul, Linear, AddMM: the matrix-product ops (kiln::matmul, bmm, linear, addmm).
//
// Shapes follow NumPy's matmul (a 1-d operand is promoted to a matrix and the added dimension
// dropped from the result; batch dimensions broadcast). Results take result_type() of the
// operands; float16/bfloat16 are computed in float32 and rounded once. The arithmetic lives in
// gemm.cc.
#include <cmath>
#include <optional>

#include "kiln/functional/elementwise.h"
#include "kiln/functional/nn.h"
#include "kiln/functional/reduce.h"
#include "kiln/functional/shape.h"
#include "kiln/op.h"
#include "ops/dtype_convert.h"
#include "ops/fused_elementwise.h"
#include "ops/gemm.h"
#include "ops/nn_grad.h"

namespace kiln {
namespace {

// NumPy broadcasting of two shapes, or nullopt when they do not broadcast.
std::optional<Shape> try_broadcast(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Runs gemm in the compute dtype of `out` (float32 for the 16-bit floats) on `out` viewed as
// `full_shape`, then rounds into `out` when the dtypes differ. `prefill` (broadcast to the
// result) is written first when the epilogue accumulates.
void gemm_into(const Tensor& a, const Tensor& b, const Tensor& out, const Shape& full_shape,
               GemmEpilogue ep, const Tensor& prefill = {}) {
  const DType cd = compute_dtype(out.dtype());
  const Tensor dst = out.view(full_shape);
  const Tensor target = dst.dtype() == cd ? dst : Tensor::empty(full_shape, cd);
  if (ep.bias.defined()) ep.bias = as_dtype(ep.bias, cd).contiguous();
  if (prefill.defined()) copy_into(target, prefill);
  gemm(as_dtype(a, cd), as_dtype(b, cd), target, ep);
  if (!target.is_same(dst)) copy_into(dst, target);
}

// out[..., n] = epilogue(x[..., k] @ b[k, n]), the leading dimensions of x taken as rows.
void rows_product(const Tensor& x, const Tensor& b, const Tensor& out, const GemmEpilogue& ep) {
  const int64_t rows = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  gemm_into(x.reshape({rows, x.size(-1)}), b, out, {rows, b.size(1)}, ep);
}

DType product_dtype(const char* op, const MetaList& operands, bool allow_bool) {
  const DType dtype = result_type(operands);
  KILN_CHECK_DTYPE(allow_bool || dtype != DType::kBool)
      << op << ": expected numeric tensors, got bool";
  return dtype;
}

// The shapes of a NumPy matmul: `out` is the result, `full` the same with the dimensions that
// 1-d operands drop ([batch..., n, m]).
struct MatmulShapes {
  Shape out;
  Shape full;
};

MatmulShapes matmul_shapes(const Shape& a, const Shape& b) {
  KILN_CHECK_SHAPE(!a.empty() && !b.empty())
      << "matmul: expected a and b to have at least 1 dimension, got a with shape " << shape_str(a)
      << " and b with shape " << shape_str(b);
  const Shape a2 = a.size() == 1 ? Shape{1, a[0]} : a;
  const Shape b2 = b.size() == 1 ? Shape{b[0], 1} : b;
  const int64_t ka = a2.back(), kb = b2[b2.size() - 2];
  KILN_CHECK_SHAPE(ka == kb) << "matmul: a has shape " << shape_str(a) << " and b has shape "
                             << shape_str(b) << "; expected a.shape[-1] == b.shape["
                             << (b.size() == 1 ? "0" : "-2") << "], got " << ka << " and " << kb;
  const Shape batch_a(a2.begin(), a2.end() - 2), batch_b(b2.begin(), b2.end() - 2);
  const std::optional<Shape> batch = try_broadcast(batch_a, batch_b);
  KILN_CHECK_SHAPE(batch.has_value())
      << "matmul: a has shape " << shape_str(a) << " and b has shape " << shape_str(b)
      << "; expected batch dimensions that broadcast, got " << shape_str(batch_a) << " and "
      << shape_str(batch_b);
  MatmulShapes s{*batch, *batch};
  s.full.push_back(a2[a2.size() - 2]);
  s.full.push_back(b2.back());
  if (a.size() > 1) s.out.push_back(a2[a2.size() - 2]);
  if (b.size() > 1) s.out.push_back(b2.back());
  return s;
}

// x^T over the last two dimensions.
Tensor mT(const Tensor& x) { return transpose(x, -2, -1); }

// The gradients of a @ b (NumPy matmul) for the output gradient g. 1-d operands are promoted as
// in the forward and the gradient reshaped back; a broadcast batch dimension sums its gradient.
std::vector<Tensor> matmul_grad(const std::vector<Tensor>& inputs,
                                const std::vector<Tensor>& outputs, const Attrs&,
                                const std::vector<Tensor>& grad_outputs) {
  const Tensor& a = inputs[0];
  const Tensor& b = inputs[1];
  std::vector<Tensor> grads(2);
  if (!grad::differentiable(a) && !grad::differentiable(b)) return grads;
  const Tensor a2 = a.ndim() == 1 ? unsqueeze(a, 0) : a;
  const Tensor b2 = b.ndim() == 1 ? unsqueeze(b, 1) : b;
  const Tensor g = reshape(grad::or_zeros(grad_outputs[0], outputs[0]),
                           matmul_shapes(a.shape(), b.shape()).full);
  if (grad::differentiable(a)) {
    grads[0] = grad::as_grad_of(reshape(sum_to(matmul(g, mT(b2)), a2.shape()), a.shape()), a);
  }
  if (grad::differentiable(b)) {
    Tensor gb;
    if (b2.ndim() == 2 && g.ndim() > 2) {
      // A matrix b shared by every batch (whose batch dimensions are then a's): one product over
      // the batch-flattened rows instead of a batched product and a sum.
      const int64_t rows = shape_numel(Shape(g.shape().begin(), g.shape().end() - 1));
      gb = matmul(transpose(reshape(a2, {rows, a2.size(-1)}), 0, 1),
                  reshape(g, {rows, g.size(-1)}));
    } else {
      gb = sum_to(matmul(mT(a2), g), b2.shape());
    }
    grads[1] = grad::as_grad_of(reshape(gb, b.shape()), b);
  }
  return grads;
}

KILN_REGISTER_OP(
    OpDef("MatMul")
        .input("a")
        .input("b")
        .doc("NumPy matmul: 1-d operands promoted and squeezed, batch dimensions broadcast")
        .infer([](const InferContext& ctx) {
          const DType dtype = product_dtype("matmul", ctx.inputs, /*allow_bool=*/true);
          return MetaList{{dtype, matmul_shapes(ctx.input(0).shape, ctx.input(1).shape).out}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& a = ctx.inputs[0];
          const Tensor& b = ctx.inputs[1];
          const MatmulShapes s = matmul_shapes(a.shape(), b.shape());
          gemm_into(a.ndim() == 1 ? a.unsqueeze(0) : a, b.ndim() == 1 ? b.unsqueeze(1) : b,
                    ctx.outputs[0], s.full, {});
        })
        .grad(matmul_grad));

KILN_REGISTER_OP(OpDef("BatchMatMul")
                     .input("a")
                     .input("b")
                     .doc("[B, n, k] @ [B, k, m] -> [B, n, m], without broadcasting")
                     .infer([](const InferContext& ctx) {
                       const Shape& a = ctx.input(0).shape;
                       const Shape& b = ctx.input(1).shape;
                       KILN_CHECK_SHAPE(a.size() == 3 && b.size() == 3)
                           << "bmm: expected 3-d tensors, got a with shape " << shape_str(a)
                           << " and b with shape " << shape_str(b);
                       KILN_CHECK_SHAPE(a[0] == b[0])
                           << "bmm: a has shape " << shape_str(a) << " and b has shape "
                           << shape_str(b) << "; expected a.shape[0] == b.shape[0], got " << a[0]
                           << " and " << b[0];
                       KILN_CHECK_SHAPE(a[2] == b[1])
                           << "bmm: a has shape " << shape_str(a) << " and b has shape "
                           << shape_str(b) << "; expected a.shape[2] == b.shape[1], got " << a[2]
                           << " and " << b[1];
                       const DType dtype = product_dtype("bmm", ctx.inputs, /*allow_bool=*/true);
                       return MetaList{{dtype, {a[0], a[1], b[2]}}};
                     })
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       const Tensor& out = ctx.outputs[0];
                       gemm_into(ctx.inputs[0], ctx.inputs[1], out, out.shape(), {});
                     })
                     .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                              const Attrs&, const std::vector<Tensor>& grad_outputs) {
                       const Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
                       std::vector<Tensor> grads(2);
                       if (grad::differentiable(in[0])) {
                         grads[0] = grad::as_grad_of(bmm(g, transpose(in[1], 1, 2)), in[0]);
                       }
                       if (grad::differentiable(in[1])) {
                         grads[1] = grad::as_grad_of(bmm(transpose(in[0], 1, 2), g), in[1]);
                       }
                       return grads;
                     }));

// The gradients of x @ weight^T + bias (transposed, Linear's layout) or x @ weight + bias, for
// x [..., k], 2-d weight and optional bias [n], given the output gradient g [..., n].
std::vector<Tensor> dense_grad(const Tensor& x, const Tensor& weight, const Tensor& bias,
                               bool transposed, const Tensor& g) {
  std::vector<Tensor> grads(3);
  if (grad::differentiable(x)) {
    grads[0] = grad::as_grad_of(matmul(g, transposed ? weight : transpose(weight, 0, 1)), x);
  }
  if (grad::differentiable(weight)) {
    // Every leading dimension of x is a row: one [n, rows] @ [rows, k] product.
    const int64_t n = g.size(-1), k = x.size(-1);
    const int64_t rows = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
    const Tensor g2 = reshape(g, {rows, n});
    const Tensor x2 = reshape(x, {rows, k});
    grads[1] = grad::as_grad_of(transposed ? matmul(transpose(g2, 0, 1), x2)
                                           : matmul(transpose(x2, 0, 1), g2),
                                weight);
  }
  if (grad::differentiable(bias)) grads[2] = grad::as_grad_of(sum_to(g, bias.shape()), bias);
  return grads;
}

KILN_REGISTER_OP(
    OpDef("Linear")
        .input("x")
        .input("weight")
        .input("bias", /*optional=*/true)
        .doc("x @ weight^T + bias with weight [out_features, in_features]")
        .infer([](const InferContext& ctx) {
          const Shape& x = ctx.input(0).shape;
          const Shape& w = ctx.input(1).shape;
          KILN_CHECK_SHAPE(!x.empty()) << "linear: expected x to have at least 1 dimension, got "
                                          "a 0-d tensor";
          KILN_CHECK_SHAPE(w.size() == 2)
              << "linear: expected weight of shape [out_features, in_features], got "
              << shape_str(w);
          KILN_CHECK_SHAPE(x.back() == w[1])
              << "linear: x has shape " << shape_str(x) << " and weight has shape " << shape_str(w)
              << "; expected x.shape[-1] == weight.shape[1], got " << x.back() << " and " << w[1];
          const TensorMeta& bias = ctx.input(2);
          KILN_CHECK_SHAPE(!bias.defined || bias.shape == Shape{w[0]})
              << "linear: weight has shape " << shape_str(w) << "; expected bias of shape [" << w[0]
              << "], got " << shape_str(bias.shape);
          Shape out(x.begin(), x.end() - 1);
          out.push_back(w[0]);
          return MetaList{{product_dtype("linear", ctx.inputs, /*allow_bool=*/false), out}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          GemmEpilogue ep;
          ep.bias = ctx.inputs[2];
          // weight^T as a column-major view: oneDNN reads it through strides, no copy.
          rows_product(ctx.inputs[0], ctx.inputs[1].transpose(0, 1), ctx.outputs[0], ep);
        })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs&,
                 const std::vector<Tensor>& grad_outputs) {
          return dense_grad(in[0], in[1], in[2], /*transposed=*/true,
                            grad::or_zeros(grad_outputs[0], out[0]));
        }));

KILN_REGISTER_OP(
    OpDef("AddMM")
        .input("bias")
        .input("a")
        .input("b")
        .attr("beta", AttrKind::kFloat, 1.0)
        .attr("alpha", AttrKind::kFloat, 1.0)
        .doc("beta * bias + alpha * (a @ b) for 2-d a and b; bias broadcasts to the product")
        .infer([](const InferContext& ctx) {
          const Shape& bias = ctx.input(0).shape;
          const Shape& a = ctx.input(1).shape;
          const Shape& b = ctx.input(2).shape;
          KILN_CHECK_SHAPE(a.size() == 2 && b.size() == 2)
              << "addmm: expected 2-d a and b, got a with shape " << shape_str(a)
              << " and b with shape " << shape_str(b);
          KILN_CHECK_SHAPE(a[1] == b[0])
              << "addmm: a has shape " << shape_str(a) << " and b has shape " << shape_str(b)
              << "; expected a.shape[1] == b.shape[0], got " << a[1] << " and " << b[0];
          const Shape out{a[0], b[1]};
          const std::optional<Shape> joined = try_broadcast(bias, out);
          KILN_CHECK_SHAPE(joined.has_value() && *joined == out)
              << "addmm: bias has shape " << shape_str(bias) << "; expected a shape that "
              << "broadcasts to the product's " << shape_str(out);
          const DType dtype = product_dtype("addmm", ctx.inputs, /*allow_bool=*/false);
          if (!is_floating_point(dtype)) {
            const double alpha = ctx.attrs.get<double>("alpha");
            const double beta = ctx.attrs.get<double>("beta");
            // 2^62 keeps the conversion to int64 defined.
            const auto whole = [](double v) { return v == std::trunc(v) && std::fabs(v) < 0x1p62; };
            KILN_CHECK_VALUE(whole(alpha) && whole(beta))
                << "addmm: expected whole-number alpha and beta for " << dtype
                << " tensors, got alpha=" << alpha << " and beta=" << beta;
          }
          return MetaList{{dtype, out}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          GemmEpilogue ep;
          ep.alpha = ctx.attrs.get<double>("alpha");
          ep.beta = ctx.attrs.get<double>("beta");
          // beta == 0 ignores bias entirely (nan and inf included), as BLAS and PyTorch do.
          ep.accumulate = ep.beta != 0.0;
          gemm_into(ctx.inputs[1], ctx.inputs[2], out, out.shape(), ep,
                    ep.accumulate ? ctx.inputs[0] : Tensor());
        })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                 const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
          const Tensor& bias = in[0];
          const Tensor& a = in[1];
          const Tensor& b = in[2];
          const double beta = attrs.get<double>("beta");
          const double alpha = attrs.get<double>("alpha");
          const Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
          const auto scaled = [](const Tensor& t, double s) { return s == 1.0 ? t : t * s; };
          std::vector<Tensor> grads(3);
          if (grad::differentiable(bias)) {
            // beta == 0 ignores bias entirely (see the kernel): its gradient is zero.
            grads[0] = beta == 0.0 ? zeros_like(bias)
                                   : grad::as_grad_of(sum_to(scaled(g, beta), bias.shape()), bias);
          }
          if (grad::differentiable(a)) {
            grads[1] = grad::as_grad_of(scaled(matmul(g, transpose(b, 0, 1)), alpha), a);
          }
          if (grad::differentiable(b)) {
            grads[2] = grad::as_grad_of(scaled(matmul(transpose(a, 0, 1), g), alpha), b);
          }
          return grads;
        }));

// The activation of a FusedMatMul ("none", or a unary instruction of FusedElementwise).
std::optional<simd::UnaryOp> fused_activation(const std::string& name) {
  if (name == "none") return std::nullopt;
  const std::optional<simd::UnaryOp> op = fused::unary_instruction(name);
  KILN_CHECK_VALUE(op && is_gemm_activation(*op))
      << "FusedMatMul: expected activation 'none', 'Relu', 'Gelu', 'GeluTanh', 'Silu', 'Sigmoid' "
         "or 'Tanh', got '"
      << name << "'";
  return op;
}

// g * act'(z) for the activation `op` of a FusedMatMul, with z its input and y = act(z).
Tensor activation_grad(simd::UnaryOp op, const Tensor& z, const Tensor& y, const Tensor& g) {
  constexpr double kSqrt2 = 1.4142135623730951;
  constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1 / sqrt(2 pi)
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  constexpr double kGeluCoeff = 0.044715;
  switch (op) {
    case simd::UnaryOp::kRelu:
      return where(gt(z, Tensor::scalar(0.0)), g, Tensor::scalar(0.0));
    case simd::UnaryOp::kSigmoid:
      return g * y * (1.0 - y);
    case simd::UnaryOp::kTanh:
      return g * (1.0 - square(y));
    case simd::UnaryOp::kSilu: {
      const Tensor s = sigmoid(z);
      return g * s * (1.0 + z * (1.0 - s));
    }
    case simd::UnaryOp::kGeluErf:
      // d/dz z * Phi(z) = Phi(z) + z * phi(z)
      return g * (0.5 * (1.0 + erf(z / kSqrt2)) + z * exp(square(z) * -0.5) * kInvSqrt2Pi);
    case simd::UnaryOp::kGeluTanh: {
      const Tensor t = tanh((z + kGeluCoeff * z * square(z)) * kSqrt2OverPi);
      const Tensor du = (1.0 + 3.0 * kGeluCoeff * square(z)) * kSqrt2OverPi;
      return g * (0.5 * (1.0 + t) + 0.5 * z * (1.0 - square(t)) * du);
    }
    default:
      KILN_FAIL(kValue) << "FusedMatMul: no gradient for activation " << static_cast<int>(op);
  }
}

KILN_REGISTER_OP(
    OpDef("FusedMatMul")
        .input("x")
        .input("weight")
        .input("bias", /*optional=*/true)
        .attr("transpose_weight", AttrKind::kBool, false)
        .attr("activation", AttrKind::kString, std::string("none"))
        .doc("activation(x @ weight + bias), or x @ weight^T with transpose_weight (Linear's "
             "layout), for float32/float64 x [..., k] and 2-d weight; made by kiln_cpu's "
             "MatmulEpilogueFusion pass, run as one oneDNN matmul with post-ops")
        .infer([](const InferContext& ctx) {
          const TensorMeta& x = ctx.input(0);
          const TensorMeta& w = ctx.input(1);
          const TensorMeta& bias = ctx.input(2);
          fused_activation(ctx.attrs.get<std::string>("activation"));
          KILN_CHECK_DTYPE((x.dtype == DType::kFloat32 || x.dtype == DType::kFloat64) &&
                           w.dtype == x.dtype && (!bias.defined || bias.dtype == x.dtype))
              << "FusedMatMul: expected float32 or float64 operands of one dtype";
          const bool transposed = ctx.attrs.get<bool>("transpose_weight");
          KILN_CHECK_SHAPE(x.ndim() >= 1 && w.ndim() == 2)
              << "FusedMatMul: expected x with at least 1 dimension and a 2-d weight, got "
              << shape_str(x.shape) << " and " << shape_str(w.shape);
          const int64_t k = transposed ? w.shape[1] : w.shape[0];
          const int64_t n = transposed ? w.shape[0] : w.shape[1];
          KILN_CHECK_SHAPE(x.shape.back() == k)
              << "FusedMatMul: x has shape " << shape_str(x.shape) << " and weight "
              << shape_str(w.shape) << "; expected x.shape[-1] == " << k;
          KILN_CHECK_SHAPE(!bias.defined || bias.shape == Shape{n})
              << "FusedMatMul: expected bias of shape [" << n << "], got " << shape_str(bias.shape);
          Shape out(x.shape.begin(), x.shape.end() - 1);
          out.push_back(n);
          return MetaList{{x.dtype, out}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& weight = ctx.inputs[1];
          GemmEpilogue ep;
          ep.bias = ctx.inputs[2];
          ep.activation = fused_activation(ctx.attrs.get<std::string>("activation"));
          rows_product(ctx.inputs[0],
                       ctx.attrs.get<bool>("transpose_weight") ? weight.transpose(0, 1) : weight,
                       ctx.outputs[0], ep);
        })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                 const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
          const std::string activation = attrs.get<std::string>("activation");
          Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
          if (activation != "none") {
            // The pre-activation product, computed again (one more matmul) rather than kept.
            static const OpDefPtr op = OpRegistry::Instance().get("FusedMatMul");
            Attrs linear_attrs = attrs;
            linear_attrs.set("activation", std::string("none"));
            const Tensor z = call_op(*op, in, linear_attrs)[0];
            g = activation_grad(*fused_activation(activation), z, out[0], g);
          }
          return dense_grad(in[0], in[1], in[2], attrs.get<bool>("transpose_weight"), g);
        }));

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  static const OpDefPtr op = OpRegistry::Instance().get("MatMul");
  return call_op(*op, {a, b})[0];
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  static const OpDefPtr op = OpRegistry::Instance().get("BatchMatMul");
  return call_op(*op, {a, b})[0];
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  static const OpDefPtr op = OpRegistry::Instance().get("Linear");
  return call_op(*op, {x, weight, bias})[0];
}

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, double beta, double alpha) {
  static const OpDefPtr op = OpRegistry::Instance().get("AddMM");
  return call_op(*op, {bias, a, b}, {{"beta", beta}, {"alpha", alpha}})[0];
}

}  // namespace kiln
