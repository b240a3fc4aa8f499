// kiln.mint linear-algebra and neural-network ops (include/kiln/functional/nn.h except dropout,
// which lives with the random ops), plus Tensor.__matmul__ / __rmatmul__ / .matmul.
//
// Window arguments (kernel_size, stride, padding, dilation) take an int or a pair (three for the
// 3-d ops), as in PyTorch.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "kiln/functional/nn.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

namespace {

// An int (used for each of `count` dimensions) or a sequence of ints (the op checks that there
// are `count`); None gives [] (the op's default, e.g. stride = kernel_size).
std::vector<int64_t> ints_of(nb::handle obj, size_t count, const char* name) {
  const char* expected =
      count == 3 ? "an int or a sequence of three ints" : "an int or a pair of ints";
  if (obj.is_none()) return {};
  KILN_CHECK_TYPE(!PyBool_Check(obj.ptr())) << name << ": expected " << expected << ", got a bool";
  if (is_int_arg(obj)) {
    const int64_t v = shape_arg(obj, name)[0];  // a kType error when it does not fit int64
    return std::vector<int64_t>(count, v);
  }
  std::vector<int64_t> values;
  KILN_CHECK_TYPE(nb::try_cast(obj, values))
      << name << ": expected " << expected << ", got " << nb::cast<std::string>(nb::repr(obj));
  return values;
}

std::vector<int64_t> pair_of(nb::handle obj, const char* name) { return ints_of(obj, 2, name); }
std::vector<int64_t> triple_of(nb::handle obj, const char* name) { return ints_of(obj, 3, name); }

// normalized_shape: an int or a sequence of ints.
std::vector<int64_t> normalized_shape_of(nb::handle obj) {
  const Shape shape = shape_arg(obj, "normalized_shape");
  return std::vector<int64_t>(shape.begin(), shape.end());
}

Tensor optional_tensor(const std::optional<TensorArg>& t) { return t ? t->get() : Tensor(); }

// avg_pool2d's divisor_override: None gives 0 (the op's "no override"); else a nonzero int, as
// PyTorch takes it.
int64_t divisor_override_of(nb::handle obj) {
  if (obj.is_none()) return 0;
  KILN_CHECK_TYPE(is_int_arg(obj))
      << "avg_pool2d: expected divisor_override to be None or an int, got " << repr_of(obj);
  const int64_t divisor = shape_arg(obj, "avg_pool2d: divisor_override")[0];
  KILN_CHECK_VALUE(divisor != 0) << "avg_pool2d: expected a nonzero divisor_override, got 0";
  return divisor;
}

}  // namespace

void bind_mint_nn(nb::module_& mint) {
  mint.def(
      "matmul", [](const TensorArg& a, const TensorArg& b) { return matmul(a, b); }, "a"_a, "b"_a,
      "NumPy matmul: 1-d operands are promoted to matrices and the added dimension removed; "
      "batch dimensions broadcast.");
  mint.def(
      "bmm", [](const TensorArg& a, const TensorArg& b) { return bmm(a, b); }, "a"_a, "b"_a,
      "[B, n, k] @ [B, k, m] -> [B, n, m], without broadcasting.");
  mint.def(
      "linear",
      [](const TensorArg& x, const TensorArg& weight, const std::optional<TensorArg>& bias) {
        return linear(x, weight, optional_tensor(bias));
      },
      "x"_a, "weight"_a, "bias"_a = nb::none(),
      "x @ weight.T + bias with weight [out_features, in_features].");
  mint.def(
      "addmm",
      [](const TensorArg& bias, const TensorArg& a, const TensorArg& b, double beta, double alpha) {
        return addmm(bias, a, b, beta, alpha);
      },
      "bias"_a, "a"_a, "b"_a, nb::kw_only(), "beta"_a = 1.0, "alpha"_a = 1.0,
      "beta * bias + alpha * (a @ b) for 2-d a and b.");
  mint.def(
      "layer_norm",
      [](const TensorArg& x, nb::handle normalized_shape, const std::optional<TensorArg>& weight,
         const std::optional<TensorArg>& bias, double eps) {
        return layer_norm(x, normalized_shape_of(normalized_shape), optional_tensor(weight),
                          optional_tensor(bias), eps);
      },
      "x"_a, "normalized_shape"_a, "weight"_a = nb::none(), "bias"_a = nb::none(), "eps"_a = 1e-5,
      "Layer normalisation over the trailing normalized_shape dimensions.");
  mint.def(
      "rms_norm",
      [](const TensorArg& x, nb::handle normalized_shape, const std::optional<TensorArg>& weight,
         double eps) {
        return rms_norm(x, normalized_shape_of(normalized_shape), optional_tensor(weight), eps);
      },
      "x"_a, "normalized_shape"_a, "weight"_a = nb::none(), "eps"_a = 1e-6,
      "RMS normalisation over the trailing normalized_shape dimensions.");
  mint.def(
      "conv2d",
      [](const TensorArg& x, const TensorArg& weight, const std::optional<TensorArg>& bias,
         nb::handle stride, nb::handle padding, nb::handle dilation, int64_t groups) {
        return conv2d(x, weight, optional_tensor(bias), pair_of(stride, "conv2d: stride"),
                      pair_of(padding, "conv2d: padding"), pair_of(dilation, "conv2d: dilation"),
                      groups);
      },
      "x"_a, "weight"_a, "bias"_a = nb::none(), "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
      "groups"_a = 1, "2-d convolution of x [N, C, H, W] with weight [O, C / groups, kH, kW].");
  mint.def(
      "conv_transpose2d",
      [](const TensorArg& x, const TensorArg& weight, const std::optional<TensorArg>& bias,
         nb::handle stride, nb::handle padding, nb::handle output_padding, int64_t groups,
         nb::handle dilation) {
        return conv_transpose2d(x, weight, optional_tensor(bias),
                                pair_of(stride, "conv_transpose2d: stride"),
                                pair_of(padding, "conv_transpose2d: padding"),
                                pair_of(output_padding, "conv_transpose2d: output_padding"), groups,
                                pair_of(dilation, "conv_transpose2d: dilation"));
      },
      "input"_a, "weight"_a, "bias"_a = nb::none(), "stride"_a = 1, "padding"_a = 0,
      "output_padding"_a = 0, "groups"_a = 1, "dilation"_a = 1,
      "Transposed 2-d convolution (PyTorch's argument order) of input [N, C_in, H, W] with weight "
      "[C_in, C_out / groups, kH, kW].");
  mint.def(
      "conv3d",
      [](const TensorArg& x, const TensorArg& weight, const std::optional<TensorArg>& bias,
         nb::handle stride, nb::handle padding, nb::handle dilation, int64_t groups) {
        return conv3d(x, weight, optional_tensor(bias), triple_of(stride, "conv3d: stride"),
                      triple_of(padding, "conv3d: padding"),
                      triple_of(dilation, "conv3d: dilation"), groups);
      },
      "x"_a, "weight"_a, "bias"_a = nb::none(), "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
      "groups"_a = 1,
      "3-d convolution of x [N, C, D, H, W] with weight [O, C / groups, kD, kH, kW].");
  mint.def(
      "conv_transpose3d",
      [](const TensorArg& x, const TensorArg& weight, const std::optional<TensorArg>& bias,
         nb::handle stride, nb::handle padding, nb::handle output_padding, int64_t groups,
         nb::handle dilation) {
        return conv_transpose3d(x, weight, optional_tensor(bias),
                                triple_of(stride, "conv_transpose3d: stride"),
                                triple_of(padding, "conv_transpose3d: padding"),
                                triple_of(output_padding, "conv_transpose3d: output_padding"),
                                groups, triple_of(dilation, "conv_transpose3d: dilation"));
      },
      "input"_a, "weight"_a, "bias"_a = nb::none(), "stride"_a = 1, "padding"_a = 0,
      "output_padding"_a = 0, "groups"_a = 1, "dilation"_a = 1,
      "Transposed 3-d convolution (PyTorch's argument order) of input [N, C_in, D, H, W] with "
      "weight [C_in, C_out / groups, kD, kH, kW].");
  mint.def(
      "max_pool2d",
      [](const TensorArg& x, nb::handle kernel_size, nb::handle stride, nb::handle padding,
         nb::handle dilation, bool ceil_mode) {
        return max_pool2d(x, pair_of(kernel_size, "max_pool2d: kernel_size"),
                          pair_of(stride, "max_pool2d: stride"),
                          pair_of(padding, "max_pool2d: padding"),
                          pair_of(dilation, "max_pool2d: dilation"), ceil_mode);
      },
      "x"_a, "kernel_size"_a, "stride"_a = nb::none(), "padding"_a = 0, "dilation"_a = 1,
      "ceil_mode"_a = false, "Maximum over windows of x [N, C, H, W] (stride None = kernel_size).");
  mint.def(
      "lstm_cell",
      [](const TensorArg& gates, const TensorArg& c) {
        auto [h, c_next] = lstm_cell(gates, c);
        return nb::make_tuple(h, c_next);
      },
      "gates"_a, "c"_a,
      "(h', c') of an LSTM step from gates [..., 4H] (pre-activations, PyTorch's order i, f, g, "
      "o) and c [..., H]: c' = sigmoid(f) c + sigmoid(i) tanh(g), h' = sigmoid(o) tanh(c'), in "
      "one pass.");
  mint.def(
      "gru_cell",
      [](const TensorArg& x, const TensorArg& hg, const TensorArg& h) {
        return gru_cell(x, hg, h);
      },
      "x"_a, "hg"_a, "h"_a,
      "h' of a GRU step from x and hg [..., 3H] (the input's and the state's projections, "
      "PyTorch's gates r, z, n) and h [..., H]: h' = n + z (h - n), r, z = sigmoid(x_rz + "
      "hg_rz), n = tanh(x_n + r hg_n), in one pass.");
  mint.def(
      "max_pool2d_with_indices",
      [](const TensorArg& x, nb::handle kernel_size, nb::handle stride, nb::handle padding,
         nb::handle dilation, bool ceil_mode) {
        auto [values, indices] = max_pool2d_with_indices(
            x, pair_of(kernel_size, "max_pool2d: kernel_size"),
            pair_of(stride, "max_pool2d: stride"), pair_of(padding, "max_pool2d: padding"),
            pair_of(dilation, "max_pool2d: dilation"), ceil_mode);
        return nb::make_tuple(values, indices);
      },
      "x"_a, "kernel_size"_a, "stride"_a = nb::none(), "padding"_a = 0, "dilation"_a = 1,
      "ceil_mode"_a = false,
      "(max_pool2d's values, indices): with each maximum, the offset h * W + w of the element it "
      "took in its [H, W] plane (int64), as PyTorch's max_pool2d(return_indices=True).");
  mint.def(
      "avg_pool2d",
      [](const TensorArg& x, nb::handle kernel_size, nb::handle stride, nb::handle padding,
         bool ceil_mode, bool count_include_pad, nb::handle divisor_override) {
        return avg_pool2d(x, pair_of(kernel_size, "avg_pool2d: kernel_size"),
                          pair_of(stride, "avg_pool2d: stride"),
                          pair_of(padding, "avg_pool2d: padding"), ceil_mode, count_include_pad,
                          divisor_override_of(divisor_override));
      },
      "x"_a, "kernel_size"_a, "stride"_a = nb::none(), "padding"_a = 0, "ceil_mode"_a = false,
      "count_include_pad"_a = true, "divisor_override"_a = nb::none(),
      "Mean over windows of x [N, C, H, W] (stride None = kernel_size); a divisor_override "
      "(a nonzero int) divides every window's sum in place of its size.");
  mint.def(
      "resample",
      [](const TensorArg& x, int64_t dim, const TensorArg& index, const TensorArg& weight) {
        return resample(x, dim, index, weight);
      },
      "x"_a, "dim"_a, "index"_a, "weight"_a,
      "resample(x, dim, index, weight): each output along `dim` as a weighted sum of input "
      "positions, y.select(dim, o) = sum_k weight[k, o] * x.select(dim, index[k, o]) for index "
      "(int64) and weight of shape [taps, out] (Kiln's; interpolate's per-axis pass).");
  mint.def(
      "embedding",
      [](const TensorArg& indices, const TensorArg& weight) { return embedding(indices, weight); },
      "indices"_a, "weight"_a, "Rows of weight [num, dim] at integer indices.");
  mint.def(
      "cross_entropy",
      [](const TensorArg& logits, const TensorArg& target, const std::string& reduction,
         int64_t ignore_index, double label_smoothing) {
        return cross_entropy(logits, target, reduction, ignore_index, label_smoothing);
      },
      "logits"_a, "target"_a, "reduction"_a = "mean", "ignore_index"_a = -100,
      "label_smoothing"_a = 0.0,
      "Cross entropy of logits [N, C, ...] against integer class targets [N, ...], or against "
      "class probabilities of the logits' shape (a floating-point target).");
  mint.def(
      "nll_loss",
      [](const TensorArg& log_probs, const TensorArg& target, const std::string& reduction,
         int64_t ignore_index) { return nll_loss(log_probs, target, reduction, ignore_index); },
      "log_probs"_a, "target"_a, "reduction"_a = "mean", "ignore_index"_a = -100,
      "Negative log-likelihood of log_probs [N, C, ...] at integer class targets [N, ...].");
  mint.def(
      "mse_loss",
      [](const TensorArg& input, const TensorArg& target, const std::string& reduction) {
        const Tensor& x = input;
        const Tensor& y = target;
        // As PyTorch warns: [N, 1] against [N] broadcasts to [N, N], a mean of every pair.
        // (Shapes that do not broadcast are the op's error.)
        const auto broadcast = [](const Shape& a, const Shape& b) {
          for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
            const int64_t m = a[a.size() - i], n = b[b.size() - i];
            if (m != n && m != 1 && n != 1) return false;
          }
          return true;
        };
        if (x.shape() != y.shape() && !y.is_weak_scalar() && broadcast(x.shape(), y.shape())) {
          const std::string message =
              "mse_loss: input of shape " + shape_str(x.shape()) + " and target of shape " +
              shape_str(y.shape()) + " broadcast to each other; this is likely a mistake (a " +
              "[N, 1] prediction against [N] targets averages all N * N pairs). Give them one "
              "shape, or broadcast them explicitly to say so";
          if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) != 0) throw nb::python_error();
        }
        return mse_loss(x, y, reduction);
      },
      "input"_a, "target"_a, "reduction"_a = "mean",
      "Mean squared error of input and target, which broadcast (with a UserWarning when their "
      "shapes differ, as PyTorch's).");

  // Tensor @ other and other @ Tensor. As operators they return NotImplemented for operands that
  // are not tensors, numbers or arrays, so Python can try the other side.
  nb::handle tensor_type = nb::type<Tensor>();
  tensor_type.attr("__matmul__") = nb::cpp_function(
      [](const Tensor& a, const TensorArg& b) { return matmul(a, b); }, nb::is_method(),
      nb::is_operator(), nb::scope(tensor_type), nb::name("__matmul__"));
  tensor_type.attr("__rmatmul__") = nb::cpp_function(
      [](const Tensor& b, const TensorArg& a) { return matmul(a, b); }, nb::is_method(),
      nb::is_operator(), nb::scope(tensor_type), nb::name("__rmatmul__"));
  tensor_type.attr("matmul") =
      nb::cpp_function([](const Tensor& a, const TensorArg& b) { return matmul(a, b); },
                       nb::is_method(), nb::scope(tensor_type), nb::name("matmul"), "other"_a,
                       "self @ other (see kiln.mint.matmul).");
}

}  // namespace kiln::py
