// Random number generators (part of kiln/functional.h).
//
// Random ops draw from a counter-based generator: the process-wide default_generator() unless a
// call names a Generator of its own, which keeps a stream apart from the default one (a data
// loader's shuffle, say), as PyTorch's torch.Generator does.
//
//   kiln::manual_seed(0);                                        // the default stream repeats
//   kiln::Generator g(42);
//   kiln::Tensor a = kiln::rand({3}, kiln::DType::kFloat32, g);  // the same on every run
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/export.h"

namespace kiln {

/// Where a generator stands: its seed and the next counter a random op reserves. Saved with a
/// checkpoint and given back (set_rng_state, Generator::set_state), it makes the later draws
/// repeat.
struct RngState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

/// A stream of random numbers: Philox4x32-10 under a seed, and the next counter a random op
/// reserves (Note [Counter-based generator] in src/ops/random.cc). A Generator is a handle:
/// copies share one stream. Thread-safe.
class KILN_API Generator {
 public:
  /// A new stream under PyTorch's default seed, as a fresh process's default generator.
  Generator();
  /// A new stream under `seed` (what Generator().manual_seed(seed) gives).
  explicit Generator(uint64_t seed);

  /// Restarts the stream: `seed`, counter 0.
  void manual_seed(uint64_t seed);
  /// The seed and the next counter to hand out.
  RngState state() const;
  /// Moves the stream to `state` (one state() gave: the draws after it repeat).
  void set_state(const RngState& state);
  /// Reserves `count` consecutive counters (never handed out again until the 64-bit counter
  /// wraps) and returns the seed and the first of them.
  RngState reserve(uint64_t count);

  /// Whether the two handles share one stream.
  bool operator==(const Generator& other) const { return impl_ == other.impl_; }
  bool operator!=(const Generator& other) const { return impl_ != other.impl_; }

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

/// The process-wide generator of the random ops that name none.
KILN_API Generator default_generator();

/// Restarts the default generator at `seed`.
KILN_API void manual_seed(uint64_t seed);
/// The default generator's state, and setting it.
KILN_API RngState get_rng_state();
KILN_API void set_rng_state(const RngState& state);

}  // namespace kiln
