// Linear algebra and neural-network ops (part of kiln/functional.h).
//
// matmul follows NumPy's matmul (1-d operands promoted and squeezed, batch dimensions
// broadcast) and runs on oneDNN for float32; weights of linear are [out_features, in_features] as
// in PyTorch. Convolution and pooling take NCHW inputs. Losses take `reduction` "mean", "sum" or
// "none".
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/export.h"
#include "kiln/tensor.h"

namespace kiln {

KILN_API Tensor matmul(const Tensor& a, const Tensor& b);
/// [B, n, k] @ [B, k, m] -> [B, n, m] (no broadcasting).
KILN_API Tensor bmm(const Tensor& a, const Tensor& b);
/// x @ weight^T + bias; bias may be undefined.
KILN_API Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
/// beta * bias + alpha * (a @ b), a and b 2-d.
KILN_API Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, double beta = 1.0,
                      double alpha = 1.0);

/// Normalizes over the trailing dims `normalized_shape`; weight and bias may be undefined.
KILN_API Tensor layer_norm(const Tensor& x, const std::vector<int64_t>& normalized_shape,
                           const Tensor& weight = {}, const Tensor& bias = {},
                           double eps = 1e-5);
KILN_API Tensor rms_norm(const Tensor& x, const std::vector<int64_t>& normalized_shape,
                         const Tensor& weight = {}, double eps = 1e-6);

/// x [N, C, H, W], weight [O, C / groups, kH, kW], bias [O] or undefined.
KILN_API Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                       const std::vector<int64_t>& stride = {1, 1},
                       const std::vector<int64_t>& padding = {0, 0},
                       const std::vector<int64_t>& dilation = {1, 1}, int64_t groups = 1);
/// The gradients of conv2d's x (of shape `input_size`) and weight (of shape `weight_size`) from
/// its output gradient, for the same stride, padding, dilation and groups (primitives
/// Conv2DBackwardInput and Conv2DBackwardWeight).
KILN_API Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight,
                                      const Shape& input_size,
                                      const std::vector<int64_t>& stride = {1, 1},
                                      const std::vector<int64_t>& padding = {0, 0},
                                      const std::vector<int64_t>& dilation = {1, 1},
                                      int64_t groups = 1);
/// The transposed convolution (PyTorch's conv_transpose2d, the gradient of conv2d's input as a
/// layer): x [N, C_in, H, W], weight [C_in, C_out / groups, kH, kW], bias [C_out] or undefined;
/// the output is [N, C_out, H_out, W_out] with H_out = (H - 1) * stride - 2 * padding +
/// dilation * (kH - 1) + output_padding + 1. output_padding must be below stride or dilation.
KILN_API Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                                 const std::vector<int64_t>& stride = {1, 1},
                                 const std::vector<int64_t>& padding = {0, 0},
                                 const std::vector<int64_t>& output_padding = {0, 0},
                                 int64_t groups = 1, const std::vector<int64_t>& dilation = {1, 1});
KILN_API Tensor conv2d_backward_weight(const Tensor& grad_output, const Tensor& x,
                                       const Shape& weight_size,
                                       const std::vector<int64_t>& stride = {1, 1},
                                       const std::vector<int64_t>& padding = {0, 0},
                                       const std::vector<int64_t>& dilation = {1, 1},
                                       int64_t groups = 1);
/// The 3-d counterparts of the four above (primitives Conv3D, Conv3DBackwardInput and
/// Conv3DBackwardWeight): x [N, C, D, H, W], weight [O, C / groups, kD, kH, kW] (conv3d) or
/// [C_in, C_out / groups, kD, kH, kW] (conv_transpose3d); stride, padding, dilation and
/// output_padding take three values (depth, height, width).
KILN_API Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                       const std::vector<int64_t>& stride = {1, 1, 1},
                       const std::vector<int64_t>& padding = {0, 0, 0},
                       const std::vector<int64_t>& dilation = {1, 1, 1}, int64_t groups = 1);
KILN_API Tensor conv3d_backward_input(const Tensor& grad_output, const Tensor& weight,
                                      const Shape& input_size,
                                      const std::vector<int64_t>& stride = {1, 1, 1},
                                      const std::vector<int64_t>& padding = {0, 0, 0},
                                      const std::vector<int64_t>& dilation = {1, 1, 1},
                                      int64_t groups = 1);
KILN_API Tensor conv3d_backward_weight(const Tensor& grad_output, const Tensor& x,
                                       const Shape& weight_size,
                                       const std::vector<int64_t>& stride = {1, 1, 1},
                                       const std::vector<int64_t>& padding = {0, 0, 0},
                                       const std::vector<int64_t>& dilation = {1, 1, 1},
                                       int64_t groups = 1);
KILN_API Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                                 const std::vector<int64_t>& stride = {1, 1, 1},
                                 const std::vector<int64_t>& padding = {0, 0, 0},
                                 const std::vector<int64_t>& output_padding = {0, 0, 0},
                                 int64_t groups = 1,
                                 const std::vector<int64_t>& dilation = {1, 1, 1});
/// stride empty = kernel_size.
KILN_API Tensor max_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                           const std::vector<int64_t>& stride = {},
                           const std::vector<int64_t>& padding = {0, 0},
                           const std::vector<int64_t>& dilation = {1, 1},
                           bool ceil_mode = false);
/// An LSTM step's pointwise part (primitive LstmCell): gates [..., 4H], the pre-activations in
/// PyTorch's order i, f, g, o, and the cell state c [..., H] give (h', c'), with c' = sigmoid(f) c
/// + sigmoid(i) tanh(g) and h' = sigmoid(o) tanh(c'); one pass, differentiable.
KILN_API std::pair<Tensor, Tensor> lstm_cell(const Tensor& gates, const Tensor& c);
/// lstm_cell's gradients (of gates, of c) from those of h' and c' (primitive LstmCellBackward;
/// grad_h and grad_c of c's shape and dtype), differentiable again.
KILN_API std::pair<Tensor, Tensor> lstm_cell_backward(const Tensor& gates, const Tensor& c,
                                                      const Tensor& grad_h, const Tensor& grad_c);
/// A GRU step's pointwise part (primitive GruCell): x and hg [..., 3H], the input's and the
/// state's projections (PyTorch's gates r, z, n; hg with b_hh), and h [..., H] give h' = n + z
/// (h - n), with r, z = sigmoid(x_rz + hg_rz) and n = tanh(x_n + r hg_n); one pass.
KILN_API Tensor gru_cell(const Tensor& x, const Tensor& hg, const Tensor& h);
/// gru_cell's gradients (of x, hg and h) from that of h' (primitive GruCellBackward),
/// differentiable again.
KILN_API std::vector<Tensor> gru_cell_backward(const Tensor& x, const Tensor& hg, const Tensor& h,
                                               const Tensor& grad_output);
/// max_pool2d's values and, for each, the offset ih * W + iw of the element it took in its [H, W]
/// plane (int64), as PyTorch's max_pool2d(return_indices=True) (primitive MaxPool2DIndices).
KILN_API std::pair<Tensor, Tensor> max_pool2d_with_indices(
    const Tensor& x, const std::vector<int64_t>& kernel_size,
    const std::vector<int64_t>& stride = {}, const std::vector<int64_t>& padding = {0, 0},
    const std::vector<int64_t>& dilation = {1, 1}, bool ceil_mode = false);
KILN_API Tensor avg_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                           const std::vector<int64_t>& stride = {},
                           const std::vector<int64_t>& padding = {0, 0}, bool ceil_mode = false,
                           bool count_include_pad = true);
/// avg_pool2d dividing every window's sum by `divisor_override` (0: by the window's size, as
/// above), PyTorch's divisor_override.
KILN_API Tensor avg_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                           const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                           bool ceil_mode, bool count_include_pad, int64_t divisor_override);
/// The gradient of max_pool2d's x: each output gradient added at its window's maximum (the first
/// one, or the last nan, as the forward picks it) (primitive MaxPool2DBackward).
KILN_API Tensor max_pool2d_backward(const Tensor& grad_output, const Tensor& x,
                                    const std::vector<int64_t>& kernel_size,
                                    const std::vector<int64_t>& stride = {},
                                    const std::vector<int64_t>& padding = {0, 0},
                                    const std::vector<int64_t>& dilation = {1, 1},
                                    bool ceil_mode = false);
/// The gradient of avg_pool2d's x (of shape `input_size`): each output gradient spread evenly
/// over its window's divisor (primitive AvgPool2DBackward).
KILN_API Tensor avg_pool2d_backward(const Tensor& grad_output, const Shape& input_size,
                                    const std::vector<int64_t>& kernel_size,
                                    const std::vector<int64_t>& stride = {},
                                    const std::vector<int64_t>& padding = {0, 0},
                                    bool ceil_mode = false, bool count_include_pad = true);
KILN_API Tensor avg_pool2d_backward(const Tensor& grad_output, const Shape& input_size,
                                    const std::vector<int64_t>& kernel_size,
                                    const std::vector<int64_t>& stride,
                                    const std::vector<int64_t>& padding, bool ceil_mode,
                                    bool count_include_pad, int64_t divisor_override);

/// Each output along `dim` as a weighted sum of input positions: y.select(dim, o) = sum_k
/// weight[k, o] * x.select(dim, index[k, o]), with index (int64, each in [0, x.size(dim))) and
/// weight (floating) of shape [taps, out]; floating x, 16-bit computed in float32 (primitive
/// Resample: the per-axis pass of linear, cubic and antialiased interpolation).
KILN_API Tensor resample(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& weight);
/// The gradient of resample's x (of `size` along dim): each output gradient added at its taps,
/// times their weights (primitive ResampleBackward).
KILN_API Tensor resample_backward(const Tensor& grad_output, const Tensor& index,
                                  const Tensor& weight, int64_t dim, int64_t size);

/// Rows of `weight` [num, dim] picked by integer `indices` (any shape) -> indices.shape + [dim].
KILN_API Tensor embedding(const Tensor& indices, const Tensor& weight);
/// The gradient of embedding's weight: zeros [num_weights, dim] with every row of `grad_output`
/// (indices.shape + [dim]) added at its index (primitive EmbeddingBackward).
KILN_API Tensor embedding_backward(const Tensor& indices, const Tensor& grad_output,
                                   int64_t num_weights);
/// Zeroes elements with probability p and scales the rest by 1/(1-p), drawing from the global
/// generator (kiln::manual_seed); identity when !training or p == 0.
KILN_API Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);

/// logits [N, C] (or [N, C, d...]) against class indices [N] (or [N, d...]), or against class
/// probabilities of the logits' shape (a floating-point target; ignore_index does not apply), as
/// PyTorch's cross_entropy. "mean" divides by the number of counted positions.
KILN_API Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                              const std::string& reduction = "mean", int64_t ignore_index = -100,
                              double label_smoothing = 0.0);
KILN_API Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                         const std::string& reduction = "mean", int64_t ignore_index = -100);
KILN_API Tensor mse_loss(const Tensor& input, const Tensor& target,
                         const std::string& reduction = "mean");

}  // namespace kiln
