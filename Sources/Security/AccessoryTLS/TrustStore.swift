#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The persistent trust store: anchors to trust and accessories paired by key, in a per-user
/// directory and a system-wide one.
///
/// Each directory holds:
/// - `*.pem` / `*.crt`: trusted anchor certificates (CAs or self-signed accessory
///   certificates), loaded in addition to the system roots;
/// - `known_accessories`: one paired accessory a line, `IDENTITY sha256:BASE64 [# comment]`,
///   like ssh's known_hosts. `#` starts a comment line.
///
/// The user directory is `$XDG_CONFIG_HOME/accessory-http/trust` (default
/// `~/.config/accessory-http/trust`; a relative `XDG_CONFIG_HOME` is ignored, as the XDG spec
/// says); the system one is `/etc/accessory-http/trust`. Lookups read the user file first.
/// ``remember(identity:pin:comment:)`` writes only the user file.
///
/// Like ssh's StrictModes, a directory or file of the store that anyone but its owner could
/// write, or that belongs to another user (root excepted), is refused with an error saying how
/// to fix it: whoever can write there can make this user trust any accessory.
///
/// Anchors are global: a CA in the store is trusted for every accessory, as a CA in the system
/// roots is. That is safe only because a CA alone never identifies an accessory: a chain that
/// verifies must also carry the expected name (``TLSConfiguration/serverName``), so a CA is
/// trusted to say *which* accessory holds a name, never to stand in for a name, a pin or a
/// pairing.
public struct TrustStore: Sendable, Hashable {
    /// A paired accessory.
    public struct Entry: Sendable, Hashable {
        /// The accessory's identity, the first word of its known_accessories line.
        public let identity: String
        /// The key the accessory is paired with.
        public let pin: TLSPin
        /// The text after the pin, without a leading `#`; `nil` if the line has none.
        public let comment: String?
        /// The file the entry was read from.
        public let file: String
    }

    /// The per-user directory (written by pairing); `nil` if there is no home directory.
    public var userDirectory: String?
    /// The system-wide directory (read only).
    public var systemDirectory: String?

    /// A trust store in the given directories; ``standard()`` gives the usual ones.
    ///
    /// - Parameters:
    ///   - userDirectory: The per-user directory, read first and written by
    ///     ``remember(identity:pin:comment:)``; `nil` for none.
    ///   - systemDirectory: The system-wide directory, only read; `nil` (the default) for none.
    public init(userDirectory: String?, systemDirectory: String? = nil) {
        self.userDirectory = userDirectory
        self.systemDirectory = systemDirectory
    }

    /// The standard locations, from `XDG_CONFIG_HOME` / `HOME`.
    public static func standard() -> TrustStore {
        var user: String?
        if let xdg = getenv("XDG_CONFIG_HOME").map({ String(cString: $0) }), xdg.hasPrefix("/") {
            user = xdg + "/accessory-http/trust"
        } else if let home = getenv("HOME").map({ String(cString: $0) }), !home.isEmpty {
            user = home + "/.config/accessory-http/trust"
        }
        return TrustStore(userDirectory: user, systemDirectory: "/etc/accessory-http/trust")
    }

    /// The known_accessories file in the user directory.
    public var userKnownAccessoriesFile: String? { self.userDirectory.map { $0 + "/known_accessories" } }

    private var directories: [String] { [self.userDirectory, self.systemDirectory].compactMap { $0 } }

    /// The anchor certificate files in both directories. Throws when a directory or file
    /// could be written by someone else (see ``TrustStore``).
    public func anchorFiles() throws(TLSError) -> [String] {
        var files: [String] = []
        for directory in self.directories {
            guard try StoreFile.checkWritableOnlyByOwner(directory) else { continue }
            guard let handle = opendir(directory) else { continue }
            defer { closedir(handle) }
            while let entry = readdir(handle) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name.hasSuffix(".pem") || name.hasSuffix(".crt") { files.append(directory + "/" + name) }
            }
        }
        for file in files { _ = try StoreFile.checkWritableOnlyByOwner(file) }
        return files.sorted()
    }

    /// Every paired accessory, user entries first.
    public func entries() throws(TLSError) -> [Entry] {
        var entries: [Entry] = []
        for directory in self.directories {
            let file = directory + "/known_accessories"
            guard try StoreFile.checkWritableOnlyByOwner(directory), try StoreFile.checkWritableOnlyByOwner(file),
                let text = try TextFile.read(file)
            else { continue }
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let trimmed = String(line).trimmingWhitespace()
                if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
                let parts = trimmed.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
                guard parts.count >= 2 else {
                    throw TLSError(
                        .trustStoreError,
                        "\(file):\(number + 1): expected 'IDENTITY sha256:BASE64 [# comment]'"
                    )
                }
                let pin: TLSPin
                do {
                    pin = try TLSPin(parsing: String(parts[1]))
                } catch {
                    throw TLSError(.trustStoreError, "\(file):\(number + 1): \(error.message)")
                }
                var comment: String?
                if parts.count == 3 {
                    let rest = String(parts[2]).trimmingWhitespace()
                    comment = rest.hasPrefix("#") ? String(rest.dropFirst()).trimmingWhitespace() : rest
                }
                entries.append(Entry(identity: String(parts[0]), pin: pin, comment: comment, file: file))
            }
        }
        return entries
    }

    /// The entry for `identity` (the user's first), or `nil` if the accessory is not paired.
    public func entry(for identity: String) throws(TLSError) -> Entry? {
        try self.entries().first { $0.identity == identity }
    }

    /// Pairs `identity` with `pin` in the user's known_accessories, replacing an earlier entry
    /// for the same identity (the `trust` command refuses to replace a different key: it asks
    /// for `--forget` first). The file is replaced atomically under a lock and kept private
    /// (0600).
    public func remember(identity: String, pin: TLSPin, comment: String? = nil) throws(TLSError) {
        guard let directory = self.userDirectory, let file = self.userKnownAccessoriesFile else {
            throw TLSError(.trustStoreError, "no per-user trust directory (HOME and XDG_CONFIG_HOME are unset)")
        }
        try Self.validate(identity: identity)
        try TextFile.makeDirectories(directory)
        _ = try StoreFile.checkWritableOnlyByOwner(directory)
        _ = try StoreFile.checkWritableOnlyByOwner(file)
        let lock = try StoreFile.lock(directory)
        defer { close(lock) }
        var lines: [String] = []
        if let text = try TextFile.read(file) {
            for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
                let first = line.split(separator: " ", maxSplits: 1).first.map(String.init)
                if first != identity { lines.append(String(line)) }
            }
        } else {
            lines.append("# accessory-http known accessories: IDENTITY sha256:SPKI-SHA256-BASE64 [# comment]")
        }
        let safeComment = comment.map { $0.replacingNewlines() }
        lines.append("\(identity) \(pin)" + (safeComment.map { " # \($0)" } ?? ""))
        try TextFile.writeAtomically(file, lines.joined(separator: "\n") + "\n")
    }

    /// Removes `identity` from the user's known_accessories. Returns whether it was there.
    @discardableResult
    public func forget(identity: String) throws(TLSError) -> Bool {
        guard let directory = self.userDirectory, let file = self.userKnownAccessoriesFile,
            try StoreFile.checkWritableOnlyByOwner(directory)
        else { return false }
        _ = try StoreFile.checkWritableOnlyByOwner(file)
        let lock = try StoreFile.lock(directory)
        defer { close(lock) }
        guard let text = try TextFile.read(file) else { return false }
        var found = false
        var lines: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.split(separator: " ", maxSplits: 1).first.map(String.init) == identity {
                found = true
            } else {
                lines.append(String(line))
            }
        }
        if found { try TextFile.writeAtomically(file, lines.joined(separator: "\n") + "\n") }
        return found
    }

    static func validate(identity: String) throws(TLSError) {
        guard !identity.isEmpty, !identity.hasPrefix("#"),
            !identity.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 })
        else {
            throw TLSError(
                .invalidConfiguration,
                "the accessory identity '\(identity)' must be non-empty, without spaces, and not start with #"
            )
        }
    }
}

extension String {
    fileprivate func replacingNewlines() -> String {
        String(self.unicodeScalars.map { $0 == "\n" || $0 == "\r" ? " " : Character($0) })
    }
}

/// Small whole-file reads and atomic writes with errno-based messages.
enum TextFile {
    /// The file's text, or `nil` if it does not exist.
    static func read(_ path: String) throws(TLSError) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw TLSError(.trustStoreError, "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 8192)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw TLSError(.trustStoreError, "cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
            if bytes.count > 4 * 1024 * 1024 {
                throw TLSError(.trustStoreError, "\(path) is larger than 4 MiB; is it the right file?")
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func makeDirectories(_ path: String) throws(TLSError) {
        var prefix = ""
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw TLSError(.trustStoreError, "cannot create \(prefix): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Replaces `path` with `text`: a new file with a random name beside it, created with
    /// `O_EXCL|O_NOFOLLOW` (so no planted file or symlink is ever written through), mode 0600,
    /// synced, renamed over `path`, and the directory synced so the rename survives a crash.
    static func writeAtomically(_ path: String, _ text: String) throws(TLSError) {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let base = path.split(separator: "/").last.map(String.init) ?? path
        var random = SystemRandomNumberGenerator()
        let suffix = String(random.next() as UInt64, radix: 16)
        let temporary = "\(directory)/.\(base).\(suffix).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw TLSError(.trustStoreError, "cannot write \(temporary): \(String(cString: strerror(errno)))")
        }
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes {
                Glibc.write(fd, $0.baseAddress.map { $0 + offset }, $0.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                let reason = String(cString: strerror(errno))
                close(fd)
                unlink(temporary)
                throw TLSError(.trustStoreError, "cannot write \(temporary): \(reason)")
            }
            offset += written
        }
        bytes.removeAll()
        let synced = fsync(fd) == 0
        close(fd)
        guard synced, rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw TLSError(.trustStoreError, "cannot replace \(path): \(reason)")
        }
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            _ = fsync(directoryFD)
            close(directoryFD)
        }
    }
}

/// Checks and locks of the trust store's files.
enum StoreFile {
    /// Whether `path` exists; throws when someone other than its owner could write it, or it
    /// belongs to another user than this one or root (ssh's StrictModes).
    static func checkWritableOnlyByOwner(_ path: String) throws(TLSError) -> Bool {
        var status = stat()
        if stat(path, &status) != 0 {
            if errno == ENOENT || errno == ENOTDIR { return false }
            throw TLSError(.trustStoreError, "cannot check \(path): \(String(cString: strerror(errno)))")
        }
        let owner = status.st_uid
        if owner != geteuid() && owner != 0 {
            throw TLSError(
                .trustStoreError,
                "refusing the trust store: \(path) belongs to uid \(owner), not to this user (uid \(geteuid())) or root, so its owner could make you trust any accessory; fix it with: chown \(geteuid()) '\(path)'"
            )
        }
        let mode = status.st_mode & 0o7777
        if mode & 0o022 != 0 {
            let octal = String(mode, radix: 8)
            throw TLSError(
                .trustStoreError,
                "refusing the trust store: \(path) can be written by \(mode & 0o002 != 0 ? "every user" : "its group") (mode \(octal)), so they could make you trust any accessory; fix it with: chmod go-w '\(path)'"
            )
        }
        return true
    }

    /// An exclusive lock on the store's `.lock` file, held until the descriptor is closed, so
    /// two pairings at once cannot lose one another's line.
    static func lock(_ directory: String) throws(TLSError) -> Int32 {
        let path = directory + "/.known_accessories.lock"
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw TLSError(.trustStoreError, "cannot open the lock \(path): \(String(cString: strerror(errno)))")
        }
        while flock(fd, LOCK_EX) != 0 {
            if errno == EINTR { continue }
            let reason = String(cString: strerror(errno))
            close(fd)
            throw TLSError(.trustStoreError, "cannot lock \(path): \(reason)")
        }
        return fd
    }
}
