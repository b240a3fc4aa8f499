// Private to libkiln: the casts autocast makes in call_op (see kiln/autocast.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/op.h"

namespace kiln::detail {

/// The inputs of a call of `op_name` as autocast wants them on this thread (see
/// kiln/autocast.h), or nullopt when it changes none (autocast off, the op on no list, or the
/// inputs already in the dtype). The casts are Cast op calls.
std::optional<std::vector<Tensor>> autocast_inputs(const std::string& op_name, TensorSpan inputs);

/// Counts the changes of the op lists (set_autocast_policy), for the jit's keys: a graph traced
/// before a change has the casts of the old lists.
KILN_API int64_t autocast_policies_generation();

}  // namespace kiln::detail
