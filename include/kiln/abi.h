// The plugin ABI: Kiln's version, the ABI version every plugin is stamped with, and the C entry
// struct a plugin library exports.
//
//   // What KILN_EXTENSION (and later KILN_EXPORT_PASS_PLUGIN, KILN_REGISTER_BACKEND) expand to:
//   KILN_PLUGIN_EXPORT const KilnPluginEntry* kiln_plugin_extension_entry() {
//     static const KilnPluginEntry entry{KILN_ABI_VERSION, "extension", &my_init};
//     return &entry;
//   }
//
// A plugin is a shared library linked to libkiln. Its C++ interface is only stable within one
// minor version of Kiln, so the registration macros stamp the KILN_ABI_VERSION of the headers the
// plugin was compiled with into the entry struct, and the loader (once, in the core, for
// extensions, pass plugins and backend plugins alike) refuses a plugin whose stamp differs from
// the libkiln it would run against, naming both versions. The entry point is `extern "C"` and
// returns a struct whose first field is the version, so the check itself never depends on the C++
// ABI; `init` reports failures through a callback, so exceptions never cross it.
#pragma once

#include <cstdint>
#include <exception>

#include "kiln/error.h"
#include "kiln/export.h"

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 6
#define KILN_VERSION_PATCH 0
/// The version of Kiln's plugin ABI: major * 1000 + minor (patch releases keep the ABI). CMake
/// checks that the project version agrees with the numbers above.
#define KILN_ABI_VERSION (KILN_VERSION_MAJOR * 1000 + KILN_VERSION_MINOR)

/// Declares a plugin's C entry point, visible even when the plugin hides its other symbols.
#define KILN_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

extern "C" {

/// How a plugin's init reports a failure: `error_kind` is a kiln::ErrorKind value.
typedef void (*KilnPluginReportFn)(void* report_context, int error_kind, const char* message);
/// Runs a plugin's registrations against `host` (an object whose type the plugin kind fixes:
/// kiln::ExtensionModule for extensions). Returns 0 on success; on failure calls `report` once and
/// returns nonzero. Never throws.
typedef int (*KilnPluginInitFn)(void* host, KilnPluginReportFn report, void* report_context);

/// What a plugin's entry function returns. The layout of the first field never changes.
struct KilnPluginEntry {
  uint32_t abi_version;  // KILN_ABI_VERSION of the headers the plugin was compiled with
  const char* kind;      // "extension", "pass" or "backend"
  KilnPluginInitFn init;
};

/// The type of every plugin entry function (`kiln_plugin_<kind>_entry`).
typedef const KilnPluginEntry* (*KilnPluginEntryFn)(void);
}

namespace kiln {

/// The KILN_ABI_VERSION libkiln was built with (what plugins are checked against).
KILN_API int abi_version();

namespace detail {

/// Runs `body(*host)` and turns any exception into a `report` call, so that nothing is thrown
/// across the C entry point. Compiled into the plugin (it is inline), so the catch happens on the
/// plugin's side of the boundary.
template <typename Host>
int run_plugin_init(void (*body)(Host&), void* host, KilnPluginReportFn report,
                    void* report_context) noexcept {
  try {
    body(*static_cast<Host*>(host));
    return 0;
  } catch (const Error& e) {
    report(report_context, static_cast<int>(e.kind()), e.what());
  } catch (const std::exception& e) {
    report(report_context, static_cast<int>(ErrorKind::kGeneric), e.what());
  } catch (...) {
    report(report_context, static_cast<int>(ErrorKind::kGeneric), "an unknown exception");
  }
  return 1;
}

}  // namespace detail
}  // namespace kiln
