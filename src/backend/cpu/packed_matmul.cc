// PackedMatmul (see packed_matmul.h).
#include "backend/cpu/packed_matmul.h"

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
  dnnl::primitive_attr attr = onednn::cached_attr();
  if (activation) {
    dnnl::post_ops post;
    onednn::append_activation(*activation, &post);
    attr.set_post_ops(post);
  }
  const auto primitive_for = [&](const dnnl::memory::desc& weights) {
    const dnnl::matmul::desc desc =
        has_bias ? dnnl::matmul::desc(mm->src_md_, weights, mm->bias_md_, mm->dst_md_)
                 : dnnl::matmul::desc(mm->src_md_, weights, mm->dst_md_);
    return dnnl::matmul::primitive_desc(desc, attr, onednn::engine());
  };
  // The weight as given: [k, n] row-major, or Linear's [n, k] read as its transpose.
  const dnnl::memory::dims strides =
      transposed ? dnnl::memory::dims{1, k} : dnnl::memory::dims{n, 1};
  mm->given_md_ = dnnl::memory::desc({k, n}, dt::f32, strides);
  mm->weight_ = weight;
  dnnl::matmul::primitive_desc pd = primitive_for(dnnl::memory::desc({k, n}, dt::f32, tag::any));
  // Note [plain weights stay as given]
  // Where oneDNN's kernel for the problem wants a plain layout for a weight of any layout (its
  // gemm:jit kernel, the one it picks on AVX2), there is nothing to pack, and the weight's own
  // layout, the one eager passes, is the better plain one: Linear's transposed weight ran 25-30%
  // faster than the row-major copy that "any" asks for (64 x 512 x 512 on AVX2, machine C;
  // bench/RESULTS.md, "kiln_cpu graph backend — machine C"). So such a weight is used as it is,
  // unless it is not contiguous (a copy per run) or oneDNN has only its reference kernel for it.
  mm->packs_ =
      pd.weights_desc().data.format_desc.blocking.inner_nblks > 0 || !weight.is_contiguous();
  if (!mm->packs_) {
    dnnl::matmul::primitive_desc given = primitive_for(mm->given_md_);
    if (onednn::is_reference_impl(given)) {
      mm->packs_ = true;
    } else {
      pd = std::move(given);
    }
  }
  mm->primitive_ = dnnl::matmul(pd);
  mm->weights_md_ = pd.weights_desc();
  mm->scratchpad_md_ = pd.scratchpad_desc();
  if (!mm->packs_) return mm;

  // The reorder primitive is made once: a training step packs the updated weight at every run.
  mm->reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(onednn::engine(), mm->given_md_,
                                                             onednn::engine(), mm->weights_md_));
  mm->packed_ = Storage::allocate(mm->weights_md_.get_size());
  mm->pack(weight.storage()->write_version());
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
  if (packs_) {
    const uint64_t version = weight_.storage()->write_version();
    if (version != packed_version_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(pack_mutex_);
      if (version != packed_version_.load(std::memory_order_relaxed)) pack(version);
    }
  }
  // Unpacked, the weight is contiguous: make() packs one that is not.
  void* const weights = packs_ ? packed_->data() : weight_.data_ptr();
  // Everything that can throw comes before ExecArgs::of (see its header).
  const Tensor src = x.contiguous();
  const Tensor bias_data = has_bias_ ? bias.contiguous() : Tensor();  // held until the end
  void* const src_ptr = src.data_ptr();
  void* const out_ptr = out.data_ptr();
  void* const bias_ptr = has_bias_ ? bias_data.data_ptr() : nullptr;
  onednn::ExecArgs& args = onednn::ExecArgs::of(id_, {{DNNL_ARG_SRC, &src_md_},
                                                      {DNNL_ARG_WEIGHTS, &weights_md_},
                                                      {DNNL_ARG_DST, &dst_md_},
                                                      {DNNL_ARG_BIAS, &bias_md_},
                                                      {DNNL_ARG_SCRATCHPAD, &scratchpad_md_}});
  args.bind(DNNL_ARG_SRC, src_ptr);
  args.bind(DNNL_ARG_WEIGHTS, weights);
  args.bind(DNNL_ARG_DST, out_ptr);
  if (has_bias_) args.bind(DNNL_ARG_BIAS, bias_ptr);
  if (scratchpad_md_.get_size() > 0) args.bind(DNNL_ARG_SCRATCHPAD, scratchpad);
  args.execute(primitive_, "could not execute a packed matmul primitive");
}

}  // namespace kiln::cpu
