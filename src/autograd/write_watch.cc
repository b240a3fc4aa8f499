// WriteWatch: telling that a tensor a node saved was changed in place (Note [Saved tensors
// changed in place] in autograd/nodes.h).
#include "autograd/nodes.h"

namespace kiln::autograd {

void WriteWatch::check(const std::vector<Tensor>& saved, const char* role) const {
  if (Storage::write_clock() == since_) return;  // nothing written anywhere since the call
  for (size_t i = 0; i < saved.size(); ++i) {
    const Tensor& t = saved[i];
    if (!t.defined()) continue;
    const std::shared_ptr<Storage>& storage = t.storage();  // (a pending tensor: waits for it)
    KILN_CHECK_VALUE(storage == nullptr || storage->write_version() <= since_)
        << role << " " << i << " (" << type_str(t) << "), saved for the gradient, was changed in "
        << "place after the call (an in-place op, out= or an assignment wrote into its memory): "
        << "the gradient would use the new values. Change a clone() of it instead, or change it "
        << "after backward";
  }
}

}  // namespace kiln::autograd
