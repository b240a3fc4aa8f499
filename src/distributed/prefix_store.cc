// A view of another rendezvous store under a key prefix, so that groups sharing it stay apart.
#include <utility>

#include "distributed/store.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base)
      : prefix_(std::move(prefix) + "/"), base_(std::move(base)) {}

  void set(const std::string& key, const std::vector<char>& value) override {
    base_->set(prefix_ + key, value);
  }
  std::vector<char> get(const std::string& key) override { return base_->get(prefix_ + key); }
  int64_t add(const std::string& key, int64_t delta) override {
    return base_->add(prefix_ + key, delta);
  }
  bool check(const std::vector<std::string>& keys) override { return base_->check(prefixed(keys)); }
  void wait(const std::vector<std::string>& keys) override { base_->wait(prefixed(keys)); }
  std::chrono::milliseconds timeout() const override { return base_->timeout(); }

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const std::string& key : keys) out.push_back(prefix_ + key);
    return out;
  }

  const std::string prefix_;
  const std::shared_ptr<Store> base_;
};

}  // namespace

std::unique_ptr<Store> make_prefix_store(std::string prefix, std::shared_ptr<Store> base) {
  KILN_ASSERT(base != nullptr);
  return std::make_unique<PrefixStore>(std::move(prefix), std::move(base));
}

}  // namespace kiln::distributed
