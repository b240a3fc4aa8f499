// An owned POSIX file descriptor, closed when its owner goes (the stores' sockets and files).
#pragma once

#include <unistd.h>

#include <utility>

namespace kiln::distributed {

/// Owns `fd` (-1: none) and closes it on destruction; movable, not copyable. Not thread-safe.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Closes the descriptor now (its close() error, which POSIX leaves unspecified, is ignored).
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace kiln::distributed
