// The TCP rendezvous store's client: every store, the serving one included, holds one connection
// to the server (tcp_server.h) and sends one request at a time (Note [TCP store protocol]).
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>

#include "distributed/fd.h"
#include "distributed/store.h"
#include "distributed/tcp_protocol.h"
#include "distributed/tcp_server.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace tcp {
namespace {

using Clock = std::chrono::steady_clock;

std::string seconds(std::chrono::milliseconds timeout) {
  std::ostringstream out;
  out << timeout.count() / 1e3 << " s";
  return out.str();
}

// Sends all of `data`; 0 or an errno value.
int send_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return 0;
}

// Receives exactly `size` bytes; 0, an errno value, or -1 when the peer closed the connection.
int recv_all(int fd, char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::recv(fd, data, size, 0);
    if (n == 0) return -1;
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return 0;
}

// Connects to `where`, retrying until `timeout` while nothing listens there yet.
Fd connect_to(const std::string& host, int port, const std::string& where,
              std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  std::string last_error = "none";
  std::chrono::milliseconds pause(1);
  while (true) {
    int rc = 0;
    const AddrInfo found = resolve(host, port, rc);
    // EAI_AGAIN is a resolver that is not answering yet, worth retrying; the rest are final.
    if (!found && rc != EAI_AGAIN) fail_to_resolve(host, rc);
    if (!found) last_error = ::gai_strerror(rc);
    for (const addrinfo* a = found.get(); a != nullptr; a = a->ai_next) {
      Fd fd(::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
      if (!fd.valid()) {
        last_error = std::strerror(errno);
        continue;
      }
      // Non-blocking, so that an unreachable host costs the time left, not the kernel's minutes.
      int error = ::connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
      if (error == EINPROGRESS || error == EINTR) {
        pollfd p{fd.get(), POLLOUT, 0};
        int ready = 0;
        do {
          const auto left =
              std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
          ready = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
        } while (ready < 0 && errno == EINTR);
        socklen_t size = sizeof(error);
        error = ETIMEDOUT;
        if (ready > 0) ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &size);
      }
      if (error != 0) {
        last_error = std::strerror(error);
        continue;
      }
      // Blocking from here on, with the store's timeout on every send and receive.
      ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
      const auto wait = std::max(timeout, std::chrono::milliseconds(1));  // 0 would mean forever
      timeval tv{static_cast<time_t>(wait.count() / 1000),
                 static_cast<suseconds_t>(wait.count() % 1000 * 1000)};
      ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      set_nodelay(fd.get());
      return fd;
    }
    const Clock::time_point now = Clock::now();
    KILN_CHECK_KIND(ErrorKind::kDistributed, now < deadline)
        << "rendezvous store: could not connect to the rendezvous server at " << where << " within "
        << seconds(timeout) << " (last error: " << last_error
        << "); expected the process that serves the store to listen there";
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

class TcpStore final : public Store {
 public:
  TcpStore(const std::string& host, int port, bool serve, std::chrono::milliseconds timeout)
      : timeout_(timeout) {
    KILN_CHECK_VALUE(port >= 0 && port <= 65535 && (serve || port != 0))
        << "make_tcp_store: expected a port in [" << (serve ? 0 : 1) << ", 65535], got " << port;
    if (serve) {
      server_ = start_server(host, port);
      port = server_->port();
    }
    where_ = address(host, port);
    connection_ = connect_to(host, port, where_, timeout);
  }

  void set(const std::string& key, const std::vector<char>& value) override {
    Writer request;
    request.u8(kSet).bytes(key).bytes(value);
    const std::vector<char> reply = call(request);
    expect(reply.size() == 1 && reply[0] == kOk);
  }

  std::vector<char> get(const std::string& key) override {
    Writer request;
    request.u8(kGet).bytes(key);
    std::vector<char> value;
    const bool found = detail::poll_until(timeout_, [&] {
      const std::vector<char> reply = call(request);
      Reader r(reply.data(), reply.size());
      uint8_t status = 0;
      expect(r.u8(status) && (status == kOk || status == kNotFound));
      if (status == kNotFound) return false;
      expect(r.bytes(value) && r.done());
      return true;
    });
    if (!found) detail::throw_wait_timeout(*this, {key});
    return value;
  }

  int64_t add(const std::string& key, int64_t delta) override {
    Writer request;
    request.u8(kAdd).bytes(key).i64(delta);
    const std::vector<char> reply = call(request);
    Reader r(reply.data(), reply.size());
    uint8_t status = 0;
    expect(r.u8(status) && (status == kOk || status == kFailed));
    if (status == kFailed) {
      std::string message;
      expect(r.bytes(message));
      KILN_FAIL(kDistributed) << message;
    }
    int64_t sum = 0;
    expect(r.i64(sum) && r.done());
    return sum;
  }

  bool check(const std::vector<std::string>& keys) override {
    Writer request;
    request.u8(kCheck).u32(static_cast<uint32_t>(keys.size()));
    for (const std::string& key : keys) request.bytes(key);
    const std::vector<char> reply = call(request);
    expect(reply.size() == 2 && reply[0] == kOk);
    return reply[1] != 0;
  }

  void wait(const std::vector<std::string>& keys) override {
    if (!detail::poll_until(timeout_, [&] { return check(keys); })) {
      detail::throw_wait_timeout(*this, keys);
    }
  }

  std::chrono::milliseconds timeout() const override { return timeout_; }

  int port() const { return server_ ? server_->port() : -1; }

 private:
  // Sends one request and returns the reply body. A failure closes the connection for good: the
  // stream may be out of step, and the server is usually gone.
  std::vector<char> call(Writer& request) {
    KILN_CHECK_KIND(ErrorKind::kDistributed, request.body_size() <= kMaxFrame)
        << "rendezvous store: expected a request of at most " << kMaxFrame << " bytes, got "
        << request.body_size();
    std::lock_guard<std::mutex> lock(mutex_);
    KILN_CHECK_KIND(ErrorKind::kDistributed, connection_.valid())
        << "rendezvous store: lost connection to the rendezvous server at " << where_
        << " earlier; expected its process to be running";
    const std::vector<char>& frame = request.frame();
    int error = send_all(connection_.get(), frame.data(), frame.size());
    char header[4];
    if (error == 0) error = recv_all(connection_.get(), header, sizeof(header));
    std::vector<char> reply;
    if (error == 0) {
      const uint32_t size = decode_u32(header);
      expect_locked(size <= kMaxFrame);
      reply.resize(size);
      error = recv_all(connection_.get(), reply.data(), reply.size());
    }
    if (error == 0) return reply;
    connection_.reset();
    KILN_CHECK_KIND(ErrorKind::kDistributed, error != EAGAIN && error != EWOULDBLOCK)
        << "rendezvous store: no reply from the rendezvous server at " << where_ << " within "
        << seconds(timeout_) << "; expected one to every request";
    KILN_FAIL(kDistributed) << "rendezvous store: lost connection to the rendezvous server at "
                            << where_ << " ("
                            << (error < 0 ? "closed by the server" : std::strerror(error))
                            << "); expected its process to be running";
  }

  void expect(bool well_formed) {
    if (well_formed) return;
    std::lock_guard<std::mutex> lock(mutex_);
    expect_locked(false);
  }

  // Requires mutex_.
  void expect_locked(bool well_formed) {
    if (well_formed) return;
    connection_.reset();
    KILN_FAIL(kDistributed) << "rendezvous store: malformed reply from " << where_
                            << "; expected a Kiln rendezvous server there";
  }

  const std::chrono::milliseconds timeout_;
  std::unique_ptr<Server> server_;  // before connection_, which closes first
  std::string where_;
  std::mutex mutex_;
  Fd connection_;
};

}  // namespace
}  // namespace tcp

std::unique_ptr<Store> make_tcp_store(const std::string& host, int port, bool serve,
                                      std::chrono::milliseconds timeout) {
  return std::make_unique<tcp::TcpStore>(host, port, serve, timeout);
}

int bound_port(const Store& store) {
  const auto* tcp = dynamic_cast<const tcp::TcpStore*>(&store);
  return tcp != nullptr ? tcp->port() : -1;
}

}  // namespace kiln::distributed
