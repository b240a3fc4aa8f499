// The socket plumbing the TCP store's server and clients share.
#include "distributed/tcp_protocol.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "kiln/error.h"

namespace kiln::distributed::tcp {

std::string address(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

AddrInfo resolve(const std::string& host, int port, int& rc) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  return AddrInfo(rc == 0 ? found : nullptr, &::freeaddrinfo);
}

[[noreturn]] void fail_to_resolve(const std::string& host, int rc) {
  KILN_FAIL(kDistributed)
      << "rendezvous store: cannot resolve the host '" << host
      << "': " << (rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc))
      << "; expected a host name or IP address of the process serving the store";
}

void set_nodelay(int fd) {
  // Requests are tiny and wait for their reply: Nagle's delay would only slow every round trip.
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace kiln::distributed::tcp
