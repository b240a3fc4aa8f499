// Errors: kiln::Error and the KILN_CHECK family.
//
//   KILN_CHECK(x.ndim() == 2) << "matmul: expected a 2-d tensor, got " << x.ndim() << "-d";
//   KILN_CHECK_SHAPE(a == b) << "add: shapes " << a << " and " << b << " do not broadcast";
//
// A failed check throws a kiln::Error (never aborts) carrying the kind of failure, the message,
// the source location and a list of context lines that callers higher up may add while the error
// propagates (`e.add_context("while running op Add")`). The Python bindings map each kind to one
// exception type: kGeneric -> KilnError, kShape -> ShapeError, kDType -> DTypeError, kIndex ->
// KilnIndexError (also an IndexError), kValue -> KilnValueError (also a ValueError), kType ->
// KilnTypeError (also a TypeError), kNotImplemented -> KilnNotImplementedError, kBuild ->
// KilnBuildError, kDistributed -> DistributedError (a rendezvous or collective that failed or
// timed out, kiln/distributed.h).
//
// KILN_ASSERT is for Kiln's own invariants: a failure there is a bug in Kiln, and says so.
#pragma once

#include <exception>
#if defined(__GLIBCXX__)
#include <cxxabi.h>  // abi::__forced_unwind
#endif
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kiln/export.h"

namespace kiln {

enum class ErrorKind : int {
  kGeneric,
  kShape,
  kDType,
  kIndex,
  kValue,
  kType,
  kNotImplemented,
  kBuild,
  kDistributed,  // keep last: plugins' error reports are range-checked against it
};

/// The exception every Kiln failure throws. Thread-safe to copy; immutable except add_context.
class KILN_API Error : public std::exception {
 public:
  Error(ErrorKind kind, std::string message, const char* file = nullptr, int line = 0);
  ~Error() override;

  ErrorKind kind() const noexcept { return kind_; }
  /// The message without context or source location.
  const std::string& message() const noexcept { return message_; }
  const std::vector<std::string>& context() const noexcept { return context_; }
  /// Appends a line of context ("while running op Add(float32[2, 3], ...)").
  void add_context(std::string line);
  /// Message, then each context line, then the source location.
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  void refresh_what();

  ErrorKind kind_;
  std::string message_;
  std::string location_;
  std::vector<std::string> context_;
  std::string what_;
};

namespace detail {

// Collects a message with operator<< and throws it from operator& (which binds looser than <<,
// so `Thrower() & Message() << a << b` builds the whole message first).
class KILN_API ErrorMessage {
 public:
  ErrorMessage(ErrorKind kind, const char* file, int line) : kind_(kind), file_(file), line_(line) {}
  template <typename T>
  ErrorMessage& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }
  [[noreturn]] void raise() const;

 private:
  ErrorKind kind_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};

struct ErrorThrower {
  [[noreturn]] void operator&(const ErrorMessage& message) const { message.raise(); }
};

/// A catch clause to put before a `catch (...)` that turns anything into an error: it lets the
/// forced unwinding of a thread (pthread_exit; Python stopping a daemon thread at exit) through,
/// since swallowing it aborts the process ("exception not rethrown").
///   try { ... } catch (const std::exception& e) { ... } KILN_LET_FORCED_UNWIND_THROUGH
///   catch (...) { ... }
#if defined(__GLIBCXX__)
#define KILN_LET_FORCED_UNWIND_THROUGH \
  catch (abi::__forced_unwind&) {      \
    throw;                             \
  }
#else
#define KILN_LET_FORCED_UNWIND_THROUGH
#endif

/// Runs fn(), user code, turning a std::exception other than kiln::Error into one (kGeneric, its
/// message), and anything else thrown (`throw 5`) into one saying so, so that Python sees a
/// KilnError whatever the user threw. std::bad_alloc passes as it is, and so does the forced
/// unwinding of a cancelled thread (no error: it must reach the thread's end).
template <typename Fn>
auto as_kiln_error(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kGeneric, e.what());
  }
  KILN_LET_FORCED_UNWIND_THROUGH
  catch (...) {
    throw Error(ErrorKind::kGeneric,
                "user code threw an object that is not a std::exception (throw a kiln::Error, "
                "or a std::exception, to say what went wrong)");
  }
}

/// as_kiln_error(fn) for user code of an op call (a custom op's kernel, infer or gradient rule),
/// adding `context()` to the kiln::Error, so that every failure of an op call names it whatever
/// the pipeline mode.
template <typename Fn, typename Context>
auto with_error_context(Fn&& fn, Context&& context) -> decltype(fn()) {
  try {
    return as_kiln_error(std::forward<Fn>(fn));
  } catch (Error& e) {
    e.add_context(context());
    throw;
  }
}

/// Rethrows a stored failure (an asynchronous op's, raised at a sync point). A kiln::Error is
/// thrown as a copy, so that handlers adding context never change the stored one, which other
/// threads may be raising at the same time.
[[noreturn]] KILN_API void rethrow_stored(const std::exception_ptr& error);

}  // namespace detail
}  // namespace kiln

#define KILN_CHECK_KIND(kind, cond)                  \
  if (__builtin_expect(static_cast<bool>(cond), 1)) { \
  } else                                             \
    ::kiln::detail::ErrorThrower() & ::kiln::detail::ErrorMessage(kind, __FILE__, __LINE__)

/// Throws kiln::Error (ErrorKind::kGeneric) with the streamed message when `cond` is false.
#define KILN_CHECK(cond) KILN_CHECK_KIND(::kiln::ErrorKind::kGeneric, cond)
#define KILN_CHECK_SHAPE(cond) KILN_CHECK_KIND(::kiln::ErrorKind::kShape, cond)
#define KILN_CHECK_DTYPE(cond) KILN_CHECK_KIND(::kiln::ErrorKind::kDType, cond)
#define KILN_CHECK_INDEX(cond) KILN_CHECK_KIND(::kiln::ErrorKind::kIndex, cond)
#define KILN_CHECK_VALUE(cond) KILN_CHECK_KIND(::kiln::ErrorKind::kValue, cond)
#define KILN_CHECK_TYPE(cond) KILN_CHECK_KIND(::kiln::ErrorKind::kType, cond)
#define KILN_CHECK_DIST(cond) KILN_CHECK_KIND(::kiln::ErrorKind::kDistributed, cond)
/// Unconditionally throws an error of the given kind: `KILN_FAIL(kValue) << "..."`.
#define KILN_FAIL(kind) KILN_CHECK_KIND(::kiln::ErrorKind::kind, false)
/// An internal invariant; a failure is a bug in Kiln.
#define KILN_ASSERT(cond) \
  KILN_CHECK(cond) << "internal error (a bug in Kiln, please report it): " #cond " failed. "
