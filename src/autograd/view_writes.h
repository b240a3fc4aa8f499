// Writes through views autograd tracks (Note [Writes through views] in view_writes.cc): which
// tensors a recorded view op made of which, and how an in-place write into one moves the others'
// histories on. Private to src/autograd/.
#pragma once

#include <memory>
#include <vector>

#include "autograd/nodes.h"

namespace kiln::autograd {

/// Notes `view`, a result of a recorded view op (kTraitView) on `input`, as a view of it (unless
/// the op is known to have copied).
void note_view(const Tensor& view, const Tensor& input);
/// Lets go of the parents of this thread's noted views that their ops, planned since, made as
/// copies (a view op that had to copy views nothing, and must not keep its input alive).
void decide_planned_views();

/// Makes `view`'s history an AsStrided node on `base`, recorded without running one (view is
/// already the view): its attributes are `layout`'s shape, strides and offset counted over
/// `over`'s elements in row-major order (`over` contiguous: base itself, or a stand-in of base's
/// shape).
void record_strided_view(const Tensor& view, const Tensor& base, const Tensor& layout,
                         const Tensor& over);

/// Whether a recorded view op made `t` (a view, or a copy a view op had to make).
bool made_by_a_view_op(const Tensor& t);

/// The tensor whose memory `t` views: its furthest view_parent up a chain of recorded views that
/// share t's memory; t itself when it views none.
Tensor view_root(const Tensor& t);

/// What an in-place write into `target` changes besides it: when target is a view, its root
/// (view_root), and the root's views that share its memory (target among them), live.
class ViewWrite {
 public:
  /// Checks that autograd can follow a write into `target` by `op` (before it is made): kValue for
  /// a view of a leaf that requires grad, or views of a root that is not contiguous.
  static ViewWrite plan(const OpDef& op, const Tensor& target);
  /// After the write, with target's own history moved on: a view's root's history becomes
  /// AsStridedScatter(root before, target), and each view's (target's too) AsStrided(root), as
  /// PyTorch's CopySlices.
  void rebase_after(const Tensor& target) const;
  /// Whether target is a view, whose root's history the write moves on.
  bool into_a_view() const { return root_ != nullptr; }

 private:
  std::shared_ptr<TensorImpl> root_;                // target's root when target is a view
  Node::Edge root_before_;                          // the root's history before the write
  std::vector<std::shared_ptr<TensorImpl>> views_;  // the root's live views sharing its memory
};

}  // namespace kiln::autograd
