import Foundation

/// Time bounds in tests are set for the plain build. A sanitized build (scripts/test --sanitize,
/// which exports ASAN_OPTIONS or TSAN_OPTIONS to the tests) runs everything several times
/// slower (up to about six times, measured), so a bound meant to catch a wait that should not happen is stretched there; what it
/// tells apart (an answer at once against a drain or a timeout of seconds) stays apart.
public enum TimeBounds {
    /// Whether this test process runs a sanitized build.
    public static let sanitized: Bool = {
        let environment = ProcessInfo.processInfo.environment
        return environment["ASAN_OPTIONS"] != nil || environment["TSAN_OPTIONS"] != nil
    }()

    /// How much longer a bound is under a sanitizer.
    public static let factor = sanitized ? 10 : 1

    /// `bound`, stretched under a sanitizer.
    public static func scaled(_ bound: Duration) -> Duration { bound * factor }
}
