// The jit's cache of built graphs (see graph_cache.h).
#include "jit/graph_cache.h"

#include <cstring>

#include "jit/dynamic_graph.h"
#include "kiln/autocast.h"
#include "ops/autocast_inputs.h"

namespace kiln::jit_detail {

void SignatureKey::add_tensor(const Tensor& t) {
  const TensorImpl* impl = t.ready();
  add_tensor(impl->dtype, impl->shape);
}

void SignatureKey::add_tensor(DType dtype, const Shape& shape) {
  words_.push_back(kTensor);
  words_.push_back(static_cast<int64_t>(dtype));
  words_.push_back(static_cast<int64_t>(shape.size()));
  for (int64_t d : shape) words_.push_back(d);
}

void SignatureKey::add_scalar(const Scalar& value) {
  if (value.is_floating_point()) {
    const double d = value.to_double();
    int64_t bits;
    std::memcpy(&bits, &d, sizeof(bits));
    words_.push_back(kFloat);
    words_.push_back(bits);
  } else {
    words_.push_back(value.is_bool() ? kBool : kInt);
    words_.push_back(value.to_int());
  }
}

bool SignatureKey::is_constant_input(const Tensor& t) {
  if (!t.defined()) return true;
  const DType d = t.dtype();
  return t.is_weak_scalar() && (d == DType::kBool || d == DType::kInt64 || d == DType::kFloat64);
}

void SignatureKey::add_input(const Tensor& t) {
  if (!t.defined()) {
    add(kNone);
    return;
  }
  if (!is_constant_input(t)) {
    const TensorImpl* impl = t.ready();
    if (!dynamic_) {
      add_tensor(impl->dtype, impl->shape);
      return;
    }
    const Shape& shape = impl->shape;
    if (batch_ < 0 && !shape.empty()) {
      batch_ = shape[0];
      if (batch_ <= 1) {
        words_.push_back(kSmallBatch);
        words_.push_back(batch_);
      }
    }
    const bool batched = !shape.empty() && shape[0] == batch_;
    batched_.push_back(batched);
    if (!batched) {
      add_tensor(impl->dtype, shape);
      return;
    }
    words_.push_back(kBatchedTensor);
    words_.push_back(static_cast<int64_t>(impl->dtype));
    words_.push_back(static_cast<int64_t>(shape.size()));
    for (size_t d = 1; d < shape.size(); ++d) words_.push_back(shape[d]);
    return;
  }
  switch (t.dtype()) {
    case DType::kBool: add_scalar(Scalar(*t.data<bool>())); break;
    case DType::kInt64: add_scalar(Scalar(*t.data<int64_t>())); break;
    default: add_scalar(Scalar(*t.data<double>())); break;
  }
}

bool SignatureKey::has_pair(int64_t first, int64_t second) const {
  for (size_t i = 0; i + 1 < words_.size(); ++i) {
    if (words_[i] == first && words_[i + 1] == second) return true;
  }
  return false;
}

size_t SignatureKey::hash() const {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the words, then a final mix
  for (int64_t w : words_) {
    h ^= static_cast<uint64_t>(w);
    h *= 0x100000001b3ULL;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return static_cast<size_t>(h);
}

std::shared_ptr<const CacheEntry> GraphCache::find(const SignatureKey& key, bool count) {
  std::shared_ptr<const CacheEntry> entry;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(key);
    if (it != entries_.end()) entry = it->second;
  }
  if (entry != nullptr && !entry->graph->current()) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second == entry) entries_.erase(it);
    entry.reset();
  }
  if (count) this->count(entry != nullptr);
  return entry;
}

std::shared_ptr<const CacheEntry> GraphCache::insert(const SignatureKey& key, CacheEntry entry) {
  auto stored = std::make_shared<const CacheEntry>(std::move(entry));
  std::shared_ptr<const CacheEntry> replaced;  // destroyed outside the lock (clears its graphs)
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = entries_[key];
  replaced = std::move(slot);
  slot = stored;
  return stored;
}

JitCacheInfo GraphCache::info() const {
  JitCacheInfo info;
  info.hits = hits_.load(std::memory_order_relaxed);
  info.misses = misses_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, entry] : entries_) {
    info.size += entry->dynamic != nullptr ? entry->dynamic->size() : 1;
  }
  return info;
}

void GraphCache::clear() {
  std::unordered_map<SignatureKey, std::shared_ptr<const CacheEntry>, SignatureKeyHash> old;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    old.swap(entries_);
  }
}

void GraphCache::erase_if(const std::function<bool(const SignatureKey&)>& drop) {
  std::vector<std::shared_ptr<const CacheEntry>> dropped;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (drop(it->first)) {
      dropped.push_back(std::move(it->second));
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

int64_t autocast_word() {
  const AutocastState state = autocast_state();
  if (!state.enabled) return 0;
  return (detail::autocast_policies_generation() << 8) + 1 + static_cast<int64_t>(state.dtype);
}

}  // namespace kiln::jit_detail
