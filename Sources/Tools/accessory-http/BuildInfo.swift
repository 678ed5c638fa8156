import AccessoryClient
import CBuildInfo

/// What `accessory-http --version` prints: the version (`AccessoryClient.version`, which the
/// Debian package's version follows too) and the git commit of the build.
enum BuildInfo {
    /// The commit scripts/package built from, or "unknown".
    static var commit: String { String(cString: accessory_http_build_commit()) }

    /// `0.1.0 (commit 905a6d5…)`.
    static var versionLine: String { "\(AccessoryClient.version) (commit \(Self.commit))" }
}
