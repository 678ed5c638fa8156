// Everything is in include/cepoll.h; SwiftPM needs a source file in a C target.
#include "cepoll.h"
