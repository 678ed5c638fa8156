// Only the header matters: LLVMFuzzerRunDriver lives in the fuzzer runtime.
#include "CLibFuzzer.h"
