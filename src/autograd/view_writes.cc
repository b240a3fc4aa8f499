// ViewWrite and note_view: autograd's side of in-place writes through views.
//
// Note [Writes through views]
// A recorded view op's result V shares its base B's memory (AutogradMeta::view_base on V, views
// on B; a view of a view has the first view's base). An in-place write into V changes B's values,
// and one into B changes V's: the other tensor's history must follow, as PyTorch's CopySlices
// makes it. After a write into V (whose own history has moved on to the write), B's history
// becomes AsStridedScatter(B before, V): B with V's elements replaced; after a write into B, or
// into V, each other live view W of B becomes AsStrided(B). The nodes are made directly, with
// the ops' own gradient rules: no kernel runs, the memory already holds the values. The views'
// layouts are read over B's row-major element sequence (AsStrided's attributes), so B must be
// contiguous, as the result of an op nearly always is. A write into a view of a leaf that
// requires grad is refused, as in PyTorch. Only tensors that live and share the memory are
// followed: one that died has no history anyone reads, and a view op that copied made no view.
// A queued call may keep a base alive a little longer; it is then followed too, which changes
// nothing anyone reads.
#include "autograd/view_writes.h"

#include <algorithm>

namespace kiln::autograd {
namespace {

// `other` when it lives, is not t, and shares t's memory.
std::shared_ptr<TensorImpl> live_sharing(const std::weak_ptr<TensorImpl>& other, const Tensor& t) {
  std::shared_ptr<TensorImpl> impl = other.lock();
  if (impl == nullptr || impl.get() == t.impl()) return nullptr;
  return Tensor(impl).storage() == t.storage() ? impl : nullptr;  // (metadata: may wait)
}

// `view`'s elements as AsStrided's attributes over contiguous `base`'s element sequence.
Attrs layout_in(const Tensor& view, const Tensor& base) {
  return {{"size", std::vector<int64_t>(view.shape().begin(), view.shape().end())},
          {"stride", std::vector<int64_t>(view.strides().begin(), view.strides().end())},
          {"offset", view.storage_offset() - base.storage_offset()}};
}

}  // namespace

void note_view(const Tensor& view, const Tensor& input) {
  std::shared_ptr<TensorImpl> base = meta_of(input).view_base.lock();
  if (base == nullptr) base = input.impl_ptr();
  std::vector<std::weak_ptr<TensorImpl>>& views = meta_of(Tensor(base)).views;
  views.erase(std::remove_if(views.begin(), views.end(),
                             [](const std::weak_ptr<TensorImpl>& v) { return v.expired(); }),
              views.end());
  views.push_back(view.impl_ptr());
  AutogradMeta& meta = meta_of(view);
  meta.view_base = base;
  meta.is_view = true;
}

bool ViewWrite::is_view(const Tensor& target) {
  const AutogradMeta* meta = target.impl()->autograd.get();
  return meta != nullptr && meta->is_view;
}

ViewWrite ViewWrite::plan(const OpDef& op, const Tensor& target) {
  ViewWrite write;
  const AutogradMeta* meta = target.impl()->autograd.get();
  if (meta == nullptr) return write;
  write.base_ = live_sharing(meta->view_base, target);
  const Tensor root = write.base_ != nullptr ? Tensor(write.base_) : target;
  for (const std::weak_ptr<TensorImpl>& view : meta_of(root).views) {
    if (std::shared_ptr<TensorImpl> impl = live_sharing(view, target)) {
      write.views_.push_back(std::move(impl));
    }
  }
  if (write.base_ == nullptr && write.views_.empty()) return write;
  KILN_CHECK_VALUE(!requires_grad(root) || !is_leaf(root))
      << op.name() << " writes into a view of a leaf tensor that requires grad (x[i], x.T, "
      << "reshape, ...), which autograd cannot track. Run an update of a parameter under "
      << "no_grad, or write into a clone() of it";
  KILN_CHECK_VALUE(root.is_contiguous())
      << op.name() << " writes into a " << type_str(target) << " tensor that shares its memory "
      << "with views autograd tracks, of a base that is not contiguous (strides "
      << shape_str(root.strides()) << "), whose layout autograd cannot follow. Use the "
      << "out-of-place form (y = y + b), or write into a contiguous() copy";
  if (write.base_ != nullptr) write.base_before_ = gradient_edge(root);
  return write;
}

void ViewWrite::rebase_after(const Tensor& target) const {
  static const OpDefPtr scatter = OpRegistry::Instance().get("AsStridedScatter");
  static const OpDefPtr as_strided = OpRegistry::Instance().get("AsStrided");
  const Tensor root = base_ != nullptr ? Tensor(base_) : target;
  if (base_ != nullptr) {
    // (The base's values before the write are gone: the rule reads only their shape.)
    rebase_history(
        root,
        make_op_node(scatter, {root.alias(), target.alias()}, {true, false}, {root.alias()},
                     layout_in(target, root), {base_before_, gradient_edge(target)}),
        0);
  }
  for (const std::shared_ptr<TensorImpl>& impl : views_) {
    const Tensor view(impl);
    rebase_history(view,
                   make_op_node(as_strided, {root.alias()}, {}, {view.alias()},
                                layout_in(view, root), {gradient_edge(root)}),
                   0);
  }
}

}  // namespace kiln::autograd
