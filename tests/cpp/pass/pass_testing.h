// Passes for the pass tests: one that logs when it runs, one that breaks the graph.
//
//   std::vector<std::string> log;
//   pm.add(std::make_shared<kiln::testing::NamedPass>("first", &log));
#pragma once

#include <string>
#include <vector>

#include "kiln/pass.h"

namespace kiln::testing {

/// Appends its name to *log when it runs and records two matches; changes nothing.
class NamedPass : public Pass {
 public:
  NamedPass(std::string name, std::vector<std::string>* log) : Pass(std::move(name)), log_(log) {}
  bool Run(const FuncGraphPtr&) override {
    log_->push_back(name());
    record_matches(2);
    return false;
  }

 private:
  std::vector<std::string>* log_;
};

/// Gives the first output a wrong abstract: a pass that breaks the graph (for debug mode).
class BreakingPass : public Pass {
 public:
  BreakingPass() : Pass("Breaker") {}
  bool Run(const FuncGraphPtr& g) override {
    g->outputs()[0]->set_abstract(Abstract(DType::kInt8, {7}));
    return true;
  }
};

}  // namespace kiln::testing
