// AlgebraicSimplification: identities that keep every value bit for bit, as pattern rewrites
// (PatternToPatternPass, the public pattern API), under one pass name.
//
// The rules (c: a frozen constant, Note [Frozen constants] in builtin_passes.h; every element
// of c must have the value shown, in any dtype and shape):
//   MulOne, OneMul      x * 1, 1 * x -> x
//   DivOne              x / 1 -> x
//   SubZero             x - 0 -> x, for +0 (x - (-0.0) is x + 0.0, which turns -0.0 into +0.0)
//   AddZero, ZeroAdd    x + 0, 0 + x -> x, for an integer or bool sum; for a floating-point sum
//                       only when c is -0.0: IEEE gives -0.0 + +0.0 = +0.0, so x + 0.0 is not x
//                       for x = -0.0, while x + (-0.0) is x for every x
//   NegNeg              Neg(Neg(x)) -> x (integers wrap, so this holds at the minimum too)
//   AbsAbs              Abs(Abs(x)) -> Abs(x)
//   AbsNeg              Abs(Neg(x)) -> Abs(x), for signed x (for uint8, Neg wraps and Abs is
//                       the identity, so they differ)
//   MaxSelf, MinSelf    Maximum(x, x), Minimum(x, x) -> x
//   <Op>NoOp            Reshape, Flatten, Squeeze, Expand, Contiguous and Cast whose result has
//                       x's abstract (dtype, shape, weakness), and Permute by the identity -> x
// x * 0 -> 0 is not among them (NaN * 0 and inf * 0 are NaN), nor x - x -> 0.
//
// Types need no rule of their own: the pattern engine refuses a rewrite whose new root has
// another abstract than the old one, so x * 1.0 for an int32 x (a float32 product) or x * ones
// that broadcasts x to a bigger shape stays as it is (counted as a refusal in the pass report).
// See Note [Outputs stay fresh] in builtin_passes.h for the one other condition: a rule does not
// make a graph output into a parameter, a constant or another output.
//
// The pass runs the rules one after another, and again while a round changed the graph (one
// rule's result may be another's match: Neg(Neg(x) * 1)), at most kMaxRounds times. A rule whose
// root op the graph does not contain is skipped, so a round costs a scan of the graph plus the
// rules that can match.
#include <cmath>
#include <functional>

#include "core/dtype_dispatch.h"
#include "ir/ir_access.h"
#include "pass/builtin/builtin_passes.h"

namespace kiln::pass {
namespace {

// Rounds of all rules per run; a graph that still changes after that is left for the next run.
constexpr int kMaxRounds = 8;

PrimitivePtr prim(const char* name) { return std::make_shared<Primitive>(name); }

const CNode& cnode(const NodePtr& n) { return static_cast<const CNode&>(*n); }

bool is_positive_zero(double v) { return v == 0 && !std::signbit(v); }
bool is_negative_zero(double v) { return v == 0 && std::signbit(v); }

// Which existing node a rule puts in the root's place.
using KeptFunc = std::function<const Node*(const CNode& root)>;

KeptFunc input_of_root(size_t i) {
  return [i](const CNode& root) { return root.input(i).get(); };
}

// The root's condition: `extra` (may be null) and Note [Outputs stay fresh].
PatternConditionFunc root_condition(KeptFunc kept, PatternConditionFunc extra = nullptr) {
  return [kept = std::move(kept), extra = std::move(extra)](const NodePtr& root) {
    if (extra && !extra(root)) return false;
    return !makes_output_alias(*root, *kept(cnode(root)));
  };
}

struct Rule {
  const char* name;
  const char* root_op;  // the source root's primitive
  std::function<void(SrcPattern&)> src;
  std::function<void(DstPattern&)> dst;
};

class RulePass final : public PatternToPatternPass {
 public:
  explicit RulePass(Rule rule)
      : PatternToPatternPass(std::string(kAlgebraicSimplificationName) + "." + rule.name),
        rule_(std::move(rule)) {}
  void DefineSrcPattern(SrcPattern* src) override { rule_.src(*src); }
  void DefineDstPattern(DstPattern* dst) override { rule_.dst(*dst); }

 private:
  Rule rule_;
};

void keep_x(DstPattern& dst) { dst.SetRoot("x"); }

// `op`(x, c) -> x (or `op`(c, x) -> x when `constant_first`).
Rule drop_constant(const char* name, const char* op, bool constant_first,
                   PatternConditionFunc constant, PatternConditionFunc extra = nullptr) {
  return {name, op,
          [=](SrcPattern& src) {
            src.AddVar("x").AddVar("c", constant);
            src.AddCNode("root", {prim(op), constant_first ? "c" : "x", constant_first ? "x" : "c"},
                         root_condition(input_of_root(constant_first ? 1 : 0), extra));
          },
          keep_x};
}

// x + c -> x: an integer (or bool) sum, or c all -0.0.
PatternConditionFunc add_identity(size_t constant_input) {
  const PatternConditionFunc negative_zero = pattern::IsConstantWhere(is_negative_zero);
  return [=](const NodePtr& root) {
    return !is_floating_point(root->abstract().dtype()) ||
           negative_zero(cnode(root).input(constant_input));
  };
}

// `op`(x) -> x when the result has x's abstract (and `extra` holds).
Rule no_op(const char* name, const char* op, PatternConditionFunc extra = nullptr) {
  const auto same_abstract = [extra](const NodePtr& root) {
    return root->abstract() == cnode(root).input(0)->abstract() && (!extra || extra(root));
  };
  return {name, op,
          [=](SrcPattern& src) {
            src.AddVar("x").AddCNode("root", {prim(op), "x"},
                                     root_condition(input_of_root(0), same_abstract));
          },
          keep_x};
}

bool identity_permutation(const NodePtr& root) {
  const std::vector<int64_t> dims =
      cnode(root).primitive()->normalized_attrs().get<std::vector<int64_t>>("dims");
  const auto rank = static_cast<int64_t>(dims.size());
  for (int64_t i = 0; i < rank; ++i) {
    if ((dims[static_cast<size_t>(i)] + rank) % rank != i) return false;
  }
  return true;
}

// `op`(`op`(x)) -> x.
Rule involution(const char* name, const char* op) {
  return {name, op,
          [=](SrcPattern& src) {
            src.AddVar("x").AddCNode("inner", {prim(op), "x"});
            src.AddCNode("root", {prim(op), "inner"}, root_condition([](const CNode& root) {
                           return cnode(root.input(0)).input(0).get();
                         }));
          },
          keep_x};
}

std::vector<Rule> rules() {
  const PatternConditionFunc one = pattern::IsConstantEqual(1.0);
  const PatternConditionFunc zero = pattern::IsConstantEqual(0.0);
  return {
      drop_constant("MulOne", "Mul", false, one),
      drop_constant("OneMul", "Mul", true, one),
      drop_constant("DivOne", "Div", false, one),
      drop_constant("SubZero", "Sub", false, pattern::IsConstantWhere(is_positive_zero)),
      drop_constant("AddZero", "Add", false, zero, add_identity(1)),
      drop_constant("ZeroAdd", "Add", true, zero, add_identity(0)),
      involution("NegNeg", "Neg"),
      {"AbsAbs", "Abs",
       [](SrcPattern& src) {
         src.AddVar("x").AddCNode("inner", {prim("Abs"), "x"});
         src.AddCNode("root", {prim("Abs"), "inner"}, root_condition(input_of_root(0)));
       },
       [](DstPattern& dst) { dst.SetRoot("inner"); }},
      {"AbsNeg", "Abs",
       [](SrcPattern& src) {
         src.AddVar("x", [](const NodePtr& x) {
              return x->abstract().is_tensor() && is_signed(x->abstract().dtype());
            })
             .AddCNode("inner", {prim("Neg"), "x"})
             .AddCNode("root", {prim("Abs"), "inner"});
       },
       [](DstPattern& dst) {
         dst.AddCNode("abs", {prim("Abs"), "x"});
       }},
      {"MaxSelf", "Maximum",
       [](SrcPattern& src) {
         src.AddVar("x").AddCNode("root", {prim("Maximum"), "x", "x"},
                                  root_condition(input_of_root(0)));
       },
       keep_x},
      {"MinSelf", "Minimum",
       [](SrcPattern& src) {
         src.AddVar("x").AddCNode("root", {prim("Minimum"), "x", "x"},
                                  root_condition(input_of_root(0)));
       },
       keep_x},
      no_op("ReshapeNoOp", "Reshape"),
      no_op("FlattenNoOp", "Flatten"),
      no_op("SqueezeNoOp", "Squeeze"),
      no_op("ExpandNoOp", "Expand"),
      no_op("ContiguousNoOp", "Contiguous"),
      no_op("CastNoOp", "Cast"),
      no_op("PermuteNoOp", "Permute", identity_permutation),
  };
}

class AlgebraicSimplification final : public Pass {
 public:
  AlgebraicSimplification() : Pass(kAlgebraicSimplificationName) {
    for (Rule& rule : rules()) {
      const char* root_op = rule.root_op;
      passes_.push_back({std::make_shared<RulePass>(std::move(rule)), root_op});
    }
  }

  void Prepare() override {
    for (const Entry& e : passes_) e.pass->Prepare();
  }

  bool Run(const FuncGraphPtr& graph) override {
    KILN_CHECK_VALUE(graph != nullptr) << "pass '" << name() << "': Run got a null graph";
    bool changed = false;
    for (int round = 0; round < kMaxRounds; ++round) {
      // The rules make no node of an op that was not in the graph (AbsNeg makes an Abs, from an
      // Abs), so what is present at the start of a round is all a rule can match in it.
      const std::vector<uint8_t> present = present_root_ops(*graph);
      bool round_changed = false;
      for (size_t i = 0; i < passes_.size(); ++i) {
        if (present[i]) round_changed = passes_[i].pass->Run(graph) || round_changed;
      }
      changed = changed || round_changed;
      if (!round_changed) break;
    }
    return changed;
  }

 private:
  struct Entry {
    std::shared_ptr<RulePass> pass;
    std::string root_op;
  };

  // Per rule, whether the graph has a node of its root op.
  std::vector<uint8_t> present_root_ops(const FuncGraph& graph) const {
    std::vector<uint8_t> present(passes_.size(), 0);
    size_t missing = passes_.size();
    for (const NodePtr& n : detail::IrAccess::slots(graph)) {
      if (n == nullptr || !n->is_cnode()) continue;
      const std::string& op = cnode(n).primitive()->name();
      for (size_t i = 0; i < passes_.size(); ++i) {
        if (!present[i] && passes_[i].root_op == op) {
          present[i] = 1;
          --missing;
        }
      }
      if (missing == 0) break;
    }
    return present;
  }

  std::vector<Entry> passes_;
};

}  // namespace

PassPtr make_algebraic_simplification() { return std::make_shared<AlgebraicSimplification>(); }

}  // namespace kiln::pass
