// PatternToPatternPass: matching a source pattern and rewriting it to the destination pattern,
// driven by a worklist to a fixpoint (see kiln/pass.h for the contract).
#include <algorithm>
#include <deque>

#include "ir/ir_access.h"
#include "pass/pattern_definition.h"

namespace kiln {

using Kind = PatternDefinition::Kind;

namespace {

// Node visits per run are capped: a node is visited first as a candidate and again each time a
// rewrite changes what it could match (its inputs); past the cap it is left alone.
constexpr uint8_t kMaxVisits = 8;
// A pass whose rewrites keep matching their own results never reaches a fixpoint; stop it.
constexpr size_t kMaxRewritesPerNode = 16;
// Refusal reasons kept per run (all are counted).
constexpr size_t kMaxReasons = 8;

bool is_numeric(const AttrValue& v) {
  return std::holds_alternative<int64_t>(v) || std::holds_alternative<double>(v) ||
         std::holds_alternative<Scalar>(v);
}

Scalar numeric(const AttrValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::get<Scalar>(v);
}

// A pattern primitive's attributes must all be present on the node with equal values; numbers
// compare by value (a pattern's 1 matches an attribute stored as 1.0), integers exactly.
bool attrs_match(const Primitive& pattern, const Primitive& node) {
  if (pattern.attrs().items().empty()) return true;
  const Attrs& have = node.is_builtin() ? node.attrs() : node.normalized_attrs();
  for (const auto& [name, want] : pattern.attrs().items()) {
    const AttrValue* got = have.find(name);
    if (got == nullptr) return false;
    if (*got == want) continue;
    if (!is_numeric(*got) || !is_numeric(want) || !same_value(numeric(*got), numeric(want))) {
      return false;
    }
  }
  return true;
}

const NodePtr& shared(const FuncGraph& g, const Node* n) {
  return detail::IrAccess::slots(g)[detail::IrAccess::slot(*n)];
}

}  // namespace

// Binds pattern slots to graph nodes. No backtracking is needed: a CNode's inputs map to its
// pattern inputs in one way (a seq var takes what the fixed inputs leave).
struct PatternMatcher {
  const PatternDefinition& def;
  PatternMap::Impl& m;

  static PatternMap::Impl& impl(PatternMap& map) { return *map.impl_; }

  bool match(int slot, const NodePtr& node) {
    const auto s = static_cast<size_t>(slot);
    if (m.bound[s]) return m.nodes[s] == node;
    const PatternDefinition::Element& e = def.at(slot);
    if (e.kind == Kind::kCNode && !match_cnode(e, node)) return false;
    if (e.cond && !e.cond(node)) return false;
    m.nodes[s] = node;
    m.bound[s] = 1;
    return true;
  }

  bool match_cnode(const PatternDefinition::Element& e, const NodePtr& node) {
    if (!node->is_cnode()) return false;
    const auto& c = static_cast<const CNode&>(*node);
    if (c.primitive()->name() != e.primitive->name()) return false;
    if (!attrs_match(*e.primitive, *c.primitive())) return false;
    const size_t n = c.num_inputs();
    const size_t k = e.inputs.size();
    const bool has_seq = e.seq_position >= 0;
    if (has_seq ? n + 1 < k : n != k) return false;
    const size_t seq_length = has_seq ? n + 1 - k : 0;
    for (size_t j = 0; j < k; ++j) {
      const int in = e.inputs[j];
      if (static_cast<int>(j) == e.seq_position) {
        if (!match_seq(in, c, j, seq_length)) return false;
        continue;
      }
      const size_t index = has_seq && static_cast<int>(j) > e.seq_position ? j + seq_length - 1 : j;
      if (!match(in, c.input(index))) return false;
    }
    return true;
  }

  bool match_seq(int slot, const CNode& c, size_t first, size_t length) {
    const PatternDefinition::Element& e = def.at(slot);
    std::vector<NodePtr>& seq = m.seqs[static_cast<size_t>(slot)];
    seq.assign(c.inputs().begin() + first, c.inputs().begin() + first + length);
    if (e.cond) {
      for (const NodePtr& n : seq) {
        if (!e.cond(n)) return false;
      }
    }
    m.bound[static_cast<size_t>(slot)] = 1;
    return true;
  }
};

PatternToPatternPass::PatternToPatternPass(std::string name) : Pass(std::move(name)) {}
PatternToPatternPass::~PatternToPatternPass() = default;

bool PatternToPatternPass::CheckMatchedDAG(const PatternMap&, const FuncGraphPtr&,
                                           const NodePtr&) const {
  return true;
}

void PatternToPatternPass::Prepare() {
  std::call_once(prepared_, [this] {
    auto def = std::make_unique<PatternDefinition>();
    def->pass_name = name();
    SrcPattern src(def.get());
    DstPattern dst(def.get());
    // A plugin's definitions may throw any std::exception; it becomes a KilnError naming the pass.
    detail::with_error_context(
        [&] {
          DefineSrcPattern(&src);
          def->num_src = def->elements.size();
          DefineDstPattern(&dst);
        },
        [&] { return "in pass '" + name() + "' defining its patterns"; });
    def->check();
    definition_ = std::move(def);
  });
  // A failed Prepare leaves the flag unset (call_once rethrows), so every later call fails too.
  KILN_ASSERT(definition_ != nullptr) << "pass '" << name() << "' is not prepared";
}

namespace {

// One run of a pattern pass over one graph.
class Rewriter {
 public:
  Rewriter(const PatternToPatternPass& pass, const PatternDefinition& def,
           const FuncGraphPtr& graph)
      : pass_(pass), def_(def), graph_(graph), map_(), m_(PatternMatcher::impl(map_)), matcher_{def, m_} {
    m_.reset(def);
  }

  bool run() {
    const std::string& root_op = def_.at(def_.src_root).primitive->name();
    for (Node* n : detail::topo_order(*graph_)) {
      if (n->is_cnode() && static_cast<CNode*>(n)->primitive()->name() == root_op) {
        work_.push_back(shared(*graph_, n));
      }
    }
    const size_t max_rewrites = kMaxRewritesPerNode * (graph_->num_nodes() + 1);
    while (!work_.empty()) {
      NodePtr node = std::move(work_.front());
      work_.pop_front();
      if (node->graph() != graph_.get() || !visit(*node)) continue;
      std::fill(m_.bound.begin(), m_.bound.end(), 0);
      if (!matcher_.match(def_.src_root, node)) continue;
      if (!pass_.CheckMatchedDAG(map_, graph_, node)) {
        refuse(node, "CheckMatchedDAG returned false");
        continue;
      }
      if (!rewrite(node, root_op)) continue;
      KILN_CHECK_VALUE(++rewrites_ <= max_rewrites)
          << "pass '" << pass_.name() << "' did not reach a fixpoint: " << rewrites_
          << " rewrites on graph \"" << graph_->name() << "\" (does a rewrite's result match "
          << "the source pattern again?)";
    }
    return rewrites_ > 0;
  }

  size_t rewrites() const { return rewrites_; }
  size_t refusals() const { return refusals_; }
  const std::vector<std::string>& reasons() const { return reasons_; }

 private:
  bool visit(const Node& n) {
    const uint64_t id = n.id();
    if (id >= visits_.size()) visits_.resize(std::max<uint64_t>(id + 1, graph_->next_id()), 0);
    if (visits_[id] >= kMaxVisits) return false;
    ++visits_[id];
    return true;
  }

  void refuse(const NodePtr& root, const std::string& why) {
    ++refusals_;
    if (reasons_.size() < kMaxReasons) {
      reasons_.push_back("pass '" + pass_.name() + "' refused to rewrite " + root->debug_string() +
                         ": " + why);
    }
  }

  // Makes the destination nodes; false when one cannot be inferred or a callback declines.
  bool build_destination(const NodePtr& root) {
    created_.clear();
    for (size_t s = def_.num_src; s < def_.elements.size(); ++s) {
      const PatternDefinition::Element& e = def_.elements[s];
      NodePtr made;
      try {
        if (e.kind == Kind::kDstValue) {
          made = graph_->add_value(e.build_value(map_));
          created_.push_back(made);
        } else {
          inputs_.clear();
          for (int in : e.inputs) {
            if (def_.at(in).kind == Kind::kSeqVar) {
              const auto& seq = m_.seqs[static_cast<size_t>(in)];
              inputs_.insert(inputs_.end(), seq.begin(), seq.end());
            } else {
              inputs_.push_back(m_.nodes[static_cast<size_t>(in)]);
            }
          }
          CNodePtr node;
          try {
            node = graph_->add_cnode(
                std::make_shared<Primitive>(e.primitive->name(), e.primitive->attrs()), inputs_);
          } catch (const Error& error) {
            refuse(root, "destination node '" + e.name + "' cannot be inferred: " + error.what());
            return false;
          }
          created_.push_back(node);
          made = e.build_cnode ? e.build_cnode(map_, node) : node;
          if (made == nullptr) {
            refuse(root, "the BuildCNodeFunc of destination node '" + e.name + "' returned null");
            return false;
          }
        }
      } catch (Error& error) {
        error.add_context("in pass '" + pass_.name() + "' building destination node '" + e.name +
                          "' for " + root->debug_string());
        throw;
      }
      KILN_CHECK_VALUE(made->graph() == graph_.get())
          << "pass '" << pass_.name() << "': destination node '" << e.name
          << "' was built as a node of another graph (or an erased one): " << made->debug_string();
      m_.nodes[s] = std::move(made);
      m_.bound[s] = 1;
    }
    return true;
  }

  // The nodes this rewrite made that the destination reaches, newest first.
  std::vector<NodePtr> made_nodes(uint64_t first_new) const {
    std::vector<NodePtr> made = created_;
    for (size_t s = def_.num_src; s < def_.elements.size(); ++s) {
      const NodePtr& n = m_.nodes[s];
      if (m_.bound[s] && n->id() >= first_new && std::find(made.begin(), made.end(), n) == made.end()) {
        made.push_back(n);
      }
    }
    for (size_t i = 0; i < made.size(); ++i) {  // grows while it is walked
      if (!made[i]->is_cnode()) continue;
      for (const NodePtr& in : static_cast<const CNode&>(*made[i]).inputs()) {
        if (in->id() >= first_new && std::find(made.begin(), made.end(), in) == made.end()) {
          made.push_back(in);
        }
      }
    }
    std::sort(made.begin(), made.end(),
              [](const NodePtr& a, const NodePtr& b) { return a->id() > b->id(); });
    return made;
  }

  void erase_unused(const std::vector<NodePtr>& nodes) {
    for (const NodePtr& n : nodes) {
      if (n->graph() == graph_.get() && n->users().empty() && n != graph_->return_node()) {
        graph_->erase(n);
      }
    }
  }

  bool is_source_bound(const Node* n) const {
    for (size_t s = 0; s < def_.num_src; ++s) {
      if (m_.bound[s] && m_.nodes[s].get() == n) return true;
    }
    return false;
  }

  // Whether `from` depends on `target` (a backward search; only for nodes a callback brought in,
  // which the match does not vouch for).
  bool depends_on(const NodePtr& from, const Node* target) const {
    std::vector<const Node*> stack{from.get()};
    std::vector<const Node*> seen;
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (n == target) return true;
      if (!n->is_cnode() || std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
      seen.push_back(n);
      for (const NodePtr& in : static_cast<const CNode*>(n)->inputs()) stack.push_back(in.get());
    }
    return false;
  }

  // A rewrite makes a cycle when the new nodes use the replaced root or something computed from
  // it. Source-bound nodes are the root's ancestors, so only other old nodes need a search.
  bool makes_cycle(const NodePtr& old_root, const NodePtr& new_root,
                   const std::vector<NodePtr>& made, uint64_t first_new) const {
    std::vector<NodePtr> frontier;
    if (new_root->id() < first_new) frontier.push_back(new_root);
    for (const NodePtr& n : made) {
      if (!n->is_cnode()) continue;
      for (const NodePtr& in : static_cast<const CNode&>(*n).inputs()) {
        if (in->id() < first_new) frontier.push_back(in);
      }
    }
    for (const NodePtr& f : frontier) {
      if (f == old_root) return true;
      if (!is_source_bound(f.get()) && depends_on(f, old_root.get())) return true;
    }
    return false;
  }

  bool rewrite(const NodePtr& old_root, const std::string& root_op) {
    const uint64_t first_new = graph_->next_id();
    const bool built = build_destination(old_root);
    const std::vector<NodePtr> made = made_nodes(first_new);
    const NodePtr new_root = built ? m_.nodes[static_cast<size_t>(def_.dst_root)] : nullptr;
    std::string refusal;
    if (!built || new_root == old_root) {
      // refused while building (counted there), or a callback gave back the root: no change
    } else if (new_root->abstract() != old_root->abstract()) {
      refusal = "the new root " + new_root->debug_string() + " is " + new_root->abstract().str() +
                " but the replaced root is " + old_root->abstract().str();
    } else if (makes_cycle(old_root, new_root, made, first_new)) {
      refusal = "the new root " + new_root->debug_string() + " would depend on the node it replaces";
    } else {
      apply(old_root, new_root, made, root_op);
      return true;
    }
    if (!refusal.empty()) refuse(old_root, refusal);
    erase_unused(made);
    return false;
  }

  void apply(const NodePtr& old_root, const NodePtr& new_root, const std::vector<NodePtr>& made,
             const std::string& root_op) {
    // The users of the old root now use the new one: they, and their users up to the pattern's
    // depth, may match now.
    level_.clear();
    for (const Use& use : old_root->users()) level_.push_back(use.user);
    graph_->replace_all_uses_with(old_root, new_root);
    for (int d = 1; d < def_.depth && !level_.empty(); ++d) {
      next_level_.clear();
      for (const CNode* user : level_) {
        if (user == graph_->return_node().get()) continue;
        if (user->primitive()->name() == root_op) work_.push_back(shared(*graph_, user));
        for (const Use& use : user->users()) next_level_.push_back(use.user);
      }
      level_.swap(next_level_);
    }
    for (const NodePtr& n : made) {
      if (n->is_cnode() && static_cast<const CNode&>(*n).primitive()->name() == root_op) {
        work_.push_back(n);
      }
    }
    // Matched source nodes the new root made unused go, users before their inputs.
    for (int s = def_.src_root; s >= 0; --s) {
      const auto slot = static_cast<size_t>(s);
      if (def_.at(s).kind != Kind::kCNode) continue;
      const NodePtr& n = m_.nodes[slot];
      if (n->graph() == graph_.get() && n->users().empty() && n != new_root) graph_->erase(n);
    }
  }

  const PatternToPatternPass& pass_;
  const PatternDefinition& def_;
  const FuncGraphPtr& graph_;
  PatternMap map_;
  PatternMap::Impl& m_;
  PatternMatcher matcher_;
  std::deque<NodePtr> work_;
  std::vector<uint8_t> visits_;
  std::vector<NodePtr> inputs_;
  std::vector<NodePtr> created_;  // by the rewrite in progress, in creation order
  std::vector<CNode*> level_;
  std::vector<CNode*> next_level_;
  size_t rewrites_ = 0;
  size_t refusals_ = 0;
  std::vector<std::string> reasons_;
};

}  // namespace

bool PatternToPatternPass::Run(const FuncGraphPtr& graph) {
  KILN_CHECK_VALUE(graph != nullptr) << "pass '" << name() << "': Run got a null graph";
  Prepare();
  Rewriter rewriter(*this, *definition_, graph);
  const bool changed = rewriter.run();
  record_matches(rewriter.rewrites());
  for (const std::string& reason : rewriter.reasons()) record_refusal(reason);
  for (size_t i = rewriter.reasons().size(); i < rewriter.refusals(); ++i) record_refusal({});
  return changed;
}

}  // namespace kiln
