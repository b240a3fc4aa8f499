// Graph passes: Pass (a rewrite of a whole FuncGraph), the declarative PatternToPatternPass
// (a source pattern rewritten to a destination pattern), PassManager (passes by stage and
// priority, timed and counted) and PassPlugin (passes shipped in a shared library).
//
//   #include <kiln/pass.h>
//   class AddNegFusionPass : public kiln::PatternToPatternPass {
//    public:
//     AddNegFusionPass() : PatternToPatternPass("AddNegFusionPass") {}
//     void DefineSrcPattern(kiln::SrcPattern* src) override {
//       (*src).AddVar("x").AddVar("y")
//           .AddCNode("neg", {std::make_shared<kiln::Primitive>("Neg"), "y"})
//           .AddCNode("add", {std::make_shared<kiln::Primitive>("Add"), "x", "neg"});
//     }
//     void DefineDstPattern(kiln::DstPattern* dst) override {
//       (*dst).AddCNode("sub", {std::make_shared<kiln::Primitive>("Sub"), "x", "y"}, BuildSub);
//     }
//    private:
//     static kiln::NodePtr BuildSub(const kiln::PatternMap&, const kiln::NodePtr& node) {
//       return node;
//     }
//   };
//   class MyPasses : public kiln::PassPlugin { ... CreatePass(name) ... };
//   KILN_EXPORT_PASS_PLUGIN(MyPasses)
//
// Source patterns. Names are defined in order: AddVar(name, cond) matches any node (a parameter,
// a constant or an op) for which `cond` holds; AddSeqVar(name, cond) matches a run of inputs of
// any length (at most one per CNode's input list); AddCNode(name, {primitive, input names...},
// cond) matches an op node whose primitive has that name, whose attributes include every
// attribute the pattern's primitive sets (with equal values; the node's schema defaults count)
// and whose inputs match the named pattern nodes. The last CNode is the root. A name used twice
// must match one node both times (Add(x, x) matches only an addition of a node to itself).
// Constants are matched with conditions (pattern::IsConstant, pattern::IsScalar below).
//
// Destination patterns. AddCNode(name, {primitive, names...}, build) makes a node of `primitive`
// applied to the named nodes (names of the source pattern or of earlier destination nodes); its
// abstract comes from the op's infer. `build`, when given, gets the PatternMap (with the
// destination nodes made so far) and that default node, and returns the node to use (the default
// node, edited or not, or another node it made in the graph). AddValueNode(name, build) adds the
// constant `build` returns. The last node added is the root unless SetRoot names another (a
// source name: the rewrite x * 1 -> x has no new node at all). The root replaces every use of the
// source root; matched nodes left without users are erased, and a matched interior node that
// still has users outside the match stays.
//
// A rewrite is refused (left undone; the pass report counts it with the reason, naming the
// pass) when CheckMatchedDAG returns false, when a new node's inference fails, when the new
// root's abstract differs from the replaced root's (dtype, shape, weakness), or when it would
// make a cycle. Patterns are checked by Prepare(): an unknown primitive or attribute name, a name
// used before it is defined or defined twice, a source pattern without a CNode, a source node that
// the root does not use, or a destination input that names nothing is a kiln::Error (kValue) naming
// the pass. register_custom_pass and PassManager::add call Prepare, so a bad pattern fails there,
// before any graph is compiled.
//
// Matching: an index of the graph's op nodes by primitive name gives the candidate roots; a
// worklist visits them in topological order and, after each rewrite, the nodes it made and their
// users (new matches can appear there), until nothing changes. Each node is visited a bounded
// number of times and a match costs the pattern's size, so a run is linear in the graph (a
// million nodes are fine); a pass whose rewrites keep matching their own results stops with an
// error after 16 rewrites per node of the graph.
//
// Tools: src_pattern() reads a pass's source pattern and instantiate_src_pattern builds it as a
// graph (kiln::verify_pass, kiln/verify_pass.h, runs such instances before and after the rewrite
// to check that it keeps their meaning); make_graph_pattern_pass makes a pass from two graphs
// (Python's kiln.graph.register_pattern traces them).
//
// Thread-safety: a Pass object may run on several graphs at once (PatternToPatternPass keeps no
// per-run state in the object); Prepare is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/abi.h"
#include "kiln/export.h"
#include "kiln/ir.h"

namespace kiln {

/// A rewrite of a whole graph.
class KILN_API Pass {
 public:
  explicit Pass(std::string name);
  Pass(const Pass&) = delete;
  Pass& operator=(const Pass&) = delete;
  virtual ~Pass();

  const std::string& name() const { return name_; }
  /// Rewrites `graph` in place; returns whether it changed. The graph is verified (well formed,
  /// every abstract known) before the first pass; a pass must leave it so.
  virtual bool Run(const FuncGraphPtr& graph) = 0;
  /// Gets the pass ready and checks it, before its first Run (PatternToPatternPass defines and
  /// checks its patterns here). Default: nothing. Called by registration, so errors show early.
  virtual void Prepare();

 protected:
  /// Counts `n` rewrites in the report of the run in progress (PassManager reads it).
  static void record_matches(size_t n = 1);
  /// Counts a rewrite the pass declined in the report of the run in progress, with the reason
  /// (the report keeps the first few; an empty reason is only counted).
  static void record_refusal(const std::string& reason);

 private:
  std::string name_;
};
using PassPtr = std::shared_ptr<Pass>;

/// The nodes a source pattern matched, by pattern name, plus the destination nodes made so far.
class KILN_API PatternMap {
 public:
  PatternMap();
  ~PatternMap();
  PatternMap(const PatternMap&) = delete;
  PatternMap& operator=(const PatternMap&) = delete;

  /// The node matched by a var or CNode named `name` (or made by a destination node); throws
  /// kValue naming the known names when there is none, or when `name` is a seq var.
  const NodePtr& Get(const std::string& name) const;
  /// The nodes matched by the seq var `name` (possibly none); kValue when it is not a seq var.
  const std::vector<NodePtr>& GetSeq(const std::string& name) const;
  /// Whether `name` is bound (a var, seq var, CNode or destination node).
  bool Contains(const std::string& name) const;

  struct Impl;  // libkiln's storage (opaque)

 private:
  friend struct PatternMatcher;
  std::unique_ptr<Impl> impl_;
};

/// A condition on a matched node.
using PatternConditionFunc = std::function<bool(const NodePtr&)>;
/// Makes or edits a destination node; `default_node` is the node the pattern describes.
using BuildCNodeFunc =
    std::function<NodePtr(const PatternMap& map, const NodePtr& default_node)>;
/// Gives a destination constant's value (a weak scalar from Tensor::scalar, or any tensor).
using BuildValueFunc = std::function<Tensor(const PatternMap& map)>;

/// One element of a pattern node's input list: a primitive (first) or an earlier name.
class KILN_API PatternInput {
 public:
  PatternInput(PrimitivePtr primitive);  // NOLINT: implicit, for braced lists
  PatternInput(std::string name);        // NOLINT
  PatternInput(const char* name);        // NOLINT

  bool is_primitive() const { return primitive_ != nullptr; }
  const PrimitivePtr& primitive() const { return primitive_; }
  const std::string& name() const { return name_; }

 private:
  PrimitivePtr primitive_;
  std::string name_;
};

struct PatternDefinition;

/// The nodes a PatternToPatternPass looks for (see the file comment).
class KILN_API SrcPattern {
 public:
  SrcPattern& AddVar(const std::string& name, PatternConditionFunc cond = nullptr);
  SrcPattern& AddSeqVar(const std::string& name, PatternConditionFunc cond = nullptr);
  SrcPattern& AddCNode(const std::string& name, std::initializer_list<PatternInput> inputs,
                       PatternConditionFunc cond = nullptr);
  SrcPattern& AddCNode(const std::string& name, const std::vector<PatternInput>& inputs,
                       PatternConditionFunc cond = nullptr);

 private:
  friend class PatternToPatternPass;
  explicit SrcPattern(PatternDefinition* definition) : definition_(definition) {}
  PatternDefinition* definition_;
};

/// What a PatternToPatternPass puts in the match's place (see the file comment).
class KILN_API DstPattern {
 public:
  DstPattern& AddCNode(const std::string& name, std::initializer_list<PatternInput> inputs,
                       BuildCNodeFunc build = nullptr);
  DstPattern& AddCNode(const std::string& name, const std::vector<PatternInput>& inputs,
                       BuildCNodeFunc build = nullptr);
  DstPattern& AddValueNode(const std::string& name, BuildValueFunc build);
  /// The node that replaces the source root: a destination node or a source name (default: the
  /// last destination node).
  DstPattern& SetRoot(const std::string& name);

 private:
  friend class PatternToPatternPass;
  explicit DstPattern(PatternDefinition* definition) : definition_(definition) {}
  PatternDefinition* definition_;
};

/// One element of a source pattern, as tools read it (PatternToPatternPass::src_pattern,
/// instantiate_src_pattern, kiln::verify_pass).
struct SrcPatternElement {
  enum class Kind : uint8_t { kVar, kSeqVar, kCNode };
  std::string name;
  Kind kind = Kind::kVar;
  PatternConditionFunc cond;   // null when the element has none
  PrimitivePtr primitive;      // CNodes: the op, with the attributes a match requires
  std::vector<size_t> inputs;  // CNodes: indices of earlier elements, in input order
};

/// A pass defined by a source and a destination pattern (see the file comment).
class KILN_API PatternToPatternPass : public Pass {
 public:
  explicit PatternToPatternPass(std::string name);
  ~PatternToPatternPass() override;

  virtual void DefineSrcPattern(SrcPattern* src) = 0;
  virtual void DefineDstPattern(DstPattern* dst) = 0;
  /// Whether a match may be rewritten; `node` is the matched root. Default: always.
  virtual bool CheckMatchedDAG(const PatternMap& map, const FuncGraphPtr& graph,
                               const NodePtr& node) const;

  /// Constants that the condition of the source var `var` accepts, for the instances of the
  /// source pattern that kiln::verify_pass builds (optional; default: none, and verify_pass tries
  /// a parameter and the constants 0, 1, -1, 2, 0.5 and -2). Override it when a var matches only
  /// some other constant.
  virtual std::vector<Tensor> ExampleConstants(const std::string& var) const;

  /// Defines and checks both patterns (once; thread-safe). Throws kValue naming the pass.
  void Prepare() override;
  bool Run(const FuncGraphPtr& graph) override;

  /// The source pattern, element by element in definition order (its last CNode is the root).
  /// Prepares the pass first (throws what Prepare throws).
  std::vector<SrcPatternElement> src_pattern();

 private:
  std::once_flag prepared_;
  std::unique_ptr<PatternDefinition> definition_;
};

/// Gives the nodes an instance of a source pattern uses for a var: one node of `graph` for a var,
/// any number for a seq var.
using PatternVarFunc =
    std::function<std::vector<NodePtr>(FuncGraph& graph, const SrcPatternElement& var)>;

/// Builds the source pattern of `pass` as a graph named `name` whose one output is the root: each
/// var is what `make_var` gives, each CNode its primitive applied to its inputs (abstract from
/// the op's infer). The instance is what the pass matches, unless its CheckMatchedDAG declines.
/// Throws what inference throws (the ops do not accept the vars' dtypes and shapes), kValue when
/// a node fails its pattern condition or make_var gives a var other than one node of `graph`,
/// and what Prepare throws.
KILN_API FuncGraphPtr instantiate_src_pattern(PatternToPatternPass& pass,
                                              const PatternVarFunc& make_var,
                                              const std::string& name = "pattern");

/// Decides whether a match of a graph pattern may be rewritten; gets the nodes matched by the
/// source graph's parameters, in order.
using GraphPatternCheckFunc = std::function<bool(const std::vector<NodePtr>& vars)>;

/// A PatternToPatternPass made from two graphs with the same number of parameters (Python's
/// kiln.graph.register_pattern traces them): `src`'s one output, an op node, and everything it
/// is computed from form the source pattern, `dst`'s output the destination. Parameters become
/// vars, matched by position (parameter i of `dst` is the node that parameter i of `src`
/// matched); constants become vars that match a frozen constant of the same value (a constant of
/// one number v matches one of any dtype and shape whose elements all equal v, integers compared
/// exactly; others an equal one). One that only elementwise ops take, widening none of their
/// operands, matches wherever elementwise ops take it without widening anything; any other only
/// at the pattern's shapes, its own and those of the inputs of the ops that take it (Note
/// [Constants of a graph pattern] in graph_pattern_pass.cc); op nodes become pattern nodes whose
/// attributes, all of them, must match. `check`, when given, may decline a match (CheckMatchedDAG).
/// Throws kValue when a graph has other than one output, `src`'s output is not an op, a parameter
/// of `src` is unused, the parameter counts differ, or a pattern is invalid (see Prepare). The
/// graphs are kept, not copied: do not change them afterwards.
KILN_API std::shared_ptr<PatternToPatternPass> make_graph_pattern_pass(
    std::string name, FuncGraphPtr src, FuncGraphPtr dst, GraphPatternCheckFunc check = nullptr);

/// Conditions for pattern vars.
namespace pattern {
/// A constant (ValueNode).
KILN_API PatternConditionFunc IsConstant();
/// A frozen constant whose every element equals `value` (any dtype, any shape, at least one
/// element). Frozen: a Python number, or a tensor only the graph holds. A tensor the program
/// still holds (a captured weight) never matches, whatever its values now: an in-place update
/// may change them before the next run (Note [Frozen constants] in pass/builtin/builtin_passes.h).
KILN_API PatternConditionFunc IsConstantEqual(double value);
/// A frozen constant (as for IsConstantEqual) with at least one element, each satisfying `pred`
/// (read as a double).
KILN_API PatternConditionFunc IsConstantWhere(std::function<bool(double)> pred);
/// A node whose value is one tensor of `dtype`.
KILN_API PatternConditionFunc HasDType(DType dtype);
/// A node whose value is one tensor of floating-point dtype.
KILN_API PatternConditionFunc IsFloatingPoint();
}  // namespace pattern

/// Where in the jit pipeline a pass runs: `frontend` right after tracing (backend-independent),
/// then `pre_fusion`, `fusion` and `post_fusion` before the backend's Build.
enum class PassStage : uint8_t { kFrontend, kPreFusion, kFusion, kPostFusion };
inline constexpr size_t kNumPassStages = 4;
/// "frontend", "pre_fusion", "fusion", "post_fusion".
KILN_API const char* stage_name(PassStage stage);
/// The stage named `name`; throws kValue listing the stage names when there is none.
KILN_API PassStage parse_stage(const std::string& name);

/// What one pass did in one run.
struct PassRunRecord {
  std::string pass;
  PassStage stage = PassStage::kPreFusion;
  bool changed = false;
  size_t matches = 0;                  // rewrites the pass recorded
  size_t refusals = 0;                 // rewrites it declined
  std::vector<std::string> reasons;    // the first few refusals' reasons
  double seconds = 0;
};

/// What a PassManager run did, pass by pass in run order.
struct KILN_API PassReport {
  std::vector<PassRunRecord> runs;
  /// A table: stage, pass, changed, matches, refusals, milliseconds; then refusal reasons.
  std::string str() const;
};

/// Sees the graph around every pass (the jit's per-pass IR dumps).
class PassObserver {
 public:
  virtual ~PassObserver() = default;
  virtual void before(const Pass& pass, PassStage stage, const FuncGraph& graph) = 0;
  virtual void after(const PassRunRecord& record, const FuncGraph& graph) = 0;
};

/// Passes in stages, run in stage order and within a stage by (priority, order of addition).
class KILN_API PassManager {
 public:
  /// Prepares `pass` (its errors propagate) and adds it.
  void add(PassPtr pass, PassStage stage = PassStage::kPreFusion, int priority = 0);
  /// With `verify`, ir::verify runs after every pass, and a failure names the pass that broke
  /// the graph (debug mode).
  void set_verify(bool verify) { verify_ = verify; }
  bool verify() const { return verify_; }
  size_t size() const { return entries_.size(); }

  /// Runs every pass on `graph`; returns whether any changed it. Appends to *report when given.
  /// A pass's exception propagates with the pass's name and stage as context.
  bool Run(const FuncGraphPtr& graph, PassReport* report = nullptr,
           PassObserver* observer = nullptr) const;

 private:
  struct Entry {
    PassPtr pass;
    PassStage stage;
    int priority;
    size_t order;
  };
  std::vector<Entry> entries_;  // kept sorted by (stage, priority, order)
  bool verify_ = false;
};

/// One registered pass, as PassRegistry::list reports it.
struct PassInfo {
  std::string name;
  std::string backend = "all";  // "all", or the one backend whose jit builds it runs for
  PassStage stage = PassStage::kPreFusion;
  int priority = 0;
  std::string source;  // the plugin's path; "" for a pass registered in-process
  bool builtin = false;  // Kiln's own (jit_level "O0" skips them; they cannot be unregistered)
};

/// The process-wide table of passes the jit runs (registration and lookup; the jit's
/// register_custom_pass in kiln/jit.h checks backend names and loads plugins before adding here).
/// Thread-safe.
class KILN_API PassRegistry {
 public:
  static PassRegistry& Instance();

  /// Prepares `pass` and adds it under info.name (which must equal pass->name()); throws kValue
  /// when the name is taken (by a built-in pass too).
  void add(PassPtr pass, PassInfo info);
  /// Removes a pass; throws kValue for an unknown name (listing the registered ones) or a
  /// built-in pass.
  void remove(const std::string& name);
  /// Every registered pass, in run order: stage, priority, order of registration.
  std::vector<PassInfo> list() const;
  /// The registered pass named `name`; throws kValue, listing the registered names, when there
  /// is none.
  PassPtr get(const std::string& name) const;
  /// The passes that apply to `backend` ("all"'s and its own), built-in ones when `builtins`.
  PassManager manager(const std::string& backend, bool builtins) const;
  /// Changes whenever a pass for `backend` (or for "all") is added or removed.
  uint64_t generation(const std::string& backend) const;
  /// Changes whenever any registration changes (cheap: one atomic load).
  uint64_t generation() const;

 private:
  PassRegistry();
  struct State;
  std::unique_ptr<State> state_;
};

/// A shared library's passes (see KILN_EXPORT_PASS_PLUGIN).
class KILN_API PassPlugin {
 public:
  virtual ~PassPlugin();
  virtual std::string GetPluginName() const = 0;
  virtual std::vector<std::string> GetAvailablePassNames() const = 0;
  /// A new pass named `name`, or null when the plugin has none by that name.
  virtual std::shared_ptr<Pass> CreatePass(const std::string& name) const = 0;
};

/// Loads the pass plugin at `path` (the core's plugin loader: file, ELF, ABI version and kind are
/// checked, each failure a kValue error naming the file) and returns its plugin object. Loading
/// a library again returns the same object.
KILN_API std::shared_ptr<const PassPlugin> load_pass_plugin(const std::string& path);

namespace detail {
/// What a pass plugin's init fills: the plugin object its KILN_EXPORT_PASS_PLUGIN makes.
struct PassPluginHost {
  std::shared_ptr<PassPlugin> plugin;
};
}  // namespace detail

}  // namespace kiln

/// Exports `Class` (a PassPlugin with a default constructor) as the library's pass plugin, stamped
/// with KILN_ABI_VERSION. Once per library.
#define KILN_EXPORT_PASS_PLUGIN(Class)                                                          \
  namespace {                                                                                   \
  void kiln_make_pass_plugin(::kiln::detail::PassPluginHost& host) {                            \
    host.plugin = std::make_shared<Class>();                                                    \
  }                                                                                             \
  int kiln_init_pass_plugin(void* host, KilnPluginReportFn report, void* context) noexcept {    \
    return ::kiln::detail::run_plugin_init<::kiln::detail::PassPluginHost>(                     \
        &kiln_make_pass_plugin, host, report, context);                                         \
  }                                                                                             \
  }                                                                                             \
  KILN_PLUGIN_EXPORT const KilnPluginEntry* kiln_plugin_pass_entry() {                          \
    static const KilnPluginEntry entry{KILN_ABI_VERSION, "pass", &kiln_init_pass_plugin};       \
    return &entry;                                                                              \
  }
