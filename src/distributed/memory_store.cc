// The in-process rendezvous store: a map behind a mutex; waiters sleep on a condition variable.
#include <condition_variable>
#include <map>
#include <mutex>

#include "distributed/store.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& value) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      values_[key] = value;
    }
    changed_.notify_all();
  }

  std::vector<char> get(const std::string& key) override {
    wait({key});
    std::lock_guard<std::mutex> lock(mutex_);
    return values_.at(key);
  }

  int64_t add(const std::string& key, int64_t delta) override {
    int64_t sum = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // An absent key counts from 0, so a failed add never leaves an entry behind.
      sum = detail::add_to_counter(key, values_[key], delta);
    }
    changed_.notify_all();
    return sum;
  }

  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return has_all(keys);
  }

  void wait(const std::vector<std::string>& keys) override {
    bool ready = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready = changed_.wait_for(lock, timeout_, [&] { return has_all(keys); });
    }
    // Outside the lock: the error names the missing keys, which takes the lock again.
    if (!ready) detail::throw_wait_timeout(*this, keys);
  }

  std::chrono::milliseconds timeout() const override { return timeout_; }

 private:
  // Requires mutex_.
  bool has_all(const std::vector<std::string>& keys) const {
    for (const std::string& key : keys) {
      if (values_.count(key) == 0) return false;
    }
    return true;
  }

  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<char>> values_;
};

}  // namespace

std::shared_ptr<Store> make_memory_store(std::chrono::milliseconds timeout) {
  return std::make_shared<MemoryStore>(timeout);
}

}  // namespace kiln::distributed
