// Private to src/ops: what the convolution ops (conv.cc: Conv2D, Conv3D) and their backward ops
// (conv_backward.cc) share: the attributes and their checks, the output shape, the oneDNN
// description of a problem (see Note [oneDNN convolution layouts] in conv.cc), and the ops called
// by spatial rank, which the gradient rules and the transposed convolutions use.
#pragma once

#include <optional>
#include <vector>

#include "kiln/op.h"
#include "ops/dtype_convert.h"
#include "ops/onednn_util.h"

namespace kiln::conv {

/// A convolution's attributes, one value per spatial dimension (two for Conv2D, three for Conv3D),
/// and its groups.
struct ConvParams {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;

  size_t rank() const { return stride.size(); }
};

/// "conv2d" or "conv3d": the name errors of a convolution of `rank` spatial dimensions give.
const char* conv_name(size_t rank);

/// The stride, padding, dilation and groups of a convolution op's attributes (of `rank` spatial
/// dimensions), checked.
ConvParams conv_params(const Attrs& attrs, size_t rank);

/// The attributes of ConvParams, as an op call takes them.
Attrs conv_attrs(const ConvParams& p);

/// [N, O, spatial...] for x [N, C, spatial...] and weight [O, C / groups, kernel...]; checks the
/// shapes (and bias's, when defined) against each other.
Shape conv_out_shape(const Shape& x, const Shape& w, const TensorMeta& bias, const ConvParams& p);

/// Adds the attributes a convolution op of `rank` spatial dimensions and its backward ops share,
/// with the forward op's defaults.
OpDef& with_conv_attrs(OpDef& def, size_t rank);

/// The ops of `rank` spatial dimensions: Conv2D / Conv3D and their backward ops.
Tensor convolution(size_t rank, const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const ConvParams& p);
Tensor convolution_backward_input(size_t rank, const Tensor& grad_output, const Tensor& weight,
                                  const Shape& input_size, const ConvParams& p);
Tensor convolution_backward_weight(size_t rank, const Tensor& grad_output, const Tensor& x,
                                   const Shape& weight_size, const ConvParams& p);

/// The oneDNN description of one convolution problem, shared by the forward and backward
/// primitives: dims of x, weight (with a groups dimension when groups > 1) and out, the spatial
/// parameters, and the plain (Kiln) layouts of the data and the weight.
struct ConvDims {
  dnnl::memory::dims src, weights, dst, strides, dilates, pad_l, pad_r;
  dnnl::memory::format_tag data_tag, weights_tag;
};

/// The oneDNN dims of the problem x * w -> out.
ConvDims conv_dims(const Shape& x, const Shape& w, const Shape& out, const ConvParams& p);

/// The primitive cache key of a `kind` ("conv.f32", ...) of the problem x * w -> out.
onednn::PrimitiveKey conv_key(const char* kind, const Shape& x, const Shape& w, const Shape& out,
                              const ConvParams& p);

/// A reorder from one layout to the other, or none when they are the same.
std::optional<dnnl::reorder> maybe_reorder(const dnnl::memory::desc& from,
                                           const dnnl::memory::desc& to);

/// A primitive's input in the layout `md` it wants: `user` itself when there is no reorder, else
/// new memory that `user` is reordered into (on onednn::stream()).
dnnl::memory staged_input(const std::optional<dnnl::reorder>& reorder, const dnnl::memory::desc& md,
                          dnnl::memory user);

/// The spatial part of a problem as three dimensions (depth, height, width), a 2-d problem with
/// a depth of 1: the direct loops of the forward and backward ops are written once, for three.
struct Volume {
  int64_t in[3], out[3], kernel[3], stride[3], padding[3], dilation[3];

  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }

  /// The input coordinate along `axis` that tap k of output coordinate o reads, or -1 when it
  /// falls into the padding.
  int64_t source(int axis, int64_t o, int64_t k) const {
    const int64_t i = o * stride[axis] - padding[axis] + k * dilation[axis];
    return i >= 0 && i < in[axis] ? i : -1;
  }
};

/// The Volume of x [N, C, spatial...], weight [O, C / groups, kernel...] and out [N, O, ...].
Volume volume_of(const Shape& x, const Shape& w, const Shape& out, const ConvParams& p);

/// Calls fn(tap, at) for each kernel tap of output element `position` (an offset into the output
/// volume) that reads the input rather than the padding: `tap` the tap's offset into the
/// kernel, `at` the offset of the element it reads into the input volume.
template <typename Fn>
void for_each_tap(const Volume& v, int64_t position, Fn&& fn) {
  const int64_t ow = position % v.out[2], oh = position / v.out[2] % v.out[1],
                od = position / (v.out[2] * v.out[1]);
  for (int64_t kd = 0; kd < v.kernel[0]; ++kd) {
    const int64_t id = v.source(0, od, kd);
    if (id < 0) continue;
    for (int64_t kh = 0; kh < v.kernel[1]; ++kh) {
      const int64_t ih = v.source(1, oh, kh);
      if (ih < 0) continue;
      for (int64_t kw = 0; kw < v.kernel[2]; ++kw) {
        const int64_t iw = v.source(2, ow, kw);
        if (iw < 0) continue;
        fn((kd * v.kernel[1] + kh) * v.kernel[2] + kw, (id * v.in[1] + ih) * v.in[2] + iw);
      }
    }
  }
}

}  // namespace kiln::conv
