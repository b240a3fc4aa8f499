// IR dumps of the jit pipeline: the graph after tracing and after each step, as text (.kir),
// Graphviz DOT (.dot) and, when Graphviz's `dot` is installed, SVG (private to libkiln).
//
//   kiln::jit_detail::IrDump dump(kiln::jit_detail::dump_dir(options.dump_ir), "f");
//   dump.write("traced", *graph);   // <dir>/f.0003.00_traced.kir, .dot, .svg
#pragma once

#include <string>

#include "kiln/export.h"
#include "kiln/ir.h"
#include "kiln/pass.h"

namespace kiln::jit_detail {

/// The dump folder: `option` when not empty, else $KILN_DUMP_IR, else "" (no dumps).
KILN_API std::string dump_dir(const std::string& option);

/// The dumps of one compilation. Files are named "<graph>.<compilation>.<step number>_<step>":
/// the compilation number is unique in the process, so recompiling never overwrites a dump. As
/// a PassObserver it writes the graph after every pass that changed it ("<stage>.<pass>").
class KILN_API IrDump : public PassObserver {
 public:
  /// Dumps into `dir` (created when missing); an empty `dir` writes nothing.
  IrDump(std::string dir, const std::string& graph_name);
  bool enabled() const { return !dir_.empty(); }
  /// Writes `graph` as the next step. Throws kValue naming the file when it cannot be written.
  void write(const std::string& step, const FuncGraph& graph);

  void before(const Pass& pass, PassStage stage, const FuncGraph& graph) override;
  void after(const PassRunRecord& record, const FuncGraph& graph) override;

 private:
  std::string dir_;
  std::string prefix_;  // "<dir>/<graph>.<compilation>."
  int step_ = 0;
};

}  // namespace kiln::jit_detail
