// note_view, view_root and ViewWrite: autograd's side of in-place writes through views.
//
// Note [Writes through views]
// A recorded view op's result V keeps the op's input P alive (AutogradMeta::view_parent, as
// PyTorch's `_base`), and P lists its views weakly (views). Up the chain of parents that share
// V's memory (a view op that had to copy, reshape of a transposed tensor, starts a chain of its
// own) lies V's root R, the tensor whose memory V views, normally an op's contiguous result. An
// in-place write into V changes R's values, and those of R's other views; one into R its views'.
// Their histories must follow, as PyTorch's CopySlices makes them: after a write into V (whose own
// history has moved on to the write), R's history becomes AsStridedScatter(R before, V), R with
// V's elements replaced, and then every live view W of R that shares its memory, V included,
// AsStrided(R); after a write into R, each such W AsStrided(R). So the gradient of a later use of
// V or W flows through R, as in PyTorch (hooks on R see it). The nodes are made directly, with
// those ops' own gradient rules: no kernel runs, the memory already holds the values. Views'
// layouts are read over R's row-major element sequence (AsStrided's attributes), so R must be
// contiguous; a write into a view of a leaf that requires grad is refused, as in PyTorch. Which
// tensors share memory is decided at the write (their storages, waiting for their metadata), so
// it never depends on how far the pipeline has got.
#include "autograd/view_writes.h"

#include <algorithm>
#include <deque>

namespace kiln::autograd {
namespace {

bool shares_memory(const Tensor& a, const Tensor& b) {
  return a.storage() == b.storage();  // (waits for pending tensors' metadata)
}

// Whether some element of `t` is another's memory too (unfold's windows, an expand): its write
// has no single value per element, and AsStridedScatter's gradient cannot put it back.
bool overlaps_itself(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of the dims of size > 1
  for (int64_t d = 0; d < t.ndim(); ++d) {
    if (t.shape()[d] > 1) dims.emplace_back(t.strides()[d], t.shape()[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // the furthest element the dims so far reach, past the first
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) return true;
    reach += stride * (size - 1);
  }
  return false;
}

// `view`'s elements as AsStrided's attributes over contiguous `over`'s element sequence.
Attrs layout_in(const Tensor& view, const Tensor& over) {
  return {{"size", std::vector<int64_t>(view.shape().begin(), view.shape().end())},
          {"stride", std::vector<int64_t>(view.strides().begin(), view.strides().end())},
          {"offset", view.storage_offset() - over.storage_offset()}};
}

// The live views of `t` (and theirs) that share `root`'s memory, into `out`.
void collect_views(const Tensor& t, const Tensor& root,
                   std::vector<std::shared_ptr<TensorImpl>>& out) {
  const AutogradMeta* meta = t.impl()->autograd.get();
  if (meta == nullptr) return;
  for (const std::weak_ptr<TensorImpl>& weak : meta->views) {
    std::shared_ptr<TensorImpl> view = weak.lock();
    if (view == nullptr || !shares_memory(Tensor(view), root)) continue;  // (a copy's are its own)
    collect_views(Tensor(view), root, out);
    out.push_back(std::move(view));
  }
}

}  // namespace

// The views this thread noted while their ops were still in the pipeline, in the order it made
// them (the order the pipeline plans them): decide_planned_views drops the parent of each that
// turned out a copy. Only this thread writes their view_parent.
thread_local std::deque<std::weak_ptr<TensorImpl>> t_undecided_views;

void decide_planned_views() {
  while (!t_undecided_views.empty()) {
    const std::shared_ptr<TensorImpl> view = t_undecided_views.front().lock();
    const uint64_t pending = view == nullptr ? 0 : view->pending.load(std::memory_order_acquire);
    if (pending != 0 && pending != TensorImpl::kFailedMetadata) return;  // not planned yet
    t_undecided_views.pop_front();
    if (view == nullptr || pending != 0) continue;
    AutogradMeta& meta = *view->autograd;
    if (meta.view_parent == nullptr) continue;
    const Tensor parent(meta.view_parent);
    if (!parent.is_pending() && parent.impl()->storage != view->storage) meta.view_parent.reset();
  }
}

void note_view(const Tensor& view, const Tensor& input) {
  // A result already planned that is a copy views nothing: keep no parent alive for it.
  if (!view.is_pending() && !input.is_pending() && !shares_memory(view, input)) return;
  if (view.is_pending()) t_undecided_views.push_back(view.impl_ptr());
  std::vector<std::weak_ptr<TensorImpl>>& views = meta_of(input).views;
  views.erase(std::remove_if(views.begin(), views.end(),
                             [](const std::weak_ptr<TensorImpl>& v) { return v.expired(); }),
              views.end());
  views.push_back(view.impl_ptr());
  meta_of(view).view_parent = input.impl_ptr();
}

void record_strided_view(const Tensor& view, const Tensor& base, const Tensor& layout,
                         const Tensor& over) {
  static const OpDefPtr as_strided = OpRegistry::Instance().get("AsStrided");
  rebase_history(
      view,
      make_op_node(as_strided, {base.alias()}, {}, {view.alias()},
                   as_strided->normalize_attrs(layout_in(layout, over)), {gradient_edge(base)}),
      0);
}

bool made_by_a_view_op(const Tensor& t) {
  const AutogradMeta* meta = t.impl()->autograd.get();
  return meta != nullptr && meta->view_parent != nullptr;
}

Tensor view_root(const Tensor& t) {
  Tensor root = t;
  for (;;) {
    const AutogradMeta* meta = root.impl()->autograd.get();
    if (meta == nullptr || meta->view_parent == nullptr) return root;
    const Tensor parent(meta->view_parent);
    if (!shares_memory(parent, t)) return root;
    root = parent;
  }
}

ViewWrite ViewWrite::plan(const OpDef& op, const Tensor& target) {
  ViewWrite write;
  const Tensor root = view_root(target);
  if (!root.is_same(target)) write.root_ = root.impl_ptr();
  collect_views(root, root, write.views_);
  if (write.root_ == nullptr && write.views_.empty()) return write;
  KILN_CHECK_VALUE(!overlaps_itself(target))
      << op.name() << " writes into a view whose elements overlap in memory (shape "
      << shape_str(target.shape()) << ", strides " << shape_str(target.strides())
      << ": unfold's windows, as_strided), which autograd cannot track; write into a clone()";
  KILN_CHECK_VALUE(!requires_grad(root) || !is_leaf(root))
      << op.name() << " writes into a view of a leaf tensor that requires grad (x[i], x.T, "
      << "reshape, ...), which autograd cannot track. Run an update of a parameter under "
      << "no_grad, or write into a clone() of it";
  KILN_CHECK_VALUE(root.is_contiguous())
      << op.name() << " writes into a " << type_str(target) << " tensor that shares its memory "
      << "with views autograd tracks, of a tensor that is not contiguous (strides "
      << shape_str(root.strides()) << "), whose layout autograd cannot follow. Use the "
      << "out-of-place form (y = y + b), or write into a contiguous() copy";
  if (write.root_ != nullptr) write.root_before_ = gradient_edge(root);
  return write;
}

void ViewWrite::rebase_after(const Tensor& target) const {
  static const OpDefPtr scatter = OpRegistry::Instance().get("AsStridedScatter");
  const Tensor root = root_ != nullptr ? Tensor(root_) : target;
  if (root_ != nullptr) {
    // (The root's values before the write are gone: the rule reads only their shape.)
    rebase_history(
        root,
        make_op_node(scatter, {root.alias(), target.alias()}, {true, false}, {root.alias()},
                     layout_in(target, root), {root_before_, gradient_edge(target)}),
        0);
  }
  for (const std::shared_ptr<TensorImpl>& view : views_) {
    record_strided_view(Tensor(view), root, Tensor(view), root);
  }
}

}  // namespace kiln::autograd
