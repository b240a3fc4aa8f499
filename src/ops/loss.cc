// CrossEntropy, NLLLoss and MSELoss (kiln::cross_entropy, nll_loss, mse_loss) with PyTorch's
// semantics: class dimension 1 of [N, C] or [N, C, d...] input (or a single [C] sample with a 0-d
// target), ignore_index, label smoothing, and reduction "mean", "sum" or "none".
//
// Per-element losses are computed in parallel in float32 (float64 for float64 input) and summed
// in float64 in a fixed order, so results do not depend on the thread count.
#include <algorithm>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/strided_loop.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/nn.h"
#include "kiln/functional/reduce.h"
#include "kiln/functional/shape.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/dtype_convert.h"
#include "ops/grad_util.h"
#include "ops/nn_grad.h"
#include "ops/simd/float_kernels.h"

namespace kiln {
namespace {

enum class Reduction { kNone, kMean, kSum };

Reduction parse_reduction(const char* op, const std::string& s) {
  if (s == "mean") return Reduction::kMean;
  if (s == "sum") return Reduction::kSum;
  KILN_CHECK_VALUE(s == "none") << op << ": expected reduction 'mean', 'sum' or 'none', got '" << s
                                << "'";
  return Reduction::kNone;
}

// Checks input [N, C, d...] (or [C]) against target [N, d...] (or []) and returns the shape of
// the per-element loss, which is the target's.
Shape class_loss_shape(const char* op, const TensorMeta& input, const TensorMeta& target) {
  KILN_CHECK_DTYPE(is_floating_point(input.dtype))
      << op << ": expected floating-point input, got " << input.dtype;
  KILN_CHECK_DTYPE(is_integral(target.dtype))
      << op << ": expected integer class indices as target, got " << target.dtype;
  KILN_CHECK_SHAPE(input.ndim() >= 1)
      << op << ": expected input of shape [N, C, ...] or [C], got a 0-d tensor";
  Shape expected = input.shape;
  expected.erase(expected.begin() + (input.ndim() == 1 ? 0 : 1));
  KILN_CHECK_SHAPE(target.shape == expected)
      << op << ": input has shape " << shape_str(input.shape) << " and target has shape "
      << shape_str(target.shape) << "; expected target of shape " << shape_str(expected);
  return expected;
}

MetaList class_loss_infer(const char* op, const InferContext& ctx) {
  const Shape loss_shape = class_loss_shape(op, ctx.input(0), ctx.input(1));
  const Reduction r = parse_reduction(op, ctx.attrs.get<std::string>("reduction"));
  return MetaList{{ctx.input(0).dtype, r == Reduction::kNone ? loss_shape : Shape{}}};
}

struct ClassLoss {
  const char* op;
  bool log_softmax;  // CrossEntropy takes logits; NLLLoss takes log-probabilities
  double smoothing;
  int64_t ignore_index;
  Reduction reduction;
};

// Writes the reduced loss or the per-element losses (in compute dtype C) into out.
template <typename C>
void store_losses(const std::vector<C>& losses, int64_t valid, Reduction reduction,
                  const Tensor& out) {
  const Tensor target =
      out.dtype() == dtype_of<C>() ? out : Tensor::empty(out.shape(), dtype_of<C>());
  C* y = target.data<C>();
  if (reduction == Reduction::kNone) {
    std::copy(losses.begin(), losses.end(), y);
  } else {
    double total = 0;
    for (C l : losses) total += static_cast<double>(l);
    // A mean over zero counted elements is 0 / 0 = nan, as in PyTorch.
    y[0] =
        static_cast<C>(reduction == Reduction::kSum ? total : total / static_cast<double>(valid));
  }
  if (!target.is_same(out)) copy_into(out, target);
}

// A target of `op` that is neither a class of `classes` nor ignore_index is an index error.
void check_target(const char* op, int64_t y, int64_t classes, int64_t ignore_index) {
  KILN_CHECK_INDEX(y == ignore_index || (y >= 0 && y < classes))
      << op << ": target " << y << " is out of range for " << classes
      << " classes (expected 0 <= target < " << classes << ", or ignore_index " << ignore_index
      << ")";
}

template <typename C>
void class_loss(const ClassLoss& cfg, const Tensor& input, const Tensor& target,
                const Tensor& out) {
  const Tensor x = as_dtype(input, dtype_of<C>()).contiguous();
  const bool unbatched = x.ndim() == 1;
  const int64_t classes = x.size(unbatched ? 0 : 1);
  const int64_t batch = unbatched ? 1 : x.size(0);
  const Tensor t = as_dtype(target, DType::kInt64).contiguous();
  const int64_t* labels = t.numel() > 0 ? t.data<int64_t>() : nullptr;
  const int64_t positions = t.numel();
  const int64_t inner = batch > 0 ? positions / batch : 1;  // the d... of [N, C, d...]
  int64_t valid = 0;
  for (int64_t i = 0; i < positions; ++i) {
    check_target(cfg.op, labels[i], classes, cfg.ignore_index);
    valid += labels[i] != cfg.ignore_index;
  }
  std::vector<C> losses(static_cast<size_t>(positions));
  const C* px = x.numel() > 0 ? x.data<C>() : nullptr;
  const double eps = cfg.smoothing;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, classes));
  parallel_for(0, positions, grain, [&](int64_t lo, int64_t hi) {
    std::vector<C> row(cfg.log_softmax ? static_cast<size_t>(classes) : 0);
    for (int64_t pos = lo; pos < hi; ++pos) {
      const int64_t y = labels[pos];
      if (y == cfg.ignore_index) {
        losses[pos] = 0;
        continue;
      }
      const C* base = px + (pos / inner) * classes * inner + pos % inner;
      if (!cfg.log_softmax) {
        losses[pos] = -base[y * inner];
        continue;
      }
      for (int64_t c = 0; c < classes; ++c) row[c] = base[c * inner];
      simd::log_softmax_row(row.data(), row.data(), classes);
      double loss = -static_cast<double>(row[y]);
      if (eps > 0) {
        double total = 0;
        for (C v : row) total -= static_cast<double>(v);
        loss = (1 - eps) * loss + eps / static_cast<double>(classes) * total;
      }
      losses[pos] = static_cast<C>(loss);
    }
  });
  store_losses<C>(losses, valid, cfg.reduction, out);
}

void run_class_loss(const ClassLoss& cfg, KernelContext& ctx) {
  if (compute_dtype(ctx.outputs[0].dtype()) == DType::kFloat64) {
    class_loss<double>(cfg, ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]);
  } else {
    class_loss<float>(cfg, ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]);
  }
}

// Note [Class loss gradients]
// Per position (a target element t at class dimension cd of the input), CrossEntropy's loss is
// (1 - s) * -logp[t] + s / C * sum_c -logp[c] with logp = log_softmax(logits), whose gradient in
// the logits is softmax(logits) - (1 - s) * onehot(t) - s / C; NLLLoss's, -input[t], has gradient
// -onehot(t). A position's weight is the output gradient (per position for "none", the scalar one
// for "sum", that divided by the number of counted positions for "mean"), and 0 at ignore_index.
std::vector<Tensor> class_loss_grad(const ClassLoss& cfg, const std::vector<Tensor>& inputs,
                                    const std::vector<Tensor>& outputs,
                                    const std::vector<Tensor>& grad_outputs) {
  const Tensor& x = inputs[0];
  const Tensor& target = inputs[1];
  const DType cd = compute_dtype(x.dtype());
  const int64_t class_dim = x.ndim() == 1 ? 0 : 1;
  const int64_t classes = x.size(class_dim);
  const Tensor g = to(grad::or_zeros(grad_outputs[0], outputs[0]), cd);
  const Tensor valid = ne(target, Tensor::scalar(cfg.ignore_index));
  const Tensor counted = to(valid, cd);
  // With every position ignored the mean loss is 0 / 0 = NaN, but no position has a gradient:
  // dividing by at least 1 keeps them 0 (0 * inf was NaN), as PyTorch's are.
  const Tensor weight = cfg.reduction == Reduction::kMean
                            ? counted * (g / maximum(sum(counted), Tensor::scalar(1.0)))
                            : counted * g;
  // `hit` at each counted row's target class, 0 elsewhere: GatherBackward (a zero fill and one
  // write per row) rather than comparing every class with the target, which made and converted a
  // bool tensor of x's size (cross_entropy's backward took 2.5 ms for [1024, 1024], PyTorch 1.5).
  // Without classes every position was ignored (the forward checks targets): no gradient to
  // route, and no class 0 for ignored rows to add their 0 at.
  if (classes == 0) return {grad::as_grad_of(zeros(x.shape(), cd), x), Tensor()};
  // The targets checked again: the forward's check is gone when the loss itself is unused (a
  // jitted gradient step drops its node), and GatherBackward would wrap a negative one.
  static const OpDefPtr class_target_index = OpRegistry::Instance().get("ClassTargetIndex");
  const Tensor targets = call_op(
      *class_target_index, {target},
      {{"op", std::string(cfg.op)}, {"classes", classes}, {"ignore_index", cfg.ignore_index}})[0];
  const auto at_targets = [&](double hit) {
    // Ignored rows add their 0 at class 0.
    const Tensor index = unsqueeze(targets, class_dim);
    return detail::gather_backward(unsqueeze(counted * hit, class_dim), index, class_dim,
                                   x.shape());
  };
  Tensor dx;
  if (cfg.log_softmax) {
    dx = softmax(to(x, cd), class_dim) - at_targets(1.0 - cfg.smoothing);
    if (cfg.smoothing > 0) dx = dx - cfg.smoothing / static_cast<double>(classes);
  } else {
    dx = at_targets(-1.0);
  }
  return {grad::as_grad_of(dx * unsqueeze(weight, class_dim), x), Tensor()};
}

KILN_REGISTER_OP(
    OpDef("ClassTargetIndex")
        .input("target")
        .attr("op", AttrKind::kString)
        .attr("classes", AttrKind::kInt)
        .attr("ignore_index", AttrKind::kInt)
        .doc("The class losses' gradient index: each target as int64, 0 at ignore_index; a "
             "target out of range is an index error naming the loss `op`")
        .traits(kTraitNotDifferentiable)
        .infer([](const InferContext& ctx) {
          KILN_CHECK_DTYPE(is_integral(ctx.input(0).dtype))
              << "ClassTargetIndex: expected integer targets, got " << ctx.input(0).dtype;
          return MetaList{{DType::kInt64, ctx.input(0).shape}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const std::string op = ctx.attrs.get<std::string>("op");
          const int64_t classes = ctx.attrs.get<int64_t>("classes");
          const int64_t ignore_index = ctx.attrs.get<int64_t>("ignore_index");
          const Tensor t = as_dtype(ctx.inputs[0], DType::kInt64).contiguous();
          const int64_t* labels = t.numel() > 0 ? t.data<int64_t>() : nullptr;
          int64_t* index = t.numel() > 0 ? ctx.outputs[0].data<int64_t>() : nullptr;
          for (int64_t i = 0; i < t.numel(); ++i) {
            check_target(op.c_str(), labels[i], classes, ignore_index);
            index[i] = labels[i] == ignore_index ? 0 : labels[i];
          }
        }));

KILN_REGISTER_OP(
    OpDef("CrossEntropy")
        .input("logits")
        .input("target")
        .attr("reduction", AttrKind::kString, std::string("mean"))
        .attr("ignore_index", AttrKind::kInt, int64_t{-100})
        .attr("label_smoothing", AttrKind::kFloat, 0.0)
        .doc("Cross entropy of logits (class dimension 1) against integer class targets")
        .infer([](const InferContext& ctx) {
          const double s = ctx.attrs.get<double>("label_smoothing");
          KILN_CHECK_VALUE(s >= 0.0 && s <= 1.0)
              << "cross_entropy: expected label_smoothing in [0, 1], got " << s;
          return class_loss_infer("cross_entropy", ctx);
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          run_class_loss(
              {"cross_entropy", true, ctx.attrs.get<double>("label_smoothing"),
               ctx.attrs.get<int64_t>("ignore_index"),
               parse_reduction("cross_entropy", ctx.attrs.get<std::string>("reduction"))},
              ctx);
        })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                 const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
          return class_loss_grad(
              {"cross_entropy", true, attrs.get<double>("label_smoothing"),
               attrs.get<int64_t>("ignore_index"),
               parse_reduction("cross_entropy", attrs.get<std::string>("reduction"))},
              in, out, grad_outputs);
        }));

KILN_REGISTER_OP(
    OpDef("NLLLoss")
        .input("log_probs")
        .input("target")
        .attr("reduction", AttrKind::kString, std::string("mean"))
        .attr("ignore_index", AttrKind::kInt, int64_t{-100})
        .doc("Negative log-likelihood of log-probabilities (class dimension 1) at the targets")
        .infer([](const InferContext& ctx) { return class_loss_infer("nll_loss", ctx); })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          run_class_loss({"nll_loss", false, 0.0, ctx.attrs.get<int64_t>("ignore_index"),
                          parse_reduction("nll_loss", ctx.attrs.get<std::string>("reduction"))},
                         ctx);
        })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                 const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
          return class_loss_grad({"nll_loss", false, 0.0, attrs.get<int64_t>("ignore_index"),
                                  parse_reduction("nll_loss", attrs.get<std::string>("reduction"))},
                                 in, out, grad_outputs);
        }));

// squares[i - begin] = (a[i] - b[i])^2, computed in C and stored as S, for the flat indices
// [begin, end) of a and b (already in C and broadcast to one shape).
template <typename C, typename S>
void squared_errors(const StridedLoop<2>& loop, int64_t begin, int64_t end, S* squares) {
  constexpr auto kSize = static_cast<int64_t>(sizeof(C));
  loop.run(begin, end, [&](char* const* ptrs, const int64_t* strides, int64_t n) {
    const auto* a = reinterpret_cast<const C*>(ptrs[0]);
    const auto* b = reinterpret_cast<const C*>(ptrs[1]);
    if (strides[0] == kSize && strides[1] == kSize) {
      for (int64_t i = 0; i < n; ++i) squares[i] = static_cast<S>((a[i] - b[i]) * (a[i] - b[i]));
    } else {
      const int64_t sa = strides[0] / kSize;
      const int64_t sb = strides[1] / kSize;
      for (int64_t i = 0; i < n; ++i) {
        const C d = a[i * sa] - b[i * sb];
        squares[i] = static_cast<S>(d * d);
      }
    }
    squares += n;
  });
}

template <typename C>
void mse(const Tensor& input, const Tensor& target, Reduction reduction, const Tensor& out) {
  const Shape shape = broadcast_shapes(input.shape(), target.shape());
  const Tensor a = as_dtype(input, dtype_of<C>()).expand(shape);
  const Tensor b = as_dtype(target, dtype_of<C>()).expand(shape);
  const StridedLoop<2> loop(shape, {&a, &b});
  const int64_t n = shape_numel(shape);
  const Tensor result =
      out.dtype() == dtype_of<C>() ? out : Tensor::empty(out.shape(), dtype_of<C>());
  C* y = result.data<C>();
  if (reduction == Reduction::kNone) {
    parallel_for(0, n, kElementwiseGrain,
                 [&](int64_t lo, int64_t hi) { squared_errors<C, C>(loop, lo, hi, y + lo); });
  } else {
    // Fixed blocks, summed in order: the same result on any number of threads. Within a block,
    // squares go through a float64 buffer to the SIMD sum (one float64 add per element was a
    // chain of dependent adds: 1 ms for 1M elements; a float32 sum of a buffer could overflow).
    constexpr int64_t kBlock = int64_t{1} << 14;
    constexpr int64_t kBuffer = 1024;
    const int64_t blocks = (n + kBlock - 1) / kBlock;
    std::vector<double> partial(static_cast<size_t>(blocks));
    parallel_for(0, blocks, 1, [&](int64_t lo, int64_t hi) {
      double squares[kBuffer];
      for (int64_t blk = lo; blk < hi; ++blk) {
        double s = 0;
        const int64_t end = std::min(n, (blk + 1) * kBlock);
        for (int64_t start = blk * kBlock; start < end; start += kBuffer) {
          const int64_t m = std::min(kBuffer, end - start);
          squared_errors<C, double>(loop, start, start + m, squares);
          s += simd::reduce_sum(squares, m);
        }
        partial[blk] = s;
      }
    });
    double total = 0;
    for (double s : partial) total += s;
    y[0] = static_cast<C>(reduction == Reduction::kSum ? total : total / static_cast<double>(n));
  }
  if (!result.is_same(out)) copy_into(out, result);
}

KILN_REGISTER_OP(OpDef("MSELoss")
                     .input("input")
                     .input("target")
                     .attr("reduction", AttrKind::kString, std::string("mean"))
                     .doc("Mean squared error (input - target)^2 with broadcasting")
                     .infer([](const InferContext& ctx) {
                       const Shape& a = ctx.input(0).shape;
                       const Shape& b = ctx.input(1).shape;
                       const DType dtype = result_type(ctx.inputs);
                       KILN_CHECK_DTYPE(is_floating_point(dtype))
                           << "mse_loss: expected floating-point tensors, got " << dtype;
                       Shape shape;
                       try {
                         shape = broadcast_shapes(a, b);
                       } catch (const Error&) {
                         KILN_FAIL(kShape) << "mse_loss: input has shape " << shape_str(a)
                                           << " and target has shape " << shape_str(b)
                                           << "; expected shapes that broadcast";
                       }
                       const Reduction r =
                           parse_reduction("mse_loss", ctx.attrs.get<std::string>("reduction"));
                       return MetaList{{dtype, r == Reduction::kNone ? shape : Shape{}}};
                     })
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       const Reduction r =
                           parse_reduction("mse_loss", ctx.attrs.get<std::string>("reduction"));
                       const Tensor& out = ctx.outputs[0];
                       if (compute_dtype(out.dtype()) == DType::kFloat64) {
                         mse<double>(ctx.inputs[0], ctx.inputs[1], r, out);
                       } else {
                         mse<float>(ctx.inputs[0], ctx.inputs[1], r, out);
                       }
                     })
                     // d/d input = 2 (input - target) * g (g / n for "mean" over n elements),
                     // summed down to each operand's shape; the target's is its negation.
                     .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                              const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
                       const Tensor& a = in[0];
                       const Tensor& b = in[1];
                       const DType cd = compute_dtype(out[0].dtype());
                       const Tensor diff = to(a, cd) - to(b, cd);
                       const bool mean = parse_reduction("mse_loss", attrs.get<std::string>(
                                                                         "reduction")) ==
                                         Reduction::kMean;
                       Tensor gd = to(grad::or_zeros(grad_outputs[0], out[0]), cd) * 2.0;
                       if (mean) {
                         std::vector<int64_t> all(static_cast<size_t>(diff.ndim()));
                         std::iota(all.begin(), all.end(), 0);
                         gd = detail::divide_by_count(gd, diff, all);
                       }
                       gd = diff * gd;
                       std::vector<Tensor> grads(2);
                       if (grad::differentiable(a)) {
                         grads[0] = grad::as_grad_of(sum_to(gd, a.shape()), a);
                       }
                       if (grad::differentiable(b)) {
                         grads[1] = grad::as_grad_of(-sum_to(gd, b.shape()), b);
                       }
                       return grads;
                     }));

}  // namespace

namespace {

// Cross entropy against class probabilities (PyTorch's soft targets, target shaped as the input):
// -sum over classes of target * log_softmax(logits), per position. Composed of ops, so autograd
// and the jit see through it; ignore_index does not apply.
Tensor cross_entropy_with_probabilities(const Tensor& logits, const Tensor& target,
                                        const std::string& reduction, double label_smoothing) {
  KILN_CHECK_DTYPE(is_floating_point(logits.dtype()))
      << "cross_entropy: expected floating-point input, got " << logits.dtype();
  KILN_CHECK_SHAPE(logits.ndim() >= 1)
      << "cross_entropy: expected input of shape [N, C, ...] or [C], got a 0-d tensor";
  KILN_CHECK_SHAPE(target.shape() == logits.shape())
      << "cross_entropy: a floating-point target holds class probabilities and must have the "
         "input's shape "
      << shape_str(logits.shape()) << ", got " << shape_str(target.shape())
      << " (class indices are an integer tensor)";
  KILN_CHECK_VALUE(label_smoothing >= 0.0 && label_smoothing <= 1.0)
      << "cross_entropy: expected label_smoothing in [0, 1], got " << label_smoothing;
  const Reduction r = parse_reduction("cross_entropy", reduction);
  const int64_t class_dim = logits.ndim() == 1 ? 0 : 1;
  Tensor p = target;
  if (label_smoothing > 0) {
    const auto classes = static_cast<double>(logits.shape()[static_cast<size_t>(class_dim)]);
    p = p * (1.0 - label_smoothing) + label_smoothing / classes;
  }
  const Tensor per_position = neg(sum(p * log_softmax(logits, class_dim), {class_dim}));
  if (r == Reduction::kNone) return per_position;
  // mean, not sum / numel: under kiln.jit(dynamic=True) the count follows the batch size.
  return r == Reduction::kSum ? sum(per_position) : mean(per_position);
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const std::string& reduction,
                     int64_t ignore_index, double label_smoothing) {
  if (is_floating_point(target.dtype())) {
    return cross_entropy_with_probabilities(logits, target, reduction, label_smoothing);
  }
  static const OpDefPtr op = OpRegistry::Instance().get("CrossEntropy");
  return call_op(*op, {logits, target},
                 {{"reduction", reduction},
                  {"ignore_index", ignore_index},
                  {"label_smoothing", label_smoothing}})[0];
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const std::string& reduction,
                int64_t ignore_index) {
  static const OpDefPtr op = OpRegistry::Instance().get("NLLLoss");
  return call_op(*op, {log_probs, target},
                 {{"reduction", reduction}, {"ignore_index", ignore_index}})[0];
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  static const OpDefPtr op = OpRegistry::Instance().get("MSELoss");
  return call_op(*op, {input, target}, {{"reduction", reduction}})[0];
}

}  // namespace kiln
