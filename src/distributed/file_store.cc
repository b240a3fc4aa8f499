// The shared-directory rendezvous store: one file per key, replaced atomically by rename(), so a
// reader sees either no file or a whole value; add() serializes on flock() of a lock file.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "distributed/fd.h"
#include "distributed/store.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

// File names hold keys hex-encoded: 2 bytes a byte, and names may have at most 255.
constexpr size_t kMaxKeyBytes = 100;

// Numbers the tmp files of this process; shared by its stores, which share their tmp prefix.
std::atomic<uint64_t> next_tmp{0};

std::string errno_text() { return std::strerror(errno); }

class FileStore final : public Store {
 public:
  FileStore(const std::string& directory, std::chrono::milliseconds timeout)
      : dir_(directory), timeout_(timeout) {
    std::error_code error;
    std::filesystem::create_directories(dir_, error);
    KILN_CHECK_KIND(ErrorKind::kDistributed, !error)
        << "file store: cannot create the directory '" << dir_ << "': " << error.message();
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    // Ranks on several machines may share the directory: tmp names carry host and pid.
    tmp_prefix_ = dir_ + "/.tmp-" + host + "-" + std::to_string(::getpid()) + "-";
  }

  void set(const std::string& key, const std::vector<char>& value) override {
    write_atomically(path_of(key), value);
  }

  std::vector<char> get(const std::string& key) override {
    const std::string path = path_of(key);
    std::vector<char> value;
    if (!detail::poll_until(timeout_, [&] { return read(path, value); })) {
      detail::throw_wait_timeout(*this, {key});
    }
    return value;
  }

  int64_t add(const std::string& key, int64_t delta) override {
    const std::string path = path_of(key);
    const std::string lock_path = dir_ + "/.lock";
    Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    KILN_CHECK_KIND(ErrorKind::kDistributed, lock.get() >= 0)
        << "file store: cannot open the lock file '" << lock_path << "': " << errno_text();
    // flock() locks belong to the open file, so threads of one process exclude each other too;
    // the lock is released when `lock` closes.
    int rc;
    do rc = ::flock(lock.get(), LOCK_EX);
    while (rc != 0 && errno == EINTR);
    KILN_CHECK_KIND(ErrorKind::kDistributed, rc == 0)
        << "file store: cannot lock '" << lock_path << "': " << errno_text();
    std::vector<char> value;
    read(path, value);
    const int64_t sum = detail::add_to_counter(key, value, delta);
    write_atomically(path, value);
    return sum;
  }

  bool check(const std::vector<std::string>& keys) override {
    for (const std::string& key : keys) {
      if (::access(path_of(key).c_str(), F_OK) != 0) return false;
    }
    return true;
  }

  void wait(const std::vector<std::string>& keys) override {
    if (!detail::poll_until(timeout_, [&] { return check(keys); })) {
      detail::throw_wait_timeout(*this, keys);
    }
  }

  std::chrono::milliseconds timeout() const override { return timeout_; }

 private:
  std::string path_of(const std::string& key) const {
    KILN_CHECK_KIND(ErrorKind::kDistributed, key.size() <= kMaxKeyBytes)
        << "file store: expected a key of at most " << kMaxKeyBytes << " bytes, got " << key.size()
        << " bytes ('" << key << "')";
    static const char kHex[] = "0123456789abcdef";
    std::string path = dir_ + "/k-";
    for (unsigned char c : key) {
      path += kHex[c >> 4];
      path += kHex[c & 15];
    }
    return path;
  }

  // Reads the file at `path` into `value`; false when it does not exist.
  static bool read(const std::string& path, std::vector<char>& value) {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      KILN_CHECK_KIND(ErrorKind::kDistributed, errno == ENOENT)
          << "file store: cannot open '" << path << "': " << errno_text();
      return false;
    }
    value.clear();
    char buffer[4096];
    while (true) {
      const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      KILN_CHECK_KIND(ErrorKind::kDistributed, n >= 0)
          << "file store: cannot read '" << path << "': " << errno_text();
      if (n == 0) return true;
      value.insert(value.end(), buffer, buffer + n);
    }
  }

  void write_atomically(const std::string& path, const std::vector<char>& value) {
    const std::string tmp = tmp_prefix_ + std::to_string(next_tmp++);
    {
      Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      KILN_CHECK_KIND(ErrorKind::kDistributed, fd.get() >= 0)
          << "file store: cannot create '" << tmp << "': " << errno_text();
      size_t done = 0;
      while (done < value.size()) {
        const ssize_t n = ::write(fd.get(), value.data() + done, value.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          const std::string why = errno_text();
          ::unlink(tmp.c_str());
          KILN_FAIL(kDistributed) << "file store: cannot write '" << tmp << "': " << why;
        }
        done += static_cast<size_t>(n);
      }
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      const std::string why = errno_text();
      ::unlink(tmp.c_str());
      KILN_FAIL(kDistributed) << "file store: cannot rename '" << tmp << "' to '" << path
                              << "': " << why;
    }
  }

  const std::string dir_;
  const std::chrono::milliseconds timeout_;
  std::string tmp_prefix_;
};

}  // namespace

std::unique_ptr<Store> make_file_store(const std::string& directory,
                                       std::chrono::milliseconds timeout) {
  return std::make_unique<FileStore>(directory, timeout);
}

}  // namespace kiln::distributed
