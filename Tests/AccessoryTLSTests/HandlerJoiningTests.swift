import AccessoryTLS
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A TLS handler made outside ``TLSTransport`` (``TLSHandler/make(context:eventLoop:)``) and
/// added with ``TLSHandler/add(to:)`` to a channel that closed meanwhile: the add throws and the
/// handshake fails at once with `tls-closed-during-handshake`. Added to the pipeline directly,
/// the handler would be dropped with its handshake promise unfulfilled, which stops a debug build
/// (found by the graceful-shutdown TLS suite, 2026-12-05).
@Suite("A TLS handler that cannot join its pipeline", .timeLimit(.minutes(1)))
struct HandlerJoiningTests {
    @Test func addingToAClosedChannelFailsTheHandshake() async throws {
        let certificates = try await Certificates.get()
        let context = try TLSServerContext(
            configuration: .server(
                identity: .pem(
                    certificateFile: certificates.path("server.pem"),
                    keyFile: certificates.path("server.key")
                )
            )
        )
        var descriptors: [CInt] = [-1, -1]
        #expect(socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue), 0, &descriptors) == 0)
        defer { close(descriptors[1]) }
        let channel = try await NIOPipeBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .takingOwnershipOfDescriptor(inputOutput: descriptors[0]).get()
        try await channel.close()
        let (addError, handshake) = try await channel.eventLoop.submit {
            let handler = try TLSHandler.make(context: context, eventLoop: channel.eventLoop)
            // Taken first: the handler lets go of its promise once it is completed.
            let handshake = handler.handshakeFuture
            var addError: (any Error)?
            do { try handler.add(to: channel) } catch { addError = error }
            return (addError.map { "\($0)" }, handshake)
        }.get()
        #expect(addError != nil, "a handler joined a closed channel's pipeline")
        #expect(handshake != nil)
        do {
            _ = try await handshake?.get()
            Issue.record("the handshake of a handler that never joined succeeded")
        } catch let error as TLSError {
            #expect(error.code == .closedDuringHandshake, "\(error)")
        }
    }
}
