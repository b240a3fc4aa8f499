// Loading plugin libraries (private to libkiln): one loader for extensions, pass plugins and
// backend plugins, so every kind fails the same way with the same words.
//
//   std::shared_ptr<const PluginLibrary> lib =
//       load_plugin("/path/libmy_ops.so", "kiln_plugin_extension_entry", "extension");
//   lib->init(&module);   // runs the plugin's registrations; failures become kiln::Error
//
// load_plugin checks, in order: the file exists, it is an ELF shared library, dlopen succeeds
// (missing symbols, wrong architecture), the entry symbol exists, the entry's abi_version equals
// abi_version() and its kind is the expected one. Each failure throws kiln::Error (kValue) whose
// message names the file and says what was expected and what was found. See Note [Plugins stay
// loaded] for why a loaded library is never closed.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "kiln/abi.h"
#include "kiln/export.h"

namespace kiln {

/// A dlopen()ed plugin whose entry point passed the ABI check. Thread-safe (immutable).
class KILN_API PluginLibrary {
 public:
  PluginLibrary(std::string path, const KilnPluginEntry* entry)
      : path_(std::move(path)), entry_(entry) {}
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  const std::string& path() const { return path_; }
  const KilnPluginEntry& entry() const { return *entry_; }
  /// Runs the plugin's init against `host`; a failure it reports is rethrown as kiln::Error of
  /// the kind it reported, prefixed with the plugin's kind and path.
  void init(void* host) const;

 private:
  std::string path_;
  const KilnPluginEntry* entry_;
};

/// Loads the plugin at `path` and checks its entry point `entry_symbol` (see the file comment).
/// `kind` is the plugin kind expected ("extension", "pass", "backend"). Throws kiln::Error.
KILN_API std::shared_ptr<const PluginLibrary> load_plugin(const std::string& path,
                                                           const char* entry_symbol,
                                                           const char* kind);

}  // namespace kiln
