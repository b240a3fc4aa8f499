// verify_pass: checks that a pattern pass keeps the meaning of what it rewrites, by running
// instances of its source pattern before and after the rewrite on the "reference" backend.
//
//   #include <kiln/verify_pass.h>
//   kiln::PassVerifyReport report = kiln::verify_pass("AddNegFusionPass");  // 100 trials, seed 0
//   if (!report.ok()) std::fprintf(stderr, "%s", report.str().c_str());    // the failing input
//
// A trial builds an instance of the pass's source pattern (kiln::instantiate_src_pattern): each
// var a parameter of a random dtype and shape (usually one dtype and shape for all, sometimes
// broadcasting variants or mixed dtypes), or, when the var's condition refuses a parameter, a
// constant it accepts (the pass's ExampleConstants, then 0, 1, -1, 2, 0.5 and -2); seq vars get
// 0 to 3 nodes. Combinations the ops' inference refuses, and instances the pass does not rewrite
// (CheckMatchedDAG or a refusal), are drawn again, up to 32 times per trial; a trial whose
// instances were never rewritten counts as run but not rewritten. A rewritten instance runs on
// the reference backend before and after the rewrite (with ir::verify after the pass) on the
// same random inputs; the results must have equal dtypes and shapes and values within the
// tolerance of their dtype (float64 1e-9 + 1e-9|x|, float32 1e-5 + 1e-4|x|, float16 1e-3 + 1e-2|x|,
// bfloat16 1e-2 + 5e-2|x|, exact otherwise; NaN where NaN). The report keeps the first failure
// with its inputs, both results and both graphs.
//
// Thread-safety: verify_pass may run concurrently with anything (it uses its own graphs and
// builds); it runs the pass's callbacks on the calling thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/pass.h"
#include "kiln/tensor.h"

namespace kiln {

/// A trial whose rewritten instance disagreed with the original, or whose rewrite failed.
struct PassVerifyFailure {
  size_t trial = 0;
  /// What went wrong: the first differing output element, or the error of the rewrite or run.
  std::string reason;
  std::vector<std::string> input_names;  // the instance's parameters, in order
  std::vector<Tensor> inputs;            // their random values
  std::vector<Tensor> expected;          // the outputs before the rewrite
  std::vector<Tensor> got;               // after it (empty when the rewritten graph failed)
  std::string before;                    // the instance as IR text, before the rewrite
  std::string after;                     // after it
};

/// What verify_pass found.
struct KILN_API PassVerifyReport {
  std::string pass;
  size_t trials = 0;    // trials run
  size_t rewrites = 0;  // trials whose instance the pass rewrote
  size_t failures = 0;  // trials whose rewrite threw, or whose rewritten graph failed or differed
  /// The first few reasons the pass gave for refusing a rewrite of an instance.
  std::vector<std::string> refusals;
  std::optional<PassVerifyFailure> first_failure;

  /// No failure and at least one rewrite (a pass that rewrote nothing was not checked).
  bool ok() const { return failures == 0 && rewrites > 0; }
  /// A summary line, then the first failure: reason, inputs, both results, both graphs.
  std::string str() const;
};

/// Verifies the registered pass `pass_name` (see the file comment) over `trials` trials drawn
/// from `seed` (the same seed gives the same instances and inputs). Throws kValue when no pass
/// has that name, when it is not a PatternToPatternPass, or when no instance of its source
/// pattern could be built in any trial (with the last reason).
KILN_API PassVerifyReport verify_pass(const std::string& pass_name, size_t trials = 100,
                                      uint64_t seed = 0);
/// The same for a pass object, registered or not.
KILN_API PassVerifyReport verify_pass(PatternToPatternPass& pass, size_t trials = 100,
                                      uint64_t seed = 0);

}  // namespace kiln
