// A plugin of another kind ("backend") exported under the pass plugin's entry symbol.
#include <kiln/abi.h>

namespace {
int init(void*, KilnPluginReportFn, void*) { return 0; }
const KilnPluginEntry kEntry{KILN_ABI_VERSION, "backend", &init};
}  // namespace

KILN_PLUGIN_EXPORT const KilnPluginEntry* kiln_plugin_pass_entry() { return &kEntry; }
