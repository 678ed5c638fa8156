import Glibc
import NIOCore

/// Ends a pipe-pair channel that allows half-closes when its input ends after its output's
/// reader went away.
///
/// NIO's pipe channel, on the output's hang-up, closes the output descriptor without failing the
/// writes still pending; if the input's end arrives after that and is taken as a half-close, the
/// channel stays open for ever, its writes waiting for room (swift-nio issue 3294; seen as a
/// `serve` that never returned after its host went away during a download). In the other order
/// NIO closes the channel itself. So when the input ends, this asks a duplicate of the output
/// descriptor whether its reader is gone (`POLLERR`/`POLLHUP`, without waiting), and closes the
/// channel if so. The duplicate keeps the output open for its reader, so whoever made it closes
/// it when the channel has closed; this handler only looks at it.
final class OutputHangUpWatch: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    /// A duplicate of the output descriptor, open while the channel is.
    private let watched: CInt

    init(watched: CInt) {
        self.watched = watched
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        let outputGone = (event as? ChannelEvent) == .inputClosed && self.outputHungUp
        context.fireUserInboundEventTriggered(event)
        if outputGone { context.close(promise: nil) }
    }

    /// Whether the output's reader has gone away.
    private var outputHungUp: Bool {
        var entry = pollfd(fd: self.watched, events: Int16(POLLOUT), revents: 0)
        guard poll(&entry, 1, 0) == 1 else { return false }
        return entry.revents & Int16(POLLERR | POLLHUP) != 0
    }
}
