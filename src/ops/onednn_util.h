// oneDNN glue shared by the matmul and convolution kernels (private to libkiln).
//
//   onednn::PrimitiveKey key("matmul");
//   key.add(dims).add(strides).add(static_cast<int64_t>(dtype));
//   auto entry = onednn::get_or_create<MatmulEntry>(key, [&] { return make_entry(...); });
//   entry->prim.execute(onednn::stream(), {{DNNL_ARG_SRC, onednn::wrap(md, a)}, ...});
//
// One CPU engine serves the whole process. Creating a oneDNN primitive costs tens of microseconds
// to milliseconds (JIT code generation), so kernels keep them in one process-wide LRU cache keyed
// by everything that went into the primitive descriptor: shapes, strides, dtypes and attributes.
// See Note [Primitive cache].
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/export.h"
#include "kiln/tensor.h"
#include "ops/simd/float_kernels.h"

namespace kiln::onednn {

/// The process's CPU engine, created on first use. Thread-safe.
const dnnl::engine& engine();
/// A stream on engine() owned by the calling thread (oneDNN streams are not shared across
/// threads).
dnnl::stream& stream();

/// oneDNN's data type for `dtype`; throws kDType for dtypes oneDNN has no CPU kernels for.
dnnl::memory::data_type data_type(DType dtype);
/// A plain (non-blocked) memory descriptor with explicit element strides; they must be
/// describable().
dnnl::memory::desc plain_desc(const Shape& dims, const Shape& strides, DType dtype);
/// Whether oneDNN takes these dims and strides as a plain layout: only when the dimensions of
/// more than one element, ordered by stride, nest (each stride at least the extent of the
/// dimensions with smaller strides). A batch of every other row, x[:, ::2] of a [2, 3, 4] tensor
/// (strides [12, 8, 1]), interleaves its matrices and does not nest: callers copy such an
/// operand with contiguous(). Exported for the C++ tests.
KILN_API bool describable(const Shape& dims, const Shape& strides);
/// A memory object over the tensor's memory described by `md` (no copy; the tensor must outlive
/// the use).
dnnl::memory wrap(const dnnl::memory::desc& md, const Tensor& t);
/// True when oneDNN chose its reference (scalar) implementation for `pd`: callers then retry
/// with a friendlier layout.
bool is_reference_impl(const dnnl::primitive_desc_base& pd);
/// Attributes every cached primitive starts from: a user-managed scratchpad, so that one
/// primitive may run on several threads at once (see Note [Primitive cache]).
dnnl::primitive_attr cached_attr();
/// Memory for one execution's scratchpad (`md` from the primitive descriptor), added to `args`;
/// null when the primitive needs none. Keep it until the execution ends.
std::shared_ptr<Storage> add_scratchpad(const dnnl::memory::desc& md,
                                        std::unordered_map<int, dnnl::memory>* args);

/// A new identity for a primitive a kernel keeps (a cache entry, a jit's packed matmul), for
/// ExecArgs: unlike an address, never given twice.
uint64_t new_primitive_id();

/// The memory objects of one primitive's arguments on the calling thread, pointed at each
/// execution's buffers and executed through the C API with the arguments on the stack (see
/// Note [Reused memory objects] in onednn_util.cc).
///
///   onednn::ExecArgs& args = onednn::ExecArgs::of(entry.id, {{DNNL_ARG_SRC, &entry.src_md}, ...});
///   args.bind(DNNL_ARG_SRC, src.data_ptr());
///   ...
///   args.execute(entry.prim, "could not execute a matmul primitive");
class ExecArgs {
 public:
  struct Arg {
    int arg;                         // DNNL_ARG_*
    const dnnl::memory::desc* desc;  // an empty desc (size 0): the primitive takes no such arg
  };
  static constexpr size_t kMaxArgs = 6;

  ExecArgs() = default;
  ExecArgs(const ExecArgs&) = delete;  // `auto args = of(...)` would bind a copy
  ExecArgs& operator=(const ExecArgs&) = delete;
  ExecArgs(ExecArgs&&) = default;
  ExecArgs& operator=(ExecArgs&&) = default;

  /// The calling thread's objects for primitive `id` (from new_primitive_id()), made from `args`
  /// unless the thread ran it among its last few primitives, with no bindings. Valid until the
  /// thread's next of(): so a caller does everything that can throw or run another primitive
  /// (data_ptr(), allocations, copies) first, then of(), bind() and execute() in a row.
  static ExecArgs& of(uint64_t id, std::initializer_list<Arg> args);
  /// Points `arg`'s memory at `data` for the next execute(). Only args `of` was given with a
  /// nonempty desc, each at most once.
  void bind(int arg, void* data);
  /// Runs `prim` on the thread's stream with the args bound since the last execute(), waits for
  /// it, and forgets the bindings. A failure throws a kiln::Error led by `error_message`.
  void execute(const dnnl::primitive& prim, const char* error_message);

 private:
  uint64_t id_ = 0;  // 0: unused
  size_t count_ = 0;
  int args_[kMaxArgs] = {};
  dnnl::memory memory_[kMaxArgs];
  size_t bound_count_ = 0;
  dnnl_exec_arg_t bound_[kMaxArgs] = {};
};

/// Appends `op` (kRelu, kGeluErf, kGeluTanh, kSilu, kSigmoid or kTanh; see is_gemm_activation in
/// gemm.h) as an eltwise post-op.
void append_activation(simd::UnaryOp op, dnnl::post_ops* post);

/// Everything that identifies a primitive: a kind name, the intra-op thread count and a sequence
/// of integers.
class PrimitiveKey {
 public:
  explicit PrimitiveKey(const char* kind);
  PrimitiveKey& add(int64_t value);
  /// Adds the length, then the values (so [1, 2] + [3] differs from [1] + [2, 3]).
  PrimitiveKey& add(const std::vector<int64_t>& values);
  /// Adds the bit pattern of `value`.
  PrimitiveKey& add_double(double value);

  bool operator==(const PrimitiveKey& other) const { return words_ == other.words_; }
  size_t hash() const;

 private:
  std::vector<int64_t> words_;
};

/// The type-erased cache behind get_or_create (thread-safe; `make` runs outside the lock).
std::shared_ptr<const void> cache_lookup(const PrimitiveKey& key,
                                         const std::function<std::shared_ptr<const void>()>& make);

/// The cached entry for `key`, built by `make()` on a miss. Entries of one kind must always have
/// the same type T (the key's kind name tells them apart). Thread-safe. A dnnl::error from `make`
/// (a descriptor oneDNN refuses: a Kiln bug) comes out as a kiln::Error.
template <typename T, typename Make>
std::shared_ptr<const T> get_or_create(const PrimitiveKey& key, Make&& make) {
  return std::static_pointer_cast<const T>(
      cache_lookup(key, [&]() -> std::shared_ptr<const void> { return make(); }));
}

/// Counters of the primitive cache, for tests and diagnostics.
struct PrimitiveCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t size = 0;
  int64_t capacity = 0;
};
/// Exported for the C++ tests (libkiln hides everything else here).
KILN_API PrimitiveCacheStats primitive_cache_stats();
/// Drops every cached primitive and zeroes the counters (for tests).
KILN_API void clear_primitive_cache();

}  // namespace kiln::onednn
