// The built-in backends' table of built graphs by BackendGraphId (private to libkiln).
//
//   BuiltGraphs<Program> graphs;
//   BackendGraphId id = graphs.add(compile(graph));   // Build
//   std::shared_ptr<const Program> p = graphs.find(id);  // Run; kValue for an unknown id
//   graphs.erase(id);                                    // ClearGraph
//
// Thread-safe: Run holds its own reference, so a graph cleared while it runs lives until it ends.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>

#include "kiln/backend.h"

namespace kiln::backend_detail {

template <typename Program>
class BuiltGraphs {
 public:
  BackendGraphId add(std::shared_ptr<const Program> program) {
    std::lock_guard<std::mutex> lock(mutex_);
    const BackendGraphId id = next_id_++;
    programs_.emplace(id, std::move(program));
    return id;
  }

  std::shared_ptr<const Program> find(BackendGraphId id) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = programs_.find(id);
    KILN_CHECK_VALUE(it != programs_.end())
        << "no graph with id " << id << " (never built, or cleared)";
    return it->second;
  }

  void erase(BackendGraphId id) {
    std::lock_guard<std::mutex> lock(mutex_);
    programs_.erase(id);
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    programs_.clear();
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<BackendGraphId, std::shared_ptr<const Program>> programs_;
  BackendGraphId next_id_ = 0;
};

}  // namespace kiln::backend_detail
