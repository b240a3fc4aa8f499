// Graphviz dumps of a graph: DOT text, and SVG through Graphviz's `dot` program when it is
// installed (Debian package graphviz).
//
//   std::string text = kiln::ir::to_dot(*graph);
//   if (kiln::ir::graphviz_available()) kiln::ir::write_svg(*graph, "graph.svg");
//
// Parameters are ellipses, constants notes, op nodes boxes labelled with the primitive and the
// abstract; an edge goes from each input to its user, labelled with the input's position when the
// user has several inputs.
#pragma once

#include <string>

#include "kiln/export.h"
#include "kiln/ir/func_graph.h"

namespace kiln::ir {

/// The graph in Graphviz's DOT language. Throws kValue on a cycle (as print does).
KILN_API std::string to_dot(const FuncGraph& graph);
/// True when a `dot` executable is on PATH.
KILN_API bool graphviz_available();
/// Renders to_dot(graph) to an SVG file with `dot -Tsvg`. Throws kNotImplemented when dot is
/// missing and kValue with dot's message when it fails.
KILN_API void write_svg(const FuncGraph& graph, const std::string& path);

}  // namespace kiln::ir
