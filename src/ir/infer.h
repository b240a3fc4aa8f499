// Inference for graph nodes: the abstract a primitive gives for its input nodes, built-ins
// included. Shared by FuncGraph (when nodes are made) and ir::verify (which infers again).
#pragma once

#include <vector>

#include "kiln/ir/node.h"

namespace kiln::ir {

/// Names of the IR's own primitives.
inline constexpr const char* kReturn = "Return";
inline constexpr const char* kTupleGetItem = "TupleGetItem";

/// The abstract of `primitive` applied to `inputs`: a registered op's infer on the inputs'
/// abstracts (a None constant is an omitted optional input), or a built-in's rule. Errors carry
/// the op call as context. `scratch` holds the inputs' metadata; reused, it keeps its capacity,
/// so a call allocates only the op's result list.
Abstract infer_abstract(const Primitive& primitive, NodeSpan inputs, MetaList& scratch);

}  // namespace kiln::ir
