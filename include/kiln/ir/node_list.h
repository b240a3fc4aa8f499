// Lists of graph nodes: NodeSpan (a non-owning view, for arguments) and InputList (a CNode's
// inputs, two of them stored inline), plus the IR's forward declarations and pointer aliases.
//
//   g->add_cnode("Add", {x, y});              // the braced list becomes a NodeSpan
//   for (const kiln::NodePtr& in : cnode->inputs()) ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "kiln/export.h"

namespace kiln {

class FuncGraph;
class Node;
class CNode;
class Parameter;
class ValueNode;
class Primitive;
using FuncGraphPtr = std::shared_ptr<FuncGraph>;
using NodePtr = std::shared_ptr<Node>;
using CNodePtr = std::shared_ptr<CNode>;
using ParameterPtr = std::shared_ptr<Parameter>;
using ValueNodePtr = std::shared_ptr<ValueNode>;
using PrimitivePtr = std::shared_ptr<Primitive>;

namespace detail {
struct IrAccess;
/// Lets only FuncGraph construct nodes (their constructors are public for std::make_shared).
class NodeKey {
  NodeKey() = default;
  friend class kiln::FuncGraph;
  friend struct IrAccess;
};
}  // namespace detail

/// A view of a list of nodes, for arguments: a std::vector, a braced list ({x, y}) or an
/// InputList. It does not own the nodes; like std::string_view, never keep one.
class NodeSpan {
 public:
  NodeSpan() = default;
  NodeSpan(const NodePtr* data, size_t size) : data_(data), size_(size) {}
  NodeSpan(const std::vector<NodePtr>& nodes)  // NOLINT: implicit, as for std::span
      : data_(nodes.data()), size_(nodes.size()) {}
  // The list's array lives until the end of the full expression that made it: as long as a
  // call's argument needs it.
  NodeSpan(const std::initializer_list<NodePtr>& nodes) : size_(nodes.size()) {  // NOLINT
    data_ = nodes.begin();
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const NodePtr& operator[](size_t i) const { return data_[i]; }
  const NodePtr* begin() const { return data_; }
  const NodePtr* end() const { return data_ + size_; }

 private:
  const NodePtr* data_ = nullptr;
  size_t size_ = 0;
};

/// The inputs of a CNode: a read-only array of NodePtr (indexable, iterable). Up to two live
/// inside the node, so most nodes allocate nothing for them. Next to each input it keeps the
/// position of the matching use in that input's use list, which makes unlinking O(1).
class KILN_API InputList {
 public:
  InputList() = default;
  InputList(const InputList&) = delete;
  InputList& operator=(const InputList&) = delete;
  ~InputList() { reset(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const NodePtr& operator[](size_t i) const { return nodes_[i]; }
  const NodePtr* begin() const { return nodes_; }
  const NodePtr* end() const { return nodes_ + size_; }
  const NodePtr& front() const { return nodes_[0]; }
  const NodePtr& back() const { return nodes_[size_ - 1]; }
  std::vector<NodePtr> to_vector() const { return std::vector<NodePtr>(begin(), end()); }
  operator NodeSpan() const { return NodeSpan(nodes_, size_); }  // NOLINT

 private:
  friend class CNode;
  friend class FuncGraph;
  friend struct detail::IrAccess;
  static constexpr size_t kInline = 2;
  /// Copies `nodes`; use positions are left for the caller to set.
  void assign(NodeSpan nodes);
  void reset();

  NodePtr* nodes_ = inline_nodes();
  uint32_t* use_pos_ = inline_pos_;
  uint32_t size_ = 0;
  uint32_t inline_pos_[kInline];
  alignas(NodePtr) unsigned char inline_[kInline * sizeof(NodePtr)];
  NodePtr* inline_nodes() { return reinterpret_cast<NodePtr*>(inline_); }
};

}  // namespace kiln
