// Symbol visibility for libkiln.so.
//
// libkiln is built with hidden visibility; KILN_API marks the declarations that form its public
// ABI. Custom ops and plugins include this through the other public headers and see KILN_API as
// an import declaration.
#pragma once

#if defined(KILN_BUILDING_LIBRARY)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif
