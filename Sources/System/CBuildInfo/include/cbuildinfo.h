#ifndef CBUILDINFO_H
#define CBUILDINFO_H

/// The git commit this binary was built from, as scripts/package passes it
/// (-Xcc -DACCESSORY_HTTP_COMMIT='"…"'), or "unknown" in a build that did not.
const char *accessory_http_build_commit(void);

#endif
