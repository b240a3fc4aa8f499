// CompiledGraph: a traced graph taken through the jit pipeline and built on its backends; runs it
// (private to libkiln, the Python bindings and the tests).
//
//   auto compiled = kiln::jit_detail::CompiledGraph::compile(traced, options);
//   std::vector<kiln::Tensor> out;
//   compiled->run(inputs, &out);   // one tensor per parameter of `traced`, in order
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jit/partition.h"
#include "kiln/backend.h"
#include "kiln/jit.h"
#include "kiln/pass.h"

namespace kiln::jit_detail {

/// The backend that runs what a backend's Supports declines.
inline constexpr const char* kFallbackBackend = "kiln_cpu";

class IrDump;

/// The pass pipeline on a traced graph, in place: ir::verify, then the registered passes for
/// options.backend (PassRegistry::manager; built-in ones unless jit_level is "O0"), verifying
/// after each in debug mode. Fills *report; dumps through *dump when given. Throws what a pass
/// throws, and kValue when a pass removed or added a graph parameter.
KILN_API void optimize(const FuncGraphPtr& graph, const JitOptions& options, PassReport* report,
                       IrDump* dump = nullptr);

class KILN_API CompiledGraph {
 public:
  /// The jit pipeline on a traced graph (see kiln/jit.h): dumps, optimize, partitioning, Build of
  /// each part. Throws the first error (parts built before it are cleared).
  static std::shared_ptr<CompiledGraph> compile(FuncGraphPtr traced, const JitOptions& options);
  /// Clears the built parts on their backends.
  ~CompiledGraph();
  CompiledGraph(const CompiledGraph&) = delete;
  CompiledGraph& operator=(const CompiledGraph&) = delete;

  /// Runs the parts in order on `inputs` (one per parameter of the traced graph) and replaces
  /// *outputs with the traced graph's outputs, recording no autograd (Note [Results carry no
  /// gradient]). Backend failures name the backend and the graph.
  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) const;

  /// The graph after the passes, as the backends received it (before partitioning).
  const FuncGraphPtr& optimized() const { return graph_; }
  /// What the passes did.
  const PassReport& pass_report() const { return report_; }
  /// The memory plans of the parts whose backends plan memory (BackendMemoryPlanner), summed;
  /// throws kValue when none does.
  BackendMemoryPlan memory_plan() const;
  /// The parts as built, in run order (one when the backend supports every node).
  const std::vector<GraphPart>& parts() const { return parts_; }
  /// False when an op the graph uses was unregistered or replaced, when the passes registered for
  /// its backend changed, or when a backend that built a part was registered again (its new
  /// instance knows none of the earlier one's graphs), since it was built: the graph must be
  /// built again. Cheap while none of the three registries has changed.
  bool current() const;

 private:
  // Where a part reads an input or the graph an output: a slot of the run's value table.
  struct Step {
    std::string backend;
    uint64_t registration = 0;  // the backend's BackendManager::RegistrationId at Build
    BackendGraphId id = 0;
    std::vector<size_t> inputs;
    std::vector<size_t> outputs;
  };
  CompiledGraph() = default;
  void plan();
  void run_steps(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) const;

  bool ops_current() const;
  bool passes_current() const;
  bool backends_current() const;

  FuncGraphPtr graph_;
  std::string backend_;
  PassReport report_;
  std::vector<GraphPart> parts_;
  std::vector<Step> steps_;
  std::vector<std::pair<size_t, Tensor>> constants_;  // constant outputs of the whole graph
  std::vector<size_t> outputs_;
  size_t num_slots_ = 0;
  bool direct_ = false;  // one part over the whole graph: inputs and outputs need no table
  std::vector<std::pair<std::string, OpDefPtr>> ops_;  // every op used, as built
  mutable std::atomic<uint64_t> registry_generation_{0};
  uint64_t backend_passes_ = 0;                        // PassRegistry::generation(backend_)
  mutable std::atomic<uint64_t> pass_registry_generation_{0};
  mutable std::atomic<uint64_t> backend_generation_{0};  // BackendManager::Generation
};

}  // namespace kiln::jit_detail
