// verify_pass: instances of a pattern pass's source pattern run before and after the rewrite on
// the reference backend (see kiln/verify_pass.h).
#include "kiln/verify_pass.h"

#include <cmath>
#include <cstdio>
#include <random>

#include "core/dtype_dispatch.h"
#include "kiln/backend.h"
#include "kiln/functional.h"

namespace kiln {

namespace {

constexpr size_t kAttemptsPerTrial = 32;
constexpr size_t kKeptRefusals = 8;
constexpr size_t kPrintedValues = 16;
constexpr const char* kOracle = "reference";

// Float32 most of the time: most patterns are written for it.
constexpr DType kDTypes[] = {DType::kFloat32, DType::kFloat32, DType::kFloat32,  DType::kFloat32,
                             DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt32,
                             DType::kInt64,   DType::kBool};
// Square matrices fit matmuls and elementwise ops alike.
const Shape kShapes[] = {{4, 4}, {4, 4}, {3, 4}, {2, 3, 4}, {5}, {}, {1, 4}, {2, 4, 4}};
// Constants tried for a var whose condition refuses a parameter.
constexpr double kConstants[] = {0.0, 1.0, -1.0, 2.0, 0.5, -2.0};

struct Tolerance {
  double atol;
  double rtol;
};

Tolerance tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
      return {1e-9, 1e-9};
    case DType::kFloat32:
      return {1e-5, 1e-4};
    case DType::kFloat16:
      return {1e-3, 1e-2};
    case DType::kBFloat16:
      return {1e-2, 5e-2};
    default:
      return {0, 0};
  }
}

std::string abstract_of(const Tensor& t) { return Abstract(t.dtype(), t.shape()).str(); }

std::string number(double v, int digits = 7) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.*g", digits, v);
  return text;
}

// The fewest significant digits, 7 at least, that print a and b apart: a message about their
// difference then shows it (float64 values may agree in their first 7).
int digits_to_tell(double a, double b) {
  int digits = 7;
  while (digits < 17 && number(a, digits) == number(b, digits)) ++digits;
  return digits;
}

// A tensor's values as float64, contiguous (waits for them; throws their failure).
Tensor as_float64(const Tensor& t) { return to(t, DType::kFloat64).contiguous(); }

// "float32[2, 2] [1.5, -0.25, 3, 0.5]", at most kPrintedValues values.
std::string describe(const Tensor& t) {
  std::string out = abstract_of(t) + " [";
  try {
    const Tensor v = as_float64(t);
    const double* data = v.data<double>();
    for (int64_t i = 0; i < v.numel(); ++i) {
      if (i == static_cast<int64_t>(kPrintedValues)) {
        out += ", ...";
        break;
      }
      out += (i ? ", " : "") + number(data[i]);
    }
  } catch (const Error& e) {
    out += std::string("failed: ") + e.what();
  }
  return out + "]";
}

// Fills a tensor of `dtype` and `shape` with random values: floats uniform in [-3, 3), integers
// in [-10, 10] (unsigned [0, 20]), booleans either.
Tensor random_tensor(std::mt19937_64& rng, DType dtype, const Shape& shape) {
  Tensor t = Tensor::empty(shape, dtype);
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* data = t.data<T>();
    std::uniform_real_distribution<double> real(-3.0, 3.0);
    std::uniform_int_distribution<int> integer(dtype == DType::kUInt8 ? 0 : -10,
                                               dtype == DType::kUInt8 ? 20 : 10);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (dtype == DType::kBool) {
        data[i] = convert<T>(static_cast<int>(rng() & 1));
      } else if (is_floating_point(dtype)) {
        data[i] = convert<T>(real(rng));
      } else {
        data[i] = convert<T>(integer(rng));
      }
    }
  });
  return t;
}

Tensor filled(DType dtype, const Shape& shape, double value) {
  Tensor t = Tensor::empty(shape, dtype);
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* data = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) data[i] = convert<T>(value);
  });
  return t;
}

// Makes the vars of one instance: a deterministic function of its seed, so that two makers with
// one seed build the same instance.
class VarMaker {
 public:
  VarMaker(const PatternToPatternPass& pass, uint64_t seed) : pass_(pass), rng_(seed) {
    dtype_ = kDTypes[rng_() % std::size(kDTypes)];
    shape_ = kShapes[rng_() % std::size(kShapes)];
  }

  std::vector<NodePtr> operator()(FuncGraph& graph, const SrcPatternElement& var) {
    if (var.kind == SrcPatternElement::Kind::kVar) return {make(graph, var, var.name)};
    std::vector<NodePtr> nodes;
    const size_t length = rng_() % 4;
    for (size_t i = 0; i < length; ++i) {
      nodes.push_back(make(graph, var, var.name + "." + std::to_string(i)));
    }
    return nodes;
  }

 private:
  // A broadcasting variant of the instance's shape: leading dimensions dropped, or some set to 1.
  Shape variant() {
    Shape s = shape_;
    if (s.empty()) return s;
    if (rng_() % 2 == 0)
      return Shape(s.begin() + static_cast<long>(rng_() % (s.size() + 1)), s.end());
    for (int64_t& d : s) {
      if (rng_() % 2 == 0) d = 1;
    }
    return s;
  }

  NodePtr make(FuncGraph& graph, const SrcPatternElement& var, const std::string& name) {
    const DType dtype = rng_() % 4 == 0 ? kDTypes[rng_() % std::size(kDTypes)] : dtype_;
    const Shape shape = rng_() % 4 == 0 ? variant() : shape_;
    if (!var.cond) return graph.add_parameter(dtype, shape, name);
    // Candidates go through a scratch graph first, so that the instance gets only the one used.
    FuncGraph scratch("candidates");
    if (var.cond(scratch.add_parameter(dtype, shape)))
      return graph.add_parameter(dtype, shape, name);
    std::vector<Tensor> constants = pass_.ExampleConstants(var.name);
    for (double v : kConstants) {
      constants.push_back(Tensor::scalar(Scalar(v)));
      if (v == std::floor(v)) constants.push_back(Tensor::scalar(Scalar(static_cast<int64_t>(v))));
      constants.push_back(filled(dtype, shape, v));
    }
    // Each tried as a copy only its node holds: a frozen constant (Note [Frozen constants] in
    // pass/builtin/builtin_passes.h), as value conditions require.
    const auto own = [](const Tensor& c) { return c.is_weak_scalar() ? c : c.clone(); };
    for (const Tensor& c : constants) {
      const NodePtr candidate = scratch.add_value(own(c));
      if (var.cond(candidate)) return graph.add_value(own(c));
    }
    KILN_FAIL(kValue) << "no node tried fits the condition of var '" << var.name << "' (a "
                      << Abstract(dtype, shape).str()
                      << " parameter, the pass's ExampleConstants and the constants 0, 1, -1, 2, "
                         "0.5, -2); override ExampleConstants to give one";
  }

  const PatternToPatternPass& pass_;
  std::mt19937_64 rng_;
  DType dtype_;
  Shape shape_;
};

// Builds `graph` on the reference backend, runs it and waits for the outputs.
std::vector<Tensor> run_on_oracle(const FuncGraphPtr& graph, const std::vector<Tensor>& inputs) {
  BackendManager& manager = BackendManager::Instance();
  BackendJitConfig config;
  config.backend = kOracle;
  const BackendGraphId id = manager.Build(graph, config, kOracle);
  std::vector<Tensor> outputs;
  try {
    manager.Run(kOracle, id, inputs, &outputs);
    for (const Tensor& out : outputs) (void)out.data_ptr();  // waits; throws a failure
  } catch (...) {
    manager.ClearGraph(kOracle, id);
    throw;
  }
  manager.ClearGraph(kOracle, id);
  return outputs;
}

// Why `got` is not `want` within tolerance; empty when it is.
std::string difference(size_t index, const Tensor& want, const Tensor& got) {
  const std::string which = "output " + std::to_string(index);
  if (want.dtype() != got.dtype() || want.shape() != got.shape()) {
    return which + " is " + abstract_of(want) + " before the rewrite and " + abstract_of(got) +
           " after it";
  }
  const Tensor w = as_float64(want);
  const Tensor g = as_float64(got);
  const double* a = w.data<double>();
  const double* b = g.data<double>();
  const Tolerance tol = tolerance(want.dtype());
  for (int64_t i = 0; i < w.numel(); ++i) {
    const bool same = std::isnan(a[i]) ? std::isnan(b[i])
                      : std::isinf(a[i])
                          ? a[i] == b[i]
                          : std::abs(a[i] - b[i]) <= tol.atol + tol.rtol * std::abs(a[i]);
    if (same) continue;
    const int digits = digits_to_tell(a[i], b[i]);
    return which + " element " + std::to_string(i) + " is " + number(a[i], digits) +
           " before the rewrite and " + number(b[i], digits) + " after it (" +
           dtype_name(want.dtype()) + ", tolerance " +
           (tol.atol == 0 ? std::string("0: exact")
                          : number(tol.atol) + " + " + number(tol.rtol) + " * |before|") +
           ")";
  }
  return {};
}

// One trial: instances drawn until the pass rewrites one (or the attempts run out).
class Trial {
 public:
  Trial(PatternToPatternPass& pass, PassVerifyReport& report, size_t index, uint64_t seed)
      : pass_(pass), report_(report), index_(index), seed_(seed) {}

  // Returns whether an instance was built.
  bool run(std::string* last_error) {
    bool built = false;
    for (size_t attempt = 0; attempt < kAttemptsPerTrial; ++attempt) {
      const uint64_t instance_seed = seed_ * 1000003u + index_ * 131u + attempt;
      FuncGraphPtr before;
      FuncGraphPtr after;
      try {
        before = build(instance_seed);
        after = build(instance_seed);
      } catch (const Error& e) {
        *last_error = e.what();
        continue;
      }
      built = true;
      const std::string before_text = ir::print(*before);
      PassManager manager;
      manager.add(std::shared_ptr<Pass>(&pass_, [](Pass*) {}));  // borrowed for this run
      manager.set_verify(true);
      PassReport run_report;
      std::mt19937_64 rng(instance_seed ^ 0x9e3779b97f4a7c15ull);
      std::vector<Tensor> inputs;
      for (const ParameterPtr& p : before->parameters()) {
        inputs.push_back(random_tensor(rng, p->abstract().dtype(), p->abstract().shape()));
      }
      std::vector<Tensor> expected;
      try {
        expected = run_on_oracle(before, inputs);
      } catch (const Error& e) {
        *last_error = std::string("the instance failed to run: ") + e.what();
        continue;  // the ops refuse these values: not the pass's fault
      }
      try {
        if (!manager.Run(after, &run_report)) {
          keep_refusals(run_report);
          continue;
        }
      } catch (const Error& e) {
        fail(before, before_text, nullptr, inputs, expected, {},
             std::string("the rewrite failed: ") + e.what());
        return true;
      }
      ++report_.rewrites;
      std::vector<Tensor> got;
      try {
        got = run_on_oracle(after, inputs);
      } catch (const Error& e) {
        fail(before, before_text, after, inputs, expected, {},
             std::string("the rewritten graph failed to run: ") + e.what());
        return true;
      }
      std::string why;
      if (got.size() != expected.size()) {
        why = "the rewritten graph has " + std::to_string(got.size()) + " outputs, the original " +
              std::to_string(expected.size());
      }
      for (size_t i = 0; i < expected.size() && why.empty(); ++i) {
        why = difference(i, expected[i], got[i]);
      }
      if (!why.empty()) fail(before, before_text, after, inputs, expected, got, why);
      return true;
    }
    return built;
  }

 private:
  FuncGraphPtr build(uint64_t seed) {
    VarMaker maker(pass_, seed);
    return instantiate_src_pattern(
        pass_, [&](FuncGraph& g, const SrcPatternElement& var) { return maker(g, var); },
        pass_.name() + ".instance" + std::to_string(index_));
  }

  void keep_refusals(const PassReport& run_report) {
    for (const PassRunRecord& r : run_report.runs) {
      for (const std::string& reason : r.reasons) {
        if (report_.refusals.size() < kKeptRefusals) report_.refusals.push_back(reason);
      }
    }
  }

  void fail(const FuncGraphPtr& before, const std::string& before_text, const FuncGraphPtr& after,
            const std::vector<Tensor>& inputs, std::vector<Tensor> expected,
            std::vector<Tensor> got, std::string reason) {
    ++report_.failures;
    if (report_.first_failure) return;
    PassVerifyFailure f;
    f.trial = index_;
    f.reason = std::move(reason);
    for (const ParameterPtr& p : before->parameters()) f.input_names.push_back(p->name());
    f.inputs = inputs;
    f.expected = std::move(expected);
    f.got = std::move(got);
    f.before = before_text;
    f.after = after != nullptr ? ir::print(*after) : "";
    report_.first_failure = std::move(f);
  }

  PatternToPatternPass& pass_;
  PassVerifyReport& report_;
  size_t index_;
  uint64_t seed_;
};

}  // namespace

std::string PassVerifyReport::str() const {
  std::string out = "verify_pass('" + pass + "'): " + std::to_string(trials) + " trials, " +
                    std::to_string(rewrites) + " rewritten, " + std::to_string(failures) +
                    " failed: " +
                    (failures > 0    ? "FAILED"
                     : rewrites == 0 ? "NOT CHECKED"
                                     : "ok") +
                    "\n";
  if (rewrites == 0 && failures == 0) {
    out += "  the pass rewrote none of the instances of its source pattern\n";
    for (const std::string& r : refusals) out += "  " + r + "\n";
  }
  if (!first_failure) return out;
  const PassVerifyFailure& f = *first_failure;
  out += "first failure, trial " + std::to_string(f.trial) + ": " + f.reason + "\ninputs:\n";
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    out += "  " + (i < f.input_names.size() ? f.input_names[i] : "input" + std::to_string(i)) +
           " = " + describe(f.inputs[i]) + "\n";
  }
  out += "results before the rewrite:\n";
  for (const Tensor& t : f.expected) out += "  " + describe(t) + "\n";
  out += "results after the rewrite:\n";
  for (const Tensor& t : f.got) out += "  " + describe(t) + "\n";
  if (f.got.empty()) out += "  (none)\n";
  out += "graph before the rewrite:\n" + f.before;
  if (!f.after.empty()) out += "graph after the rewrite:\n" + f.after;
  return out;
}

PassVerifyReport verify_pass(PatternToPatternPass& pass, size_t trials, uint64_t seed) {
  pass.Prepare();
  PassVerifyReport report;
  report.pass = pass.name();
  std::string last_error;
  bool any_built = false;
  for (size_t i = 0; i < trials; ++i) {
    ++report.trials;
    any_built = Trial(pass, report, i, seed).run(&last_error) || any_built;
  }
  KILN_CHECK_VALUE(any_built || trials == 0)
      << "verify_pass: no instance of the source pattern of pass '" << pass.name()
      << "' could be built in " << trials << " trials of " << kAttemptsPerTrial
      << " random dtypes and shapes; the last reason: " << last_error;
  return report;
}

PassVerifyReport verify_pass(const std::string& pass_name, size_t trials, uint64_t seed) {
  const PassPtr pass = PassRegistry::Instance().get(pass_name);
  auto* pattern = dynamic_cast<PatternToPatternPass*>(pass.get());
  KILN_CHECK_VALUE(pattern != nullptr)
      << "verify_pass: pass '" << pass_name << "' is not a PatternToPatternPass; verify_pass "
      << "checks pattern passes (it builds instances of the source pattern)";
  return verify_pass(*pattern, trials, seed);
}

}  // namespace kiln
