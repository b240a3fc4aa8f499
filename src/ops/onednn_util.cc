#include "ops/onednn_util.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/error.h"
#include "kiln/parallel.h"

namespace kiln::onednn {

// Note [Primitive cache]
// oneDNN has a primitive cache of its own, but it is keyed by the full operation descriptor and
// still pays for building that descriptor and a primitive_desc (an implementation search) on
// every call. Kiln's cache maps its own compact key (the kernel's shapes, strides, dtypes and
// attributes) straight to ready primitives and whatever goes with them (memory descriptors,
// reorders), so a repeated call costs one hash lookup. Entries are immutable after creation and a
// hit hands out a shared_ptr and takes no lock while the primitive runs, so one primitive may run
// on several threads at once (several threads calling ops in sync mode, say). oneDNN allows that
// only with a user-managed scratchpad: its default scratchpad is one buffer common to all
// primitives, and two threads running primitives at once overwrite each other's partial results.
// So every cached primitive is made with cached_attr(), and each execution brings its own
// scratchpad (add_scratchpad). Capacity is bounded (LRU) because dynamic shapes would otherwise
// grow it without limit.

namespace {

constexpr size_t kCacheCapacity = 1024;

struct KeyHash {
  size_t operator()(const PrimitiveKey& key) const { return key.hash(); }
};

class PrimitiveCache {
 public:
  std::shared_ptr<const void> lookup(const PrimitiveKey& key,
                                     const std::function<std::shared_ptr<const void>()>& make) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = index_.find(key);
      if (it != index_.end()) {
        ++hits_;
        lru_.splice(lru_.begin(), lru_, it->second);
        return it->second->second;
      }
      ++misses_;
    }
    // Built outside the lock: JIT compilation can take milliseconds and other shapes should not
    // wait for it. Two threads missing on one key both build; the first insert wins.
    std::shared_ptr<const void> value = make();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) return it->second->second;
    lru_.emplace_front(key, value);
    index_.emplace(key, lru_.begin());
    if (lru_.size() > kCacheCapacity) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return value;
  }

  PrimitiveCacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {hits_, misses_, static_cast<int64_t>(lru_.size()),
            static_cast<int64_t>(kCacheCapacity)};
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    index_.clear();
    lru_.clear();
    hits_ = 0;
    misses_ = 0;
  }

 private:
  using Entry = std::pair<PrimitiveKey, std::shared_ptr<const void>>;
  std::mutex mutex_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<PrimitiveKey, std::list<Entry>::iterator, KeyHash> index_;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

// Leaked on purpose: cached primitives refer to the engine, and static destructors at exit would
// otherwise race oneDNN's own teardown. Both stay reachable, so leak checkers do not flag them.
PrimitiveCache& cache() {
  static PrimitiveCache* instance = new PrimitiveCache();
  return *instance;
}

}  // namespace

const dnnl::engine& engine() {
  static const dnnl::engine* instance = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *instance;
}

dnnl::stream& stream() {
  thread_local dnnl::stream instance(engine());
  return instance;
}

dnnl::memory::data_type data_type(DType dtype) {
  using dt = dnnl::memory::data_type;
  switch (dtype) {
    case DType::kFloat32:
      return dt::f32;
    case DType::kBFloat16:
      return dt::bf16;
    case DType::kFloat16:
      return dt::f16;
    case DType::kInt32:
      return dt::s32;
    case DType::kInt8:
      return dt::s8;
    case DType::kUInt8:
      return dt::u8;
    default:
      break;
  }
  KILN_FAIL(kDType) << "oneDNN: expected float32, bfloat16, float16, int32, int8 or uint8, got "
                    << dtype;
}

dnnl::memory::desc plain_desc(const Shape& dims, const Shape& strides, DType dtype) {
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()), data_type(dtype),
                            dnnl::memory::dims(strides.begin(), strides.end()));
}

bool describable(const Shape& dims, const Shape& strides) {
  std::vector<size_t> order;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] != 1) order.push_back(d);
  }
  std::sort(order.begin(), order.end(),
            [&](size_t i, size_t j) { return strides[i] < strides[j]; });
  int64_t extent = 1;  // of the dimensions taken so far
  for (size_t d : order) {
    if (strides[d] < extent) return false;
    extent = strides[d] * dims[d];
  }
  return true;
}

dnnl::memory wrap(const dnnl::memory::desc& md, const Tensor& t) {
  return dnnl::memory(md, engine(), t.data_ptr());
}

bool is_reference_impl(const dnnl::primitive_desc_base& pd) {
  return std::strncmp(pd.impl_info_str(), "ref", 3) == 0;
}

void append_activation(simd::UnaryOp op, dnnl::post_ops* post) {
  // alpha and beta are 0 except for swish, whose alpha 1 makes x * sigmoid(alpha * x) silu.
  float alpha = 0.0f;
  dnnl::algorithm algorithm;
  switch (op) {
    case simd::UnaryOp::kRelu:
      algorithm = dnnl::algorithm::eltwise_relu;
      break;
    case simd::UnaryOp::kGeluErf:
      algorithm = dnnl::algorithm::eltwise_gelu_erf;
      break;
    case simd::UnaryOp::kGeluTanh:
      algorithm = dnnl::algorithm::eltwise_gelu_tanh;
      break;
    case simd::UnaryOp::kSilu:
      algorithm = dnnl::algorithm::eltwise_swish;
      alpha = 1.0f;
      break;
    case simd::UnaryOp::kSigmoid:
      algorithm = dnnl::algorithm::eltwise_logistic;
      break;
    case simd::UnaryOp::kTanh:
      algorithm = dnnl::algorithm::eltwise_tanh;
      break;
    default:
      KILN_FAIL(kGeneric) << "no oneDNN activation for unary op " << static_cast<int>(op);
  }
  post->append_eltwise(1.0f, algorithm, alpha, 0.0f);
}

dnnl::primitive_attr cached_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

std::shared_ptr<Storage> add_scratchpad(const dnnl::memory::desc& md,
                                        std::unordered_map<int, dnnl::memory>* args) {
  if (md.get_size() == 0) return nullptr;
  std::shared_ptr<Storage> memory = Storage::allocate(md.get_size());
  args->emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(md, engine(), memory->data()));
  return memory;
}

// Note [Reused memory objects]
// A dnnl::memory costs an aligned allocation and ~1,500 instructions to make, and the
// std::unordered_map that primitive::execute takes a few allocations more: for a 64x64 product,
// whose kernel is ~70k instructions, that was a tenth of the call. So each thread keeps the
// memory objects of the last few primitives it ran (an MLP's layers take turns), known by an id
// that is never reused (an address could come back after the cache evicts an entry), points them
// at the call's buffers, and executes through the C API with the arguments on the stack. The
// objects hold descriptors only, never the primitive: an evicted entry is freed as before.

uint64_t new_primitive_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

ExecArgs& ExecArgs::of(uint64_t id, std::initializer_list<Arg> args) {
  constexpr size_t kSlots = 4;
  thread_local std::array<ExecArgs, kSlots> slots;
  thread_local size_t next = 0;  // the slot a new primitive takes (round robin)
  for (ExecArgs& slot : slots) {
    if (slot.id_ != id) continue;
    slot.bound_count_ = 0;  // drops the bindings of a use that threw before its execute()
    return slot;
  }
  KILN_ASSERT(args.size() <= kMaxArgs)
      << "ExecArgs: " << args.size() << " args, at most " << kMaxArgs;
  ExecArgs& slot = slots[next];
  next = (next + 1) % kSlots;
  slot = ExecArgs();
  slot.id_ = id;
  for (const Arg& a : args) {
    if (a.desc->get_size() == 0) continue;
    slot.args_[slot.count_] = a.arg;
    slot.memory_[slot.count_] = dnnl::memory(*a.desc, engine(), DNNL_MEMORY_NONE);
    ++slot.count_;
  }
  return slot;
}

void ExecArgs::bind(int arg, void* data) {
  for (size_t i = 0; i < count_; ++i) {
    if (args_[i] != arg) continue;
    KILN_ASSERT(bound_count_ < count_) << "ExecArgs: argument " << arg << " bound twice";
    memory_[i].set_data_handle(data);
    bound_[bound_count_++] = {arg, memory_[i].get()};
    return;
  }
  KILN_ASSERT(false) << "ExecArgs: argument " << arg
                     << " was not described, or described with an empty desc";
}

void ExecArgs::execute(const dnnl::primitive& prim, const char* error_message) {
  const int count = static_cast<int>(bound_count_);
  bound_count_ = 0;
  dnnl::stream& s = stream();
  const dnnl_status_t status = dnnl_primitive_execute(prim.get(), s.get(), count, bound_);
  KILN_CHECK(status == dnnl_success) << error_message << " (oneDNN status " << status << ")";
  s.wait();
}

PrimitiveKey::PrimitiveKey(const char* kind) {
  // The kind name, packed eight characters to a word.
  const size_t n = std::strlen(kind);
  for (size_t i = 0; i < n; i += sizeof(int64_t)) {
    int64_t word = 0;
    std::memcpy(&word, kind + i, std::min(sizeof(int64_t), n - i));
    words_.push_back(word);
  }
  words_.push_back(static_cast<int64_t>(n));
  // oneDNN sizes its work partition for the thread count at creation, so a primitive built for
  // two threads is not reused after set_num_threads(8).
  words_.push_back(get_num_threads());
}

PrimitiveKey& PrimitiveKey::add(int64_t value) {
  words_.push_back(value);
  return *this;
}

PrimitiveKey& PrimitiveKey::add(const std::vector<int64_t>& values) {
  words_.push_back(static_cast<int64_t>(values.size()));
  words_.insert(words_.end(), values.begin(), values.end());
  return *this;
}

PrimitiveKey& PrimitiveKey::add_double(double value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  words_.push_back(bits);
  return *this;
}

size_t PrimitiveKey::hash() const {
  // FNV-1a over the words, mixed per word (keys are short; this is not on a hot loop).
  uint64_t h = 1469598103934665603ull;
  for (int64_t w : words_) {
    h ^= static_cast<uint64_t>(w);
    h *= 1099511628211ull;
    h ^= h >> 29;
  }
  return static_cast<size_t>(h);
}

std::shared_ptr<const void> cache_lookup(const PrimitiveKey& key,
                                         const std::function<std::shared_ptr<const void>()>& make) {
  try {
    return cache().lookup(key, make);
  } catch (const dnnl::error& e) {
    // Kernels describe only layouts oneDNN takes; a refusal is a Kiln bug, raised as a Kiln error
    // so that the call it failed in is named.
    KILN_ASSERT(false) << "oneDNN refused a primitive: " << e.what();
  }
}

PrimitiveCacheStats primitive_cache_stats() { return cache().stats(); }

void clear_primitive_cache() { cache().clear(); }

}  // namespace kiln::onednn
