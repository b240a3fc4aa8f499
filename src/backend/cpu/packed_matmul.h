// A float32 matmul by a constant weight whose weight kiln_cpu reorders once, at Build, into the
// blocked layout oneDNN's kernel for that problem prefers, when it prefers one (private to
// libkiln).
//
//   auto mm = kiln::cpu::PackedMatmul::make(rows, k, n, weight, /*transposed=*/true, true, {});
//   mm->run(x, bias, out, scratchpad);   // out[rows, n] = x[rows, k] @ weight^T + bias
//
// Eager matmuls cannot do this: they see the weight fresh at every call, so they hand oneDNN a
// plain (and, for Linear, transposed) weight. A graph's weights are constants, so kiln_cpu packs
// them once; the primitive, created then too, is kept with them (no cache lookup per run), and its
// scratchpad is planned memory (the step's workspace). A graph constant is the program's own
// tensor (a weight it may update in place, as an optimizer does): run() packs the weight again when
// an op has written into it since (Storage::write_version).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>

#include "kiln/tensor.h"
#include "ops/onednn_util.h"
#include "ops/simd/float_kernels.h"

namespace kiln::cpu {

class PackedMatmul {
 public:
  /// out = activation(x @ W + bias) for x [rows, k] with W = weight^T (`transposed`: weight is
  /// [n, k], Linear's layout) or W = weight ([k, n]); float32 only. Packs the weight now, when
  /// it packs it (Note [plain weights stay as given] in packed_matmul.cc).
  static std::shared_ptr<const PackedMatmul> make(int64_t rows, int64_t k, int64_t n,
                                                  const Tensor& weight, bool transposed,
                                                  bool has_bias,
                                                  std::optional<simd::UnaryOp> activation);

  /// Bytes of scratchpad run() needs.
  size_t scratchpad_bytes() const { return scratchpad_md_.get_size(); }
  /// The intra-op thread count the primitive was made for: oneDNN sizes a primitive's scratchpad
  /// and splits its work for it, so run() is only for calls made with that count
  /// (kiln::get_num_threads()); the caller runs the op's own kernel otherwise.
  int threads() const { return threads_; }
  /// x: [..., k] float32 with rows rows (any layout; copied when not contiguous); bias: [n] or
  /// undefined (as made); out: contiguous with rows x n elements. Thread-safe.
  void run(const Tensor& x, const Tensor& bias, const Tensor& out, void* scratchpad) const;

 private:
  /// Reorders the weight's current values into packed_ and records `version` as packed.
  void pack(uint64_t version) const;

  uint64_t id_ = onednn::new_primitive_id();  // for onednn::ExecArgs
  Tensor weight_;
  dnnl::memory::desc given_md_;  // the weight's own layout
  dnnl::reorder reorder_;        // given_md_ -> weights_md_
  mutable std::mutex pack_mutex_;  // one run packs; the others wait for it
  mutable std::atomic<uint64_t> packed_version_{0};  // the weight's write_version when packed
  dnnl::matmul primitive_;
  dnnl::memory::desc src_md_, weights_md_, bias_md_, dst_md_, scratchpad_md_;
  std::shared_ptr<Storage> packed_;  // the weight, reordered into weights_md_
  bool packs_ = false;  // false: the weight runs as given (Note [plain weights stay as given])
  bool has_bias_ = false;
  int threads_ = 0;
};

}  // namespace kiln::cpu
