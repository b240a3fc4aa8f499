// Writes through views autograd tracks (Note [Writes through views] in view_writes.cc): which
// tensors a recorded view op made of which, and how an in-place write into one moves the others'
// histories on. Private to src/autograd/.
#pragma once

#include <memory>
#include <vector>

#include "autograd/nodes.h"

namespace kiln::autograd {

/// Notes `view`, a result of a recorded view op (kTraitView) on `input`, as a view of input's
/// base (input itself, or its own base while that lives).
void note_view(const Tensor& view, const Tensor& input);

/// The other tensors an in-place write into `target` changes: its base, if it is a view, and the
/// base's views, live and sharing target's memory (a view op that copied made no view).
class ViewWrite {
 public:
  /// Checks that autograd can follow a write into `target` by `op` (before it is made): kValue for
  /// a view of a leaf that requires grad, or of a base that is not contiguous.
  static ViewWrite plan(const OpDef& op, const Tensor& target);
  /// Whether `target` is a view a recorded view op made.
  static bool is_view(const Tensor& target);
  /// After the write, with target's own history moved on: the base's history becomes
  /// AsStridedScatter(base before, target), and each view's AsStrided(base).
  void rebase_after(const Tensor& target) const;

 private:
  std::shared_ptr<TensorImpl> base_;  // target's live base sharing its memory, or null
  Node::Edge base_before_;            // base's history before the write
  std::vector<std::shared_ptr<TensorImpl>> views_;  // the base's (or target's) other live views
};

}  // namespace kiln::autograd
