// OneDnnOpRunner: a oneDNN primitive on Kiln tensors (see kiln/runners.h).
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <utility>

#include "kiln/functional/factory.h"
#include "kiln/runners.h"
#include "ops/onednn_util.h"

namespace kiln {

namespace {

OneDnnPrimitive of_kind(OneDnnPrimitive::Kind kind, std::vector<Eltwise> post_ops = {}) {
  OneDnnPrimitive p;
  p.kind = kind;
  p.post_ops = std::move(post_ops);
  return p;
}

}  // namespace

OneDnnPrimitive OneDnnPrimitive::MatMul(std::vector<Eltwise> post_ops) {
  return of_kind(Kind::kMatMul, std::move(post_ops));
}

OneDnnPrimitive OneDnnPrimitive::Convolution(std::vector<int64_t> strides,
                                             std::vector<int64_t> padding,
                                             std::vector<int64_t> dilation,
                                             std::vector<Eltwise> post_ops) {
  OneDnnPrimitive p = of_kind(Kind::kConvolution, std::move(post_ops));
  p.strides = std::move(strides);
  p.padding = std::move(padding);
  p.dilation = std::move(dilation);
  return p;
}

OneDnnPrimitive OneDnnPrimitive::Elementwise(Eltwise function) {
  return of_kind(Kind::kElementwise, {function});
}

OneDnnPrimitive OneDnnPrimitive::Softmax(int64_t axis) {
  OneDnnPrimitive p = of_kind(Kind::kSoftmax);
  p.axis = axis;
  return p;
}

OneDnnPrimitive OneDnnPrimitive::LogSoftmax(int64_t axis) {
  OneDnnPrimitive p = of_kind(Kind::kLogSoftmax);
  p.axis = axis;
  return p;
}

OneDnnPrimitive OneDnnPrimitive::LayerNorm(float epsilon) {
  OneDnnPrimitive p = of_kind(Kind::kLayerNorm);
  p.epsilon = epsilon;
  return p;
}

namespace {

using dnnl::memory;

// A ready primitive and how to feed it: one oneDNN argument per runner input (kNoArg for an
// omitted optional input) and the layouts it was created for.
constexpr int kNoArg = -1;
struct Prepared {
  dnnl::primitive prim;
  std::vector<int> input_args;
  std::vector<memory::desc> input_mds;
  memory::desc dst_md;
  memory::desc scratchpad_md;
};

// One Run between CalcWorkspace and LaunchKernel: the cached primitive (null when the output is
// empty: nothing to compute) and the tensors it reads, which are the runner's inputs, but for
// contiguous copies of those whose strides oneDNN cannot describe (onednn::describable) and, for
// a product or convolution over nothing (K or C of 0), operands of one zero there instead, so
// that the output is the bias and post-ops of zeros, as for any other contraction.
struct Staged {
  std::shared_ptr<const Prepared> prepared;
  std::vector<Tensor> inputs;
};

dnnl::algorithm eltwise_algorithm(EltwiseKind kind) {
  using a = dnnl::algorithm;
  switch (kind) {
    case EltwiseKind::kRelu: return a::eltwise_relu;
    case EltwiseKind::kGeluTanh: return a::eltwise_gelu_tanh;
    case EltwiseKind::kGeluErf: return a::eltwise_gelu_erf;
    case EltwiseKind::kTanh: return a::eltwise_tanh;
    case EltwiseKind::kSigmoid: return a::eltwise_logistic;
    case EltwiseKind::kSwish: return a::eltwise_swish;
    case EltwiseKind::kElu: return a::eltwise_elu;
    case EltwiseKind::kExp: return a::eltwise_exp;
    case EltwiseKind::kLog: return a::eltwise_log;
    case EltwiseKind::kSqrt: return a::eltwise_sqrt;
    case EltwiseKind::kAbs: return a::eltwise_abs;
    case EltwiseKind::kSquare: return a::eltwise_square;
    case EltwiseKind::kLinear: return a::eltwise_linear;
    case EltwiseKind::kClip: return a::eltwise_clip;
  }
  KILN_FAIL(kValue) << "unknown EltwiseKind " << static_cast<int>(kind);
}

// Scratchpad in user mode: oneDNN's temporary memory is the runner's workspace.
dnnl::primitive_attr make_attr(const std::vector<Eltwise>& post_ops) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (!post_ops.empty()) {
    dnnl::post_ops ops;
    for (const Eltwise& e : post_ops) ops.append_eltwise(1.0f, eltwise_algorithm(e.kind), e.alpha, e.beta);
    attr.set_post_ops(ops);
  }
  return attr;
}

class Checker {
 public:
  explicit Checker(const OpRunner& runner) : runner_(runner) {}

  void count(size_t min_inputs, size_t max_inputs) const {
    const size_t n = runner_.inputs().size();
    KILN_CHECK_VALUE(n >= min_inputs && n <= max_inputs)
        << prefix() << "expected " << min_inputs
        << (max_inputs > min_inputs ? " to " + std::to_string(max_inputs) : std::string())
        << " inputs, got " << n;
    KILN_CHECK_VALUE(runner_.outputs().size() == 1)
        << prefix() << "expected 1 output, got " << runner_.outputs().size();
  }
  // The input, or an undefined tensor when it is omitted (optional inputs).
  Tensor input(size_t i) const {
    return i < runner_.inputs().size() ? runner_.inputs()[i] : Tensor();
  }
  void float32(const Tensor& t, const char* what) const {
    KILN_CHECK_DTYPE(t.dtype() == DType::kFloat32)
        << prefix() << "expected " << what << " of dtype float32, got " << t.dtype();
  }
  void contiguous(const Tensor& t, const char* what) const {
    KILN_CHECK_VALUE(t.is_contiguous())
        << prefix() << "expected " << what << " to be contiguous (call .contiguous())";
  }
  void describable(const Tensor& out) const {
    KILN_CHECK_VALUE(out.numel() == 0 || onednn::describable(out.shape(), out.strides()))
        << prefix() << "expected an output whose elements do not interleave across dimensions "
        << "(a contiguous tensor, or a permutation or slice of one), got shape "
        << shape_str(out.shape()) << " with strides " << shape_str(out.strides());
  }
  void output_shape(const Shape& expected) const {
    const Tensor& out = runner_.outputs()[0];
    KILN_CHECK_SHAPE(out.shape() == expected)
        << prefix() << "expected an output of shape " << shape_str(expected) << ", got "
        << shape_str(out.shape());
  }
  std::string prefix() const { return "OneDnnOpRunner '" + runner_.op_name() + "': "; }

 private:
  const OpRunner& runner_;
};

memory::desc desc_of(const Tensor& t) { return onednn::plain_desc(t.shape(), t.strides(), t.dtype()); }

bool describable(const Tensor& t) { return onednn::describable(t.shape(), t.strides()); }

// The inputs as Staged holds them: each defined one that oneDNN cannot describe copied.
void stage(std::vector<Tensor>* inputs) {
  for (Tensor& t : *inputs) {
    if (t.defined() && !describable(t)) t = t.contiguous();
  }
}

// A tensor of zeros of t's shape but for a size of 1 in dimension `dim`.
Tensor one_zero_along(const Tensor& t, int64_t dim) {
  Shape shape = t.shape();
  shape[static_cast<size_t>(dim < 0 ? dim + t.ndim() : dim)] = 1;
  return zeros(shape, t.dtype());
}

void add_tensor(onednn::PrimitiveKey& key, const Tensor& t) {
  if (!t.defined()) {
    key.add(-1);
    return;
  }
  key.add(t.shape()).add(t.strides());
}

void add_post_ops(onednn::PrimitiveKey& key, const std::vector<Eltwise>& ops) {
  key.add(static_cast<int64_t>(ops.size()));
  for (const Eltwise& e : ops) key.add(static_cast<int64_t>(e.kind)).add_double(e.alpha).add_double(e.beta);
}

// Finishes a Prepared from its primitive descriptor.
template <typename PrimitiveDesc, typename Primitive>
std::shared_ptr<Prepared> finish(const PrimitiveDesc& pd, std::vector<int> args,
                                 std::vector<memory::desc> mds) {
  auto p = std::make_shared<Prepared>();
  p->prim = Primitive(pd);
  p->input_args = std::move(args);
  p->input_mds = std::move(mds);
  p->dst_md = pd.dst_desc();
  p->scratchpad_md = pd.scratchpad_desc();
  return p;
}

// a [..., M, K] as a memory descriptor of `rank` dims (missing batch dims are size 1).
memory::desc ranked_desc(const Tensor& t, size_t rank) {
  Shape dims(rank, 1), strides(rank, 0);
  const size_t lead = rank - t.shape().size();
  for (size_t i = 0; i < t.shape().size(); ++i) {
    dims[lead + i] = t.shape()[i];
    strides[lead + i] = t.strides()[i];
  }
  for (size_t i = lead; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
  return onednn::plain_desc(dims, strides, t.dtype());
}

std::shared_ptr<const Prepared> prepare_matmul(const OneDnnOpRunner& r, const OneDnnPrimitive& p,
                                               std::vector<Tensor>* staged) {
  Checker check(r);
  check.count(2, 3);
  Tensor a = check.input(0), b = check.input(1), bias = check.input(2);
  const Tensor& out = r.outputs()[0];
  check.float32(a, "a");
  check.float32(b, "b");
  check.float32(out, "the output");
  KILN_CHECK_SHAPE(a.ndim() >= 2 && b.ndim() >= 2)
      << check.prefix() << "expected a and b with at least 2 dimensions, got "
      << shape_str(a.shape()) << " and " << shape_str(b.shape());
  KILN_CHECK_SHAPE(a.size(-1) == b.size(-2))
      << check.prefix() << "a " << shape_str(a.shape()) << " and b " << shape_str(b.shape())
      << " do not fit: a has " << a.size(-1) << " columns, b has " << b.size(-2) << " rows";
  Shape expected = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                    Shape(b.shape().begin(), b.shape().end() - 2));
  expected.push_back(a.size(-2));
  expected.push_back(b.size(-1));
  check.output_shape(expected);
  check.describable(out);
  if (out.numel() == 0) return nullptr;
  if (a.size(-1) == 0) {
    (*staged)[0] = one_zero_along(a, -1);
    (*staged)[1] = one_zero_along(b, -2);
  }
  stage(staged);
  a = (*staged)[0];
  b = (*staged)[1];
  if (bias.defined()) bias = (*staged)[2];
  const size_t rank = expected.size();
  onednn::PrimitiveKey key("ext_matmul");
  add_tensor(key, a);
  add_tensor(key, b);
  add_tensor(key, bias);
  add_tensor(key, out);
  add_post_ops(key, p.post_ops);
  return onednn::get_or_create<Prepared>(key, [&] {
    const memory::desc a_md = ranked_desc(a, rank), b_md = ranked_desc(b, rank);
    const memory::desc dst_md = desc_of(out);
    const dnnl::primitive_attr attr = make_attr(p.post_ops);
    if (!bias.defined()) {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, dst_md), attr,
                                      onednn::engine());
      return finish<decltype(pd), dnnl::matmul>(pd, {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, kNoArg},
                                                {a_md, b_md, {}});
    }
    check.float32(bias, "bias");
    KILN_CHECK_SHAPE(bias.ndim() <= static_cast<int64_t>(rank) &&
                     broadcast_shapes(bias.shape(), expected) == expected)
        << check.prefix() << "bias " << shape_str(bias.shape())
        << " does not broadcast to the output " << shape_str(expected);
    const memory::desc bias_md = ranked_desc(bias, rank);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, bias_md, dst_md), attr,
                                    onednn::engine());
    return finish<decltype(pd), dnnl::matmul>(pd, {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS},
                                              {a_md, b_md, bias_md});
  });
}

std::shared_ptr<const Prepared> prepare_convolution(const OneDnnOpRunner& r,
                                                    const OneDnnPrimitive& p,
                                                    std::vector<Tensor>* staged) {
  Checker check(r);
  check.count(2, 3);
  Tensor x = check.input(0), w = check.input(1), bias = check.input(2);
  const Tensor& out = r.outputs()[0];
  for (const Tensor& t : {x, w, out}) check.float32(t, "x, w and the output");
  KILN_CHECK_SHAPE(x.ndim() == 4 && w.ndim() == 4 && w.size(1) == x.size(1))
      << check.prefix() << "expected x [N, C, H, W] and w [O, C, KH, KW], got "
      << shape_str(x.shape()) << " and " << shape_str(w.shape());
  KILN_CHECK_VALUE(p.strides.size() == 2 && p.padding.size() == 2 && p.dilation.size() == 2)
      << check.prefix() << "expected 2 strides, paddings and dilations (height, width)";
  Shape expected{x.size(0), w.size(0), 0, 0};
  for (int d = 0; d < 2; ++d) {
    KILN_CHECK_VALUE(p.strides[d] >= 1 && p.dilation[d] >= 1 && p.padding[d] >= 0)
        << check.prefix() << "expected strides and dilations >= 1 and paddings >= 0";
    const int64_t span = p.dilation[d] * (w.size(2 + d) - 1) + 1;
    expected[2 + d] = (x.size(2 + d) + 2 * p.padding[d] - span) / p.strides[d] + 1;
    KILN_CHECK_SHAPE(expected[2 + d] >= 1)
        << check.prefix() << "the kernel " << shape_str(w.shape()) << " does not fit the input "
        << shape_str(x.shape()) << " with this padding";
  }
  check.output_shape(expected);
  if (bias.defined()) {
    check.float32(bias, "bias");
    KILN_CHECK_SHAPE(bias.shape() == Shape{w.size(0)})
        << check.prefix() << "expected bias [" << w.size(0) << "], got " << shape_str(bias.shape());
  }
  check.describable(out);
  if (out.numel() == 0) return nullptr;
  if (x.size(1) == 0) {
    (*staged)[0] = one_zero_along(x, 1);
    (*staged)[1] = one_zero_along(w, 1);
  }
  stage(staged);
  x = (*staged)[0];
  w = (*staged)[1];
  if (bias.defined()) bias = (*staged)[2];
  onednn::PrimitiveKey key("ext_convolution");
  for (const Tensor& t : {x, w, bias, out}) add_tensor(key, t);
  key.add(p.strides).add(p.padding).add(p.dilation);
  add_post_ops(key, p.post_ops);
  return onednn::get_or_create<Prepared>(key, [&] {
    const memory::desc x_md = desc_of(x), w_md = desc_of(w), dst_md = desc_of(out);
    const memory::dims strides(p.strides.begin(), p.strides.end());
    const memory::dims padding(p.padding.begin(), p.padding.end());
    const memory::dims dilates{p.dilation[0] - 1, p.dilation[1] - 1};  // oneDNN counts gaps
    const auto prop = dnnl::prop_kind::forward_inference;
    const auto alg = dnnl::algorithm::convolution_direct;
    const dnnl::primitive_attr attr = make_attr(p.post_ops);
    const memory::desc bias_md = bias.defined() ? desc_of(bias) : memory::desc();
    const dnnl::convolution_forward::desc desc =
        bias.defined() ? dnnl::convolution_forward::desc(prop, alg, x_md, w_md, bias_md, dst_md,
                                                         strides, dilates, padding, padding)
                       : dnnl::convolution_forward::desc(prop, alg, x_md, w_md, dst_md, strides,
                                                         dilates, padding, padding);
    dnnl::convolution_forward::primitive_desc pd(desc, attr, onednn::engine());
    return finish<decltype(pd), dnnl::convolution_forward>(
        pd, {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, bias.defined() ? DNNL_ARG_BIAS : kNoArg},
        {x_md, w_md, bias_md});
  });
}

// Elementwise, softmax and layer norm: one contiguous tensor in, one of its shape out.
std::shared_ptr<const Prepared> prepare_pointwise(const OneDnnOpRunner& r,
                                                  const OneDnnPrimitive& p) {
  Checker check(r);
  const bool norm = p.kind == OneDnnPrimitive::Kind::kLayerNorm;
  check.count(1, norm ? 3 : 1);
  const Tensor x = check.input(0), gamma = check.input(1), beta = check.input(2);
  const Tensor& out = r.outputs()[0];
  check.float32(x, "x");
  check.float32(out, "the output");
  check.contiguous(x, "x");
  check.contiguous(out, "the output");
  check.output_shape(x.shape());
  KILN_CHECK_SHAPE(x.ndim() >= 1) << check.prefix() << "expected x with at least 1 dimension";
  for (const Tensor* t : {&gamma, &beta}) {
    if (!t->defined()) continue;
    check.float32(*t, "gamma and beta");
    KILN_CHECK_SHAPE(t->shape() == Shape{x.size(-1)})
        << check.prefix() << "expected gamma and beta of shape [" << x.size(-1) << "], got "
        << shape_str(t->shape());
  }
  const int64_t axis = wrap_dim(p.axis, x.ndim(), "axis");
  if (x.numel() == 0) return nullptr;
  onednn::PrimitiveKey key("ext_pointwise");
  key.add(static_cast<int64_t>(p.kind)).add(x.shape()).add(axis).add_double(p.epsilon);
  key.add(gamma.defined()).add(beta.defined());
  add_post_ops(key, p.post_ops);
  return onednn::get_or_create<Prepared>(key, [&] {
    const memory::desc md = desc_of(x);
    const auto prop = dnnl::prop_kind::forward_inference;
    const dnnl::primitive_attr attr = make_attr({});
    const dnnl::engine& eng = onednn::engine();
    switch (p.kind) {
      case OneDnnPrimitive::Kind::kElementwise: {
        KILN_CHECK_VALUE(p.post_ops.size() == 1) << check.prefix() << "expected one function";
        const Eltwise& e = p.post_ops[0];
        dnnl::eltwise_forward::primitive_desc pd(
            dnnl::eltwise_forward::desc(prop, eltwise_algorithm(e.kind), md, e.alpha, e.beta),
            attr, eng);
        return finish<decltype(pd), dnnl::eltwise_forward>(pd, {DNNL_ARG_SRC}, {md});
      }
      case OneDnnPrimitive::Kind::kSoftmax: {
        dnnl::softmax_forward::primitive_desc pd(
            dnnl::softmax_forward::desc(prop, md, static_cast<int>(axis)), attr, eng);
        return finish<decltype(pd), dnnl::softmax_forward>(pd, {DNNL_ARG_SRC}, {md});
      }
      case OneDnnPrimitive::Kind::kLogSoftmax: {
        dnnl::logsoftmax_forward::primitive_desc pd(
            dnnl::logsoftmax_forward::desc(prop, md, static_cast<int>(axis)), attr, eng);
        return finish<decltype(pd), dnnl::logsoftmax_forward>(pd, {DNNL_ARG_SRC}, {md});
      }
      default: {
        auto flags = dnnl::normalization_flags::none;
        if (gamma.defined()) flags |= dnnl::normalization_flags::use_scale;
        if (beta.defined()) flags |= dnnl::normalization_flags::use_shift;
        dnnl::layer_normalization_forward::primitive_desc pd(
            dnnl::layer_normalization_forward::desc(prop, md, p.epsilon, flags), attr, eng);
        const memory::desc param_md({x.size(-1)}, memory::data_type::f32, memory::format_tag::a);
        return finish<decltype(pd), dnnl::layer_normalization_forward>(
            pd,
            {DNNL_ARG_SRC, gamma.defined() ? DNNL_ARG_SCALE : kNoArg,
             beta.defined() ? DNNL_ARG_SHIFT : kNoArg},
            {md, param_md, param_md});
      }
    }
  });
}

}  // namespace

OneDnnOpRunner::OneDnnOpRunner(std::string op_name, OneDnnPrimitive primitive)
    : OpRunner(std::move(op_name)), primitive_(std::move(primitive)) {}

OneDnnOpRunner::~OneDnnOpRunner() = default;

size_t OneDnnOpRunner::CalcWorkspace() {
  using Kind = OneDnnPrimitive::Kind;
  auto staged = std::make_shared<Staged>();
  staged->inputs = inputs();
  switch (primitive_.kind) {
    case Kind::kMatMul:
      staged->prepared = prepare_matmul(*this, primitive_, &staged->inputs);
      break;
    case Kind::kConvolution:
      staged->prepared = prepare_convolution(*this, primitive_, &staged->inputs);
      break;
    default:
      staged->prepared = prepare_pointwise(*this, primitive_);
      break;
  }
  prepared_ = staged;
  return staged->prepared ? staged->prepared->scratchpad_md.get_size() : 0;
}

void OneDnnOpRunner::LaunchKernel() {
  KILN_ASSERT(prepared_ != nullptr) << "LaunchKernel before CalcWorkspace";
  const auto& staged = *static_cast<const Staged*>(prepared_.get());
  if (staged.prepared == nullptr) {  // an empty output
    prepared_.reset();
    return;
  }
  const Prepared& p = *staged.prepared;
  const dnnl::engine& eng = onednn::engine();
  std::unordered_map<int, memory> args;
  for (size_t i = 0; i < p.input_args.size() && i < staged.inputs.size(); ++i) {
    if (p.input_args[i] != kNoArg)
      args.emplace(p.input_args[i], onednn::wrap(p.input_mds[i], staged.inputs[i]));
  }
  args.emplace(DNNL_ARG_DST, onednn::wrap(p.dst_md, outputs()[0]));
  if (p.scratchpad_md.get_size() > 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(p.scratchpad_md, eng, workspace_ptr()));
  }
  p.prim.execute(onednn::stream(), args);
  onednn::stream().wait();
  prepared_.reset();
}

}  // namespace kiln
