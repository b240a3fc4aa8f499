// The TCP rendezvous store's server: a thread that holds the table and answers clients.
#pragma once

#include <memory>
#include <string>

namespace kiln::distributed::tcp {

/// A running server. Destroying it stops its thread and closes every connection, so that its
/// clients' next calls fail at once instead of waiting.
class Server {
 public:
  virtual ~Server();
  /// The port it listens on (the one picked when started with port 0).
  virtual int port() const = 0;
};

/// Starts a server listening on `port` (0: any free one) of every interface of host's address
/// family; see make_tcp_store() for why not only host's address. Throws kDistributed when host
/// does not resolve or the port cannot be bound.
std::unique_ptr<Server> start_server(const std::string& host, int port);

}  // namespace kiln::distributed::tcp
