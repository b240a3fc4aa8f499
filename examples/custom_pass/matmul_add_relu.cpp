// matmul_add_relu.cpp — relu(x @ w + b) as one custom op: a oneDNN matmul with the bias added
// and the ReLU applied as the result is written (one pass over the output instead of three).
// Registered with m.def_op, so graphs can use it: MatMulAddReluFusion (my_passes.cpp) rewrites
// Relu(Add(MatMul(x, w), b)) to it.
//   ops.mat_mul_add_relu(x [M, K], w [K, N], b [N], [1, N] or [M, N]) -> [M, N], float32
// Built with kiln.ops.CustomOpBuilder(..., ldflags=["-ldnnl"]).
#include <kiln/extension.h>
#include <kiln/op.h>

#include <dnnl.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace {

kiln::MetaList infer(const kiln::InferContext& ctx) {
  const kiln::TensorMeta& x = ctx.input(0);
  const kiln::TensorMeta& w = ctx.input(1);
  const kiln::TensorMeta& b = ctx.input(2);
  for (const kiln::TensorMeta* t : {&x, &w, &b}) {
    KILN_CHECK_DTYPE(t->dtype == kiln::DType::kFloat32)
        << "MatMulAddRelu: expected float32 inputs, got " << kiln::dtype_name(t->dtype);
  }
  KILN_CHECK_SHAPE(x.shape.size() == 2 && w.shape.size() == 2 && x.shape[1] == w.shape[0])
      << "MatMulAddRelu: expected x [M, K] and w [K, N], got " << kiln::shape_str(x.shape)
      << " and " << kiln::shape_str(w.shape);
  const int64_t m = x.shape[0];
  const int64_t n = w.shape[1];
  const bool row = (b.shape.size() == 1 && b.shape[0] == n) ||
                   (b.shape.size() == 2 && (b.shape[0] == 1 || b.shape[0] == m) && b.shape[1] == n);
  KILN_CHECK_SHAPE(row) << "MatMulAddRelu: expected b [" << n << "], [1, " << n << "] or [" << m
                        << ", " << n << "], got " << kiln::shape_str(b.shape);
  return {kiln::TensorMeta(kiln::DType::kFloat32, {m, n})};
}

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// A [rows, cols] view of `t` (b [N] is one row), with its strides.
dnnl::memory::desc desc_of(const kiln::Tensor& t) {
  const bool vector = t.ndim() == 1;
  const dnnl::memory::dims dims{vector ? 1 : t.size(0), t.size(-1)};
  const dnnl::memory::dims strides{vector ? t.size(0) * t.stride(0) : t.stride(0), t.stride(-1)};
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

// Primitives are made once per shapes and strides (making one takes far longer than running a
// small one).
std::shared_ptr<const dnnl::matmul> primitive(const kiln::Tensor& x, const kiln::Tensor& w,
                                              const kiln::Tensor& b, const kiln::Tensor& out) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, std::shared_ptr<const dnnl::matmul>> cache;
  std::vector<int64_t> key;
  for (const kiln::Tensor* t : {&x, &w, &b, &out}) {
    key.push_back(t->ndim());
    for (int64_t d = 0; d < t->ndim(); ++d) {
      key.push_back(t->size(d));
      key.push_back(t->stride(d));
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<const dnnl::matmul>& p = cache[key];
  if (p == nullptr) {
    dnnl::post_ops relu;
    relu.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(relu);
    const dnnl::matmul::desc desc(desc_of(x), desc_of(w), desc_of(b), desc_of(out));
    p = std::make_shared<const dnnl::matmul>(dnnl::matmul::primitive_desc(desc, attr, engine()));
  }
  return p;
}

void kernel(kiln::KernelContext& ctx) {
  const kiln::Tensor& x = ctx.inputs[0];
  const kiln::Tensor& w = ctx.inputs[1];
  const kiln::Tensor& b = ctx.inputs[2];
  const kiln::Tensor& out = ctx.outputs[0];
  const auto matmul = primitive(x, w, b, out);
  thread_local dnnl::stream stream(engine());
  const auto memory = [](const kiln::Tensor& t) {
    return dnnl::memory(desc_of(t), engine(), t.data_ptr());
  };
  matmul->execute(stream, {{DNNL_ARG_SRC, memory(x)},
                           {DNNL_ARG_WEIGHTS, memory(w)},
                           {DNNL_ARG_BIAS, memory(b)},
                           {DNNL_ARG_DST, memory(out)}});
  stream.wait();
}

}  // namespace

KILN_EXTENSION(m) {
  m.def_op(kiln::OpDef("MatMulAddRelu")
               .input("x")
               .input("w")
               .input("b")
               .infer(&infer)
               .kernel(kiln::DeviceType::kCPU, &kernel)
               .doc("relu(x @ w + b) in one oneDNN matmul (bias and ReLU fused), float32."));
}
