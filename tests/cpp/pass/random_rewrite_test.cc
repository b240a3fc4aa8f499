// Random graphs through every built-in pass plus an AddNeg -> Sub pattern pass: each result is
// checked by ir::verify (after every pass) and by running it on the "reference" backend against
// the graph as built: integers exactly, floats with the same sign, NaN-ness and infinity and
// within an ulp (see kUlps: the kernels, not the rewrites, round differently on different
// layouts). Each pass must also be idempotent.
//
// The graphs are small and made to be rewritten: elementwise ops with broadcasting over several
// dtypes, constants that are 0, 1, -0.0 and weak scalars, constants the program still holds
// (which the passes must not read), chains of constants, shared and duplicated subexpressions,
// Add(x, Neg(y)), no-op views and casts, and dead nodes.
//
// kNumGraphs graphs in kShards tests (ctest runs them in parallel; each stays far from the
// per-test timeout). The release build runs 100,000 (36-41 s in one process, measured on the
// two-core machine). Sanitizer builds (AddressSanitizer, ThreadSanitizer; detected from the
// compiler's own macros) run a tenth: under ASan + UBSan at -O1 a shard of 1,000 graphs took
// 6-7 s (ctest -j2), so the full count would add some 11 minutes to `make test`.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../backend/backend_testing.h"
#include "core/dtype_dispatch.h"
#include "kiln/backend.h"
#include "kiln/ir.h"
#include "kiln/pass.h"
#include "kiln/runtime.h"
#include "pass/builtin/builtin_passes.h"
#include "testing.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KILN_RANDOM_REWRITE_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KILN_RANDOM_REWRITE_SANITIZED 1
#endif

namespace kiln {
namespace {

#ifdef KILN_RANDOM_REWRITE_SANITIZED
constexpr int kNumGraphs = 10000;
#else
constexpr int kNumGraphs = 100000;
#endif
constexpr int kShards = 10;

PrimitivePtr prim(const std::string& name) { return std::make_shared<Primitive>(name); }

// The seed example of DESIGN.md, Add(x, Neg(y)) -> Sub(x, y), made exact: the negation must
// happen in the sum's dtype. For an integer y in a float sum the example is wrong although the
// abstracts agree: Neg works on integers, so -0.0 + Neg(0) is -0.0 + 0.0 = +0.0 where
// -0.0 - 0 is -0.0, and Neg(INT32_MIN) wraps to INT32_MIN where Sub subtracts -2^31.
class AddNegFusionPass : public PatternToPatternPass {
 public:
  AddNegFusionPass() : PatternToPatternPass("AddNegFusionPass") {}
  void DefineSrcPattern(SrcPattern* src) override {
    (*src).AddVar("x").AddVar("y")
        .AddCNode("neg", {prim("Neg"), "y"})
        .AddCNode("add", {prim("Add"), "x", "neg"});
  }
  void DefineDstPattern(DstPattern* dst) override {
    (*dst).AddCNode("sub", {prim("Sub"), "x", "y"});
  }
  bool CheckMatchedDAG(const PatternMap& map, const FuncGraphPtr&,
                       const NodePtr& add) const override {
    return map.Get("y")->abstract().dtype() == add->abstract().dtype();
  }
};

// A random graph made to be rewritten (see the file comment). Deterministic in its seed, so two
// builders with one seed make two equal, independent graphs.
class RewriteGraphBuilder {
 public:
  explicit RewriteGraphBuilder(uint32_t seed) : rng_(seed) {}

  FuncGraphPtr build() {
    graph_ = std::make_shared<FuncGraph>("random");
    nodes_.clear();
    const DType main = pick<DType>({DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                    DType::kInt32, DType::kInt64});
    const int num_params = uniform(1, 3);
    for (int i = 0; i < num_params; ++i) {
      dtypes_.push_back(uniform(0, 4) == 0 ? pick<DType>({DType::kFloat32, DType::kInt32,
                                                          DType::kFloat64, DType::kFloat16})
                                           : main);
      nodes_.push_back(graph_->add_parameter(dtypes_.back(), random_shape(),
                                             "p" + std::to_string(i)));
    }
    const int num_ops = uniform(3, 18);
    for (int made = 0, tries = 0; made < num_ops && tries < num_ops * 10; ++tries) {
      if (add_random_node()) ++made;
    }
    std::vector<NodePtr> outputs;
    const int num_outputs = uniform(1, 3);
    const int n = static_cast<int>(nodes_.size());
    for (int i = 0; i < num_outputs; ++i) outputs.push_back(nodes_[uniform(n / 2, n - 1)]);
    graph_->set_outputs(outputs);
    return graph_;
  }

  /// Inputs for the graph's parameters: values around zero, with signed zeros, NaN and
  /// infinities among the floats.
  std::vector<Tensor> inputs() {
    std::vector<Tensor> in;
    for (const ParameterPtr& p : graph_->parameters()) {
      const TensorMeta& meta = p->abstract().tensor();
      Tensor t = Tensor::empty(meta.shape, meta.dtype);
      visit_dtype(meta.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* data = t.data<T>();
        for (int64_t i = 0; i < t.numel(); ++i) data[i] = convert<T>(random_value(meta.dtype));
      });
      in.push_back(t);
    }
    return in;
  }

 private:
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  template <typename T>
  T pick(std::initializer_list<T> items) {
    return *(items.begin() + uniform(0, static_cast<int>(items.size()) - 1));
  }
  template <typename T>
  const T& any_of(const std::vector<T>& items) {
    return items[static_cast<size_t>(uniform(0, static_cast<int>(items.size()) - 1))];
  }
  NodePtr any() { return any_of(nodes_); }
  // Later nodes more often, so that graphs grow deep.
  NodePtr recent() {
    const int n = static_cast<int>(nodes_.size());
    return nodes_[static_cast<size_t>(uniform(std::max(0, n - 4), n - 1))];
  }
  NodePtr operand() { return uniform(0, 1) == 0 ? any() : recent(); }

  Shape random_shape() {
    switch (uniform(0, 4)) {
      case 0: return {};
      case 1: return {3};
      case 2: return {2, 3};
      case 3: return {1, 3};
      default: return {2, 1};
    }
  }

  double random_value(DType dtype) {
    if (!is_floating_point(dtype)) return uniform(-40, 40);
    switch (uniform(0, 9)) {
      case 0: return -0.0;
      case 1: return 0.0;
      case 2: return pick<double>({std::nan(""), std::numeric_limits<double>::infinity(),
                                   -std::numeric_limits<double>::infinity(), 1.0});
      default: return std::uniform_real_distribution<double>(-3, 3)(rng_);
    }
  }

  // A constant: a weak scalar, or a tensor of a parameter's dtype filled with one special value
  // or random values, which only the graph holds or which the program holds too.
  NodePtr constant() {
    if (uniform(0, 2) == 0) {
      return graph_->add_value(pick<Scalar>({Scalar(0.0), Scalar(-0.0), Scalar(1.0),
                                             Scalar(int64_t{0}), Scalar(int64_t{1}), Scalar(2.5),
                                             Scalar(int64_t{-3})}));
    }
    const DType dtype = any_of(dtypes_);
    Tensor t = Tensor::empty(random_shape(), dtype);
    const int fill = uniform(0, 4);
    const double special = pick<double>({0.0, -0.0, 1.0});
    visit_dtype(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* data = t.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        data[i] = convert<T>(fill < 3 ? special : random_value(dtype));
      }
    });
    if (uniform(0, 5) == 0) held_.push_back(t);  // the program keeps it: not frozen
    return graph_->add_value(t);
  }

  NodePtr binary(const char* op, const NodePtr& a, const NodePtr& b) {
    return graph_->add_cnode(op, {a, b});
  }

  std::vector<int64_t> shape_of(const NodePtr& n) {
    const Shape& s = n->abstract().shape();
    return std::vector<int64_t>(s.begin(), s.end());
  }

  // A view or cast that is often a no-op.
  NodePtr view_or_cast(const NodePtr& x) {
    const std::vector<int64_t> shape = shape_of(x);
    const auto rank = static_cast<int64_t>(shape.size());
    switch (uniform(0, 5)) {
      case 0:
        return graph_->add_cnode("Reshape", {x},
                                 {{"shape", uniform(0, 1) ? shape : std::vector<int64_t>{-1}}});
      case 1: {
        const DType dtype = x->abstract().dtype();
        return graph_->add_cnode(
            "Cast", {x}, {{"dtype", uniform(0, 1) ? dtype : pick<DType>({DType::kFloat32,
                                                                          DType::kFloat64,
                                                                          DType::kInt32})}});
      }
      case 2: {
        std::vector<int64_t> dims;
        for (int64_t d = 0; d < rank; ++d) dims.push_back(uniform(0, 1) ? d : d - rank);
        if (rank == 2 && uniform(0, 1)) dims = {1, 0};
        return graph_->add_cnode("Permute", {x}, {{"dims", dims}});
      }
      case 3: {
        std::vector<int64_t> to = shape;
        if (rank == 2 && uniform(0, 1)) to = {2, 3};
        return graph_->add_cnode("Expand", {x}, {{"shape", to}});
      }
      case 4: return graph_->add_cnode("Squeeze", {x});
      default:
        // Not Contiguous of a weak scalar: eagerly it returns that weak scalar itself, while its
        // infer says strong, so the reference backend's result would disagree with the graph's
        // own types before any pass ran (a bug of the op, reported apart).
        return graph_->add_cnode(uniform(0, 1) && !x->abstract().tensor().weak ? "Contiguous"
                                                                               : "Flatten",
                                 {x});
    }
  }

  // Another node like an existing op node: the same primitive (name and attributes) on the same
  // inputs, for CSE.
  NodePtr duplicate() {
    for (int tries = 0; tries < 4; ++tries) {
      const NodePtr n = any();
      if (!n->is_cnode()) continue;
      const auto& c = static_cast<const CNode&>(*n);
      return graph_->add_cnode(
          std::make_shared<Primitive>(c.primitive()->name(), c.primitive()->attrs()),
          c.inputs().to_vector());
    }
    return nullptr;
  }

  // Tries one random node; false when the op's infer refuses its inputs.
  bool add_random_node() {
    try {
      NodePtr made;
      const NodePtr x = operand();
      switch (uniform(0, 13)) {
        case 0:
        case 1: made = constant(); break;
        case 2:
        case 3:
          made = binary(pick<const char*>({"Add", "Sub", "Mul", "Div", "Maximum", "Minimum"}), x,
                        operand());
          break;
        case 4: {  // an identity candidate: x op 0 / 1 / -0.0, either side
          const NodePtr c = constant();
          const char* op = pick<const char*>({"Add", "Sub", "Mul", "Div"});
          made = uniform(0, 1) ? binary(op, x, c) : binary(op, c, x);
          break;
        }
        case 5:
          made = graph_->add_cnode(pick<const char*>({"Neg", "Exp", "Abs"}), {x});
          break;
        case 6: {  // pairs the rules cancel
          const char* inner = pick<const char*>({"Neg", "Abs"});
          const char* outer = pick<const char*>({"Neg", "Abs"});
          made = graph_->add_cnode(outer, {graph_->add_cnode(inner, {x})});
          break;
        }
        case 7: made = binary("Add", x, graph_->add_cnode("Neg", {operand()})); break;
        case 8: made = view_or_cast(x); break;
        case 9:
        case 10: made = duplicate(); break;
        case 11: made = binary(pick<const char*>({"Maximum", "Minimum", "Add"}), x, x); break;
        case 12: {  // a computation on constants only
          made = binary(pick<const char*>({"Add", "Mul", "Sub"}), constant(),
                        graph_->add_cnode("Neg", {constant()}));
          break;
        }
        default:
          made = graph_->add_cnode("ReduceSum", {x});
          break;
      }
      if (made == nullptr) return false;
      nodes_.push_back(made);
      return true;
    } catch (const Error&) {
      return false;
    }
  }

  std::mt19937 rng_;
  FuncGraphPtr graph_;
  std::vector<NodePtr> nodes_;
  std::vector<DType> dtypes_;
  std::vector<Tensor> held_;
};

// How far apart two floats of one dtype are, in units in the last place (adjacent values of the
// dtype are 1 apart; +0 and -0 are 0 apart, their signs are compared separately).
template <typename T>
uint64_t ulps_apart(T a, T b) {
  using Bits = std::conditional_t<sizeof(T) == 2, uint16_t,
                                  std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
  const auto ordered = [](T v) {
    Bits bits;
    std::memcpy(&bits, &v, sizeof bits);
    const Bits sign = Bits(Bits(1) << (8 * sizeof(Bits) - 1));
    return (bits & sign) ? -static_cast<int64_t>(bits & ~sign) : static_cast<int64_t>(bits);
  };
  const int64_t d = ordered(a) - ordered(b);
  return static_cast<uint64_t>(d < 0 ? -d : d);
}

// Floats may differ by this many ulps: a rewrite can change the layout an op reads (removing
// Maximum(v, v) after an Expand hands Exp a broadcast view instead of a contiguous buffer), and
// Kiln's kernels round differently on different layouts (Exp's SIMD and scalar paths differ by
// an ulp). Of the 100,000 graphs, one needs it (seed 43102). Signs (so -0.0 against +0.0),
// NaNs and infinities must match exactly.
constexpr uint64_t kUlps = 1;

// Same dtype and shape; integers and bools equal, floats as above. Returns a description of the
// first difference, or "".
std::string difference(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return "got " + type_str(got) + ", want " + type_str(want);
  }
  const Tensor a = got.contiguous();
  const Tensor b = want.contiguous();
  std::string diff;
  visit_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    for (int64_t i = 0; i < a.numel() && diff.empty(); ++i) {
      const double u = convert<double>(x[i]);
      const double v = convert<double>(y[i]);
      bool same;
      if constexpr (std::is_integral_v<T>) {
        same = x[i] == y[i];
      } else {
        same = std::isnan(u) ? std::isnan(v)
                             : !std::isnan(v) && std::signbit(u) == std::signbit(v) &&
                                   std::isinf(u) == std::isinf(v) &&
                                   ulps_apart(x[i], y[i]) <= kUlps;
      }
      if (!same) {
        char text[160];
        std::snprintf(text, sizeof text, "element %lld: got %.17g%s, want %.17g%s",
                      static_cast<long long>(i), u, std::signbit(u) ? " (sign set)" : "", v,
                      std::signbit(v) ? " (sign set)" : "");
        diff = text;
      }
    }
  });
  return diff;
}

// Runs a pass, then again to check that the second run finds nothing left to do (a kValue
// error naming the pass otherwise, which the test reports with the graph).
class Idempotent final : public Pass {
 public:
  explicit Idempotent(PassPtr inner) : Pass(inner->name()), inner_(std::move(inner)) {}
  void Prepare() override { inner_->Prepare(); }
  bool Run(const FuncGraphPtr& graph) override {
    const bool changed = inner_->Run(graph);
    KILN_CHECK_VALUE(!inner_->Run(graph))
        << "pass '" << name() << "' is not idempotent: its second run changed the graph, to\n"
        << ir::print(*graph);
    return changed;
  }

 private:
  PassPtr inner_;
};

// The built-in passes as the jit runs them, AddNeg -> Sub first; each checked for idempotence,
// and the graph verified after every pass. (The sequence as a whole need not be a fixpoint: CSE
// may merge the two inputs of a Maximum that simplification saw as different.)
PassManager all_passes() {
  PassManager pm;
  const auto add = [&](PassPtr pass, int priority) {
    pm.add(std::make_shared<Idempotent>(std::move(pass)), PassStage::kFrontend, priority);
  };
  add(std::make_shared<AddNegFusionPass>(), -100);
  add(pass::make_constant_folding(), pass::kConstantFoldingPriority);
  add(pass::make_algebraic_simplification(), pass::kAlgebraicSimplificationPriority);
  add(pass::make_common_subexpression_elimination(),
      pass::kCommonSubexpressionEliminationPriority);
  add(pass::make_dead_code_elimination(), pass::kDeadCodeEliminationPriority);
  pm.set_verify(true);
  return pm;
}

class RandomRewrite : public ::testing::TestWithParam<int> {};

// The graph of `seed` as built, for failure messages.
std::string original_text(uint32_t seed) { return ir::print(*RewriteGraphBuilder(seed).build()); }

TEST_P(RandomRewrite, KeepsEveryResult) {
  // The synchronous pipeline: this test checks the passes, and each graph runs some 40 tiny ops,
  // whose cost in the asynchronous modes is mostly thread hand-offs (three times the run time
  // on a busy two-core machine). The passes' own tests run in the suite's mode.
  const runtime::PipelineMode mode = runtime::get_pipeline();
  runtime::set_pipeline(runtime::PipelineMode::kSync);
  const PassManager passes = all_passes();
  const int per_shard = kNumGraphs / kShards;
  size_t changed = 0;
  size_t nodes_before = 0;
  size_t nodes_after = 0;
  for (int k = 0; k < per_shard; ++k) {
    const uint32_t seed = static_cast<uint32_t>(GetParam() * per_shard + k);
    RewriteGraphBuilder builder(seed);
    const FuncGraphPtr graph = builder.build();
    const std::vector<Tensor> inputs = builder.inputs();
    try {
      ir::verify(*graph);
      // Results first; the reference backend keeps no reference to the graph's constants once
      // the graph is cleared, so the passes see them as the builder made them.
      const std::vector<Tensor> want = testing::run_on_reference(graph, inputs);
      nodes_before += graph->num_nodes();
      changed += passes.Run(graph) ? 1 : 0;
      ir::verify(*graph);
      nodes_after += graph->num_nodes();
      const std::vector<Tensor> got = testing::run_on_reference(graph, inputs);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        const std::string diff = difference(got[i], want[i]);
        ASSERT_EQ(diff, "") << "seed " << seed << ", output " << i << "\n"
                            << original_text(seed) << "was rewritten to\n" << ir::print(*graph);
      }
    } catch (const Error& e) {
      FAIL() << "seed " << seed << ": " << e.what() << "\n" << original_text(seed);
    }
  }
  runtime::set_pipeline(mode);
  // The graphs are made to be rewritten: most are.
  EXPECT_GT(changed, static_cast<size_t>(per_shard) * 3 / 4);
  EXPECT_LT(nodes_after, nodes_before);
}

INSTANTIATE_TEST_SUITE_P(Shards, RandomRewrite, ::testing::Range(0, kShards));

}  // namespace
}  // namespace kiln
