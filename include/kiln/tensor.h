// kiln::Tensor: a reference-counted handle to an n-dimensional strided view of a Storage.
//
//   kiln::Tensor out(kiln::DType::kFloat32, {2, 3});   // metadata only; the pipeline allocates
//   kiln::Tensor x = kiln::Tensor::empty({4, 5});      // metadata and memory
//   kiln::Tensor row = x.select(0, 1);                  // a view: shares x's storage
//   float* p = row.data<float>();                       // element (1, 0) of x
//
// Copying a Tensor copies the handle, not the data (as in PyTorch): both handles see the same
// elements, and `data<T>()` on a const Tensor gives a mutable T*. Views (view, reshape when it can,
// transpose, permute, slice, narrow, select, expand, squeeze, unsqueeze, flatten, unfold) share
// storage and keep it alive; `contiguous()` copies only when the layout needs it.
//
// Tensor's methods are the core layer, below autograd and kiln::jit: neither records them. A view,
// clone() or contiguous() of a tensor that requires grad has no gradient path to it, and inside a
// traced function they see no data. For recorded forms use the functions of kiln/functional.h
// (kiln::reshape, transpose, permute, expand, squeeze, unsqueeze, flatten, contiguous, as_strided,
// index, ...) or autograd::differentiable_view(x, [](const Tensor& t) { return t.select(0, 1); }),
// as kiln's Python Tensor methods do.
//
// Shapes and strides are in elements; a stride may be 0 (a broadcast dimension). Dimensions
// accept negative indices counted from the end, as in NumPy. Invalid arguments throw kiln::Error
// of kind kShape, kIndex or kDType with what was expected and what came.
//
// A tensor returned by an eager op may be *pending*: its op is still queued in the runtime's
// pipeline (kiln/runtime.h). Reading its metadata (dtype(), shape(), ...) then waits for the op's
// FrontendTask, and reading its data (data_ptr(), data<T>()) waits for every queued op that uses
// its memory; either rethrows the op's error if it failed. Inside kernels nothing waits: the
// pipeline runs a kernel only after its inputs are ready.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/allocator.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/export.h"
#include "kiln/scalar.h"
#include "kiln/small_vector.h"

namespace kiln {

/// Dimensions a Shape holds without allocating memory (kiln/small_vector.h).
inline constexpr size_t kMaxInlineDims = 6;
/// Sizes or strides of a tensor, in elements.
using Shape = SmallVector<int64_t, kMaxInlineDims>;

/// "[2, 3]"
KILN_API std::string shape_str(const Shape& shape);
/// Product of the sizes (1 for a 0-d shape).
KILN_API int64_t shape_numel(const Shape& shape);
/// The bytes of a contiguous tensor of `shape` and `dtype`; throws kShape naming `what` when a
/// size is negative or the bytes would number more than 2^63 - 1 (a product that would wrap).
KILN_API size_t checked_nbytes(const Shape& shape, DType dtype, const char* what);
/// The elements of memory a view of `shape` and `strides` (non-negative) reaches when it starts
/// `offset` elements in: offset + sum((size - 1) * stride) + 1, or 0 for an empty view. A sum past
/// 2^63 - 1 gives INT64_MAX (more than any memory holds).
KILN_API int64_t view_extent(const Shape& shape, const Shape& strides, int64_t offset);
/// Row-major strides for `shape`.
KILN_API Shape contiguous_strides(const Shape& shape);
/// Wraps a possibly negative `dim` into [0, ndim); throws kIndex naming `what` when out of range.
KILN_API int64_t wrap_dim(int64_t dim, int64_t ndim, const char* what = "dim");
/// `shape` with dimensions start_dim..end_dim merged into one (a 0-d shape becomes [1]).
KILN_API Shape flatten_shape(const Shape& shape, int64_t start_dim, int64_t end_dim);
/// NumPy broadcasting of two shapes; throws kShape when they do not broadcast.
KILN_API Shape broadcast_shapes(const Shape& a, const Shape& b);

struct OpFailure;
struct AutogradMeta;  // kiln/autograd.h

/// The state behind a Tensor handle. Exposed for the runtime and backends; user code goes through
/// Tensor.
struct KILN_API TensorImpl {
  /// `pending` of a tensor whose producing op failed before its metadata was known.
  static constexpr uint64_t kFailedMetadata = ~uint64_t{0};

  DType dtype = DType::kFloat32;
  Device device;
  Shape shape;
  Shape strides;
  int64_t offset = 0;  // in elements, into storage
  std::shared_ptr<Storage> storage;  // null until memory is allocated
  // A 0-d tensor standing for a Python number: "weak" in type promotion (see kiln/scalar.h).
  bool weak = false;
  // 0 once the metadata above is known; while the producing op waits in the pipeline, its
  // sequence number; kFailedMetadata when it failed first. Written with release by the stage
  // that fills the metadata, so an acquire load that sees 0 sees the metadata.
  std::atomic<uint64_t> pending{0};
  // Gradient state (requires_grad, the op that made it, .grad) when autograd has seen this
  // tensor; null for the vast majority of tensors. Owned by the autograd layer (kiln/autograd.h).
  std::shared_ptr<AutogradMeta> autograd;

  // User-provided, so that make_shared<TensorImpl>() does not zero the object (two inline
  // shapes) before the member initializers run; it happens for every op's result.
  TensorImpl() {}
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;
  ~TensorImpl();

  /// Why the op that wrote this tensor (or one it depended on) failed; null when it is healthy.
  /// A read of the tensor raises it; an op that uses the tensor fails with the same cause.
  std::shared_ptr<const OpFailure> failure() const;
  /// Records a failure; thread-safe. A *transient* one is that of an op that wrote into this
  /// existing tensor (`out`, in-place): its data is still whole, so once any sync point has raised
  /// the failure, the tensor is healthy again. A failure already recorded stays unless it was
  /// transient and raised.
  void set_failure(std::shared_ptr<const OpFailure> failure, bool transient = false);
  /// Records `base`'s live failure, transient or not, on this tensor (a view of `base`).
  void inherit_failure(const TensorImpl& base);

  /// Registers `alias` (a pending handle, Tensor::alias()) to receive this pending tensor's
  /// metadata; false when the metadata is already final (take_pending_aliases ran), in which case
  /// the caller makes the alias from it directly. Thread-safe.
  bool add_pending_alias(std::shared_ptr<TensorImpl> alias);
  /// For the stage that made this tensor's `pending` final (0, or kFailedMetadata with the
  /// failure recorded): gives the registered aliases this tensor's metadata and failure, and
  /// closes registration. The aliases are still pending; that stage ends them as it ends this one.
  std::vector<std::shared_ptr<TensorImpl>> take_pending_aliases();

 private:
  struct PendingAlias {
    std::shared_ptr<TensorImpl> alias;
    PendingAlias* next;
  };
  static PendingAlias aliases_taken_;  // the list head once take_pending_aliases ran
  std::atomic<PendingAlias*> pending_aliases_{nullptr};

  struct FailureLink {
    std::shared_ptr<const OpFailure> failure;
    bool transient;
    const FailureLink* previous;  // replaced links, kept until the tensor dies: readers may hold them
  };
  std::atomic<const FailureLink*> failure_{nullptr};
};

/// The failure of one asynchronous op call, shared by every tensor it left failed.
struct KILN_API OpFailure {
  explicit OpFailure(std::exception_ptr e) : error(std::move(e)) {}
  const std::exception_ptr error;
  /// True once a sync point raised it (synchronize() raises only failures no read has raised).
  mutable std::atomic<bool> raised{false};

  /// Marks the failure raised and throws it (a kiln::Error as a copy; see detail::rethrow_stored).
  [[noreturn]] void raise() const;
};

namespace detail {
/// How a user thread waits for a pending tensor. The runtime installs these; without it nothing is
/// ever pending. Both return once the tensor is ready or failed; the caller raises the failure.
struct PendingTensorHooks {
  void (*wait_for_metadata)(const TensorImpl& impl);
  void (*wait_for_data)(const TensorImpl& impl);
};
KILN_API void set_pending_tensor_hooks(const PendingTensorHooks& hooks);
/// Throws kiln::Error for a use of an undefined tensor; out of line, so that Tensor::impl(), on
/// every accessor's path, stays small enough to inline.
[[noreturn]] KILN_API void throw_undefined_tensor();
}  // namespace detail

class KILN_API Tensor {
 public:
  /// An undefined tensor (defined() is false); the "None" of optional tensor arguments.
  Tensor() = default;
  /// Metadata for a contiguous tensor; memory comes later (from the pipeline, or allocate()).
  Tensor(DType dtype, Shape shape, Device device = Device::cpu());
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  /// A contiguous tensor with freshly allocated, uninitialised memory.
  static Tensor empty(Shape shape, DType dtype = DType::kFloat32, Device device = Device::cpu());
  /// A view of memory owned elsewhere; `deleter` (may be empty) runs when the last view dies.
  /// `strides` in elements; empty means contiguous.
  static Tensor from_blob(void* data, Shape shape, DType dtype, Shape strides = {},
                          Storage::Deleter deleter = nullptr, Device device = Device::cpu());

  /// A 0-d tensor holding `value`, weak in type promotion: bool, int64 or float64 by kind.
  static Tensor scalar(const Scalar& value);

  bool defined() const { return impl_ != nullptr; }
  // Metadata. On a pending tensor each waits for the producing op's FrontendTask (see the top).
  DType dtype() const { return ready()->dtype; }
  Device device() const { return ready()->device; }
  const Shape& shape() const { return ready()->shape; }
  const Shape& strides() const { return ready()->strides; }
  int64_t storage_offset() const { return ready()->offset; }
  int64_t ndim() const { return static_cast<int64_t>(ready()->shape.size()); }
  int64_t numel() const { return shape_numel(ready()->shape); }
  /// Size and stride of one dimension (negative dims count from the end).
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  size_t itemsize() const { return kiln::itemsize(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * itemsize(); }
  /// True when the elements are laid out row-major without gaps (size-1 dims may have any stride).
  bool is_contiguous() const;
  /// True for a tensor made by scalar(): a Python number, weak in type promotion.
  bool is_weak_scalar() const { return ready()->weak; }
  /// True while the producing op has not computed this tensor's metadata (never waits).
  bool is_pending() const { return impl()->pending.load(std::memory_order_acquire) != 0; }

  /// Gives the tensor memory if it has none (contiguous, from the device allocator; inside its
  /// Storage when at most Storage::kInlineBytes).
  void allocate() const;
  bool has_storage() const { return ready()->storage != nullptr; }
  const std::shared_ptr<Storage>& storage() const { return ready()->storage; }
  /// Address of element 0 (storage base + offset); throws when the tensor has no memory. Outside
  /// the pipeline's workers it first waits until no queued op uses the memory, and rethrows the
  /// producing op's error.
  void* data_ptr() const;
  /// Typed data_ptr(); throws kDType when T does not match dtype().
  template <typename T>
  T* data() const {
    KILN_CHECK_DTYPE(dtype_of<T>() == dtype())
        << "data<" << dtype_name(dtype_of<T>()) << ">() called on a tensor of dtype " << dtype();
    return static_cast<T*>(data_ptr());
  }

  // Views. Each returns a new handle over the same storage.
  /// Same elements with a new shape (one size may be -1); throws kShape when the strides of this
  /// tensor cannot express it without a copy (use reshape()).
  Tensor view(const Shape& shape) const;
  /// view() when the strides allow it, otherwise an undefined tensor (never copies).
  Tensor try_view(const Shape& shape) const;
  /// view() when possible, otherwise a contiguous copy with the new shape.
  Tensor reshape(const Shape& shape) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  /// Elements start, start+step, ... < end along `dim` (Python slice semantics: negative and
  /// out-of-range start/end are clamped; step >= 1).
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  /// Removes `dim`, keeping index `index` (negative counts from the end).
  Tensor select(int64_t dim, int64_t index) const;
  /// Broadcasts to `shape` (size -1 keeps a dimension) with stride 0 in expanded dimensions.
  Tensor expand(const Shape& shape) const;
  Tensor broadcast_to(const Shape& shape) const { return expand(shape); }
  /// Removes every size-1 dimension, or only `dim` when it has size 1.
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  /// Sliding windows of `size` elements every `step` along `dim`, as a new last dimension.
  Tensor unfold(int64_t dim, int64_t size, int64_t step) const;
  Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;
  /// The same elements and metadata under a new handle, without this one's autograd state
  /// (autograd's detach() and what it saves of an op's outputs). Does not wait for a pending
  /// tensor: the alias is pending too and gets the metadata (or the failure) with it.
  Tensor alias() const;

  /// This tensor when contiguous, else a contiguous copy.
  Tensor contiguous() const;
  /// A contiguous copy with its own storage.
  Tensor clone() const;

  /// True when both handles refer to the same TensorImpl.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  TensorImpl* impl() const {
    if (__builtin_expect(impl_ == nullptr, 0)) detail::throw_undefined_tensor();
    return impl_.get();
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  /// impl() with its metadata known: waits for a pending tensor and throws if its op failed.
  const TensorImpl* ready() const {
    const TensorImpl* p = impl();
    if (__builtin_expect(p->pending.load(std::memory_order_acquire) != 0, 0)) wait_for_metadata();
    return p;
  }

 private:
  void wait_for_metadata() const;

  std::shared_ptr<TensorImpl> impl_;
};

/// "float32[2, 3]", as error messages and IR text print a tensor's type.
KILN_API std::string type_str(const Tensor& t);
KILN_API std::ostream& operator<<(std::ostream& os, const Tensor& t);

/// Copies `src` into `dst` element by element, converting dtype and broadcasting src to dst's
/// shape. Both must have memory. Overlapping memory is not supported, except dst == src exactly.
/// A kernel's copy: it runs where it is called and is not counted as a write into dst's storage
/// (Storage::write_version); into a tensor others may hold, write with an op (Cast with `out`).
KILN_API void copy_into(const Tensor& dst, const Tensor& src);

}  // namespace kiln
