// Rendezvous stores: the small key-value tables ranks meet through before Gloo connects them (each
// rank publishes its address; new_group() and the init checks publish more). Private to Kiln.
//
//   std::unique_ptr<Store> s = make_tcp_store("127.0.0.1", 29500, /*serve=*/rank == 0, timeout);
//   s->set("rank/1", bytes);
//   std::vector<char> v = s->get("rank/0");       // waits for the key, up to the timeout
//   int64_t joined = s->add("joined", 1);         // atomic counter, returns the new value
//
// Every blocking call waits at most the store's timeout and then throws
// kiln::Error(ErrorKind::kDistributed) naming the keys it waited for and the timeout. A store is
// safe to use from several threads. Keys and values are arbitrary bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/export.h"

namespace kiln::distributed {

/// A key-value table shared by the ranks of one job. Every method is thread-safe and throws
/// kiln::Error(ErrorKind::kDistributed) when the store cannot be reached.
class KILN_API Store {
 public:
  virtual ~Store();
  virtual void set(const std::string& key, const std::vector<char>& value) = 0;
  /// The value of `key`, waiting until some rank sets it.
  virtual std::vector<char> get(const std::string& key) = 0;
  /// Adds `delta` to the integer at `key` (0 when absent) and returns the sum. The counter is
  /// stored as decimal text, so get() on it returns e.g. "3"; a key holding anything else throws.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  /// True when every key exists (does not wait).
  virtual bool check(const std::vector<std::string>& keys) = 0;
  /// Waits until every key exists.
  virtual void wait(const std::vector<std::string>& keys) = 0;
  virtual std::chrono::milliseconds timeout() const = 0;
};

/// A store served by a thread of the process with `serve` set and reached over TCP by every
/// process (the serving one included), each retrying to connect until the timeout. The server
/// listens on `port` of every interface of host's address family, not only host's address: a
/// machine often maps its own name to 127.0.1.1, which the other machines could not reach. Port 0
/// picks a free port (see bound_port()). The server thread stops when its store is destroyed;
/// the other stores' next calls then throw. A host that does not resolve throws at once.
KILN_API std::unique_ptr<Store> make_tcp_store(const std::string& host, int port, bool serve,
                                               std::chrono::milliseconds timeout);
/// The port a serving TCP store listens on (for port 0); -1 for other stores.
KILN_API int bound_port(const Store& store);

/// A store in a directory every rank can reach (created if missing): one file per key, written
/// atomically (write then rename); counters use a lock file. Keys are at most 100 bytes (file
/// names hold them hex-encoded). Destroying the store leaves the directory to its owner.
KILN_API std::unique_ptr<Store> make_file_store(const std::string& directory,
                                                std::chrono::milliseconds timeout);

/// A store in this process's memory, shared by the threads that hold it (tests run ranks as
/// threads).
KILN_API std::shared_ptr<Store> make_memory_store(std::chrono::milliseconds timeout);

/// A view of `base` that prefixes every key with `prefix` + "/" (new_group() keeps groups apart
/// so); its timeout is base's. Timeout errors name the prefixed keys.
KILN_API std::unique_ptr<Store> make_prefix_store(std::string prefix, std::shared_ptr<Store> base);

namespace detail {

/// Calls `ready` until it returns true (then true) or `timeout` has passed (then false), sleeping
/// 1 ms between calls at first and backing off to 10 ms.
bool poll_until(std::chrono::milliseconds timeout, const std::function<bool()>& ready);

/// Throws the kDistributed error of a wait for `keys` that timed out, naming those `store` still
/// lacks and its timeout.
[[noreturn]] void throw_wait_timeout(Store& store, const std::vector<std::string>& keys);

/// The counter arithmetic of Store::add: `value` (empty when the key is absent) plus `delta`,
/// with `value` replaced by the sum's decimal text. Throws kDistributed, leaving `value` as it
/// was, when `value` is not an integer or the sum overflows (neither can happen when it is empty).
int64_t add_to_counter(const std::string& key, std::vector<char>& value, int64_t delta);

}  // namespace detail
}  // namespace kiln::distributed
