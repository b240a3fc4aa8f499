// IR dumps of the jit pipeline: the graph after tracing, before and after each pass that changed
// it, and as each backend receives it, as text (.kir), Graphviz DOT (.dot) and, when Graphviz's
// `dot` is installed, SVG; plus a page per compilation that steps through them and a folder
// index (private to libkiln).
//
//   kiln::jit_detail::IrDump dump(kiln::jit_detail::dump_dir(options.dump_ir), "f");
//   dump.write("traced", *graph);        // <dir>/f.0003.00_traced.kir, .dot, .svg
//   passes.Run(graph, &report, &dump);   // <dir>/f.0003.01_pre_fusion.P.before.kir, .after.kir ...
//   // <dir>/f.0003.html steps through them; <dir>/index.html lists the compilations
//
// Dumping off (an empty folder) costs one branch per call and writes nothing; the jit passes no
// observer to PassManager then.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "jit/dump_page.h"
#include "kiln/export.h"
#include "kiln/ir.h"
#include "kiln/pass.h"

namespace kiln::jit_detail {

/// The dump folder: `option` when not empty, else $KILN_DUMP_IR, else "" (no dumps).
KILN_API std::string dump_dir(const std::string& option);

/// The ids of the nodes that differ between two states of one graph (node ids are kept across
/// passes): nodes only in one of them (added or removed) and nodes in both whose primitive,
/// attributes, inputs or abstract differ (the return node, Node::kReturnId, when the outputs do).
KILN_API ir::NodeIdSet changed_nodes(const FuncGraph& before, const FuncGraph& after);

/// The dumps of one compilation. Files are named "<graph>.<compilation>.<step number>_<step>":
/// the compilation number is unique in the process, so recompiling never overwrites a dump. As
/// a PassObserver it keeps the graph's text before every pass and, when the pass changed the
/// graph (or reported no change but the text differs), writes both states as one step
/// ("<stage>.<pass>.before" / ".after") with changed_nodes highlighted. After every step the
/// page "<graph>.<compilation>.html" is rewritten, so it shows a compilation that failed half
/// way too; the first step also rewrites the folder's index.html.
///
/// SVGs are rendered with a time limit per graph (kSvgSeconds); when dot runs out of it, graphs
/// of that size or larger get no SVG in this compilation and the page says why.
class KILN_API IrDump : public PassObserver {
 public:
  static constexpr double kSvgSeconds = 20;

  /// Dumps into `dir` (created when missing); an empty `dir` writes nothing.
  IrDump(std::string dir, const std::string& graph_name);
  ~IrDump() override;
  bool enabled() const { return !dir_.empty(); }
  /// Writes `graph` as the next step. Throws kValue naming the file when it cannot be written.
  void write(const std::string& step, const FuncGraph& graph);

  void before(const Pass& pass, PassStage stage, const FuncGraph& graph) override;
  void after(const PassRunRecord& record, const FuncGraph& graph) override;

 private:
  // Writes one state of the graph as <prefix><base>.kir/.dot/.svg.
  DumpGraphFiles write_graph(const std::string& base, const FuncGraph& graph, std::string text,
                             const ir::NodeIdSet& highlight);
  std::string next_step_base(const std::string& step);
  void write_page();

  std::string dir_;
  std::string graph_name_;
  std::string stem_;    // "<graph>.<compilation>"
  std::string prefix_;  // "<dir>/<stem>."
  int step_ = 0;
  std::string before_text_;  // the graph's text before the pass in progress
  size_t svg_node_limit_ = ~size_t{0};  // no SVG for graphs this large (dot ran out of time)
  std::vector<DumpStep> steps_;
};

}  // namespace kiln::jit_detail
