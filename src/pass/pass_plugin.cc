// Pass plugins: loading a library's PassPlugin through the core's plugin loader (see kiln/pass.h).
#include <map>
#include <mutex>

#include "core/plugin.h"
#include "kiln/pass.h"

namespace kiln {

PassPlugin::~PassPlugin() = default;

std::shared_ptr<const PassPlugin> load_pass_plugin(const std::string& path) {
  static std::mutex mutex;
  // Plugins stay loaded (Note [Plugins stay loaded] in src/core/plugin.cc), and so do their
  // plugin objects: loading a library again gives the object its first load made.
  // Keyed by the entry point, which is one per library however its path is spelled.
  static auto* loaded = new std::map<const KilnPluginEntry*, std::shared_ptr<const PassPlugin>>();
  const std::shared_ptr<const PluginLibrary> library =
      load_plugin(path, "kiln_plugin_pass_entry", "pass");
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded->find(&library->entry());
  if (it != loaded->end()) return it->second;
  detail::PassPluginHost host;
  library->init(&host);
  KILN_CHECK_VALUE(host.plugin != nullptr)
      << "pass plugin " << path << ": its KILN_EXPORT_PASS_PLUGIN made no plugin object";
  return loaded->emplace(&library->entry(), std::move(host.plugin)).first->second;
}

}  // namespace kiln
