# kiln_warnings: an INTERFACE target carrying the warning flags (not installed, not exported), so
# consumers of kiln::kiln never inherit them.
add_library(kiln_warnings INTERFACE)
target_compile_options(kiln_warnings INTERFACE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
if(KILN_WERROR)
  target_compile_options(kiln_warnings INTERFACE -Werror)
endif()

# kiln_sanitizers: the instrumentation flags of a sanitizer build (empty otherwise).
add_library(kiln_sanitizers INTERFACE)
if(KILN_SANITIZE)
  target_compile_options(kiln_sanitizers INTERFACE -fsanitize=${KILN_SANITIZE}
                                                   -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(kiln_sanitizers INTERFACE -fsanitize=${KILN_SANITIZE})
endif()
