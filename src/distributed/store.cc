// What every rendezvous store shares: the polling loop, the timeout error and counter arithmetic.
#include "distributed/store.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "kiln/error.h"

namespace kiln::distributed {

Store::~Store() = default;

namespace detail {

bool poll_until(std::chrono::milliseconds timeout, const std::function<bool()>& ready) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  // Short sleeps first: in a rendezvous the key usually arrives within milliseconds.
  std::chrono::milliseconds pause(1);
  while (true) {
    if (ready()) return true;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(10));
  }
}

void throw_wait_timeout(Store& store, const std::vector<std::string>& keys) {
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (!store.check({key})) missing.push_back(key);
  }
  // The keys may all have arrived since the wait gave up; name them all then.
  if (missing.empty()) missing = keys;
  std::ostringstream names;
  for (size_t i = 0; i < missing.size(); ++i) names << (i ? ", '" : "'") << missing[i] << "'";
  KILN_FAIL(kDistributed) << "rendezvous store: timed out after " << store.timeout().count() / 1e3
                          << " s waiting for key" << (missing.size() == 1 ? " " : "s ")
                          << names.str() << ", which no rank has set";
}

int64_t add_to_counter(const std::string& key, std::vector<char>& value, int64_t delta) {
  int64_t current = 0;
  if (!value.empty()) {
    const std::string text(value.begin(), value.end());
    char* end = nullptr;
    errno = 0;
    current = std::strtoll(text.c_str(), &end, 10);
    // strtoll would also skip leading spaces; a counter is exactly its decimal text.
    const bool whole = errno == 0 && end == text.c_str() + text.size() &&
                       !std::isspace(static_cast<unsigned char>(text[0]));
    KILN_CHECK_KIND(ErrorKind::kDistributed, whole)
        << "rendezvous store: add('" << key << "') expected the key to hold an integer, got '"
        << text << "'";
  }
  int64_t sum = 0;
  KILN_CHECK_KIND(ErrorKind::kDistributed, !__builtin_add_overflow(current, delta, &sum))
      << "rendezvous store: add('" << key << "', " << delta << ") overflows the counter at "
      << current;
  const std::string text = std::to_string(sum);
  value.assign(text.begin(), text.end());
  return sum;
}

}  // namespace detail
}  // namespace kiln::distributed
