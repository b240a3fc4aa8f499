// ConstantFolding: an op node whose inputs are all frozen constants becomes a constant.
//
// A CNode is folded when
//   - every input is a frozen constant (Note [Frozen constants] in builtin_passes.h: never a
//     tensor the program may still write, such as a weight a traced function read), or it has
//     no inputs at all (Full, Arange, Eye of a fixed shape);
//   - its op is registered with a CPU kernel, has neither kTraitRandom (it would replay one draw
//     forever) nor kTraitSideEffect, and is not Empty (its value is unspecified: folding it would
//     put arbitrary bytes into the graph);
//   - it has one output (multi-output ops, taken apart by TupleGetItem, are left alone: a tuple
//     cannot be a constant, and those ops — Split, MaxDim — are rarely fed only constants);
//   - its result is at most kSmallConstantBytes (64 KiB): a bigger constant would make the graph
//     bigger and its dumps unreadable to save one op at run time;
//   - it is not a graph output (Note [Outputs stay fresh] in builtin_passes.h: each call must
//     return a new tensor), though what it computes from may fold.
// The op runs eagerly through the runtime (kiln::call_op, on this thread's process-wide
// dispatcher even while a trace is recording), and its result, read at a sync point, is copied
// into a tensor of its own that becomes the new ValueNode; the node's users use that constant,
// and the node and the constants only it used are erased. The constant's abstract equals the
// node's (dtype, shape, weakness: a weak result stays a weak scalar), so no user's type changes.
// Nodes are visited in topological order, so a chain of constant ops folds in one run.
//
// A fold that fails (the op raises on its constants, e.g. a shape its kernel refuses, or its
// result disagrees with the node's abstract) leaves the node as it was and is counted as a
// refusal with the error in the pass report; no exception escapes. The graph stays valid, and
// running it raises the op's error where it would have been raised without the pass.
#include <algorithm>
#include <vector>

#include "ir/ir_access.h"
#include "kiln/autocast.h"
#include "pass/builtin/builtin_passes.h"

namespace kiln::pass {
namespace {

// Runs ops eagerly while it lives, even on a thread that is tracing (a trace's dispatcher would
// record the calls as nodes of the traced graph instead).
class EagerScope {
 public:
  EagerScope() : previous_(set_thread_dispatcher(nullptr)) {}
  ~EagerScope() { set_thread_dispatcher(previous_); }
  EagerScope(const EagerScope&) = delete;
  EagerScope& operator=(const EagerScope&) = delete;

 private:
  Dispatcher* previous_;
};

bool foldable_op(const CNode& c) {
  const Primitive& p = *c.primitive();
  if (p.is_builtin()) return false;
  const OpDefPtr op = p.op_def();
  if (op == nullptr || op->has_trait(kTraitRandom) || op->has_trait(kTraitSideEffect)) {
    return false;
  }
  if (op->name() == "Empty" || op->find_kernel(DeviceType::kCPU) == nullptr) return false;
  if (!c.abstract().is_tensor()) return false;
  const TensorMeta& meta = c.abstract().tensor();
  return static_cast<size_t>(meta.numel()) * itemsize(meta.dtype) <= kSmallConstantBytes;
}

class ConstantFolding final : public Pass {
 public:
  ConstantFolding() : Pass(kConstantFoldingName) {}

  bool Run(const FuncGraphPtr& graph) override {
    KILN_CHECK_VALUE(graph != nullptr) << "pass '" << name() << "': Run got a null graph";
    FuncGraph& g = *graph;
    // Which constants are frozen is decided before any op runs: the calls below hold references
    // to their inputs for a while, which would make use counts say "shared". By id: erasing may
    // compact the graph's slots. Folded constants are new nodes (ids from next_id() on), all
    // frozen.
    std::vector<uint64_t> frozen_ids;
    for (const NodePtr& n : detail::IrAccess::slots(g)) {
      if (n != nullptr && is_frozen_constant(*n)) frozen_ids.push_back(n->id());
    }
    std::sort(frozen_ids.begin(), frozen_ids.end());
    const uint64_t first_new = g.next_id();
    const auto is_frozen = [&](const Node& n) {
      return n.id() >= first_new ||
             std::binary_search(frozen_ids.begin(), frozen_ids.end(), n.id());
    };

    EagerScope eager;
    size_t folded = 0;
    for (Node* n : detail::topo_order(g)) {
      if (!n->is_cnode() || n == g.return_node().get()) continue;
      auto& c = static_cast<CNode&>(*n);
      if (!foldable_op(c) || is_graph_output(c)) continue;  // Note [Outputs stay fresh]
      bool constant_inputs = true;
      for (const NodePtr& in : c.inputs()) {
        constant_inputs = constant_inputs && in->is_value() && is_frozen(*in);
      }
      if (!constant_inputs) continue;
      Tensor value = evaluate(c);
      if (!value.defined()) continue;
      const NodePtr node = detail::IrAccess::slots(g)[detail::IrAccess::slot(c)];
      const std::vector<NodePtr> inputs = c.inputs().to_vector();
      g.replace_all_uses_with(node, g.add_value(value));
      g.erase(node);
      for (const NodePtr& in : inputs) {
        if (in->graph() == &g && in->users().empty()) g.erase(in);
      }
      ++folded;
    }
    record_matches(folded);
    return folded > 0;
  }

 private:
  // The node's value as a contiguous tensor of its own, or an undefined tensor when the op
  // failed (recorded as a refusal).
  Tensor evaluate(const CNode& c) const {
    const TensorMeta& want = c.abstract().tensor();
    try {
      std::vector<Tensor> inputs;
      inputs.reserve(c.num_inputs());
      for (const NodePtr& in : c.inputs()) {
        const Tensor& v = static_cast<const ValueNode&>(*in).value();
        // A copy, so that the runtime's references to the call's inputs never touch the graph's
        // constants (see `frozen_ids` in Run); weak scalars are frozen whoever holds them.
        inputs.push_back(v.defined() && !v.is_weak_scalar() ? v.clone() : v);
      }
      const AutocastGuard no_autocast(autocast_state().dtype, false);  // the graph's own dtypes
      const std::vector<Tensor> results =
          call_op(*c.primitive()->op_def(), inputs, c.primitive()->attrs());
      KILN_CHECK(results.size() == 1) << "the op returned " << results.size() << " results";
      const Tensor& result = results[0];
      KILN_CHECK(result.dtype() == want.dtype && result.shape() == want.shape)
          << "the op's result is " << type_str(result) << " but the node is "
          << c.abstract().str();
      Tensor value = Tensor::empty(result.shape(), result.dtype());
      copy_into(value, result);  // reads the result: waits for the op, raises its failure
      value.impl()->weak = want.weak;
      return value;
    } catch (const Error& e) {
      record_refusal("pass '" + name() + "' left " + c.debug_string() +
                     " unfolded: evaluating it failed: " + e.what());
      return Tensor();
    }
  }
};

}  // namespace

PassPtr make_constant_folding() { return std::make_shared<ConstantFolding>(); }

}  // namespace kiln::pass
