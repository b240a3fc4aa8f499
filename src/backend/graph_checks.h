// Checks that the built-in backends make at every Run (private to libkiln).
#pragma once

#include <string>
#include <vector>

#include "kiln/op.h"

namespace kiln::backend_detail {

/// The inputs match the graph's parameters in number, dtype and shape; kValue / kDType / kShape
/// errors name the input by position and by `names` (one per parameter).
void check_inputs(const std::string& graph, const std::vector<TensorMeta>& parameters,
                  const std::vector<std::string>& names, const std::vector<Tensor>& inputs);

/// Every op in `ops` is still the registered one (an op unregistered or replaced after Build must
/// not run from a stale definition); cheap while the registry's generation is `generation`.
void check_ops_current(const std::string& graph, uint64_t generation,
                       const std::vector<OpDefPtr>& ops);

}  // namespace kiln::backend_detail
