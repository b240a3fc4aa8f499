// The cache of a jitted function: built graphs by call signature (private to libkiln, the Python
// bindings and the tests).
//
//   kiln::jit_detail::SignatureKey key;
//   key.add_tensor(x);                       // dtype and shape
//   key.add_scalar(kiln::Scalar(2.0));       // a constant's value
//   if (auto entry = cache.find(key)) entry->graph->run(inputs, &outputs);
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "jit/compiled_graph.h"
#include "kiln/jit.h"
#include "kiln/small_vector.h"

namespace kiln::jit_detail {

/// A call's signature as a list of words: each argument adds a tag and what identifies it (a
/// tensor its dtype and shape, a constant its value). Front ends may add words of their own
/// (tags from kFrontEndTags on) for structure and other constants.
///
/// The key of a dynamic function's call (set_dynamic) leaves out the batch size: the leading
/// dimension of the first tensor input with a dimension is the batch size B, and every tensor
/// input whose leading dimension is B is *batched*, keyed by its dtype and the rest of its shape
/// (tag kBatchedTensor), so calls that differ only in B share a key. Batch sizes 0 and 1 are the
/// exception: each keys itself (tag kSmallBatch and B), so that their calls share no graph, and
/// no template, with the others (Note [Dynamic batch size]).
class KILN_API SignatureKey {
 public:
  enum Tag : int64_t {
    kTensor = 1,
    kNone,
    kBool,
    kInt,
    kFloat,
    kBatchedTensor,
    kSmallBatch,
    kFrontEndTags = 16
  };

  /// Keys a dynamic function's call from here on (see above); call it before adding inputs.
  void set_dynamic() { dynamic_ = true; }
  /// The batch size of a dynamic call; -1 when no tensor input has a dimension (or not dynamic).
  int64_t batch() const { return batch_; }
  /// For each tensor input added with add_input (the graph's parameters, in order), whether it
  /// is batched; empty unless dynamic.
  const std::vector<bool>& batched() const { return batched_; }

  void clear() {
    words_.clear();
    batch_ = -1;
    batched_.clear();
  }
  void add(int64_t word) { words_.push_back(word); }
  void add_tensor(const Tensor& t);
  void add_tensor(DType dtype, const Shape& shape);
  /// kBool, kInt or kFloat and the value's bits (-0.0 and 0.0 differ; NaNs of one payload match).
  void add_scalar(const Scalar& value);
  /// A call's tensor argument: kNone for an undefined tensor, its value for a constant input
  /// (is_constant_input), else its dtype and shape (for a batched input, without the batch size).
  void add_input(const Tensor& t);
  /// True for the tensor arguments the jit treats as constants, traced by value: undefined
  /// tensors and weak scalars (Python numbers, Tensor::scalar).
  static bool is_constant_input(const Tensor& t);
  size_t hash() const;
  /// Whether `first` is followed by `second` somewhere in the words (a front end's tag and its
  /// value, say; a match of two words that mean something else is possible).
  bool has_pair(int64_t first, int64_t second) const;
  bool operator==(const SignatureKey& other) const { return words_ == other.words_; }

 private:
  SmallVector<int64_t, 16> words_;
  bool dynamic_ = false;
  int64_t batch_ = -1;
  std::vector<bool> batched_;
};

struct SignatureKeyHash {
  size_t operator()(const SignatureKey& key) const { return key.hash(); }
};

/// The calling thread's autocast state (kiln/autocast.h) as one key word: 0 when off, else its
/// dtype and the generation of the op lists. A trace records autocast's casts, so the state is
/// part of every key.
KILN_API int64_t autocast_word();

class DynamicGraph;

/// What the cache keeps per signature: the built graph, and what the front end needs to turn the
/// graph's outputs into its result (the Python bindings keep the output structure there). For a
/// dynamic function's batched signature, `graph` is the graph built for the first batch size and
/// `dynamic` the graphs of the others (see dynamic_graph.h).
struct CacheEntry {
  std::shared_ptr<CompiledGraph> graph;
  std::shared_ptr<void> front_end;
  std::shared_ptr<DynamicGraph> dynamic;
};

/// Built graphs by signature, with hit and miss counters. Thread-safe.
class KILN_API GraphCache {
 public:
  /// The entry for `key` (a hit), or null (a miss). An entry whose ops were unregistered or
  /// replaced, or whose backend's passes changed, since it was built is dropped (a miss). With
  /// count false the call is not counted (the caller counts it with count()).
  std::shared_ptr<const CacheEntry> find(const SignatureKey& key, bool count = true);
  /// Counts a call as a hit (it ran a graph built before) or a miss (it built one).
  void count(bool hit) { (hit ? hits_ : misses_).fetch_add(1, std::memory_order_relaxed); }
  /// Stores an entry (replacing one of the same key) and returns it.
  std::shared_ptr<const CacheEntry> insert(const SignatureKey& key, CacheEntry entry);
  /// The counters; size counts every built graph, those of each batch size of a dynamic entry.
  JitCacheInfo info() const;
  void clear();
  /// Drops the entries whose keys `drop` picks (destroyed after the lock is released: a front
  /// end's part of an entry may run code of its own when it goes).
  void erase_if(const std::function<bool(const SignatureKey&)>& drop);

 private:
  mutable std::mutex mutex_;
  std::unordered_map<SignatureKey, std::shared_ptr<const CacheEntry>, SignatureKeyHash> entries_;
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
};

}  // namespace kiln::jit_detail
