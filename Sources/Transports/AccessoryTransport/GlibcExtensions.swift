import Glibc

/// glibc functions that Swift's Glibc module hides because it is imported without
/// `_GNU_SOURCE`; they are looked up at run time and are `nil` on a C library without them.
enum GlibcExtensions {
    typealias Pipe2 = @convention(c) (UnsafeMutablePointer<CInt>?, CInt) -> CInt
    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, CInt) -> CInt

    /// `pipe2(2)`: creates a pipe with flags such as `O_CLOEXEC` atomically.
    static let pipe2: Pipe2? = lookUp("pipe2", as: Pipe2.self)

    /// `posix_spawn_file_actions_addclosefrom_np(3)` (glibc 2.34+): closes every descriptor
    /// from a number on in the child.
    static let addCloseFrom: AddCloseFrom? = lookUp("posix_spawn_file_actions_addclosefrom_np", as: AddCloseFrom.self)

    private static func lookUp<Function>(_ name: String, as type: Function.Type) -> Function? {
        // dlsym(RTLD_DEFAULT, …); RTLD_DEFAULT is a null handle on glibc.
        guard let symbol = dlsym(nil, name) else { return nil }
        return unsafeBitCast(symbol, to: type)
    }
}
