#include "kiln/tensor.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <unordered_map>
#include <utility>

namespace kiln {
namespace {

// Note [Failed writes into shared memory]
// An op that fails while writing into an existing tensor (out=, in place) leaves a transient
// failure on that tensor, and its data as it was. When the tensor is a view, other tensors on the
// same memory (its base, sibling views) must report it too: in the async modes, reading the base
// after `x[0].floor_divide_(0)` failed showed the old values without a word, and later ops used
// them, where the sync mode raises at the call. So a transient failure is also recorded for the
// tensor's Storage, in this side table (Storage keeps its layout), and failure() of any tensor
// on that Storage returns it until a sync point raises it. The same holds for a fresh result
// whose kernel failed after its memory was given (a kernel's own check: bernoulli's
// probabilities, gather's indices): views made of it while it was pending (sum's and reshape's,
// say) read that memory, unwritten, and must fail too; such an entry lasts as long as the memory
// (the result stays failed), not until a raise. The table is empty almost always, so
// failure() pays one atomic load; while it holds entries, a lookup is one hash find under a
// shared lock (thousands of unraised failures left no op slower). Entries that are done (raised,
// or of a storage that died: a new Storage may reuse the address) are ignored, erased when a
// lookup meets one, and swept when the table has doubled since its last sweep.
class StorageFailures {
 public:
  static StorageFailures& instance() {
    static auto* table = new StorageFailures();  // leaked: failure() may run during exit
    return *table;
  }

  void record(const std::shared_ptr<Storage>& storage, std::shared_ptr<const OpFailure> failure,
              bool transient) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    auto [it, inserted] = entries_.try_emplace(storage.get(), Entry{storage, failure, transient});
    // The first live failure stays, as on a tensor.
    if (!inserted && done(it->second)) it->second = Entry{storage, std::move(failure), transient};
    if (entries_.size() >= 2 * swept_size_ + 16) {  // amortised: O(1) sweeping per record
      for (auto e = entries_.begin(); e != entries_.end();) {
        e = done(e->second) ? entries_.erase(e) : std::next(e);
      }
      swept_size_ = entries_.size();
    }
    count_.store(entries_.size(), std::memory_order_release);
  }

  std::shared_ptr<const OpFailure> of(const Storage* storage) {
    if (storage == nullptr || count_.load(std::memory_order_acquire) == 0) return nullptr;
    {
      std::shared_lock<std::shared_mutex> lock(mutex_);
      const auto it = entries_.find(storage);
      if (it == entries_.end()) return nullptr;
      if (!done(it->second)) return it->second.failure;
    }
    std::unique_lock<std::shared_mutex> lock(mutex_);
    const auto it = entries_.find(storage);
    if (it != entries_.end() && done(it->second)) entries_.erase(it);
    count_.store(entries_.size(), std::memory_order_release);
    return nullptr;
  }

 private:
  struct Entry {
    std::weak_ptr<Storage> storage;
    std::shared_ptr<const OpFailure> failure;
    bool transient;  // a failed write (done once raised), or a failed result's (for good)
  };

  static bool done(const Entry& e) {
    return e.storage.expired() ||
           (e.transient && e.failure->raised.load(std::memory_order_acquire));
  }

  std::shared_mutex mutex_;
  std::unordered_map<const Storage*, Entry> entries_;
  size_t swept_size_ = 0;  // the table's size after its last sweep
  std::atomic<size_t> count_{0};
};

// Makes `view` a view of `base`'s memory (whose metadata is known) with the given layout.
void fill_view(TensorImpl& view, const TensorImpl& base, Shape shape, Shape strides,
               int64_t offset) {
  view.dtype = base.dtype;
  view.device = base.device;
  view.shape = std::move(shape);
  view.strides = std::move(strides);
  view.offset = offset;
  view.storage = base.storage;
  // A view of a failed tensor is failed too, so reading it raises the cause instead of reading
  // memory that was never written (a value being traced by the jit is such a tensor).
  view.inherit_failure(base);
}

std::shared_ptr<TensorImpl> make_view(const Tensor& base, Shape shape, Shape strides,
                                      int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  fill_view(*impl, *base.ready(), std::move(shape), std::move(strides), offset);
  return impl;
}

// Resolves one -1 in `shape` so that it holds `numel` elements.
Shape infer_size(const Shape& shape, int64_t numel, const char* what) {
  Shape out = shape;
  int64_t known = 1;
  int64_t infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      KILN_CHECK_SHAPE(infer_at < 0) << what << ": only one dimension can be -1, got "
                                     << shape_str(shape);
      infer_at = static_cast<int64_t>(i);
    } else {
      KILN_CHECK_SHAPE(out[i] >= 0) << what << ": invalid size " << out[i] << " in "
                                    << shape_str(shape);
      // A product that wraps could land on numel by chance: such a shape holds no tensor.
      KILN_CHECK_SHAPE(!__builtin_mul_overflow(known, out[i], &known))
          << what << ": shape " << shape_str(shape) << " is invalid for " << numel
          << " elements (it holds more than 2^63 - 1)";
    }
  }
  if (infer_at >= 0) {
    KILN_CHECK_SHAPE(known != 0 && numel % known == 0)
        << what << ": shape " << shape_str(shape) << " is invalid for " << numel << " elements";
    out[infer_at] = numel / known;
  } else {
    KILN_CHECK_SHAPE(known == numel)
        << what << ": shape " << shape_str(shape) << " is invalid for " << numel
        << " elements (it holds " << known << ")";
  }
  return out;
}

// Strides that present `old` (with `old_strides`) as `shape` without moving data, or false when
// no such strides exist. Groups of old dimensions that are contiguous with each other may be split
// or merged freely (the algorithm of PyTorch's computeStride).
bool view_strides(const Shape& old, const Shape& old_strides, const Shape& shape, Shape* out) {
  out->assign(shape.size(), 0);
  if (old.empty()) {
    std::fill(out->begin(), out->end(), 1);
    return true;
  }
  if (shape_numel(old) == 0) {
    *out = contiguous_strides(shape);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old.size()) - 1; d >= 0; --d) {
    tensor_numel *= old[d];
    if (d == 0 || (old[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        (*out)[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

// Nothing is pending until the runtime installs its hooks, so reaching these is a bug.
void no_metadata_hook(const TensorImpl&) {
  KILN_ASSERT(false) << "a pending tensor was read before the runtime installed its hooks";
}
void no_data_hook(const TensorImpl&) {}

detail::PendingTensorHooks g_hooks{&no_metadata_hook, &no_data_hook};

}  // namespace

Tensor::Tensor(DType dtype, Shape shape, Device device) : impl_(std::make_shared<TensorImpl>()) {
  checked_nbytes(shape, dtype, "Tensor");
  impl_->dtype = dtype;
  impl_->device = device;
  impl_->strides = contiguous_strides(shape);
  impl_->shape = std::move(shape);
}

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  Tensor t(dtype, std::move(shape), device);
  t.allocate();
  return t;
}

Tensor Tensor::scalar(const Scalar& value) {
  const DType dtype = value.is_bool() ? DType::kBool
                                      : (value.is_integral() ? DType::kInt64 : DType::kFloat64);
  Tensor t = Tensor::empty({}, dtype);
  t.impl()->weak = true;
  switch (dtype) {
    case DType::kBool: *t.data<bool>() = value.to_bool(); break;
    case DType::kInt64: *t.data<int64_t>() = value.to_int(); break;
    default: *t.data<double>() = value.to_double(); break;
  }
  return t;
}

Tensor Tensor::from_blob(void* data, Shape shape, DType dtype, Shape strides,
                         Storage::Deleter deleter, Device device) {
  checked_nbytes(shape, dtype, "from_blob");
  if (strides.empty()) strides = contiguous_strides(shape);
  KILN_CHECK_SHAPE(strides.size() == shape.size())
      << "from_blob: expected " << shape.size() << " strides, got " << strides.size();
  // Extent of memory the view touches, for Storage::nbytes.
  const int64_t extent = view_extent(shape, strides, 0);
  KILN_CHECK_VALUE(data != nullptr || extent == 0)
      << "from_blob: data is null for a tensor of shape " << shape_str(shape)
      << "; only an empty tensor may have no memory";
  for (size_t i = 0; i < shape.size() && extent != 0; ++i) {
    KILN_CHECK_SHAPE(strides[i] >= 0)
        << "from_blob: negative strides are not supported, got " << shape_str(strides);
  }
  int64_t nbytes = 0;
  KILN_CHECK_SHAPE(
      extent < std::numeric_limits<int64_t>::max() &&
      !__builtin_mul_overflow(extent, static_cast<int64_t>(kiln::itemsize(dtype)), &nbytes))
      << "from_blob: a view of shape " << shape_str(shape) << " and strides " << shape_str(strides)
      << " would reach more than 2^63 - 1 bytes";
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = dtype;
  impl->device = device;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->storage = Storage::wrap(data, static_cast<size_t>(nbytes), std::move(deleter), device);
  return Tensor(std::move(impl));
}

int64_t Tensor::size(int64_t dim) const {
  KILN_CHECK_INDEX(ndim() > 0) << "size(" << dim << "): a 0-d tensor has no dimensions";
  return shape()[wrap_dim(dim, ndim())];
}

int64_t Tensor::stride(int64_t dim) const {
  KILN_CHECK_INDEX(ndim() > 0) << "stride(" << dim << "): a 0-d tensor has no dimensions";
  return strides()[wrap_dim(dim, ndim())];
}

bool Tensor::is_contiguous() const {
  const TensorImpl* t = ready();
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(t->shape.size()) - 1; d >= 0; --d) {
    const int64_t s = t->shape[d];
    if (s == 0) return true;
    if (s != 1 && t->strides[d] != expected) return false;
    expected *= s;
  }
  return true;
}

void Tensor::allocate() const {
  // A pending result first gets its metadata, and with it the pipeline's Storage: replacing that
  // raced with the kernel that writes it.
  ready();
  TensorImpl* t = impl();
  if (t->storage != nullptr) return;
  t->strides = contiguous_strides(t->shape);
  t->offset = 0;
  // Deferred and materialized at once: a tensor of at most Storage::kInlineBytes (a Python
  // number's scalar, a small temporary) keeps its memory inside its Storage.
  std::shared_ptr<Storage> storage = Storage::deferred(nbytes(), t->device);
  storage->materialize();
  t->storage = std::move(storage);
}

TensorImpl::PendingAlias TensorImpl::aliases_taken_{nullptr, nullptr};

TensorImpl::~TensorImpl() {
  const FailureLink* link = failure_.load(std::memory_order_relaxed);
  while (link != nullptr) {
    const FailureLink* previous = link->previous;
    delete link;
    link = previous;
  }
  // The stage that makes a pending tensor's metadata final takes its aliases, and the pipeline
  // holds the tensor until then: a list is left here only if no stage ever planned the tensor.
  PendingAlias* alias = pending_aliases_.load(std::memory_order_relaxed);
  while (alias != nullptr && alias != &aliases_taken_) delete std::exchange(alias, alias->next);
}

bool TensorImpl::add_pending_alias(std::shared_ptr<TensorImpl> alias) {
  auto* entry = new PendingAlias{std::move(alias), nullptr};
  PendingAlias* head = pending_aliases_.load(std::memory_order_acquire);
  do {
    if (head == &aliases_taken_) {
      delete entry;
      return false;
    }
    entry->next = head;
  } while (!pending_aliases_.compare_exchange_weak(head, entry, std::memory_order_acq_rel,
                                                   std::memory_order_acquire));
  return true;
}

std::vector<std::shared_ptr<TensorImpl>> TensorImpl::take_pending_aliases() {
  PendingAlias* entry = pending_aliases_.exchange(&aliases_taken_, std::memory_order_acq_rel);
  std::vector<std::shared_ptr<TensorImpl>> aliases;
  if (entry == &aliases_taken_) return aliases;
  const bool failed = pending.load(std::memory_order_relaxed) == kFailedMetadata;
  while (entry != nullptr) {
    TensorImpl& alias = *entry->alias;
    if (failed) {
      alias.inherit_failure(*this);
    } else {
      fill_view(alias, *this, shape, strides, offset);
    }
    aliases.push_back(std::move(entry->alias));
    delete std::exchange(entry, entry->next);
  }
  return aliases;
}

std::shared_ptr<const OpFailure> TensorImpl::failure() const {
  const FailureLink* link = failure_.load(std::memory_order_acquire);
  if (link != nullptr &&
      !(link->transient && link->failure->raised.load(std::memory_order_acquire))) {
    return link->failure;
  }
  // Note [Failed writes into shared memory]
  return StorageFailures::instance().of(storage.get());
}

void TensorImpl::set_failure(std::shared_ptr<const OpFailure> failure, bool transient) {
  // Note [Failed writes into shared memory]
  if (storage != nullptr) StorageFailures::instance().record(storage, failure, transient);
  auto* link = new FailureLink{std::move(failure), transient, nullptr};
  const FailureLink* current = failure_.load(std::memory_order_acquire);
  do {
    if (current != nullptr &&
        !(current->transient && current->failure->raised.load(std::memory_order_acquire))) {
      delete link;  // the first live failure stays
      return;
    }
    link->previous = current;
  } while (!failure_.compare_exchange_weak(current, link, std::memory_order_acq_rel,
                                           std::memory_order_acquire));
}

void TensorImpl::inherit_failure(const TensorImpl& base) {
  const FailureLink* link = base.failure_.load(std::memory_order_acquire);
  if (link == nullptr) return;
  if (link->transient && link->failure->raised.load(std::memory_order_acquire)) return;
  set_failure(link->failure, link->transient);
}

void OpFailure::raise() const {
  raised.store(true, std::memory_order_release);
  detail::rethrow_stored(error);
}

namespace {

// data_ptr's slow paths, out of line: with them inline, the error message's stream and the
// failure's shared_ptr gave every read of a tensor's data a large frame to set up.
[[noreturn]] __attribute__((noinline, cold)) void throw_no_memory(const Tensor& t) {
  KILN_FAIL(kGeneric) << "tensor " << type_str(t) << " has no memory yet";
}

__attribute__((noinline)) void wait_for_queued_writers(const TensorImpl& t) {
  g_hooks.wait_for_data(t);
  if (const std::shared_ptr<const OpFailure> failure = t.failure()) failure->raise();
}

}  // namespace

void* Tensor::data_ptr() const {
  const TensorImpl* t = ready();
  if (__builtin_expect(t->storage == nullptr, 0)) throw_no_memory(*this);
  if (t->storage->has_queued_use()) wait_for_queued_writers(*t);
  return static_cast<char*>(t->storage->data()) +
         t->offset * static_cast<int64_t>(kiln::itemsize(t->dtype));
}

void Tensor::wait_for_metadata() const {
  const TensorImpl* t = impl();
  g_hooks.wait_for_metadata(*t);
  if (t->pending.load(std::memory_order_acquire) == TensorImpl::kFailedMetadata) {
    const std::shared_ptr<const OpFailure> failure = t->failure();
    KILN_ASSERT(failure != nullptr) << "a failed tensor carries no failure";
    failure->raise();
  }
}

namespace detail {

void set_pending_tensor_hooks(const PendingTensorHooks& hooks) {
  KILN_CHECK(hooks.wait_for_metadata != nullptr && hooks.wait_for_data != nullptr)
      << "set_pending_tensor_hooks: expected both hooks";
  g_hooks = hooks;
}

void throw_undefined_tensor() { KILN_FAIL(kGeneric) << "operation on an undefined tensor"; }

}  // namespace detail

Tensor Tensor::view(const Shape& shape) const {
  Tensor result = try_view(shape);
  KILN_CHECK_SHAPE(result.defined())
      << "view: cannot view a tensor of shape " << shape_str(this->shape()) << " and strides "
      << shape_str(this->strides()) << " as " << shape_str(infer_size(shape, numel(), "view"))
      << " without copying; use reshape()";
  return result;
}

Tensor Tensor::try_view(const Shape& shape) const {
  Shape resolved = infer_size(shape, numel(), "view");
  Shape strides;
  if (!view_strides(this->shape(), this->strides(), resolved, &strides)) return Tensor();
  return Tensor(make_view(*this, std::move(resolved), std::move(strides), storage_offset()));
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape resolved = infer_size(shape, numel(), "reshape");
  Tensor result = try_view(resolved);
  return result.defined() ? result : contiguous().view(resolved);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  const int64_t d0 = wrap_dim(dim0, ndim());
  const int64_t d1 = wrap_dim(dim1, ndim());
  if (ndim() == 0) return *this;
  Shape shape = this->shape();
  Shape strides = this->strides();
  std::swap(shape[d0], shape[d1]);
  std::swap(strides[d0], strides[d1]);
  return Tensor(make_view(*this, std::move(shape), std::move(strides), storage_offset()));
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  KILN_CHECK_SHAPE(static_cast<int64_t>(dims.size()) == ndim())
      << "permute: expected " << ndim() << " dims for a " << ndim() << "-d tensor, got "
      << dims.size();
  Shape shape(dims.size());
  Shape strides(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], ndim());
    KILN_CHECK_INDEX(!seen[d]) << "permute: dim " << d << " appears twice in " << shape_str(dims);
    seen[d] = true;
    shape[i] = this->shape()[d];
    strides[i] = this->strides()[d];
  }
  return Tensor(make_view(*this, std::move(shape), std::move(strides), storage_offset()));
}

Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  KILN_CHECK_INDEX(ndim() > 0) << "slice: cannot slice a 0-d tensor";
  const int64_t d = wrap_dim(dim, ndim());
  KILN_CHECK_VALUE(step >= 1) << "slice: step must be positive, got " << step;
  const int64_t n = shape()[d];
  auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  const int64_t lo = clamp(start);
  const int64_t hi = std::max(lo, clamp(end));
  Shape shape = this->shape();
  Shape strides = this->strides();
  // Without overflow for any step (hi - lo + step - 1 wrapped for steps near 2**63).
  shape[d] = hi > lo ? (hi - lo - 1) / step + 1 : 0;
  const int64_t offset = storage_offset() + lo * strides[d];
  // With two or more elements the step is below n, so the product fits; with fewer it is unused.
  if (shape[d] > 1) strides[d] *= step;
  return Tensor(make_view(*this, std::move(shape), std::move(strides), offset));
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  KILN_CHECK_INDEX(ndim() > 0) << "narrow: cannot narrow a 0-d tensor";
  const int64_t d = wrap_dim(dim, ndim());
  const int64_t n = shape()[d];
  const int64_t s = start < 0 ? start + n : start;
  KILN_CHECK_INDEX(s >= 0 && s <= n && length >= 0 && length <= n - s)
      << "narrow: range [" << start << ", " << start << " + " << length
      << ") is out of bounds for dimension " << d << " of size " << n;
  return slice(d, s, s + length);
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  KILN_CHECK_INDEX(ndim() > 0) << "select: cannot index a 0-d tensor";
  const int64_t d = wrap_dim(dim, ndim());
  const int64_t n = shape()[d];
  KILN_CHECK_INDEX(index >= -n && index < n)
      << "index " << index << " is out of bounds for dimension " << d << " with size " << n;
  const int64_t i = index < 0 ? index + n : index;
  Shape shape = this->shape();
  Shape strides = this->strides();
  const int64_t offset = storage_offset() + i * strides[d];
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return Tensor(make_view(*this, std::move(shape), std::move(strides), offset));
}

Tensor Tensor::expand(const Shape& shape) const {
  KILN_CHECK_SHAPE(static_cast<int64_t>(shape.size()) >= ndim())
      << "expand: cannot expand a " << ndim() << "-d tensor of shape " << shape_str(this->shape())
      << " to fewer dimensions " << shape_str(shape);
  const size_t lead = shape.size() - static_cast<size_t>(ndim());
  Shape out_shape(shape.size());
  Shape out_strides(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      KILN_CHECK_SHAPE(shape[i] >= 0) << "expand: size -1 is not allowed for a new leading "
                                      << "dimension, got " << shape_str(shape);
      out_shape[i] = shape[i];
      out_strides[i] = 0;
      continue;
    }
    const int64_t have = this->shape()[i - lead];
    const int64_t want = shape[i] == -1 ? have : shape[i];
    KILN_CHECK_SHAPE(want == have || have == 1)
        << "expand: cannot broadcast shape " << shape_str(this->shape()) << " to "
        << shape_str(shape) << ": dimension " << i << " has size " << have
        << " (expected 1 or " << want << ")";
    out_shape[i] = want;
    out_strides[i] = want == have ? strides()[i - lead] : 0;
  }
  checked_nbytes(out_shape, dtype(), "expand");  // no negative sizes, no count that wraps
  return Tensor(make_view(*this, std::move(out_shape), std::move(out_strides), storage_offset()));
}

Tensor Tensor::squeeze() const {
  Shape shape;
  Shape strides;
  for (int64_t d = 0; d < ndim(); ++d) {
    if (this->shape()[d] != 1) {
      shape.push_back(this->shape()[d]);
      strides.push_back(this->strides()[d]);
    }
  }
  return Tensor(make_view(*this, std::move(shape), std::move(strides), storage_offset()));
}

Tensor Tensor::squeeze(int64_t dim) const {
  if (ndim() == 0) {
    wrap_dim(dim, 0);
    return *this;
  }
  const int64_t d = wrap_dim(dim, ndim());
  if (shape()[d] != 1) return *this;  // NumPy raises here; PyTorch returns the input unchanged.
  Shape shape = this->shape();
  Shape strides = this->strides();
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return Tensor(make_view(*this, std::move(shape), std::move(strides), storage_offset()));
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  const int64_t d = wrap_dim(dim, ndim() + 1);
  Shape shape = this->shape();
  Shape strides = this->strides();
  const int64_t stride = d < ndim() ? strides[d] * shape[d] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return Tensor(make_view(*this, std::move(shape), std::move(strides), storage_offset()));
}

Shape flatten_shape(const Shape& shape, int64_t start_dim, int64_t end_dim) {
  const auto ndim = static_cast<int64_t>(shape.size());
  const int64_t s = wrap_dim(start_dim, ndim, "start_dim");  // a 0-d shape takes 0 and -1
  const int64_t e = wrap_dim(end_dim, ndim, "end_dim");
  if (ndim == 0) return {1};
  KILN_CHECK_INDEX(s <= e) << "flatten: start_dim " << start_dim << " comes after end_dim "
                           << end_dim;
  Shape result(shape.begin(), shape.begin() + s);
  int64_t merged = 1;
  bool overflow = false;
  for (int64_t d = s; d <= e; ++d) overflow |= __builtin_mul_overflow(merged, shape[d], &merged);
  // An empty tensor's other sizes may multiply past 2^63 - 1: its merged size is still 0.
  if (std::find(shape.begin() + s, shape.begin() + e + 1, 0) != shape.begin() + e + 1) {
    merged = 0;
    overflow = false;
  }
  KILN_CHECK_SHAPE(!overflow) << "flatten: the product of sizes " << s << " to " << e << " of "
                              << shape_str(shape) << " is past 2^63 - 1";
  result.push_back(merged);
  result.insert(result.end(), shape.begin() + e + 1, shape.end());
  return result;
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  return reshape(flatten_shape(shape(), start_dim, end_dim));
}

Tensor Tensor::unfold(int64_t dim, int64_t size, int64_t step) const {
  const int64_t d = wrap_dim(dim, ndim());
  const int64_t n = ndim() == 0 ? 1 : shape()[d];
  KILN_CHECK_SHAPE(size >= 0 && size <= n)
      << "unfold: window size " << size << " exceeds dimension " << d << " of size " << n;
  KILN_CHECK_VALUE(step >= 1) << "unfold: step must be positive, got " << step;
  Shape shape = this->shape();
  Shape strides = this->strides();
  if (ndim() == 0) {
    shape = {size};
    strides = {1};
    return Tensor(make_view(*this, shape, strides, storage_offset()));
  }
  const int64_t stride = strides[d];
  shape[d] = (n - size) / step + 1;
  strides[d] = stride * step;
  shape.push_back(size);
  strides.push_back(stride);
  return Tensor(make_view(*this, std::move(shape), std::move(strides), storage_offset()));
}

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset) const {
  KILN_CHECK_SHAPE(shape.size() == strides.size())
      << "as_strided: expected as many strides as sizes, got " << shape_str(shape) << " and "
      << shape_str(strides);
  checked_nbytes(shape, dtype(), "as_strided");
  for (int64_t st : strides) {
    KILN_CHECK_SHAPE(st >= 0) << "as_strided: strides must be non-negative, got "
                              << shape_str(strides);
  }
  KILN_CHECK_INDEX(offset >= 0) << "as_strided: the storage offset must be non-negative, got "
                                << offset;
  // The view must lie inside the memory.
  if (const std::shared_ptr<Storage>& memory = storage()) {
    const auto elements = static_cast<int64_t>(memory->nbytes() / itemsize());
    KILN_CHECK_INDEX(view_extent(shape, strides, offset) <= elements)
        << "as_strided: a view of sizes " << shape_str(shape) << ", strides " << shape_str(strides)
        << " and offset " << offset << " reaches past the " << elements
        << " elements of the tensor's memory";
  }
  return Tensor(make_view(*this, shape, strides, offset));
}

Tensor Tensor::alias() const {
  TensorImpl* base = impl();
  uint64_t pending = base->pending.load(std::memory_order_acquire);
  if (pending != 0 && pending != TensorImpl::kFailedMetadata) {
    auto alias = std::make_shared<TensorImpl>();
    alias->pending.store(pending, std::memory_order_relaxed);
    if (base->add_pending_alias(alias)) return Tensor(std::move(alias));
    pending = base->pending.load(std::memory_order_acquire);  // final now
  }
  if (pending == TensorImpl::kFailedMetadata) {  // failed as its base, raising when read
    auto alias = std::make_shared<TensorImpl>();
    alias->pending.store(pending, std::memory_order_relaxed);
    alias->inherit_failure(*base);
    return Tensor(std::move(alias));
  }
  return Tensor(make_view(*this, shape(), strides(), storage_offset()));
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  Tensor out = Tensor::empty(shape(), dtype(), device());
  copy_into(out, *this);
  return out;
}

std::string type_str(const Tensor& t) {
  if (!t.defined()) return "undefined";
  return std::string(dtype_name(t.dtype())) + shape_str(t.shape());
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << type_str(t); }

}  // namespace kiln
