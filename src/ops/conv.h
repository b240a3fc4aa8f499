// Private to src/ops: what Conv2D (conv.cc) and its backward ops (conv_backward.cc) share: the
// attributes and their checks, the output shape, and the oneDNN description of a problem (see
// Note [oneDNN convolution layouts] in conv.cc).
#pragma once

#include <optional>
#include <vector>

#include "kiln/op.h"
#include "ops/dtype_convert.h"
#include "ops/onednn_util.h"

namespace kiln::conv {

/// Convolution attributes, checked: stride, padding and dilation per spatial dimension, groups.
struct ConvParams {
  int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
};

/// The stride, padding, dilation and groups of a Conv2D's or a backward op's attributes, checked.
ConvParams conv_params(const Attrs& attrs);

/// [N, O, OH, OW] for x [N, C, H, W] and weight [O, C / groups, kH, kW]; checks the shapes (and
/// bias's, when defined) against each other.
Shape conv_out_shape(const Shape& x, const Shape& w, const TensorMeta& bias, const ConvParams& p);

/// Adds the attributes Conv2D and its backward ops share, with Conv2D's defaults.
OpDef& with_conv_attrs(OpDef& def);

/// The convolution attributes of a Conv2D or a backward op, as conv2d's arguments.
struct ConvArgs {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
};
ConvArgs conv_args(const Attrs& attrs);

/// The oneDNN description of one convolution problem, shared by the forward and backward
/// primitives: dims of x, weight (goihw with groups) and out, and the spatial parameters.
struct ConvDims {
  dnnl::memory::dims src, weights, dst, strides, dilates, pad_l, pad_r;
  dnnl::memory::format_tag weights_tag;
};

/// The oneDNN dims of the problem x * w -> out.
ConvDims conv_dims(const Shape& x, const Shape& w, const Shape& out, const ConvParams& p);

/// The primitive cache key of a `kind` ("conv2d.f32", ...) of the problem x * w -> out.
onednn::PrimitiveKey conv_key(const char* kind, const Shape& x, const Shape& w, const Shape& out,
                              const ConvParams& p);

/// A reorder from one layout to the other, or none when they are the same.
std::optional<dnnl::reorder> maybe_reorder(const dnnl::memory::desc& from,
                                           const dnnl::memory::desc& to);

/// A primitive's input in the layout `md` it wants: `user` itself when there is no reorder, else
/// new memory that `user` is reordered into (on onednn::stream()).
dnnl::memory staged_input(const std::optional<dnnl::reorder>& reorder, const dnnl::memory::desc& md,
                          dnnl::memory user);

}  // namespace kiln::conv
