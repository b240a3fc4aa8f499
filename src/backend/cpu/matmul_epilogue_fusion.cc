// MatmulEpilogueFusion: kiln_cpu's "pre_fusion"-stage pass. A float32/float64 Linear, or a MatMul
// by a 2-d weight, followed by an Add of a bias row and/or an activation (Relu, Gelu in both
// forms, Silu, Sigmoid, Tanh) becomes one FusedMatMul, which runs as a single oneDNN matmul with
// the bias and the activation as post-ops: the product is written once, already finished,
// instead of being read and written again by each elementwise op.
//
// Each link of the chain must be the only user of the one before it (a value someone else reads
// must be stored as it is). A Linear with nothing to absorb stays a Linear.
#include "backend/cpu/cpu_passes.h"
#include "ir/ir_access.h"
#include "ops/fused_elementwise.h"
#include "ops/gemm.h"

namespace kiln::cpu {
namespace {

const CNode* op_node(const Node* n, const char* name) {
  if (n == nullptr || !n->is_cnode()) return nullptr;
  const auto* c = static_cast<const CNode*>(n);
  return c->primitive()->name() == name && c->abstract().is_tensor() ? c : nullptr;
}

// The one user of `n`, or null.
const CNode* only_user(const Node& n) { return n.users().size() == 1 ? n.users()[0].user : nullptr; }

// The activation instruction of `c` when it is one FusedMatMul applies ("Relu", "GeluTanh", ...).
std::optional<std::string> activation_of(const CNode& c) {
  const Primitive& p = *c.primitive();
  if (p.is_builtin() || p.op_def() == nullptr || c.inputs().size() != 1) return std::nullopt;
  std::optional<std::string> name = fused::instruction_name(p.name(), p.normalized_attrs());
  if (!name) return std::nullopt;
  const std::optional<simd::UnaryOp> op = fused::unary_instruction(*name);
  return op && is_gemm_activation(*op) ? name : std::nullopt;
}

class MatmulEpilogueFusion final : public Pass {
 public:
  MatmulEpilogueFusion() : Pass(kMatmulEpilogueFusionName) {}

  bool Run(const FuncGraphPtr& graph) override {
    KILN_CHECK_VALUE(graph != nullptr) << "pass '" << name() << "': Run got a null graph";
    size_t fused = 0;
    for (const NodePtr& n : graph->topological_order()) {
      if (n->graph() != graph.get()) continue;  // erased by an earlier fusion
      if (fuse_from(graph, n)) ++fused;
    }
    record_matches(fused);
    return fused > 0;
  }

 private:
  static bool fuse_from(const FuncGraphPtr& graph, const NodePtr& start) {
    const CNode* linear = op_node(start.get(), "Linear");
    const CNode* matmul = op_node(start.get(), "MatMul");
    const CNode* product = linear != nullptr ? linear : matmul;
    if (product == nullptr) return false;
    const TensorMeta& out = product->abstract().tensor();
    if (out.dtype != DType::kFloat32 && out.dtype != DType::kFloat64) return false;
    const NodePtr& x = product->input(0);
    const NodePtr& weight = product->input(1);
    for (const NodePtr& operand : {x, weight}) {
      if (operand->abstract().dtype() != out.dtype) return false;
    }
    if (weight->abstract().shape().size() != 2 || x->abstract().shape().empty()) return false;
    NodePtr bias;
    const Abstract& linear_bias = product->input(product->inputs().size() - 1)->abstract();
    if (linear != nullptr && linear_bias.is_tensor() && linear_bias.tensor().defined) {
      bias = linear->input(2);
      if (bias->abstract().dtype() != out.dtype) return false;
    }

    std::vector<const CNode*> chain{product};  // the nodes the fused one replaces, in order
    if (bias == nullptr) {
      const CNode* add = op_node(only_user(*product), "Add");
      if (add != nullptr && add->abstract().tensor() == out) {
        const NodePtr& other = add->input(add->input(0).get() == product ? 1 : 0);
        const TensorMeta& b = other->abstract().tensor();
        if (other.get() != product && b.dtype == out.dtype && !b.weak &&
            b.shape == Shape{out.shape.back()}) {
          bias = other;
          chain.push_back(add);
        }
      }
    }
    std::string activation = "none";
    if (const CNode* act = only_user(*chain.back()); act != nullptr) {
      const std::optional<std::string> name = activation_of(*act);
      if (name && act->abstract().tensor() == out) {
        activation = *name;
        chain.push_back(act);
      }
    }
    if (chain.size() == 1 && linear != nullptr) return false;  // nothing to absorb
    if (chain.size() == 1 && bias == nullptr) return false;

    std::vector<NodePtr> inputs{x, weight};
    inputs.push_back(bias != nullptr ? bias : graph->add_value(Tensor()));
    const CNodePtr replacement = graph->add_cnode(
        std::make_shared<Primitive>(
            "FusedMatMul",
            Attrs{{"transpose_weight", linear != nullptr}, {"activation", activation}}),
        inputs);
    graph->replace_all_uses_with(node_ptr(*graph, chain.back()), replacement);
    for (size_t i = chain.size(); i-- > 0;) graph->erase(node_ptr(*graph, chain[i]));
    return true;
  }

  // The graph's handle of its node `n`.
  static NodePtr node_ptr(const FuncGraph& graph, const Node* n) {
    return detail::IrAccess::slots(graph)[detail::IrAccess::slot(*n)];
  }
};

}  // namespace

PassPtr make_matmul_epilogue_fusion() { return std::make_shared<MatmulEpilogueFusion>(); }

}  // namespace kiln::cpu
