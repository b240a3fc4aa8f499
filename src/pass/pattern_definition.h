// The checked form of a PatternToPatternPass's two patterns, and PatternMap's storage (private to
// libkiln).
//
//   PatternDefinition def;
//   def.pass_name = "AddNegFusionPass";
//   SrcPattern-/DstPattern-calls append to def.src / def.dst ...
//   def.check();          // resolves names to slots; throws kValue naming the pass
//
// Every name gets a *slot*: source nodes take slots 0..src.size()-1 in definition order, the
// destination nodes the slots after them. Matching and rewriting index PatternMap's arrays by slot,
// so a match does no name lookups and no allocations once the arrays have grown.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/pass.h"

namespace kiln {

struct PatternDefinition {
  enum class Kind : uint8_t { kVar, kSeqVar, kCNode, kDstCNode, kDstValue };
  struct Element {
    std::string name;
    Kind kind = Kind::kVar;
    PatternConditionFunc cond;
    PrimitivePtr primitive;               // CNodes
    std::vector<std::string> input_names;  // CNodes, as written
    std::vector<int> inputs;               // CNodes: the inputs' slots (set by check)
    int seq_position = -1;                 // source CNodes: index in `inputs` of a seq var
    BuildCNodeFunc build_cnode;
    BuildValueFunc build_value;
  };

  std::string pass_name;
  std::vector<Element> elements;  // source elements, then destination ones
  size_t num_src = 0;             // set by check
  std::string root_name;          // SetRoot's argument, or empty
  // Set by check():
  std::unordered_map<std::string, int> slots;
  int src_root = -1;
  int dst_root = -1;
  int depth = 1;  // longest path from the source root to a leaf, in CNodes
  // Mistakes found while the patterns were defined (duplicate names), reported by check().
  std::string first_error;

  void add(Element element);
  /// Resolves names and checks both patterns; throws kValue naming the pass.
  void check();
  const Element& at(int slot) const { return elements[static_cast<size_t>(slot)]; }
};

struct PatternMap::Impl {
  const PatternDefinition* definition = nullptr;
  std::vector<NodePtr> nodes;              // by slot
  std::vector<std::vector<NodePtr>> seqs;  // by slot (seq vars only)
  std::vector<uint8_t> bound;              // by slot

  void reset(const PatternDefinition& def) {
    definition = &def;
    nodes.resize(def.elements.size());
    seqs.resize(def.elements.size());
    bound.assign(def.elements.size(), 0);
  }
};

}  // namespace kiln
