import Glibc

/// How many bytes written to a stream's descriptor the far side has not taken yet: the kernel's
/// send queue. `SIOCOUTQ` on a socket (a unix socket counts what the peer has not read), `TIOCOUTQ`
/// on a tty (what the UART has not sent), `FIONREAD` on a pipe (either end reports what the pipe
/// holds).
///
/// A layer that must tell a device reading slowly from a dead one needs it: bytes that left the
/// channel's own buffer have only reached this queue, and the device takes them from there unseen
/// (docs/framing.md §4). A pty reports 0 (its writes go straight into the other side's buffer,
/// which is bounded to a few tens of KiB).
///
/// NIO owns the descriptor and closes it on the channel's event loop, so ``unsentBytes()`` may
/// be called only there, while the channel is active: then the number still names this stream.
///
/// A transport whose channel has no descriptor (USB: its writes go into transfers) counts the
/// queue itself: ``init(counting:)``.
public struct KernelSendQueue: Sendable, Hashable {
    private enum Source: Hashable {
        case descriptor(CInt, request: UInt)
        case counter(Counter)
    }

    /// A transport's own count; equal only to itself.
    private final class Counter: Sendable, Hashable {
        let unsent: @Sendable () -> Int
        init(_ unsent: @escaping @Sendable () -> Int) { self.unsent = unsent }
        static func == (lhs: Counter, rhs: Counter) -> Bool { lhs === rhs }
        func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    }

    private let source: Source

    /// The send queue of `descriptor`, or `nil` when its kind has none to read (a regular file,
    /// a character device that is not a tty) or `fstat` fails.
    public init?(descriptor: CInt) {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return nil }
        let request: UInt
        switch FileKind(mode: status.st_mode) {
        // Linux defines SIOCOUTQ as TIOCOUTQ (linux/sockios.h); Glibc's module has only the latter.
        case .socket: request = UInt(TIOCOUTQ)
        case .fifo: request = UInt(FIONREAD)
        case .characterDevice where isatty(descriptor) == 1: request = UInt(TIOCOUTQ)
        default: return nil
        }
        self.source = .descriptor(descriptor, request: request)
    }

    /// A queue the transport counts itself: `unsent` returns the bytes written past the channel
    /// that the device has not taken yet (a USB link's OUT transfers not back).
    public init(counting unsent: @escaping @Sendable () -> Int) {
        self.source = .counter(Counter(unsent))
    }

    /// The bytes in the queue now, or `nil` if the kernel would not say. Call it only on the
    /// channel's event loop while the channel is active (see the type's comment).
    public func unsentBytes() -> Int? {
        switch self.source {
        case .descriptor(let descriptor, let request):
            var count: CInt = 0
            guard ioctl(descriptor, request, &count) == 0, count >= 0 else { return nil }
            return Int(count)
        case .counter(let counter):
            return counter.unsent()
        }
    }
}
