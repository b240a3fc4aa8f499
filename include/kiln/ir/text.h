// The graph IR's text format: ir::print writes a graph, ir::parse reads one back, exactly.
//
//   graph "f"(%0 "x": float32[2, 3], %1 "y": float32[3]) {
//     %2 = Neg(%1) : float32[3]
//     %3 = const float64[] weak [0.5]
//     %4 = Add(%0, %2) : float32[2, 3]
//     %5 = Mul(%4, %3) : float32[2, 3]
//     %6 = MaxDim(%5) {dim = 1, keepdim = false} : (float32[2], int64[2])
//     %7 = TupleGetItem(%6) {index = 0} : float32[2]
//     return %5, %7
//   }
//
// Nodes are written in topological order (FuncGraph::topological_order) under their ids, each
// CNode with its attributes in their stored order and its abstract after the colon; constants
// list every element in row-major order. Floating-point values are written in the shortest form
// that reads back to the same bits, so print(parse(print(g))) == print(g) and the parsed graph
// has the same nodes, ids, primitives, attributes, abstracts, constants and parameter names.
//
// Attribute values: None, true/false, integers (`2`), floats (always with `.`, `e`, `inf` or
// `nan`: `2.0`), strings (`"mean"`, C escapes), integer lists (`[1, 2]`), dtypes (`float32`) and
// scalars (`scalar(2)`, `scalar(0.5)`, `scalar(true)`). `#` starts a comment to the end of the
// line; whitespace and line breaks are free.
//
// parse takes abstracts from the text and runs no inference; ir::verify checks them.
#pragma once

#include <string>
#include <string_view>

#include "kiln/export.h"
#include "kiln/ir/func_graph.h"

namespace kiln::ir {

/// The graph as text. Throws kValue naming a node when the graph has a cycle.
KILN_API std::string print(const FuncGraph& graph);

/// Reads a graph written by print (or by hand in the same format). A syntax error, a use of an
/// undefined node, a node defined twice or a malformed value throws kValue whose message starts
/// with "line L, column C:".
KILN_API FuncGraphPtr parse(std::string_view text);

}  // namespace kiln::ir
