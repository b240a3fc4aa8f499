// Graphviz dumps of a graph: DOT text, and SVG through Graphviz's `dot` program when it is
// installed (Debian package graphviz).
//
//   std::string text = kiln::ir::to_dot(*graph);
//   if (kiln::ir::graphviz_available()) kiln::ir::write_svg(*graph, "graph.svg");
//
// Parameters are ellipses, constants notes, op nodes boxes labelled with the primitive and the
// abstract; an edge goes from each input to its user, with the input's position as its head label
// when the user has several inputs.
//
// Highlighting: the nodes whose ids are in `highlight` are drawn filled in amber with a thick red
// border, and so are the edges into them (the jit's per-pass dumps mark the nodes a pass added,
// removed or rewired this way). Ids that name no node of the graph are ignored, so one set can
// serve the graphs before and after a change.
//
//   std::unordered_set<uint64_t> changed{4, 7};
//   kiln::ir::write_svg(*graph, "after.svg", changed);
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>

#include "kiln/export.h"
#include "kiln/ir/func_graph.h"

namespace kiln::ir {

/// Node ids to draw highlighted (Node::id(); the return node is Node::kReturnId).
using NodeIdSet = std::unordered_set<uint64_t>;

/// The graph in Graphviz's DOT language, the nodes in `highlight` highlighted (default: none).
/// Throws kValue on a cycle (as print does).
KILN_API std::string to_dot(const FuncGraph& graph, const NodeIdSet& highlight = {});
/// True when a `dot` executable is on PATH.
KILN_API bool graphviz_available();
/// Renders to_dot(graph, highlight) to an SVG file with `dot -Tsvg`. Throws kNotImplemented when
/// dot is missing and kValue with dot's message when it fails. With a positive
/// `timeout_seconds`, dot is killed when it runs longer and kValue says so (dot's layout grows
/// much faster than linearly on some graphs: a node used by every step of a long chain makes a
/// few hundred nodes take minutes). Default: no limit.
KILN_API void write_svg(const FuncGraph& graph, const std::string& path,
                        const NodeIdSet& highlight = {}, double timeout_seconds = 0);

}  // namespace kiln::ir
