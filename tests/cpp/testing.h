// Helpers shared by the GoogleTest suite.
//
//   expect_error([&] { kiln::add(a, b); }, kiln::ErrorKind::kShape, "do not broadcast");
//
// Eager ops run asynchronously (kiln/runtime.h): an op's error may surface at the call or at the
// next sync point. These helpers synchronize after running the code under test, so they catch the
// error in every pipeline mode.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "kiln/error.h"
#include "kiln/runtime.h"

namespace kiln::testing {

/// Runs `fn` and the next sync point; returns the kiln::Error either raised (fails the test when
/// neither did). A failure left over from earlier code fails the test before `fn` runs.
template <typename F>
Error error_of(F&& fn) {
  runtime::synchronize();
  try {
    std::forward<F>(fn)();
    runtime::synchronize();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return Error(ErrorKind::kGeneric, "");
}

/// Expects `fn` (or the sync point after it) to raise a kiln::Error of `kind` containing `needle`.
template <typename F>
void expect_error(F&& fn, ErrorKind kind, const std::string& needle) {
  const Error e = error_of(std::forward<F>(fn));
  EXPECT_EQ(e.kind(), kind) << e.what();
  EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
      << "expected an error containing '" << needle << "', got: " << e.what();
}

}  // namespace kiln::testing
