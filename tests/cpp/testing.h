// Helpers shared by the GoogleTest suite.
//
//   expect_error([&] { kiln::add(a, b); }, kiln::ErrorKind::kShape, "do not broadcast");
//   expect_close(got, want, 1e-6);   // same dtype and shape, values within a relative tolerance
//
// Eager ops run asynchronously (kiln/runtime.h): an op's error may surface at the call or at the
// next sync point. These helpers synchronize after running the code under test, so they catch the
// error in every pipeline mode.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "kiln/error.h"
#include "kiln/functional.h"
#include "kiln/runtime.h"

namespace kiln::testing {

/// Runs `fn`, which must raise a kiln::Error, and returns it (fails the test when it raised
/// none). No sync point: what `fn` itself raises, not a failure still queued.
template <typename F>
Error raised_by(F&& fn) {
  try {
    std::forward<F>(fn)();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return Error(ErrorKind::kGeneric, "");
}

/// Runs `fn` and the next sync point; returns the kiln::Error either raised (fails the test when
/// neither did). A failure left over from earlier code fails the test before `fn` runs.
template <typename F>
Error error_of(F&& fn) {
  runtime::synchronize();
  return raised_by([&] {
    std::forward<F>(fn)();
    runtime::synchronize();
  });
}

/// Expects `fn` (or the sync point after it) to raise a kiln::Error of `kind` containing `needle`.
template <typename F>
void expect_error(F&& fn, ErrorKind kind, const std::string& needle) {
  const Error e = error_of(std::forward<F>(fn));
  EXPECT_EQ(e.kind(), kind) << e.what();
  EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
      << "expected an error containing '" << needle << "', got: " << e.what();
}

/// Expects `got` to have `want`'s dtype and shape and every value within rtol * max(1, |want|)
/// of it (rtol 0: equal; equal infinities and equal values always pass).
inline void expect_close(const Tensor& got, const Tensor& want, double rtol) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  const Tensor g = to(got, DType::kFloat64).contiguous();
  const Tensor w = to(want, DType::kFloat64).contiguous();
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double a = g.data<double>()[i], b = w.data<double>()[i];
    if (a == b) continue;
    ASSERT_NEAR(a, b, rtol * std::max(1.0, std::abs(b))) << "element " << i;
  }
}

}  // namespace kiln::testing
