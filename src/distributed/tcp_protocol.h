// The TCP rendezvous store's wire format, and the socket plumbing its server and clients share.
//
// Note [TCP store protocol]
// Every message either way is a frame: a 4-byte body length, then the body. Integers are little
// endian; a string is a 4-byte length and its bytes. A request body is an opcode and operands; the
// reply body is a status byte and results:
//   SET key value       -> kOk
//   GET key             -> kOk value | kNotFound
//   ADD key delta(8)    -> kOk sum(8) | kFailed message
//   CHECK count key...  -> kOk all_present(1)
// The server answers each connection's requests in order; a malformed frame closes it. get() and
// wait() poll with GET and CHECK instead of parking on the server, which keeps the server free of
// timers and a client's deadline on the client.
#pragma once

#include <netdb.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::distributed::tcp {

enum Op : uint8_t { kSet = 1, kGet, kAdd, kCheck };
enum Status : uint8_t { kOk = 0, kNotFound, kFailed };
// Rendezvous values are small; the bound stops a stray connection from growing a buffer forever.
constexpr uint32_t kMaxFrame = 256u << 20;

// Builds a frame; see Note [TCP store protocol].
class Writer {
 public:
  Writer() : bytes_(4, 0) {}
  Writer& u8(uint8_t v) {
    bytes_.push_back(static_cast<char>(v));
    return *this;
  }
  Writer& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  Writer& i64(int64_t v) {
    for (int i = 0; i < 8; ++i)
      bytes_.push_back(static_cast<char>(static_cast<uint64_t>(v) >> (8 * i)));
    return *this;
  }
  template <typename Bytes>
  Writer& bytes(const Bytes& b) {
    u32(static_cast<uint32_t>(b.size()));
    bytes_.insert(bytes_.end(), b.begin(), b.end());
    return *this;
  }
  size_t body_size() const { return bytes_.size() - 4; }
  // The frame, with the body length filled in.
  const std::vector<char>& frame() {
    const uint32_t n = static_cast<uint32_t>(body_size());
    for (int i = 0; i < 4; ++i) bytes_[i] = static_cast<char>(n >> (8 * i));
    return bytes_;
  }

 private:
  std::vector<char> bytes_;
};

inline uint32_t decode_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// Parses a frame body; every read returns false once the body runs short.
class Reader {
 public:
  Reader(const char* data, size_t size) : data_(data), size_(size) {}
  bool u8(uint8_t& v) {
    if (size_ - pos_ < 1) return false;
    v = static_cast<uint8_t>(data_[pos_++]);
    return true;
  }
  bool u32(uint32_t& v) {
    if (size_ - pos_ < 4) return false;
    v = decode_u32(data_ + pos_);
    pos_ += 4;
    return true;
  }
  bool i64(int64_t& v) {
    if (size_ - pos_ < 8) return false;
    uint64_t u = 0;
    for (int i = 0; i < 8; ++i)
      u |= static_cast<uint64_t>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
    v = static_cast<int64_t>(u);
    pos_ += 8;
    return true;
  }
  template <typename Bytes>
  bool bytes(Bytes& b) {
    uint32_t n = 0;
    if (!u32(n) || size_ - pos_ < n) return false;
    b.assign(data_ + pos_, data_ + pos_ + n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == size_; }

 private:
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

/// "host:port", with IPv6 literals bracketed.
std::string address(const std::string& host, int port);

using AddrInfo = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;

/// host's stream addresses at `port`; null, with `rc` set to getaddrinfo's error, when it does not
/// resolve.
AddrInfo resolve(const std::string& host, int port, int& rc);

/// Throws the kDistributed error for a host that did not resolve with getaddrinfo error `rc`.
[[noreturn]] void fail_to_resolve(const std::string& host, int rc);

/// Turns off Nagle's algorithm on a connected socket.
void set_nodelay(int fd);

}  // namespace kiln::distributed::tcp
