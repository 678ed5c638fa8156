// libFuzzer's driver, for a binary whose `main` is its own (SwiftPM names an executable's entry
// point itself). Provided by the fuzzer runtime that `-sanitize=fuzzer` links; used only by the
// fuzz targets (scripts/fuzz).
#pragma once
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
