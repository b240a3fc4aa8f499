#include "kiln/error.h"

#include <utility>

namespace kiln {

Error::Error(ErrorKind kind, std::string message, const char* file, int line)
    : kind_(kind), message_(std::move(message)) {
  if (file != nullptr) {
    location_ = std::string(file) + ":" + std::to_string(line);
  }
  refresh_what();
}

Error::~Error() = default;

void Error::add_context(std::string line) {
  context_.push_back(std::move(line));
  refresh_what();
}

void Error::refresh_what() {
  what_ = message_;
  for (const std::string& line : context_) {
    what_ += "\n  ";
    what_ += line;
  }
  if (!location_.empty()) {
    what_ += "\n  (raised at " + location_ + ")";
  }
}

namespace detail {

void ErrorMessage::raise() const { throw Error(kind_, stream_.str(), file_, line_); }

void rethrow_stored(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    throw Error(e);
  }
}

}  // namespace detail
}  // namespace kiln
