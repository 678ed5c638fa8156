import CEpoll

/// Whether epoll will watch a descriptor for readiness.
///
/// NIO's pipe channels assume it will, and trap when it does not (a `try!` around the
/// registration in `BaseSocketChannel.registerAlreadyConfigured0`, NIO 2.x): epoll refuses with
/// `EPERM` files that are always ready, such as regular files and character devices without a
/// poll method (`/dev/null`, `/dev/zero`, `/dev/full`). Before 2026-12-06,
/// `--device stdio < /dev/zero` and `serve --device stdio < /dev/zero` crashed that way. A
/// descriptor that comes from outside is asked here first, on an epoll instance of its own.
package enum ReadinessWatch {
    /// False only when epoll refuses `descriptor` (`EPERM`); true when it accepts it, or when
    /// the question cannot be asked (then NIO's own registration reports the error).
    package static func accepts(_ descriptor: CInt) -> Bool {
        accessory_epoll_accepts(descriptor) != 0
    }
}
