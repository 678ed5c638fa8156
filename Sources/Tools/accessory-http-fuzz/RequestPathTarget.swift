import AccessoryResponder
import Dispatch
import HTTPTypes
import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The responder's request path served for real: `HTTPResponder.serve(descriptor:)` on one end
/// of a socketpair (the session layer's HELLO watch, the HTTP/1.1-or-HTTP/2 detector, NIO's
/// parser, the request framing checks, the serving loop), the fuzzer's bytes written to the
/// other end as a host would, then the host's end of input. The handler reads each request's
/// body and answers with its length, so the fuzzer explores the request side, not a route.
///
/// Asserts that the responder answers and closes the line within 5 s of the host's last byte,
/// whatever the host sent: a responder that waits forever on a half-closed line is the hang
/// this target exists to find. Slower than the in-memory targets (a socket and a task per
/// input); docs/testing.md gives its rate.
enum RequestPathTarget {
    nonisolated(unsafe) private static var responder: HTTPResponder?

    static func prepare() {
        // A responder that closes early (a 400 ends the link) must not kill the fuzzer with
        // SIGPIPE while the rest of the input is written.
        signal(SIGPIPE, SIG_IGN)
        var configuration = ResponderConfiguration()
        configuration.maxRequestBodySize = 1 << 20
        configuration.idleTimeout = .seconds(30)
        self.responder = HTTPResponder(configuration: configuration) { request in
            let body = try await request.body.collect(upTo: 1 << 20)
            return ResponderResponse(status: .ok, body: .bytes(ByteBuffer(string: "\(body.readableBytes)\n")))
        }
    }

    static func run(_ input: inout FuzzInput) {
        guard let responder = self.responder else { return }
        let bytes = Array(input.rest())
        var pair: [CInt] = [-1, -1]
        guard socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue), 0, &pair) == 0 else {
            FuzzCheck.exit("socketpair failed: \(String(cString: strerror(errno)))")
        }
        let (accessory, host) = (pair[0], pair[1])
        let served = DispatchSemaphore(value: 0)
        Task {
            try? await responder.serve(descriptor: accessory)
            served.signal()
        }
        Self.writeAll(bytes, to: host)
        shutdown(host, CInt(SHUT_WR))
        let answered = Self.readToEnd(host, within: 5_000)
        close(host)
        FuzzCheck.require(answered, "the responder neither answered nor closed the line within 5 s of the host's end")
        FuzzCheck.require(
            served.wait(timeout: .now() + .seconds(5)) == .success,
            "the responder's serve call did not return within 5 s of the line closing"
        )
    }

    private static func writeAll(_ bytes: [UInt8], to descriptor: CInt) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            // The responder closed early (a 400 ends the link): the rest is not wanted.
            guard written > 0 else { return }
            offset += written
        }
    }

    /// Reads until the responder closes its end; `false` if it had not after `milliseconds`.
    private static func readToEnd(_ descriptor: CInt, within milliseconds: Int) -> Bool {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let end = Int(deadline.tv_sec) * 1000 + Int(deadline.tv_nsec) / 1_000_000 + milliseconds
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let left = end - (Int(now.tv_sec) * 1000 + Int(now.tv_nsec) / 1_000_000)
            guard left > 0 else { return false }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, CInt(left))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return false }
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            // 0: the responder closed; an error (ECONNRESET) ends the line as well.
            if count <= 0 { return true }
        }
    }
}
