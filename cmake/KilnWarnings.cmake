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
  if(KILN_SANITIZE MATCHES "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # ThreadSanitizer does not model std::atomic_thread_fence, and GCC warns about each one
    # (-Wtsan). The runtime's fences only keep a sleeper from missing its wake-up (see
    # src/runtime/parker.h); the ordering of data, which TSan checks, comes from acquire and
    # release operations it does model.
    target_compile_options(kiln_sanitizers INTERFACE -Wno-tsan)
  endif()
endif()
