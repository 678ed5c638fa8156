import AccessoryClient
import AccessoryHTTP1
import AccessoryTLS
import AccessoryTransport
import Testing

/// `AccessoryClientError.wrapping` classifies by type and code, never by message text.
@Suite struct ErrorWrappingTests {
    static let linkCases: [(HTTPLinkError.Code, AccessoryClientError.Code)] = [
        (.invalidRequest, .invalidRequest),
        (.malformedResponse, .protocolError),
        (.strayBytes, .protocolError),
        (.responseTooLarge, .protocolError),
        (.responseBodyTooLarge, .responseTooLarge),
        (.linkClosed, .transportFailed),
        (.transportFailed, .transportFailed),
        (.idleTimeout, .timedOut),
        (.writeTimeout, .timedOut),
        (.exchangeTimeout, .timedOut),
        (.openTimeout, .timedOut),
        (.requestBodyFailed, .requestBodyFailed),
        (.cancelled, .cancelled),
        (.shutDown, .shutDown),
    ]

    @Test(arguments: Self.linkCases)
    func linkCodesMap(link: HTTPLinkError.Code, expected: AccessoryClientError.Code) {
        // Messages that would have fooled the old text matching.
        let error = AccessoryClientError.wrapping(HTTPLinkError(link, "the response body is larger than you think"))
        #expect(error.code == expected)
    }

    static let tlsCases: [(TLSError.Code, AccessoryClientError.Code)] = [
        (.untrustedCertificate, .tlsUntrusted),
        (.nameMismatch, .tlsUntrusted),
        (.pinMismatch, .tlsUntrusted),
        (.pairingMismatch, .tlsUntrusted),
        (.noIdentity, .tlsUntrusted),
        (.handshakeFailed, .tlsFailed),
        (.clientCertificateRequired, .tlsFailed),
        (.truncated, .tlsFailed),
        (.invalidConfiguration, .tlsConfiguration),
        (.trustStoreError, .tlsConfiguration),
    ]

    @Test(arguments: Self.tlsCases)
    func tlsFailuresAreNotPlainTransportFailures(tls: TLSError.Code, expected: AccessoryClientError.Code) {
        let cause = TLSError(tls, "why")
        let error = AccessoryClientError.wrapping(HTTPLinkError(.transportFailed, "open failed", underlying: cause))
        #expect(error.code == expected)
        #expect(error.tlsError == cause)
        #expect(error.message == "why")
    }

    @Test func everyErrorTypeSharesOneShape() {
        let transport = TransportError(.deviceBusy, "busy", underlying: TransportError(.openFailed, "inner"))
        let link = HTTPLinkError(.transportFailed, "link", underlying: transport)
        let client = AccessoryClientError.wrapping(link)
        #expect(client.causes.count == 4)
        #expect(client.cause(TransportError.self)?.code == .deviceBusy)
        #expect("\(client)" == client.message)
        #expect("\(link.code)" == "transport-failed")
        let errors: [any AccessoryError] = [transport, link, client, TLSError(.truncated, "t")]
        #expect(errors.map(\.description) == ["busy", "link", "link", "t"])
    }

    @Test func aRedirectLimitIsTyped() async throws {
        let client = makeEmulatorClient { $0.redirects = RedirectPolicy(maxRedirects: 2) }
        defer { Task { await client.shutdown() } }
        await #expect {
            _ = try await client.data(AccessoryRequest(path: "/redirect/5"))
        } throws: { error in
            (error as? AccessoryClientError)?.redirectFailure == .tooManyRedirects(limit: 2)
        }
    }
}
