#include "kiln/ir/node_list.h"

#include <new>

#include "kiln/error.h"
#include "kiln/ir/node.h"

namespace kiln {

void InputList::assign(NodeSpan nodes) {
  reset();
  const size_t n = nodes.size();
  KILN_CHECK_VALUE(n < UINT32_MAX) << "too many inputs: " << n;
  if (n > kInline) {
    // One block: the nodes, then their use positions.
    void* block = ::operator new(n * (sizeof(NodePtr) + sizeof(uint32_t)));
    nodes_ = static_cast<NodePtr*>(block);
    use_pos_ = reinterpret_cast<uint32_t*>(nodes_ + n);
  }
  for (size_t i = 0; i < n; ++i) new (nodes_ + i) NodePtr(nodes[i]);
  size_ = static_cast<uint32_t>(n);
}

void InputList::reset() {
  for (size_t i = 0; i < size_; ++i) nodes_[i].~NodePtr();
  if (nodes_ != inline_nodes()) {
    ::operator delete(nodes_);
    nodes_ = inline_nodes();
    use_pos_ = inline_pos_;
  }
  size_ = 0;
}

}  // namespace kiln
