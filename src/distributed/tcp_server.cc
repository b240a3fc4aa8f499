// The TCP rendezvous store's server: one thread poll()s the listener and every connection and
// answers whole requests as they arrive (Note [TCP store protocol]).
#include "distributed/tcp_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "distributed/fd.h"
#include "distributed/store.h"
#include "distributed/tcp_protocol.h"
#include "kiln/error.h"

namespace kiln::distributed::tcp {

Server::~Server() = default;

namespace {

// The table and the thread serving it. Only that thread touches the table and the connections.
class PollServer final : public Server {
 public:
  PollServer(const std::string& host, int port) {
    int rc = 0;
    const AddrInfo found = resolve(host, port, rc);
    if (!found) fail_to_resolve(host, rc);
    const int family = found->ai_family;
    listener_ = Fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    KILN_CHECK_KIND(ErrorKind::kDistributed, listener_.valid())
        << "rendezvous store: cannot create a socket: " << std::strerror(errno);
    // A restarted job may rebind its port while the last run's connections sit in TIME_WAIT.
    const int one = 1;
    ::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_storage any{};
    socklen_t any_size = 0;
    if (family == AF_INET6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&any);
      a->sin6_family = AF_INET6;
      a->sin6_addr = in6addr_any;
      a->sin6_port = htons(static_cast<uint16_t>(port));
      any_size = sizeof(sockaddr_in6);
    } else {
      auto* a = reinterpret_cast<sockaddr_in*>(&any);
      a->sin_family = AF_INET;
      a->sin_addr.s_addr = htonl(INADDR_ANY);
      a->sin_port = htons(static_cast<uint16_t>(port));
      any_size = sizeof(sockaddr_in);
    }
    const bool listening =
        ::bind(listener_.get(), reinterpret_cast<sockaddr*>(&any), any_size) == 0 &&
        ::listen(listener_.get(), SOMAXCONN) == 0;
    KILN_CHECK_KIND(ErrorKind::kDistributed, listening)
        << "rendezvous store: cannot listen on port " << port << " for " << address(host, port)
        << ": " << std::strerror(errno) << "; expected a free port (is another job using it?)";
    socklen_t size = sizeof(any);
    ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&any), &size);
    port_ = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&any)->sin6_port
                                     : reinterpret_cast<sockaddr_in*>(&any)->sin_port);
    wake_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    KILN_CHECK_KIND(ErrorKind::kDistributed, wake_.valid())
        << "rendezvous store: cannot create an eventfd: " << std::strerror(errno);
    thread_ = std::thread([this] { run(); });
  }

  // Stops the thread; the connections then close, so that clients of this server fail at once.
  ~PollServer() override {
    const uint64_t one = 1;
    while (::write(wake_.get(), &one, sizeof(one)) < 0 && errno == EINTR) {
    }
    thread_.join();
  }

  int port() const override { return port_; }

 private:
  struct Connection {
    Fd fd;
    std::vector<char> in;   // received bytes not yet answered
    std::vector<char> out;  // reply bytes not yet sent, from `sent` on
    size_t sent = 0;
  };

  void run() {
    std::vector<pollfd> fds;
    while (true) {
      fds.clear();
      fds.push_back({wake_.get(), POLLIN, 0});
      fds.push_back({listener_.get(), POLLIN, 0});
      for (const Connection& c : connections_) {
        const bool pending = c.sent < c.out.size();
        fds.push_back({c.fd.get(), static_cast<short>(POLLIN | (pending ? POLLOUT : 0)), 0});
      }
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        // Only a lack of kernel memory fails poll() here. Closing everything makes clients throw
        // rather than wait for replies that would never come.
        return;
      }
      if (fds[0].revents != 0) return;
      // Existing connections first: fds[i + 2] belongs to connections_[i] until accept() adds more.
      size_t kept = 0;
      for (size_t i = 0; i < connections_.size(); ++i) {
        const short events = fds[i + 2].revents;
        bool alive = true;
        if (events & (POLLIN | POLLHUP | POLLERR)) alive = receive(connections_[i]);
        if (alive && (events & POLLOUT)) alive = flush(connections_[i]);
        if (alive) connections_[kept++] = std::move(connections_[i]);
      }
      connections_.resize(kept);
      if (fds[1].revents & POLLIN) accept_all();
    }
  }

  void accept_all() {
    while (true) {
      Fd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd.valid()) {
        if (errno == EINTR) continue;
        return;  // EAGAIN: none left; otherwise the client sees the failure itself
      }
      set_nodelay(fd.get());
      connections_.push_back(Connection{std::move(fd), {}, {}, 0});
    }
  }

  // Reads what arrived and answers every whole request; false when the connection should close.
  bool receive(Connection& c) {
    char buffer[65536];
    while (true) {
      const ssize_t n = ::recv(c.fd.get(), buffer, sizeof(buffer), 0);
      if (n > 0) {
        c.in.insert(c.in.end(), buffer, buffer + n);
        continue;
      }
      if (n == 0) return false;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return false;
    }
    size_t pos = 0;
    while (c.in.size() - pos >= 4) {
      const uint32_t size = decode_u32(c.in.data() + pos);
      if (size > kMaxFrame) return false;
      if (c.in.size() - pos - 4 < size) break;
      if (!answer(Reader(c.in.data() + pos + 4, size), c.out)) return false;
      pos += 4 + size;
    }
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(pos));
    return flush(c);
  }

  // Sends what the socket takes; false on a broken connection.
  static bool flush(Connection& c) {
    while (c.sent < c.out.size()) {
      const ssize_t n =
          ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK;  // POLLOUT resumes it
      }
      c.sent += static_cast<size_t>(n);
    }
    c.out.clear();
    c.sent = 0;
    return true;
  }

  // Appends the reply to one request to `out`; false when the request is malformed.
  bool answer(Reader request, std::vector<char>& out) {
    uint8_t op = 0;
    std::string key;
    Writer reply;
    if (!request.u8(op)) return false;
    switch (op) {
      case kSet: {
        std::vector<char> value;
        if (!request.bytes(key) || !request.bytes(value)) return false;
        values_[key] = std::move(value);
        reply.u8(kOk);
        break;
      }
      case kGet: {
        if (!request.bytes(key)) return false;
        const auto it = values_.find(key);
        if (it == values_.end()) {
          reply.u8(kNotFound);
        } else {
          reply.u8(kOk).bytes(it->second);
        }
        break;
      }
      case kAdd: {
        int64_t delta = 0;
        if (!request.bytes(key) || !request.i64(delta)) return false;
        try {
          // An absent key counts from 0, so a failed add never leaves an entry behind.
          const int64_t sum = detail::add_to_counter(key, values_[key], delta);
          reply.u8(kOk).i64(sum);
        } catch (const Error& e) {
          reply.u8(kFailed).bytes(e.message());
        }
        break;
      }
      case kCheck: {
        uint32_t count = 0;
        if (!request.u32(count)) return false;
        bool all = true;
        for (uint32_t i = 0; i < count; ++i) {
          if (!request.bytes(key)) return false;
          all = all && values_.count(key) != 0;
        }
        reply.u8(kOk).u8(all ? 1 : 0);
        break;
      }
      default:
        return false;
    }
    if (!request.done()) return false;
    const std::vector<char>& frame = reply.frame();
    out.insert(out.end(), frame.begin(), frame.end());
    return true;
  }

  Fd listener_;
  Fd wake_;
  int port_ = -1;
  std::map<std::string, std::vector<char>> values_;
  std::vector<Connection> connections_;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Server> start_server(const std::string& host, int port) {
  return std::make_unique<PollServer>(host, port);
}

}  // namespace kiln::distributed::tcp
