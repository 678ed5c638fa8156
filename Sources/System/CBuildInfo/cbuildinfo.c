// The commit is a C macro because SwiftPM cannot pass a string value into Swift code at build
// time; scripts/package defines it, other builds say "unknown".
#include "cbuildinfo.h"

#ifndef ACCESSORY_HTTP_COMMIT
#define ACCESSORY_HTTP_COMMIT "unknown"
#endif

const char *accessory_http_build_commit(void) { return ACCESSORY_HTTP_COMMIT; }
