// ExtensionModule and load_extension: what a custom-op library exposes, and loading one.
#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "core/plugin.h"
#include "kiln/extension.h"
#include "kiln/op.h"

namespace kiln {

// Note [One entry point per library]
// Every source file of an extension may hold a KILN_EXTENSION block. Each block adds a static
// registrar to a list whose head is a function-local static of a *hidden* inline function, so
// the linker merges the lists of one library's translation units into one, while two libraries
// never share a list (a default-visibility inline static would be a process-wide unique symbol).
// The entry point kiln_plugin_extension_entry is inline too (one definition per library, emitted
// by any translation unit with a block); its init runs the blocks in registration order. So a
// multi-source extension needs no "main" file, and the ABI stamp comes from the headers of the
// translation unit the linker keeps (all of them were compiled in one build).

struct ExtensionModule::State {
  std::string name;
  std::vector<ExtensionFunction> functions;
  std::vector<std::pair<std::string, OpDefPtr>> ops;
  std::shared_ptr<const PluginLibrary> library;  // keeps the code alive with the module
  std::vector<OpRegistration> registrations;

  void check_python_name(const std::string& py_name, const std::string& what) const {
    bool valid = !py_name.empty() && !std::isdigit(static_cast<unsigned char>(py_name[0]));
    for (char c : py_name) {
      valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    }
    KILN_CHECK_VALUE(valid) << "extension '" << name << "': expected a Python name (letters, "
                            << "digits and _) for a " << what << ", got '" << py_name << "'";
    // Python's keywords (keyword.kwlist): `ops.import` or a parameter `lambda` cannot be written.
    static const std::set<std::string> kKeywords = {
        "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
        "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
        "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
        "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};
    KILN_CHECK_VALUE(kKeywords.count(py_name) == 0)
        << "extension '" << name << "': expected a Python name that is not a keyword for a " << what
        << ", got '" << py_name << "'";
  }

  void check_new_name(const std::string& py_name) const {
    check_python_name(py_name, "function");
    const bool taken = std::any_of(functions.begin(), functions.end(),
                                   [&](const ExtensionFunction& f) { return f.name == py_name; }) ||
                       std::any_of(ops.begin(), ops.end(),
                                   [&](const auto& op) { return op.first == py_name; });
    KILN_CHECK_VALUE(!taken) << "extension '" << name << "' defines '" << py_name << "' twice";
  }

  // The same OpDef objects at every activation: the Python functions bound to them stay the
  // registered ops when a failed reload brings this build back.
  void register_ops() {
    for (const auto& [py_name, def] : ops) registrations.push_back(OpRegistry::Instance().add(def));
  }
  void release_ops() { registrations.clear(); }
};

ExtensionModule::ExtensionModule(std::string name) : state_(std::make_unique<State>()) {
  state_->name = std::move(name);
}

ExtensionModule::~ExtensionModule() = default;

const std::string& ExtensionModule::name() const { return state_->name; }

namespace {

// "FusedAdd" -> "fused_add", "LinearGELU" -> "linear_gelu", "FFT2d" -> "fft2d".
std::string snake_case(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (std::isupper(c) && i > 0) {
      const auto prev = static_cast<unsigned char>(name[i - 1]);
      const bool next_lower =
          i + 1 < name.size() && std::islower(static_cast<unsigned char>(name[i + 1]));
      if (std::islower(prev) || std::isdigit(prev) || (std::isupper(prev) && next_lower)) {
        out += '_';
      }
    }
    out += static_cast<char>(std::tolower(c));
  }
  return out;
}

}  // namespace

ExtensionModule& ExtensionModule::def_erased(const char* name,
                                             const detail::ErasedSignature& signature,
                                             std::initializer_list<const char*> arg_names,
                                             const char* doc) {
  ExtensionFunction function;
  function.name = name != nullptr ? name : "";
  function.doc = doc != nullptr ? doc : "";
  function.arg_kinds.assign(signature.arg_kinds, signature.arg_kinds + signature.num_args);
  function.result_kind = signature.result_kind;
  function.num_results = signature.num_results;
  function.fn = signature.fn;
  function.invoker = signature.invoker;
  state_->check_new_name(function.name);
  for (const char* arg : arg_names) function.arg_names.emplace_back(arg != nullptr ? arg : "");
  if (arg_names.size() == 0) {
    for (size_t i = 0; i < signature.num_args; ++i) {
      function.arg_names.push_back("arg" + std::to_string(i));
    }
  }
  KILN_CHECK_VALUE(function.arg_names.size() == signature.num_args)
      << "extension '" << state_->name << "': def('" << function.name << "') got "
      << function.arg_names.size() << " argument names for a function of " << signature.num_args
      << " parameters";
  for (const std::string& arg : function.arg_names) {
    state_->check_python_name(arg, "parameter of " + function.name);
    KILN_CHECK_VALUE(std::count(function.arg_names.begin(), function.arg_names.end(), arg) == 1)
        << "extension '" << state_->name << "': def('" << function.name
        << "') names two parameters '" << arg << "'";
  }
  state_->functions.push_back(std::move(function));
  return *this;
}

ExtensionModule& ExtensionModule::def_op(const OpDef& op, const std::string& python_name) {
  const std::string py_name = python_name.empty() ? snake_case(op.name()) : python_name;
  state_->check_new_name(py_name);
  KILN_CHECK_VALUE(op.infer_fn() != nullptr)
      << "extension '" << state_->name << "': def_op(" << op.name()
      << ") needs an infer function";
  state_->ops.emplace_back(py_name, std::make_shared<const OpDef>(op));
  return *this;
}

const std::vector<ExtensionFunction>& ExtensionModule::functions() const {
  return state_->functions;
}

const ExtensionFunction* ExtensionModule::find_function(const std::string& name) const {
  for (const ExtensionFunction& f : state_->functions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const std::vector<std::pair<std::string, OpDefPtr>>& ExtensionModule::ops() const {
  return state_->ops;
}

// Note [Replacing an extension]
// The process keeps the newest loaded module of each extension name (so its ops stay registered
// even when Python drops the module object). Loading another build under the same name first
// removes the old build's ops from the registry, then registers the new build's; if that fails
// (an op name taken by another extension), the old build's ops come back and the error says why.
// Old Python functions keep working on the code they were built with (Note [Plugins stay
// loaded]); the registry, and so graphs and call_op by name, see only the new build.
void ExtensionModule::activate(const std::shared_ptr<ExtensionModule>& module) {
  static std::mutex mutex;
  static auto* active = new std::map<std::string, std::shared_ptr<ExtensionModule>>();
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<ExtensionModule>& slot = (*active)[module->name()];
  if (slot != nullptr) slot->state_->release_ops();
  try {
    module->state_->register_ops();
  } catch (Error& e) {
    module->state_->release_ops();
    if (slot != nullptr) slot->state_->register_ops();
    e.add_context("while activating extension '" + module->name() + "'");
    throw;
  }
  slot = module;
}

std::shared_ptr<const ExtensionModule> load_extension(const std::string& path,
                                                      const std::string& name) {
  std::shared_ptr<const PluginLibrary> library =
      load_plugin(path, "kiln_plugin_extension_entry", "extension");
  auto module = std::make_shared<ExtensionModule>(name);
  library->init(module.get());
  module->state_->library = std::move(library);
  ExtensionModule::activate(module);
  return module;
}

}  // namespace kiln
