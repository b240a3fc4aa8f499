// PackedMatmul (see packed_matmul.h).
#include "backend/cpu/packed_matmul.h"

#include <unordered_map>

#include "kiln/parallel.h"
#include "ops/onednn_util.h"

namespace kiln::cpu {

std::shared_ptr<const PackedMatmul> PackedMatmul::make(int64_t rows, int64_t k, int64_t n,
                                                       const Tensor& weight, bool transposed,
                                                       bool has_bias,
                                                       std::optional<simd::UnaryOp> activation) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  auto mm = std::make_shared<PackedMatmul>();
  mm->has_bias_ = has_bias;
  detail::apply_num_threads();  // oneDNN reads OpenMP's count when it makes the primitive
  mm->threads_ = get_num_threads();
  mm->src_md_ = dnnl::memory::desc({rows, k}, dt::f32, tag::ab);
  mm->dst_md_ = dnnl::memory::desc({rows, n}, dt::f32, tag::ab);
  if (has_bias) mm->bias_md_ = dnnl::memory::desc({1, n}, dt::f32, tag::ab);
  const dnnl::memory::desc any_weights({k, n}, dt::f32, tag::any);
  dnnl::primitive_attr attr = onednn::cached_attr();
  if (activation) {
    dnnl::post_ops post;
    onednn::append_activation(*activation, &post);
    attr.set_post_ops(post);
  }
  const dnnl::matmul::desc desc =
      has_bias ? dnnl::matmul::desc(mm->src_md_, any_weights, mm->bias_md_, mm->dst_md_)
               : dnnl::matmul::desc(mm->src_md_, any_weights, mm->dst_md_);
  const dnnl::matmul::primitive_desc pd(desc, attr, onednn::engine());
  mm->primitive_ = dnnl::matmul(pd);
  mm->weights_md_ = pd.weights_desc();
  mm->scratchpad_md_ = pd.scratchpad_desc();

  mm->weight_ = weight;
  // The weight as given: [k, n] row-major, or Linear's [n, k] read as its transpose. The reorder
  // primitive is made once: a training step packs the updated weight at every run.
  const dnnl::memory::dims strides = transposed ? dnnl::memory::dims{1, k}
                                                : dnnl::memory::dims{n, 1};
  mm->given_md_ = dnnl::memory::desc({k, n}, dt::f32, strides);
  mm->reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(onednn::engine(), mm->given_md_,
                                                             onednn::engine(), mm->weights_md_));
  mm->packed_ = Storage::allocate(mm->weights_md_.get_size());
  const uint64_t version = weight.storage()->write_version();
  mm->pack(version);
  return mm;
}

void PackedMatmul::pack(uint64_t version) const {
  const Tensor w = weight_.contiguous();
  dnnl::memory from(given_md_, onednn::engine(), w.data_ptr());
  dnnl::memory to(weights_md_, onednn::engine(), packed_->data());
  dnnl::stream& stream = onednn::stream();
  reorder_.execute(stream, from, to);
  stream.wait();
  packed_version_.store(version, std::memory_order_release);
}

void PackedMatmul::run(const Tensor& x, const Tensor& bias, const Tensor& out,
                       void* scratchpad) const {
  const uint64_t version = weight_.storage()->write_version();
  if (version != packed_version_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(pack_mutex_);
    if (version != packed_version_.load(std::memory_order_relaxed)) pack(version);
  }
  const Tensor src = x.contiguous();
  const dnnl::engine& engine = onednn::engine();
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(src_md_, engine, src.data_ptr())},
      {DNNL_ARG_WEIGHTS, dnnl::memory(weights_md_, engine, packed_->data())},
      {DNNL_ARG_DST, dnnl::memory(dst_md_, engine, out.data_ptr())}};
  Tensor bias_data;
  if (has_bias_) {
    bias_data = bias.contiguous();
    args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md_, engine, bias_data.data_ptr()));
  }
  if (scratchpad_md_.get_size() > 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(scratchpad_md_, engine, scratchpad));
  }
  dnnl::stream& stream = onednn::stream();
  primitive_.execute(stream, args);
  stream.wait();
}

}  // namespace kiln::cpu
