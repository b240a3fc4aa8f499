// Kiln's built-in graph passes (private to libkiln; KILN_API for the tests).
//
//   kiln::PassManager pm;
//   pm.add(kiln::pass::make_constant_folding(), kiln::PassStage::kFrontend);
//   pm.Run(graph);
//
// The jit runs them on every graph at jit_level "O1" and "O2" ("O0" skips them): PassRegistry
// registers them on its first use (register_builtin_passes), for backend "all", in the frontend
// stage, in this order:
//
//   ConstantFolding            a CNode whose inputs are all frozen constants becomes a constant
//   AlgebraicSimplification    identities that keep every value bit for bit: x * 1, x / 1, x - 0,
//                              Neg(Neg(x)), no-op reshapes and casts, ... (pattern rewrites)
//   CommonSubexpressionElimination
//                              equal nodes (op, attributes, inputs) and equal small constants
//                              become one
//   DeadCodeElimination        nodes that no output and no side-effecting op needs are removed
//
// Folding first gives simplification and CSE constants to work with; CSE before DCE, because
// merging leaves nodes unused. All four are linear in the graph and recurse nowhere (a chain of a
// million nodes is fine), and deterministic. Each is described in its own .cc.
//
// Note [Frozen constants]
// A ValueNode may hold a tensor the program still holds: the jit makes a weight that a traced
// function reads into a constant holding that same tensor, so that the compiled graph sees the
// weight's in-place updates (kiln/jit.h). A pass must not read such a constant's values at
// compile time and bake them into the graph: folding W * 2, or removing x * W because W is all
// ones today, or merging two zero-initialised biases, would go wrong at the first optimizer step.
// So the built-in passes read values only of *frozen* constants: weak scalars (Python numbers,
// which nobody writes), undefined constants (None), and tensors that only this ValueNode holds
// (no other handle, no other view of its storage) in memory that Kiln allocated (not memory
// wrapped from NumPy or DLPack, which its owner may still write). Constants that the passes make
// (folded values) are frozen. A constant made by an eager op may count as shared until the runtime
// drops its own reference to the op's result (at the next op or sync point): a missed rewrite,
// never a wrong one.
//
// Note [Outputs stay fresh]
// Eagerly, x * 1 and kiln::full({2}, 3.0) make new tensors, which the caller owns and may write
// in place. A graph output that is a parameter, a constant or another output comes back from the
// compiled graph as that very tensor: the caller's input, the graph's own constant (which an
// in-place write would change for every later call), or the other result. So the built-in passes
// never turn an output into one of those that was not one already: folding leaves outputs
// computed, a simplification whose result would be such a node does not apply at an output, and
// CSE does not merge two outputs. (An output that aliases something in the traced graph itself,
// as `return x` does, is the jit's business.)
#pragma once

#include <vector>

#include "kiln/pass.h"

namespace kiln::pass {

/// The built-in passes' names (PassInfo::name, list_passes).
inline constexpr const char* kConstantFoldingName = "ConstantFolding";
inline constexpr const char* kAlgebraicSimplificationName = "AlgebraicSimplification";
inline constexpr const char* kCommonSubexpressionEliminationName = "CommonSubexpressionElimination";
inline constexpr const char* kDeadCodeEliminationName = "DeadCodeElimination";

/// Their priorities in the frontend stage: before a user's frontend pass of the default priority
/// 0, in the order above; a user pass may go between them with a priority in between.
inline constexpr int kConstantFoldingPriority = -40;
inline constexpr int kAlgebraicSimplificationPriority = -30;
inline constexpr int kCommonSubexpressionEliminationPriority = -20;
inline constexpr int kDeadCodeEliminationPriority = -10;

/// The largest constant, in bytes, that constant folding makes and that CSE compares by value:
/// 64 KiB, a 128 x 128 float32 matrix. Bigger results stay computed at run time, so a graph does
/// not grow by a big tensor to save one op (see constant_folding.cc).
inline constexpr size_t kSmallConstantBytes = 64 * 1024;

KILN_API PassPtr make_constant_folding();
KILN_API PassPtr make_algebraic_simplification();
KILN_API PassPtr make_common_subexpression_elimination();
/// `name` lets a backend run it again under its own name (kiln_cpu's after fusion).
KILN_API PassPtr make_dead_code_elimination(const std::string& name = kDeadCodeEliminationName);

/// Registers the four passes above as built-in (PassInfo::builtin), for backend "all", stage
/// frontend, with the priorities above. PassRegistry::Instance calls it once, when the registry
/// is first used: never from a static initializer, because registering prepares the pattern
/// passes, which checks their primitives against the op registry (filled as libkiln loads).
KILN_API void register_builtin_passes(PassRegistry& registry);

/// Registers a layer's own built-in passes (a backend's fusion passes) in a registry.
using BuiltinPassSet = void (*)(PassRegistry& registry);
/// The sets that PassRegistry::Instance registers after the four above, when it is first used.
std::vector<BuiltinPassSet>& builtin_pass_sets();
/// Adds a set from a static initializer of libkiln (a namespace-scope registrar object); later
/// layers use this, since the registry itself must not be made during static initialization.
struct BuiltinPassSetRegistrar {
  explicit BuiltinPassSetRegistrar(BuiltinPassSet set) { builtin_pass_sets().push_back(set); }
};

/// Whether `node` is a frozen constant, whose values a pass may read (see Note [Frozen
/// constants]). False for anything but a ValueNode.
KILN_API bool is_frozen_constant(const Node& node);

/// Whether `node` is one of its graph's outputs.
KILN_API bool is_graph_output(const Node& node);

/// Whether putting `replacement` in the place of `node` would make an output alias a parameter,
/// a constant or another output (see Note [Outputs stay fresh]).
KILN_API bool makes_output_alias(const Node& node, const Node& replacement);

}  // namespace kiln::pass
