// Registering the built-in passes, and which constants they may read (see builtin_passes.h).
#include "pass/builtin/builtin_passes.h"

namespace kiln::pass {

void register_builtin_passes(PassRegistry& registry) {
  const auto add = [&](PassPtr pass, int priority) {
    PassInfo info;
    info.name = pass->name();
    info.backend = "all";
    info.stage = PassStage::kFrontend;
    info.priority = priority;
    info.builtin = true;
    registry.add(std::move(pass), std::move(info));
  };
  add(make_constant_folding(), kConstantFoldingPriority);
  add(make_algebraic_simplification(), kAlgebraicSimplificationPriority);
  add(make_common_subexpression_elimination(), kCommonSubexpressionEliminationPriority);
  add(make_dead_code_elimination(), kDeadCodeEliminationPriority);
}

std::vector<BuiltinPassSet>& builtin_pass_sets() {
  static std::vector<BuiltinPassSet> sets;
  return sets;
}

// See Note [Frozen constants] in builtin_passes.h.
bool is_frozen_constant(const Node& node) {
  if (!node.is_value()) return false;
  const Tensor& value = static_cast<const ValueNode&>(node).value();
  if (!value.defined()) return true;
  if (value.is_weak_scalar()) return true;
  // Only this ValueNode holds the tensor (a use count of 1 cannot grow behind our back: nobody
  // else has a handle to copy), and no view shares its memory.
  if (value.impl_ptr().use_count() != 1) return false;
  const std::shared_ptr<Storage>& storage = value.storage();
  return storage != nullptr && storage.use_count() == 1 && storage->owns_memory();
}

bool is_graph_output(const Node& node) {
  const FuncGraph* graph = node.graph();
  if (graph == nullptr) return false;
  const CNode* ret = graph->return_node().get();
  for (const Use& use : node.users()) {
    if (use.user == ret) return true;
  }
  return false;
}

// See Note [Outputs stay fresh] in builtin_passes.h.
bool makes_output_alias(const Node& node, const Node& replacement) {
  if (!is_graph_output(node)) return false;
  return replacement.is_parameter() || replacement.is_value() || is_graph_output(replacement);
}

}  // namespace kiln::pass
