// Pass, the per-run report a pass records into, stages, and PassManager (see kiln/pass.h).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "kiln/pass.h"

namespace kiln {

namespace {

// What the pass running on this thread has recorded (PassManager installs one per pass run;
// outside a manager the records go nowhere).
struct RunRecorder {
  size_t matches = 0;
  size_t refusals = 0;
  std::vector<std::string> reasons;
};
thread_local RunRecorder* t_recorder = nullptr;

// Reasons kept per pass run in a report.
constexpr size_t kReportedReasons = 8;

class ScopedRecorder {
 public:
  explicit ScopedRecorder(RunRecorder* recorder) : previous_(t_recorder) { t_recorder = recorder; }
  ~ScopedRecorder() { t_recorder = previous_; }
  ScopedRecorder(const ScopedRecorder&) = delete;
  ScopedRecorder& operator=(const ScopedRecorder&) = delete;

 private:
  RunRecorder* previous_;
};

constexpr const char* kStageNames[kNumPassStages] = {"frontend", "pre_fusion", "fusion",
                                                     "post_fusion"};

}  // namespace

Pass::Pass(std::string name) : name_(std::move(name)) {
  KILN_CHECK_VALUE(!name_.empty()) << "a pass needs a name";
}
Pass::~Pass() = default;
void Pass::Prepare() {}

void Pass::record_matches(size_t n) {
  if (t_recorder != nullptr) t_recorder->matches += n;
}

void Pass::record_refusal(const std::string& reason) {
  if (t_recorder == nullptr) return;
  ++t_recorder->refusals;
  if (!reason.empty() && t_recorder->reasons.size() < kReportedReasons) {
    t_recorder->reasons.push_back(reason);
  }
}

const char* stage_name(PassStage stage) { return kStageNames[static_cast<size_t>(stage)]; }

PassStage parse_stage(const std::string& name) {
  for (size_t i = 0; i < kNumPassStages; ++i) {
    if (name == kStageNames[i]) return static_cast<PassStage>(i);
  }
  KILN_FAIL(kValue) << "unknown pass stage '" << name
                    << "'; the stages are frontend, pre_fusion, fusion, post_fusion";
}

std::string PassReport::str() const {
  std::string out =
      "stage        pass                              changed  matches  refused"
      "        ms\n";
  for (const PassRunRecord& r : runs) {
    // The numbers alone go through a fixed buffer: a pass name may be of any length.
    char numbers[96];
    std::snprintf(numbers, sizeof(numbers), " %-7s %8zu %8zu %9.3f\n", r.changed ? "yes" : "no",
                  r.matches, r.refusals, r.seconds * 1e3);
    std::string stage = stage_name(r.stage);
    stage.resize(std::max<size_t>(stage.size(), 12), ' ');
    std::string pass = r.pass;
    pass.resize(std::max<size_t>(pass.size(), 33), ' ');
    out += stage + " " + pass + numbers;
  }
  for (const PassRunRecord& r : runs) {
    for (const std::string& reason : r.reasons) out += "  " + reason + "\n";
  }
  return out;
}

void PassManager::add(PassPtr pass, PassStage stage, int priority) {
  KILN_CHECK_VALUE(pass != nullptr) << "PassManager::add: the pass is null";
  detail::with_error_context([&] { pass->Prepare(); },
                             [&] { return "while preparing pass '" + pass->name() + "'"; });
  Entry entry{std::move(pass), stage, priority, entries_.size()};
  const auto before = [](const Entry& a, const Entry& b) {
    if (a.stage != b.stage) return a.stage < b.stage;
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.order < b.order;
  };
  entries_.insert(std::upper_bound(entries_.begin(), entries_.end(), entry, before),
                  std::move(entry));
}

bool PassManager::Run(const FuncGraphPtr& graph, PassReport* report,
                      PassObserver* observer) const {
  KILN_CHECK_VALUE(graph != nullptr) << "PassManager::Run got a null graph";
  bool changed = false;
  for (const Entry& entry : entries_) {
    Pass& pass = *entry.pass;
    const auto where = [&] {
      return "pass '" + pass.name() + "' (stage " + stage_name(entry.stage) + ")";
    };
    if (observer != nullptr) observer->before(pass, entry.stage, *graph);
    RunRecorder recorder;
    PassRunRecord record;
    record.pass = pass.name();
    record.stage = entry.stage;
    const auto start = std::chrono::steady_clock::now();
    try {
      ScopedRecorder scope(&recorder);
      record.changed = pass.Run(graph);
    } catch (Error& e) {
      e.add_context("in " + where() + " on graph \"" + graph->name() + "\"");
      throw;
    } catch (const std::exception& e) {
      KILN_FAIL(kGeneric) << where() << " failed on graph \"" << graph->name()
                          << "\": " << e.what();
    }
    KILN_LET_FORCED_UNWIND_THROUGH
    catch (...) {
      KILN_FAIL(kGeneric) << where() << " failed on graph \"" << graph->name()
                          << "\": an unknown exception";
    }
    record.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    record.matches = recorder.matches;
    record.refusals = recorder.refusals;
    record.reasons = std::move(recorder.reasons);
    if (verify_) {
      try {
        ir::verify(*graph);
      } catch (Error& e) {
        e.add_context(where() + " left graph \"" + graph->name() + "\" broken");
        throw;
      }
    }
    changed = changed || record.changed;
    if (observer != nullptr) observer->after(record, *graph);
    if (report != nullptr) report->runs.push_back(std::move(record));
  }
  return changed;
}

}  // namespace kiln
