// libFuzzer entry points (docs/testing.md, "Fuzzing"). This target exists only when the package
// is built with ACCESSORY_HTTP_FUZZ=1 and `-sanitize=fuzzer` (scripts/fuzz does both): libFuzzer
// supplies `main`, calls `LLVMFuzzerInitialize` once and `LLVMFuzzerTestOneInput` per input.
// One binary holds every target; ACCESSORY_HTTP_FUZZ_TARGET picks one.
//
// SwiftPM links an executable with `main` set to `<module>_main`, so libFuzzer's own `main` is
// never used: `AccessoryHTTPFuzz_main` hands control to libFuzzer's driver instead, which then
// calls the two entry points below as its `main` would.

import CLibFuzzer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The target chosen at start-up. libFuzzer calls both entry points from its one thread, the
/// first before the other, so this is written once and then only read.
nonisolated(unsafe) private var selectedTarget: FuzzTarget?

@_cdecl("LLVMFuzzerInitialize")
public func fuzzerInitialize(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> CInt {
    let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
    guard let raw = getenv("ACCESSORY_HTTP_FUZZ_TARGET") else {
        FuzzCheck.exit("set ACCESSORY_HTTP_FUZZ_TARGET to one of: \(names) (scripts/fuzz does)")
    }
    let name = String(cString: raw)
    guard let target = FuzzTarget(rawValue: name) else {
        FuzzCheck.exit("unknown fuzz target '\(name)'; the targets are: \(names)")
    }
    target.prepare()
    selectedTarget = target
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let target = selectedTarget else { return 0 }
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    var input = FuzzInput(bytes)
    target.run(&input)
    return 0
}

@_cdecl("AccessoryHTTPFuzz_main")
public func fuzzMain(
    _ argc: CInt,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> CInt {
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { data, size in fuzzerTestOneInput(data, size) }
}
