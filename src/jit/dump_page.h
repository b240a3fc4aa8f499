// The HTML pages of the jit's IR dumps (private to libkiln): a page per compilation that steps
// through its dumps, and a folder index that lists the compilations' pages.
//
//   std::vector<kiln::jit_detail::DumpStep> steps = ...;   // IrDump fills them
//   write(dir + "/f.0003.html", kiln::jit_detail::compilation_page("f.0003", "f", steps));
//   write(dir + "/index.html", kiln::jit_detail::index_page(kiln::jit_detail::list_pages(dir)));
//
// The pages are self-contained: CSS and JavaScript inline, the data as JSON inside the page, SVGs
// referenced by relative paths (the page sits beside them), nothing fetched from a network.
// The compilation page lists every step (the traced graph, each pass with its stage, matches,
// refusals and time — passes that changed nothing are listed but not stepped to — and each graph
// handed to a backend); it shows one step at a time, a pass's graph before and after side by side
// with the changed nodes highlighted (in the SVG and in the IR text below it). Prev/next buttons,
// the left and right arrow keys, clicks on the list and the URL's fragment (`#3`: the third
// step) move between steps.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kiln/ir/dot.h"

namespace kiln::jit_detail {

/// The files of one graph state of a dump ("" fields: not written).
struct DumpGraphFiles {
  std::string kir;   // file name relative to the page
  std::string dot;
  std::string svg;   // "" when no SVG was made (svg_note says why)
  std::string svg_note;
  std::string text;  // the IR text, shown on the page (cut when very large, text_cut)
  bool text_cut = false;
};

/// One entry of a compilation page: a graph snapshot (traced, a backend's part) or a pass run.
struct DumpStep {
  std::string title;       // "traced", "kiln_cpu", "pre_fusion.AddNegFusionPass"
  bool is_pass = false;
  std::string stage;       // a pass's
  std::string pass;
  bool changed = false;    // a pass: as it reported
  size_t matches = 0;
  size_t refusals = 0;
  std::vector<std::string> reasons;
  double seconds = 0;
  std::string note;        // shown above the graphs
  bool has_graphs = false;  // false: a pass that changed nothing (listed, not shown)
  DumpGraphFiles before;   // a pass's input (is_pass and has_graphs)
  DumpGraphFiles after;    // a pass's output, or the snapshot
  ir::NodeIdSet highlight;
};

/// The page of one compilation; `stem` is "<graph>.<compilation>", `graph` the graph's name.
std::string compilation_page(const std::string& stem, const std::string& graph,
                             const std::vector<DumpStep>& steps);

/// The compilation pages in `dir` ("<stem>.html" files beside their dumps), by compilation number.
std::vector<std::string> list_pages(const std::string& dir);
/// A page linking to each of `pages` (file names relative to it).
std::string index_page(const std::vector<std::string>& pages);

}  // namespace kiln::jit_detail
