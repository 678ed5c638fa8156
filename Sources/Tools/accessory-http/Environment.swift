#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// This process's environment variables.
struct Environment {
    subscript(name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        return String(cString: value)
    }
}
