import AccessoryHTTP1
import AccessoryTransport
import NIOCore
import NIOHTTP2

/// Whether an HTTP/2 connection's device is still there, for both kinds of client connection
/// (through ``LivenessCheck``): an I/O-free state machine (events in, actions out), its clock
/// passed in.
///
/// A stream whose wait ends at the idle bound says only that the device is silent on that
/// stream. When it sent nothing on the whole connection for that long either, the connection
/// asks with a PING (RFC 9113 §6.7): a device whose HTTP/2 side lives acknowledges it at once,
/// and only the stream is reset (a slow handler on the device); one that acknowledges nothing
/// within half the idle bound has lost its HTTP/2 side, though its line may live on (a session
/// layer answers its pings whatever HTTP does), and the connection is given up. Half: a request
/// sent just after the first wait ended is then moved to the next connection before its own
/// wait ends on the silent one.
struct ConnectionLiveness {
    enum Action: Equatable {
        case none
        /// Send a PING with this payload and give up unless it is acknowledged within `within`.
        case ping(UInt64, within: Duration)
    }

    /// When the device last sent anything on the connection.
    private(set) var lastReceipt: NIODeadline
    /// The payload of the PING that waits for its acknowledgement.
    private(set) var outstandingPing: UInt64?
    private var nextPing: UInt64 = 0xACCE_55ED_0000_0001

    init(startedAt now: NIODeadline) {
        self.lastReceipt = now
    }

    /// The device sent something (the end of a read).
    mutating func received(at now: NIODeadline) {
        self.lastReceipt = now
    }

    /// A stream's wait ended at `idleTimeout`.
    mutating func streamWentIdle(after idleTimeout: Duration, at now: NIODeadline) -> Action {
        guard self.outstandingPing == nil, now - self.lastReceipt >= TimeAmount(idleTimeout) else { return .none }
        let payload = self.nextPing
        self.nextPing &+= 1
        self.outstandingPing = payload
        return .ping(payload, within: idleTimeout / 2)
    }

    /// A PING acknowledgement arrived: true when it answers the outstanding PING (the device
    /// lives; nothing more to do).
    mutating func acknowledged(_ payload: UInt64) -> Bool {
        guard payload == self.outstandingPing else { return false }
        self.outstandingPing = nil
        return true
    }

    /// The PING's bound passed: true when it is still unacknowledged (give the connection up).
    func pingBoundPassed(for payload: UInt64) -> Bool {
        payload == self.outstandingPing
    }
}

/// Runs a connection's ``ConnectionLiveness`` on its event loop: sends the PING and keeps its
/// bound. Shared by the frame-level streams (``HTTP2ClientStreams``) and, for a link that keeps
/// stream channels, ``StreamChannelsConnection``.
final class LivenessCheck {
    private var liveness = ConnectionLiveness(startedAt: .now())
    private var timer: Scheduled<Void>?

    init() {}

    /// The end of a read: the device sent something.
    func readCompleted() {
        self.liveness.received(at: .now())
    }

    /// A frame on stream 0: a PING acknowledgement may answer the check.
    func received(_ frame: HTTP2Frame) {
        guard case .ping(let data, ack: true) = frame.payload, self.liveness.acknowledged(data.integer) else { return }
        self.timer?.cancel()
        self.timer = nil
    }

    /// A stream's wait ended at `idleTimeout`: when the whole connection was silent that long,
    /// writes a PING on `context` (a handler whose outbound type is `HTTP2Frame`) and calls
    /// `giveUp` unless it is acknowledged within half of `idleTimeout`.
    func streamWentIdle(
        after idleTimeout: Duration,
        context: ChannelHandlerContext,
        giveUp: @escaping (HTTP2ConnectionSilence) -> Void
    ) {
        guard case .ping(let payload, let bound) = self.liveness.streamWentIdle(after: idleTimeout, at: .now()) else {
            return
        }
        let ping = HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: payload), ack: false))
        context.writeAndFlush(NIOAny(ping), promise: nil)
        self.timer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(bound)) {
            self.timer = nil
            guard self.liveness.pingBoundPassed(for: payload) else { return }
            giveUp(HTTP2ConnectionSilence(idleTimeout: idleTimeout))
        }
    }

    /// The connection is gone: the bound stops.
    func stop() {
        self.timer?.cancel()
        self.timer = nil
    }
}

@available(*, unavailable)
extension LivenessCheck: Sendable {}

/// The device's HTTP/2 side stopped answering, not even a PING: the connection was given up. It
/// ends the connection's streams as the session layer's errors do (``StreamEndingError``): an
/// idempotent request that had no response byte is sent again on the next connection.
struct HTTP2ConnectionSilence: StreamEndingError {
    let idleTimeout: Duration

    var code: HTTPLinkError.Code { .idleTimeout }
    var message: String {
        "the device sent nothing on its HTTP/2 connection for \(self.idleTimeout) while a response was due, "
            + "and did not acknowledge a PING within \(self.idleTimeout / 2): its HTTP/2 side stopped; the "
            + "connection was given up and the next request starts a new one"
    }
    var underlying: (any Error)? { nil }
}
