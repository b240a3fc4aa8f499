// ir::verify: checks that a graph is well formed.
//
//   kiln::ir::verify(*graph);   // throws kiln::Error naming the first bad node
//
// Checks, in this order: every input of every node is a live node of the same graph (not null,
// erased or from another graph); use lists match the inputs exactly (each use is an input and
// each input has one use); every primitive is a registered op or an IR built-in; the graph has
// no cycle; every abstract is what inference gives (parameters and constants: their tensors;
// CNodes: the op's infer on the inputs' abstracts, attributes checked against the schema).
// Linear in the size of the graph; no recursion.
#pragma once

#include "kiln/export.h"
#include "kiln/ir/func_graph.h"

namespace kiln::ir {

/// Throws kiln::Error whose message names the offending node (as Node::debug_string does):
/// kDType or kShape for an abstract that disagrees with inference, kValue for everything else
/// (dangling input, broken use list, unregistered primitive, cycle, bad attributes).
KILN_API void verify(const FuncGraph& graph);

}  // namespace kiln::ir
