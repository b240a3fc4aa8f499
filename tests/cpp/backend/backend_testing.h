// Helpers for tests that run graphs: running one on the "reference" backend (the oracle).
//
//   std::vector<kiln::Tensor> out = kiln::testing::run_on_reference(graph, {x, y});
#pragma once

#include <vector>

#include "kiln/backend.h"

namespace kiln::testing {

/// Builds `graph` on the reference backend, runs it on `inputs` and clears it again.
inline std::vector<Tensor> run_on_reference(const FuncGraphPtr& graph,
                                            const std::vector<Tensor>& inputs) {
  BackendManager& m = BackendManager::Instance();
  const BackendGraphId id = m.Build(graph, {}, "reference");
  std::vector<Tensor> out;
  m.Run("reference", id, inputs, &out);
  m.ClearGraph("reference", id);
  return out;
}

}  // namespace kiln::testing
