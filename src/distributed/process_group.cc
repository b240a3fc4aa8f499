// The process's groups: init_process_group (options, the rendezvous and its checks), new_group,
// destroy_process_group, and the lookups collective ops use.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include "distributed/communicator.h"
#include "distributed/group.h"
#include "distributed/store.h"
#include "kiln/error.h"
#include "kiln/runtime.h"

namespace kiln::distributed {
namespace {

constexpr double kDefaultTimeoutSeconds = 300;

struct World {
  std::mutex mutex;
  std::string backend;
  std::shared_ptr<Store> store;  // Gloo's rendezvous (MPI has its own)
  std::string hostname;          // where this rank's Gloo pairs listen
  // Not reset by init_process_group: a group made before destroy_process_group keeps an id no
  // later group has (a jitted function holding it fails as destroyed, not on another group).
  int next_group_id = 1;
  std::map<int, std::shared_ptr<Group>> groups;
};

World& world_state() {
  static World* world = new World;  // leaked: groups may outlive static destruction order
  return *world;
}

// The timeouts count whole milliseconds (0.0004 s was none at all).
bool timeout_in_range(double seconds) { return seconds >= 1e-3 && seconds <= 1e9; }

double timeout_seconds(double requested) {
  KILN_CHECK_VALUE(requested == 0 || timeout_in_range(requested))  // 0: not given
      << "init_process_group: timeout " << requested
      << " s is out of range; expected from 0.001 to 1e9 s";
  if (requested > 0) return requested;
  const char* env = std::getenv("KILN_DIST_TIMEOUT");
  if (env == nullptr || *env == '\0') return kDefaultTimeoutSeconds;
  char* end = nullptr;
  const double value = std::strtod(env, &end);
  KILN_CHECK_VALUE(end != env && *end == '\0' && timeout_in_range(value))
      << "KILN_DIST_TIMEOUT: expected a number of seconds from 0.001 to 1e9, got '" << env << "'";
  return value;
}

int int_from_env(const char* name, int given, const char* what) {
  if (given >= 0) return given;
  const char* env = std::getenv(name);
  KILN_CHECK_DIST(env != nullptr && *env != '\0')
      << "init_process_group: " << what << " was not given and " << name
      << " is not set (the launcher, python -m kiln.distributed.run, sets it)";
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(env, &end, 10);
  // Past int's range it wrapped (WORLD_SIZE=4294967297 was a world of 1).
  KILN_CHECK_VALUE(end != env && *end == '\0' && errno == 0 && value >= 0 &&
                   value <= std::numeric_limits<int>::max())
      << name << ": expected a non-negative integer below 2^31, got '" << env << "'";
  return static_cast<int>(value);
}

struct HostPort {
  std::string host;
  int port;
};

HostPort parse_host_port(const std::string& text, const std::string& init_method) {
  const size_t colon = text.rfind(':');
  KILN_CHECK_VALUE(colon != std::string::npos && colon > 0 && colon + 1 < text.size())
      << "init_method '" << init_method << "': expected host:port";
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // [::1]:29500
  }
  const std::string port_text = text.substr(colon + 1);
  char* end = nullptr;
  const long port = std::strtol(port_text.c_str(), &end, 10);
  KILN_CHECK_VALUE(*end == '\0' && port > 0 && port < 65536)
      << "init_method '" << init_method << "': expected a port in 1..65535, got '" << port_text
      << "'";
  return {host, static_cast<int>(port)};
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// The address other ranks reach this one's Gloo pairs at: KILN_DIST_HOSTNAME when set, loopback
// when the rendezvous is on loopback (everything runs on this machine), else this host's name.
std::string gloo_hostname(const std::string& rendezvous_host) {
  if (const char* env = std::getenv("KILN_DIST_HOSTNAME"); env != nullptr && *env != '\0') {
    return env;
  }
  if (is_loopback(rendezvous_host)) return "127.0.0.1";
  char name[256] = {};
  KILN_CHECK_DIST(gethostname(name, sizeof(name) - 1) == 0)
      << "init_process_group: gethostname failed; set KILN_DIST_HOSTNAME";
  return name;
}

struct Rendezvous {
  std::shared_ptr<Store> store;
  std::string hostname;
};

Rendezvous connect_store(const std::string& init_method, int rank,
                         std::chrono::milliseconds timeout) {
  const std::string tcp = "tcp://", env = "env://", file = "file://";
  if (init_method.rfind(tcp, 0) == 0 || init_method == env) {
    HostPort where;
    if (init_method == env) {
      const char* addr = std::getenv("MASTER_ADDR");
      const char* port = std::getenv("MASTER_PORT");
      KILN_CHECK_DIST(addr != nullptr && *addr != '\0' && port != nullptr && *port != '\0')
          << "init_method 'env://' needs MASTER_ADDR and MASTER_PORT in the environment (the "
             "launcher, python -m kiln.distributed.run, sets them)";
      where = parse_host_port(std::string(addr) + ":" + port, init_method);
    } else {
      where = parse_host_port(init_method.substr(tcp.size()), init_method);
    }
    return {make_tcp_store(where.host, where.port, rank == 0, timeout), gloo_hostname(where.host)};
  }
  if (init_method.rfind(file, 0) == 0) {
    const std::string path = init_method.substr(file.size());
    KILN_CHECK_VALUE(!path.empty())
        << "init_method '" << init_method << "': expected file:///path/to/shared/directory";
    return {make_file_store(path, timeout), gloo_hostname("")};
  }
  KILN_FAIL(kValue) << "init_method '" << init_method
                    << "': expected 'env://', 'tcp://host:port' or 'file:///path'";
  return {};
}

// Waits until `store` has key_of(r) for every rank r below `size`, or its timeout passes; returns
// the ranks whose keys never came, as a list for a message ("1, 3"), empty when all did.
std::string missing_ranks(Store& store, int size, const std::function<std::string(int)>& key_of) {
  std::vector<int> missing(size);
  for (int r = 0; r < size; ++r) missing[r] = r;
  detail::poll_until(store.timeout(), [&] {
    missing.erase(std::remove_if(missing.begin(), missing.end(),
                                 [&](int r) { return store.check({key_of(r)}); }),
                  missing.end());
    return missing.empty();
  });
  std::ostringstream list;
  for (size_t i = 0; i < missing.size(); ++i) list << (i ? ", " : "") << missing[i];
  return list.str();
}

// Every rank announces its world size; each then waits for all of them, naming the ranks that
// never came, and checks that they agree.
void check_world(Store& store, int rank, int world_size, const std::string& init_method) {
  const int64_t joined = store.add("kiln/joined", 1);
  KILN_CHECK_DIST(joined <= world_size)
      << "init_process_group: " << joined << " processes joined a world of size " << world_size
      << " at " << init_method
      << " (a rank started twice, or the rendezvous is left over from an earlier run: a file:// "
         "directory must be fresh)";
  const std::string mine = std::to_string(world_size);
  store.set("kiln/world_size/" + std::to_string(rank), std::vector<char>(mine.begin(), mine.end()));
  const auto key_of = [](int r) { return "kiln/world_size/" + std::to_string(r); };
  const std::string missing = missing_ranks(store, world_size, key_of);
  KILN_CHECK_DIST(missing.empty())
      << "init_process_group: rank " << rank << " waited " << store.timeout().count() / 1000.0
      << " s at " << init_method << " for ranks [" << missing << "] of a world of size "
      << world_size << ", which never joined";
  for (int r = 0; r < world_size; ++r) {
    const std::vector<char> value = store.get(key_of(r));
    const std::string theirs(value.begin(), value.end());
    KILN_CHECK_DIST(theirs == mine)
        << "init_process_group: rank " << r << " was started with world_size " << theirs
        << " but rank " << rank << " with " << world_size << "; every rank must agree";
  }
}

// How a group connects its members: the backend, and for Gloo the rendezvous.
struct Connection {
  std::string backend;
  std::shared_ptr<Store> store;
  std::string hostname;
  std::chrono::milliseconds timeout;
};

std::string seconds_str(std::chrono::milliseconds t) {
  std::ostringstream s;
  s << static_cast<double>(t.count()) / 1000.0 << " s";
  return s.str();
}

std::shared_ptr<Group> make_group(int id, const std::vector<int>& ranks, int world_rank,
                                  const Connection& how) {
  const auto it = std::find(ranks.begin(), ranks.end(), world_rank);
  const int rank = it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
  std::unique_ptr<Communicator> communicator;
  try {
    if (how.backend == "mpi") {
      communicator = connect_mpi(ranks, world_rank, how.timeout);  // collective over the world
    } else if (rank >= 0) {
      const std::unique_ptr<Store> store =
          make_prefix_store("group" + std::to_string(id), how.store);
      communicator =
          connect_gloo(rank, static_cast<int>(ranks.size()), how.timeout, *store, how.hostname);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    KILN_FAIL(kDistributed) << "group " << id << " (rank " << rank << " of " << ranks.size()
                            << "): could not connect to the other ranks (timeout "
                            << seconds_str(how.timeout) << "): " << e.what();
  }
  return std::make_shared<Group>(id, rank, ranks, how.timeout, how.backend,
                                 std::move(communicator));
}

Connection connection_of(const World& w, std::chrono::milliseconds timeout) {
  return {w.backend, w.store, w.hostname, timeout};
}

// Returns once all `size` ranks have called it with `key` (every rank must): rank 0, which serves
// a tcp:// / env:// rendezvous, returns last, once the others are done with the store. (Returning
// before the others had connected through it, rank 0 could exit or destroy the group and take the
// store from under them.) Through the store rather than a group's communicator: it needs no
// group, so a broken one does not matter, and does not overtake collectives the pipeline has not
// launched yet.
void store_barrier(Store& store, const std::string& key, int rank, int size, const char* what) {
  const auto key_of = [&key](const char* phase) {
    return [&key, phase](int r) { return key + "/" + phase + "/" + std::to_string(r); };
  };
  store.set(key_of("arrived")(rank), {'1'});
  const std::string missing = missing_ranks(store, size, key_of("arrived"));
  KILN_CHECK_DIST(missing.empty())
      << what << ": rank " << rank << " waited " << seconds_str(store.timeout()) << " for ranks ["
      << missing << "] to connect (did they stop before calling " << what << "?)";
  store.set(key_of("left")(rank), {'1'});
  // Every rank arrived, so every one says it left unless it dies in between, which its
  // connections will report: rank 0's wait needs no error of its own.
  if (rank == 0) missing_ranks(store, size, key_of("left"));
}

}  // namespace

std::shared_ptr<Group> group_of(int64_t id) {
  World& w = world_state();
  std::lock_guard<std::mutex> lock(w.mutex);
  KILN_CHECK_DIST(!w.groups.empty())
      << "no process group: call init_process_group() before collectives";
  const auto it = w.groups.find(static_cast<int>(id));
  if (it != w.groups.end()) return it->second;
  std::ostringstream ids;
  for (const auto& [known, group] : w.groups) ids << (ids.tellp() > 0 ? ", " : "") << known;
  KILN_FAIL(kDistributed) << "unknown process group " << id << "; the groups are [" << ids.str()
                          << "]";
  return nullptr;
}

std::shared_ptr<Group> group_of(const std::shared_ptr<ProcessGroup>& requested) {
  if (requested == nullptr) return group_of(0);
  World& w = world_state();
  std::lock_guard<std::mutex> lock(w.mutex);
  const auto it = w.groups.find(requested->id());
  KILN_CHECK_DIST(it != w.groups.end() && it->second == requested)
      << "process group " << requested->id()
      << " was destroyed by destroy_process_group(); make a new one with new_group()";
  return it->second;
}

void init_process_group(const InitOptions& options) {
  World& w = world_state();
  std::lock_guard<std::mutex> lock(w.mutex);
  KILN_CHECK_DIST(w.groups.empty())
      << "init_process_group: already initialized; call destroy_process_group() first";
  KILN_CHECK_VALUE(options.backend == "gloo" || options.backend == "mpi")
      << "init_process_group: unknown backend '" << options.backend
      << "'; expected 'gloo' or 'mpi'";
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds(options.timeout_s) * 1000.0));
  int rank = 0, world_size = 0;
  if (options.backend == "mpi") {
    // MPI's launcher (mpirun) decides the ranks; init_method does not apply.
    std::tie(rank, world_size) = mpi_start();
    KILN_CHECK_VALUE(options.rank < 0 || options.rank == rank)
        << "init_process_group: rank " << options.rank << " was given, but MPI made this process "
        << "rank " << rank;
    KILN_CHECK_VALUE(options.world_size < 0 || options.world_size == world_size)
        << "init_process_group: world_size " << options.world_size
        << " was given, but MPI's world has " << world_size << " processes";
  } else {
    world_size = int_from_env("WORLD_SIZE", options.world_size, "world_size");
    rank = int_from_env("RANK", options.rank, "rank");
    KILN_CHECK_VALUE(world_size >= 1)
        << "init_process_group: world_size must be >= 1, got " << world_size;
    KILN_CHECK_VALUE(rank < world_size)
        << "init_process_group: rank " << rank << " is outside [0, " << world_size << ")";
    Rendezvous rendezvous = connect_store(options.init_method, rank, timeout);
    check_world(*rendezvous.store, rank, world_size, options.init_method);
    w.store = std::move(rendezvous.store);
    w.hostname = std::move(rendezvous.hostname);
  }
  w.backend = options.backend;
  std::vector<int> everyone(world_size);
  for (int r = 0; r < world_size; ++r) everyone[r] = r;
  try {
    w.groups[0] = make_group(0, everyone, rank, connection_of(w, timeout));
    if (w.store != nullptr)
      store_barrier(*w.store, "kiln/connected", rank, world_size, "init_process_group");
  } catch (...) {
    w.groups.clear();
    w.store.reset();
    throw;
  }
}

void destroy_process_group() {
  // Collectives the pipeline has not launched yet still need their group (and the peers expect
  // them): let them run first.
  runtime::drain();
  World& w = world_state();
  std::map<int, std::shared_ptr<Group>> groups;
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    groups.swap(w.groups);
    w.store.reset();
  }
  for (auto& [id, group] : groups) group->drain();
}

bool is_mpi_available() { return mpi_built(); }

bool is_initialized() {
  World& w = world_state();
  std::lock_guard<std::mutex> lock(w.mutex);
  return !w.groups.empty();
}

std::shared_ptr<ProcessGroup> world() { return group_of(0); }
std::shared_ptr<ProcessGroup> group_by_id(int id) { return group_of(id); }
int get_rank() { return group_of(0)->rank(); }
int get_world_size() { return group_of(0)->size(); }

std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& requested) {
  World& w = world_state();
  std::unique_lock<std::mutex> lock(w.mutex);
  const auto world_it = w.groups.find(0);
  KILN_CHECK_DIST(world_it != w.groups.end()) << "new_group: call init_process_group() first";
  const std::shared_ptr<Group> everyone = world_it->second;
  KILN_CHECK_VALUE(!requested.empty()) << "new_group: expected at least one rank";
  // Sorted, as torch.distributed does: group ranks follow world ranks whatever order each
  // process listed them in.
  std::vector<int> ranks = requested;
  std::sort(ranks.begin(), ranks.end());
  for (size_t i = 0; i < ranks.size(); ++i) {
    KILN_CHECK_VALUE(ranks[i] >= 0 && ranks[i] < everyone->size())
        << "new_group: rank " << ranks[i] << " is outside the world [0, " << everyone->size()
        << ")";
    KILN_CHECK_VALUE(i == 0 || ranks[i] != ranks[i - 1])
        << "new_group: rank " << ranks[i] << " appears twice";
  }
  const int id = w.next_group_id++;
  const Connection how = connection_of(w, everyone->timeout());
  // Connecting waits for the other members; collectives on other groups look groups up meanwhile.
  lock.unlock();
  std::shared_ptr<Group> group = make_group(id, ranks, everyone->rank(), how);
  // Every world rank calls new_group: none may leave (rank 0 with the rendezvous) before the new
  // group's members have connected through it.
  if (how.store != nullptr) {
    store_barrier(*how.store, "group" + std::to_string(id) + "/connected", everyone->rank(),
                  everyone->size(), "new_group");
  }
  lock.lock();
  const auto now = w.groups.find(0);
  KILN_CHECK_DIST(now != w.groups.end() && now->second == everyone)
      << "new_group: the process group was destroyed while the new group connected";
  w.groups[id] = group;
  return group;
}

}  // namespace kiln::distributed
