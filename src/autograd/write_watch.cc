// WriteWatch and RefuseReads: telling that a tensor a node saved was changed in place, and
// refusing a gradient rule's reads of it (Note [Saved tensors changed in place] in
// autograd/nodes.h).
#include "autograd/nodes.h"

namespace kiln::autograd {

std::vector<WriteWatch::Changed> WriteWatch::changed(const std::vector<Tensor>& saved,
                                                     const char* role,
                                                     const std::vector<bool>& overwritten) const {
  std::vector<Changed> result;
  const bool written_since = Storage::write_clock() != since_;
  for (size_t i = 0; i < saved.size(); ++i) {
    const Tensor& t = saved[i];
    if (!t.defined()) continue;
    const std::string name = std::string(role) + " " + std::to_string(i) + " (" + type_str(t) + ")";
    if (i < overwritten.size() && overwritten[i]) {
      result.push_back({t.impl(), nullptr,
                        name + " was written over by this in-place call, and the gradient needs "
                               "its old value: use the out-of-place form (y = y * w, not y *= w)"});
      continue;
    }
    if (!written_since) continue;
    const std::shared_ptr<Storage>& storage = t.storage();  // (a pending tensor: waits for it)
    if (storage == nullptr || storage->write_version() <= since_) continue;
    result.push_back({t.impl(), storage.get(),
                      name + ", saved for the gradient, was changed in place after the call (an "
                             "in-place op, out= or an assignment wrote into its memory): the "
                             "gradient would use the new values. Change a clone() of it instead, "
                             "or change it after backward"});
  }
  return result;
}

void WriteWatch::check(const std::vector<Tensor>& saved, const char* role) const {
  if (Storage::write_clock() == since_) return;  // nothing written anywhere since the call
  const std::vector<Changed> found = changed(saved, role);
  KILN_CHECK_VALUE(found.empty()) << found.front().message;
}

RefuseReads::RefuseReads(std::vector<WriteWatch::Changed> inputs,
                         std::vector<WriteWatch::Changed> outputs)
    : changed_(std::move(inputs)) {
  changed_.insert(changed_.end(), std::make_move_iterator(outputs.begin()),
                  std::make_move_iterator(outputs.end()));
  if (changed_.empty()) return;
  previous_ = kiln::detail::set_call_input_check(this);
  installed_ = true;
}

RefuseReads::~RefuseReads() {
  if (installed_) kiln::detail::set_call_input_check(previous_);
}

void RefuseReads::check(const OpDef& op, TensorSpan inputs) const {
  if (previous_ != nullptr) previous_->check(op, inputs);  // a rule run inside another's
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    // A pending input is a result of the rule's own calls, made after the write: new memory.
    const Storage* memory = t.is_pending() ? nullptr : t.impl()->storage.get();
    for (const WriteWatch::Changed& c : changed_) {
      KILN_CHECK_VALUE(t.impl() != c.tensor && (memory == nullptr || memory != c.memory))
          << c.message;
    }
  }
}

}  // namespace kiln::autograd
