// Registering passes for the jit: backend and stage names checked, plugins loaded (see
// kiln/jit.h).
#include <algorithm>

#include "kiln/backend.h"
#include "kiln/jit.h"

namespace kiln {

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out.empty() ? "none" : out;
}

PassInfo checked_info(const std::string& name, const std::string& backend,
                      const std::string& stage, int priority) {
  KILN_CHECK_VALUE(backend == "all" || BackendManager::Instance().Find(backend) != nullptr)
      << "cannot register pass '" << name << "' for the unknown backend '" << backend
      << "'; registered backends: " << joined(list_backends()) << " (or \"all\")";
  PassInfo info;
  info.name = name;
  info.backend = backend;
  info.stage = parse_stage(stage);
  info.priority = priority;
  return info;
}

}  // namespace

void register_custom_pass(const std::string& pass_name, const std::string& plugin_path,
                          const std::string& backend, const std::string& stage, int priority) {
  PassInfo info = checked_info(pass_name, backend, stage, priority);
  info.source = plugin_path;
  const std::shared_ptr<const PassPlugin> plugin = load_pass_plugin(plugin_path);
  const std::string what = "pass plugin " + plugin_path + " ('" + plugin->GetPluginName() + "')";
  const std::vector<std::string> names = plugin->GetAvailablePassNames();
  KILN_CHECK_VALUE(std::find(names.begin(), names.end(), pass_name) != names.end())
      << what << " has no pass named '" << pass_name << "'; its passes: " << joined(names);
  PassPtr pass;
  try {
    pass = plugin->CreatePass(pass_name);
  } catch (Error& e) {
    e.add_context("in " + what + " creating pass '" + pass_name + "'");
    throw;
  } catch (const std::exception& e) {
    KILN_FAIL(kValue) << what << " failed creating pass '" << pass_name << "': " << e.what();
  } catch (...) {
    KILN_FAIL(kValue) << what << " failed creating pass '" << pass_name
                      << "': an unknown exception";
  }
  KILN_CHECK_VALUE(pass != nullptr)
      << what << " lists the pass '" << pass_name << "' but CreatePass returned null for it";
  PassRegistry::Instance().add(std::move(pass), std::move(info));
}

void register_pass(PassPtr pass, const std::string& backend, const std::string& stage,
                   int priority) {
  KILN_CHECK_VALUE(pass != nullptr) << "register_pass: the pass is null";
  PassInfo info = checked_info(pass->name(), backend, stage, priority);
  PassRegistry::Instance().add(std::move(pass), std::move(info));
}

void unregister_custom_pass(const std::string& name) { PassRegistry::Instance().remove(name); }

std::vector<PassInfo> list_passes() { return PassRegistry::Instance().list(); }

}  // namespace kiln
