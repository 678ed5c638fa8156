// The header's functions are static inline; SwiftPM needs one source file to make a C target.
#include "cthreadsanitizer.h"
