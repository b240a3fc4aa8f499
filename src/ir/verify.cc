// ir::verify: the checks listed in kiln/ir/verify.h, each a linear pass over the node table.
#include "kiln/ir/verify.h"

#include "ir/infer.h"
#include "ir/ir_access.h"

// Every failure names the graph, then the node.
#define KILN_VERIFY_FAIL(kind) KILN_FAIL(kind) << "verify: graph \"" << g_.name() << "\": "

namespace kiln::ir {

namespace {

using detail::IrAccess;

class Verifier {
 public:
  explicit Verifier(const FuncGraph& g) : g_(g), slots_(IrAccess::slots(g)) {}

  void run() {
    check_inputs();
    check_uses();
    check_primitives();
    for (const Node* n : detail::topo_order(g_)) check_abstract(*n);  // topo_order: no cycles
  }

 private:
  // Every input is a live node of this graph.
  void check_inputs() {
    edge_start_.assign(slots_.size() + 1, 0);
    for (size_t s = 0; s < slots_.size(); ++s) {
      edge_start_[s + 1] = edge_start_[s];
      const Node* n = slots_[s].get();
      if (n == nullptr || !n->is_cnode()) continue;
      const auto& c = static_cast<const CNode&>(*n);
      for (size_t i = 0; i < c.num_inputs(); ++i) {
        const Node* in = c.inputs()[i].get();
        if (detail::is_member(g_, in)) continue;
        KILN_VERIFY_FAIL(kValue) << "input " << i << " of " << c.debug_string()
                                 << " is a dangling reference ("
                                 << (in == nullptr ? std::string("null")
                                                   : in->debug_string() + ", not in this graph")
                                 << ")";
      }
      edge_start_[s + 1] += c.num_inputs();
    }
  }

  // The use lists are exactly the inputs: every use names an input that is this node, at the
  // position the user recorded, and every input is used once (marked off edge by edge).
  void check_uses() {
    std::vector<uint8_t> seen(edge_start_.back(), 0);
    for (const NodePtr& n : slots_) {
      if (n == nullptr) continue;
      const Uses& uses = n->users();
      for (size_t u = 0; u < uses.size(); ++u) {
        const CNode* user = uses[u].user;
        const uint32_t index = uses[u].index;
        if (!detail::is_member(g_, user)) {
          KILN_VERIFY_FAIL(kValue) << "the use list of " << n->debug_string()
                                   << " names a user that is not in this graph";
        }
        if (index >= user->num_inputs() || user->inputs()[index].get() != n.get()) {
          KILN_VERIFY_FAIL(kValue)
              << "the use list of " << n->debug_string() << " says " << user->debug_string()
              << " uses it as input " << index << ", which it does not";
        }
        if (IrAccess::use_position(*user, index) != u) {
          KILN_VERIFY_FAIL(kValue)
              << "the use list of " << n->debug_string() << ": " << user->debug_string()
              << " has its use of input " << index << " at the wrong position";
        }
        uint8_t& mark = seen[edge_start_[IrAccess::slot(*user)] + index];
        if (mark) {
          KILN_VERIFY_FAIL(kValue) << "the use list of " << n->debug_string() << " lists input "
                                   << index << " of " << user->debug_string() << " twice";
        }
        mark = 1;
      }
    }
    for (size_t s = 0; s < slots_.size(); ++s) {
      for (size_t e = edge_start_[s]; e < edge_start_[s + 1]; ++e) {
        if (seen[e]) continue;
        const auto& c = static_cast<const CNode&>(*slots_[s]);
        const size_t i = e - edge_start_[s];
        KILN_VERIFY_FAIL(kValue) << "input " << i << " of " << c.debug_string()
                                 << " is missing from the use list of "
                                 << c.inputs()[i]->debug_string();
      }
    }
  }

  void check_primitives() {
    for (const NodePtr& n : slots_) {
      if (n == nullptr || !n->is_cnode()) continue;
      const auto& c = static_cast<const CNode&>(*n);
      const Primitive* p = c.primitive().get();
      if (p == nullptr) {
        KILN_VERIFY_FAIL(kValue) << c.debug_string() << " has no primitive";
      }
      if (&c == g_.return_node().get()) {
        if (!p->is_return()) {
          KILN_VERIFY_FAIL(kValue) << "the return node's primitive is '" << p->name() << "'";
        }
        continue;
      }
      if (p->is_return()) {
        KILN_VERIFY_FAIL(kValue) << c.debug_string() << " uses 'Return', which only the return "
                                 << "node may";
      }
      if (!p->is_builtin() && p->op_def() == nullptr) {
        KILN_VERIFY_FAIL(kValue) << c.debug_string() << ": primitive '" << p->name()
                                 << "' is not a registered op";
      }
    }
  }

  // What inference gives for a constant or an op node.
  Abstract expected_abstract(const Node& n) const {
    if (n.is_value()) {
      const Tensor& v = static_cast<const ValueNode&>(n).value();
      return v.defined() ? Abstract(TensorMeta::of(v)) : Abstract();
    }
    const auto& c = static_cast<const CNode&>(n);
    try {
      return infer_abstract(*c.primitive(), c.inputs(), IrAccess::scratch(g_));
    } catch (Error& e) {
      e.add_context("verify: graph \"" + g_.name() + "\": inferring " + c.debug_string());
      throw;
    }
  }

  void check_abstract(const Node& n) {
    const Abstract& stored = n.abstract();
    if (n.is_parameter()) {
      if (!stored.is_tensor()) {
        KILN_VERIFY_FAIL(kType) << n.debug_string() << " has abstract " << stored.str()
                                << "; a parameter is a tensor";
      }
      return;
    }
    if (&n == g_.return_node().get()) {
      for (const NodePtr& out : g_.outputs()) {
        if (!out->abstract().is_tensor()) {
          KILN_VERIFY_FAIL(kType) << "the output " << out->debug_string() << " is "
                                  << out->abstract().str() << ", not a tensor";
        }
      }
      return;
    }
    const Abstract expected = expected_abstract(n);
    if (stored == expected) return;
    // Weakness is part of the type: it decides promotion.
    const bool dtype_differs =
        stored.is_tensor() && expected.is_tensor() &&
        (stored.dtype() != expected.dtype() || stored.tensor().weak != expected.tensor().weak);
    KILN_CHECK_KIND(dtype_differs ? ErrorKind::kDType : ErrorKind::kShape, false)
        << "verify: graph \"" << g_.name() << "\": " << n.debug_string() << " has abstract "
        << stored.str() << ", but inference gives " << expected.str();
  }

  const FuncGraph& g_;
  const std::vector<NodePtr>& slots_;
  std::vector<size_t> edge_start_;  // by slot: index of the node's first input among all inputs
};

}  // namespace

void verify(const FuncGraph& graph) { Verifier(graph).run(); }

}  // namespace kiln::ir
