#include "ops/gemm.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "kiln/parallel.h"
#include "ops/gemv.h"
#include "ops/onednn_util.h"

namespace kiln {
namespace {

// Note [oneDNN matmul layouts]
// oneDNN's matmul takes any strides in its memory descriptors, but only some layouts reach its
// fast (brgemm / jit gemm) kernels: each operand's matrix must be row-major or column-major
// (one of the two inner strides 1, the other at least the matrix's width), and batch dimensions
// must either match or be 1 (oneDNN broadcasts size-1 batch dimensions itself). So a transposed
// view passes as strides, a stride-0 (expanded) batch dimension passes as size 1, and only an
// operand whose matrix has no unit stride, or whose matrices interleave (a batch of every other
// row: onednn::describable), is copied with contiguous(). When oneDNN still picks
// its reference implementation, the operands are made contiguous and the primitive rebuilt.

struct Layout {
  Shape dims;
  Shape strides;
};

// The operand as oneDNN sees it: padded to `nd` dims with leading 1s, broadcast batch dims as
// size 1, strides normalised. False when its matrix is neither row- nor column-major, or oneDNN
// cannot describe it.
bool onednn_layout(const Tensor& t, int64_t nd, Layout* layout) {
  Shape& dims = layout->dims;
  Shape& strides = layout->strides;
  dims.assign(static_cast<size_t>(nd), 1);
  strides.assign(static_cast<size_t>(nd), 0);
  const int64_t offset = nd - t.ndim();
  for (int64_t i = 0; i < t.ndim(); ++i) {
    dims[offset + i] = t.size(i);
    strides[offset + i] = t.stride(i);
  }
  for (int64_t d = 0; d < nd - 2; ++d) {
    if (strides[d] == 0) dims[d] = 1;
  }
  const int64_t r = dims[nd - 2], c = dims[nd - 1];
  const int64_t sr = strides[nd - 2], sc = strides[nd - 1];
  if ((sc == 1 || c == 1) && (r == 1 || sr >= c)) {
    strides[nd - 2] = r == 1 ? c : sr;
    strides[nd - 1] = 1;
  } else if ((sr == 1 || r == 1) && (c == 1 || sc >= r)) {
    strides[nd - 2] = 1;
    strides[nd - 1] = c == 1 ? r : sc;
  } else {
    return false;
  }
  // A size-1 batch dimension's stride is never used; give it the span of the dimensions inside
  // it so that the descriptor looks like an ordinary dense layout.
  int64_t span = std::max(r * strides[nd - 2], c * strides[nd - 1]);
  for (int64_t d = nd - 3; d >= 0; --d) {
    if (dims[d] == 1) strides[d] = span;
    span = std::max(span, dims[d] * strides[d]);
  }
  return onednn::describable(dims, strides);
}

// Note [oneDNN matmul implementation]
// For float32 on x86, oneDNN 2.6 offers two fast matmul implementations: brgemm
// ("brg:avx512_core", its first choice on AVX-512) and "gemm:jit", the kernel behind dnnl_sgemm.
// brgemm wins on thin products, gemm:jit on large ones. Measured with both in one process
// (bench/RESULTS.md, "sgemm"; best of 6), gemm:jit took 0.87x brgemm's time on 2048^3, 0.90x on
// 1024^3, 0.92x on 4096 x 1024 x 1024 and 0.94x on 512^3, the two were within noise of each other
// on 256^3, and brgemm took 0.66x gemm:jit's time on 64 x 2048 x 2048 and 0.83x on 32 x 4096 x
// 4096. So a product whose matrices have every dimension (rows, columns, depth) at least
// kJitGemmMinDim runs on gemm:jit when oneDNN offers it for the descriptor, and every other one on
// oneDNN's first choice.
constexpr int64_t kJitGemmMinDim = 256;

struct MatmulEntry {
  uint64_t id = onednn::new_primitive_id();  // for onednn::ExecArgs
  dnnl::matmul prim;
  dnnl::memory::desc a_md, b_md, c_md, bias_md, scratchpad_md;
  bool reference = false;
  std::string impl;  // oneDNN's implementation name
};

// oneDNN's first implementation for `desc`, or its gemm:jit one when `prefer_jit_gemm` and it
// has one (Note [oneDNN matmul implementation]).
dnnl::matmul::primitive_desc choose_implementation(const dnnl::matmul::desc& desc,
                                                   const dnnl::primitive_attr& attr,
                                                   bool prefer_jit_gemm) {
  if (prefer_jit_gemm) {
    dnnl::matmul::primitive_desc candidate(desc, attr, onednn::engine());
    do {
      if (std::strncmp(candidate.impl_info_str(), "gemm:jit", 8) == 0) return candidate;
    } while (candidate.next_impl());
  }
  return dnnl::matmul::primitive_desc(desc, attr, onednn::engine());
}

std::shared_ptr<const MatmulEntry> matmul_primitive(const Layout& a, const Layout& b,
                                                    const Shape& out_dims, const GemmEpilogue& ep) {
  onednn::PrimitiveKey key("matmul.f32");
  key.add(a.dims).add(a.strides).add(b.dims).add(b.strides).add(out_dims);
  key.add(ep.bias.defined() ? 1 : 0).add(ep.accumulate ? 1 : 0);
  key.add_double(ep.alpha).add_double(ep.beta);
  key.add(ep.activation ? static_cast<int64_t>(*ep.activation) : -1);
  return onednn::get_or_create<MatmulEntry>(key, [&] {
    auto entry = std::make_shared<MatmulEntry>();
    entry->a_md = onednn::plain_desc(a.dims, a.strides, DType::kFloat32);
    entry->b_md = onednn::plain_desc(b.dims, b.strides, DType::kFloat32);
    entry->c_md = onednn::plain_desc(out_dims, contiguous_strides(out_dims), DType::kFloat32);
    dnnl::primitive_attr attr = onednn::cached_attr();
    if (ep.alpha != 1.0) attr.set_output_scales(0, {static_cast<float>(ep.alpha)});
    dnnl::post_ops post;
    if (ep.accumulate) post.append_sum(static_cast<float>(ep.beta));
    if (ep.activation) onednn::append_activation(*ep.activation, &post);
    if (post.len() > 0) attr.set_post_ops(post);
    std::unique_ptr<dnnl::matmul::desc> desc;
    if (ep.bias.defined()) {
      Shape bias_dims(out_dims.size(), 1);
      bias_dims.back() = out_dims.back();
      entry->bias_md =
          onednn::plain_desc(bias_dims, contiguous_strides(bias_dims), DType::kFloat32);
      desc = std::make_unique<dnnl::matmul::desc>(entry->a_md, entry->b_md, entry->bias_md,
                                                  entry->c_md);
    } else {
      desc = std::make_unique<dnnl::matmul::desc>(entry->a_md, entry->b_md, entry->c_md);
    }
    const size_t nd = out_dims.size();
    const bool large =
        std::min({out_dims[nd - 2], out_dims[nd - 1], a.dims[nd - 1]}) >= kJitGemmMinDim;
    const dnnl::matmul::primitive_desc pd = choose_implementation(*desc, attr, large);
    entry->reference = onednn::is_reference_impl(pd);
    entry->impl = pd.impl_info_str();
    entry->scratchpad_md = pd.scratchpad_desc();
    entry->prim = dnnl::matmul(pd);
    return entry;
  });
}

// A float32 product as oneDNN runs it: the operands (copied where their layout needed it) and the
// cached primitive.
struct OneDnnPlan {
  Tensor a, b;
  std::shared_ptr<const MatmulEntry> entry;
};

// Returns false when the problem does not fit oneDNN's layout rules even after copying (then
// the generic loop runs it).
bool plan_onednn(const Tensor& a_in, const Tensor& b_in, const Tensor& out, const GemmEpilogue& ep,
                 OneDnnPlan* plan) {
  const int64_t nd = out.ndim();
  if (nd > DNNL_MAX_NDIMS) return false;
  Tensor a = a_in, b = b_in;
  Layout la, lb;
  if (!onednn_layout(a, nd, &la)) {
    a = a.contiguous();
    onednn_layout(a, nd, &la);
  }
  if (!onednn_layout(b, nd, &lb)) {
    b = b.contiguous();
    onednn_layout(b, nd, &lb);
  }
  // A batch dimension of the output where both operands have size 1 to oneDNN (one of them
  // expanded there with stride 0, the other of size 1 or expanded too) leaves oneDNN no operand
  // of the output's size: materialise the one that was expanded to it.
  for (int64_t d = 0; d < nd - 2; ++d) {
    if (out.size(d) == 1 || la.dims[d] != 1 || lb.dims[d] != 1) continue;
    const int64_t in_a = d - (nd - a.ndim());  // d among a's dimensions (a may have fewer)
    const bool a_expanded = in_a >= 0 && a.size(in_a) > 1;
    Tensor& t = a_expanded ? a : b;
    t = t.contiguous();
    onednn_layout(t, nd, a_expanded ? &la : &lb);
  }
  std::shared_ptr<const MatmulEntry> entry = matmul_primitive(la, lb, out.shape(), ep);
  if (entry->reference && !(a.is_contiguous() && b.is_contiguous())) {
    a = a.contiguous();
    b = b.contiguous();
    onednn_layout(a, nd, &la);
    onednn_layout(b, nd, &lb);
    entry = matmul_primitive(la, lb, out.shape(), ep);
  }
  *plan = OneDnnPlan{a, b, std::move(entry)};
  return true;
}

// Whether gemm() runs this problem on oneDNN (float32 with a nonempty product); k == 0 has no
// product to compute: the generic loop writes the epilogue of zeros.
bool uses_onednn(const Tensor& a, const Tensor& out) {
  return out.dtype() == DType::kFloat32 && out.numel() > 0 && a.size(-1) > 0;
}

void run_onednn(const OneDnnPlan& plan, const Tensor& out, const GemmEpilogue& ep) {
  const MatmulEntry& entry = *plan.entry;
  // Everything that can throw comes before ExecArgs::of (see its header).
  void* const a = plan.a.data_ptr();
  void* const b = plan.b.data_ptr();
  void* const c = out.data_ptr();
  void* const bias = ep.bias.defined() ? ep.bias.data_ptr() : nullptr;
  std::shared_ptr<Storage> scratchpad;  // held until the execution ends
  if (entry.scratchpad_md.get_size() > 0) {
    scratchpad = Storage::allocate(entry.scratchpad_md.get_size());
  }
  onednn::ExecArgs& args =
      onednn::ExecArgs::of(entry.id, {{DNNL_ARG_SRC, &entry.a_md},
                                      {DNNL_ARG_WEIGHTS, &entry.b_md},
                                      {DNNL_ARG_DST, &entry.c_md},
                                      {DNNL_ARG_BIAS, &entry.bias_md},
                                      {DNNL_ARG_SCRATCHPAD, &entry.scratchpad_md}});
  args.bind(DNNL_ARG_SRC, a);
  args.bind(DNNL_ARG_WEIGHTS, b);
  args.bind(DNNL_ARG_DST, c);
  if (bias != nullptr) args.bind(DNNL_ARG_BIAS, bias);
  if (scratchpad != nullptr) args.bind(DNNL_ARG_SCRATCHPAD, scratchpad->data());
  args.execute(entry.prim, "could not execute a matmul primitive");
}

// The accumulator of the generic loop: the type itself for floats; for integers and bool a
// uint64 with wrap-around (the low bits equal NumPy's wrapping integer matmul, without signed
// overflow).
template <typename T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, T, uint64_t>;

template <typename T>
Acc<T> to_acc(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v;
  } else {
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  }
}

// Element offsets of every batch matrix of `t` (a contiguous tensor) within the broadcast batch
// of `batch_shape`.
std::vector<int64_t> batch_offsets(const Tensor& t, const Shape& batch_shape) {
  const int64_t nb = static_cast<int64_t>(batch_shape.size());
  const int64_t tb = t.ndim() - 2;
  Shape strides(static_cast<size_t>(nb), 0);
  for (int64_t i = 0; i < tb; ++i) {
    strides[nb - tb + i] = t.size(i) == 1 ? 0 : t.stride(i);
  }
  std::vector<int64_t> offsets(static_cast<size_t>(shape_numel(batch_shape)));
  for (size_t idx = 0; idx < offsets.size(); ++idx) {
    int64_t rest = static_cast<int64_t>(idx), off = 0;
    for (int64_t d = nb - 1; d >= 0; --d) {
      off += (rest % batch_shape[d]) * strides[d];
      rest /= batch_shape[d];
    }
    offsets[idx] = off;
  }
  return offsets;
}

constexpr int64_t kRowBlock = 16;
constexpr int64_t kColBlock = 256;
constexpr int64_t kDepthBlock = 128;
// Multiply-adds per parallel chunk: enough that thread start-up is noise.
constexpr int64_t kMinChunkWork = int64_t{1} << 16;

// One generic-loop problem over contiguous operands; a task is kRowBlock rows of one batch
// matrix, computed in column blocks that keep a [kDepthBlock, kColBlock] panel of b in cache.
template <typename T>
struct GenericGemm {
  using A = Acc<T>;
  const T* a;
  const T* b;
  T* c;
  const T* bias;  // null for none
  std::vector<int64_t> a_off, b_off;
  int64_t n, m, k;
  A alpha, beta;
  bool plain;  // alpha == 1, no bias, no accumulation
  bool accumulate;

  void run(int64_t task, std::vector<A>& acc) const {
    const int64_t row_blocks = (n + kRowBlock - 1) / kRowBlock;
    const int64_t bi = task / row_blocks;
    const int64_t i0 = (task % row_blocks) * kRowBlock;
    const int64_t i1 = std::min(n, i0 + kRowBlock);
    const T* ab = a + a_off[bi];
    const T* bb = b + b_off[bi];
    T* cb = c + bi * n * m;
    for (int64_t j0 = 0; j0 < m; j0 += kColBlock) {
      const int64_t jn = std::min(kColBlock, m - j0);
      std::fill(acc.begin(), acc.end(), A{});
      for (int64_t k0 = 0; k0 < k; k0 += kDepthBlock) {
        const int64_t k1 = std::min(k, k0 + kDepthBlock);
        for (int64_t i = i0; i < i1; ++i) {
          A* crow = acc.data() + (i - i0) * jn;
          for (int64_t kk = k0; kk < k1; ++kk) {
            const A av = to_acc(ab[i * k + kk]);
            const T* brow = bb + kk * m + j0;
            for (int64_t j = 0; j < jn; ++j) crow[j] += av * to_acc(brow[j]);
          }
        }
      }
      for (int64_t i = i0; i < i1; ++i) store(acc.data() + (i - i0) * jn, cb + i * m + j0, j0, jn);
    }
  }

  void store(const A* acc, T* out, int64_t j0, int64_t jn) const {
    for (int64_t j = 0; j < jn; ++j) {
      if constexpr (std::is_same_v<T, bool>) {
        out[j] = acc[j] != 0;
      } else if (plain) {
        out[j] = static_cast<T>(acc[j]);
      } else {
        A v = alpha * acc[j];
        if (bias != nullptr) v += to_acc(bias[j0 + j]);
        if (accumulate) v += beta * to_acc(out[j]);
        out[j] = static_cast<T>(v);
      }
    }
  }
};

template <typename T>
void generic_gemm(const Tensor& a_in, const Tensor& b_in, const Tensor& out,
                  const GemmEpilogue& ep) {
  using A = Acc<T>;
  const Tensor a = a_in.contiguous(), b = b_in.contiguous();
  const Shape batch_shape(out.shape().begin(), out.shape().end() - 2);
  GenericGemm<T> job;
  job.a = a.data<T>();
  job.b = b.data<T>();
  job.c = out.data<T>();
  job.bias = ep.bias.defined() ? ep.bias.data<T>() : nullptr;
  job.a_off = batch_offsets(a, batch_shape);
  job.b_off = batch_offsets(b, batch_shape);
  job.n = out.size(-2);
  job.m = out.size(-1);
  job.k = a.size(-1);
  // Integer dtypes take alpha and beta as integers (AddMM checks they are whole and in range).
  if constexpr (std::is_floating_point_v<T>) {
    job.alpha = static_cast<A>(ep.alpha);
    job.beta = static_cast<A>(ep.beta);
  } else {
    job.alpha = static_cast<uint64_t>(static_cast<int64_t>(ep.alpha));
    job.beta = static_cast<uint64_t>(static_cast<int64_t>(ep.beta));
  }
  job.plain = ep.alpha == 1.0 && !ep.accumulate && job.bias == nullptr;
  job.accumulate = ep.accumulate;
  const int64_t tasks =
      static_cast<int64_t>(job.a_off.size()) * ((job.n + kRowBlock - 1) / kRowBlock);
  const int64_t task_work =
      std::max<int64_t>(1, std::min(job.n, kRowBlock) * std::max<int64_t>(job.k, 1) * job.m);
  parallel_for(0, tasks, std::max<int64_t>(1, kMinChunkWork / task_work),
               [&](int64_t lo, int64_t hi) {
                 std::vector<A> acc(static_cast<size_t>(kRowBlock * kColBlock));
                 for (int64_t task = lo; task < hi; ++task) job.run(task, acc);
               });
}

// out = op(out) in place, for the loops oneDNN does not run.
void apply_activation(simd::UnaryOp op, const Tensor& out) {
  KILN_ASSERT(out.dtype() == DType::kFloat32 || out.dtype() == DType::kFloat64)
      << "gemm activation on " << out.dtype();
  const int64_t n = out.numel();
  parallel_for(0, n, 32768, [&](int64_t begin, int64_t end) {
    if (out.dtype() == DType::kFloat32) {
      float* y = out.data<float>() + begin;
      simd::unary(op, y, y, end - begin);
    } else {
      double* y = out.data<double>() + begin;
      simd::unary(op, y, y, end - begin);
    }
  });
}

}  // namespace

bool is_gemm_activation(simd::UnaryOp op) {
  switch (op) {
    case simd::UnaryOp::kRelu:
    case simd::UnaryOp::kGeluErf:
    case simd::UnaryOp::kGeluTanh:
    case simd::UnaryOp::kSilu:
    case simd::UnaryOp::kSigmoid:
    case simd::UnaryOp::kTanh:
      return true;
    default:
      return false;
  }
}

void gemm(const Tensor& a, const Tensor& b, const Tensor& out, const GemmEpilogue& epilogue) {
  KILN_ASSERT(a.dtype() == out.dtype() && b.dtype() == out.dtype() && out.is_contiguous())
      << "gemm got " << type_str(a) << " @ " << type_str(b) << " -> " << type_str(out);
  KILN_ASSERT(!epilogue.bias.defined() || epilogue.alpha == 1.0) << "bias with alpha != 1";
  if (out.numel() == 0) return;
  if (runs_as_gemv(a, b, out)) {  // one row: Note [Single-row products]
    gemv(a, b, out, epilogue);
    if (epilogue.activation) apply_activation(*epilogue.activation, out);
    return;
  }
  OneDnnPlan plan;
  if (uses_onednn(a, out) && plan_onednn(a, b, out, epilogue, &plan)) {
    run_onednn(plan, out, epilogue);
    return;
  }
  if (epilogue.activation) {
    GemmEpilogue linear = epilogue;
    linear.activation.reset();
    gemm(a, b, out, linear);
    apply_activation(*epilogue.activation, out);
    return;
  }
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      KILN_ASSERT(false) << "gemm called with " << out.dtype() << "; compute it in float32";
    } else {
      if constexpr (std::is_same_v<T, bool>) {
        KILN_ASSERT(epilogue.alpha == 1.0 && !epilogue.accumulate && !epilogue.bias.defined())
            << "bool gemm with an epilogue";
      }
      generic_gemm<T>(a, b, out, epilogue);
    }
  });
}

std::string gemm_implementation(const Tensor& a, const Tensor& b, const Tensor& out,
                                const GemmEpilogue& epilogue) {
  if (runs_as_gemv(a, b, out)) return "gemv";
  OneDnnPlan plan;
  if (!uses_onednn(a, out) || !plan_onednn(a, b, out, epilogue, &plan)) return "";
  return plan.entry->impl;
}

}  // namespace kiln
