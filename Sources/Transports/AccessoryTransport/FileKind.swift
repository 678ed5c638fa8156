import Glibc

/// The kind of a file as `stat(2)` reports it, used to explain why a path cannot be a device.
enum FileKind: Sendable, Hashable, CustomStringConvertible {
    case regularFile, directory, characterDevice, blockDevice, fifo, socket, symbolicLink, unknown

    init(mode: mode_t) {
        switch mode & S_IFMT {
        case S_IFREG: self = .regularFile
        case S_IFDIR: self = .directory
        case S_IFCHR: self = .characterDevice
        case S_IFBLK: self = .blockDevice
        case S_IFIFO: self = .fifo
        case S_IFSOCK: self = .socket
        case S_IFLNK: self = .symbolicLink
        default: self = .unknown
        }
    }

    /// `stat(2)` on `path`, following symbolic links.
    static func of(path: String) throws(Errno) -> FileKind {
        var status = stat()
        _ = try retryingOnInterrupt { stat(path, &status) }
        return FileKind(mode: status.st_mode)
    }

    /// With an article, for messages: "a regular file".
    var description: String {
        switch self {
        case .regularFile: "a regular file"
        case .directory: "a directory"
        case .characterDevice: "a character device"
        case .blockDevice: "a block device"
        case .fifo: "a named pipe"
        case .socket: "a socket"
        case .symbolicLink: "a symbolic link"
        case .unknown: "a file of unknown kind"
        }
    }
}
