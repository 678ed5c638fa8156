import AccessoryClient
import AccessoryHTTP1
import AccessoryTLS
import Foundation
import Testing

@testable import AccessoryURLProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Failures reach URLSession callers with the URLError codes URLSession uses for the same
/// failures, chosen by the errors' types and codes, never by their messages.
@Suite struct ErrorMappingTests {
    static let url = URL(string: "accessory://x/y")!

    func urlCode(_ error: any Error) -> URLError.Code? {
        (URLErrorMapping.urlError(for: error, url: Self.url) as? URLError)?.code
    }

    static let tlsCases: [(TLSError.Code, URLError.Code)] = [
        (.untrustedCertificate, .serverCertificateUntrusted),
        (.nameMismatch, .serverCertificateUntrusted),
        (.pinMismatch, .serverCertificateUntrusted),
        (.pairingMismatch, .serverCertificateUntrusted),
        (.noIdentity, .serverCertificateUntrusted),
        (.clientCertificateRequired, .clientCertificateRequired),
        (.certificateRejectedByPeer, .clientCertificateRejected),
        (.handshakeFailed, .secureConnectionFailed),
        (.truncated, .secureConnectionFailed),
        (.invalidConfiguration, .secureConnectionFailed),
    ]

    @Test(arguments: Self.tlsCases)
    func aTLSFailureUnderTheLinkMapsToURLSessionsCode(tls: TLSError.Code, expected: URLError.Code) {
        // As the link reports it: an open failure whose cause is the TLS error.
        let error = HTTPLinkError(.transportFailed, "opening failed", underlying: TLSError(tls, "some words"))
        #expect(self.urlCode(error) == expected)
    }

    @Test(arguments: [
        (RedirectFailure.tooManyRedirects(limit: 3), URLError.Code.httpTooManyRedirects),
        (.cycle(url: "accessory://x/a"), .httpTooManyRedirects),
        (.crossAccessoryRefused(location: "accessory://other/"), .redirectToNonExistentLocation),
        (.invalidLocation("::"), .redirectToNonExistentLocation),
    ])
    func aRedirectFailureMapsByItsKind(failure: RedirectFailure, expected: URLError.Code) {
        // A message that would have fooled the old text matching ("limit" in a Location).
        let error = AccessoryClientError(.redirectFailed, "a message about a limit", underlying: failure)
        #expect(self.urlCode(error) == expected)
    }

    @Test func aBodyOverTheCollectLimitIsDataLengthExceedsMaximum() {
        let error = HTTPLinkError(.responseBodyTooLarge, "too big")
        #expect(self.urlCode(error) == .dataLengthExceedsMaximum)
        #expect(self.urlCode(HTTPLinkError(.responseTooLarge, "head too big")) == .badServerResponse)
    }

    @Test("an untrusted accessory is serverCertificateUntrusted through URLSession, end to end")
    func untrustedEndToEnd() async throws {
        #expect(try await SecureAccessory.ready(), "the TLS accessory did not start (is openssl installed?)")
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        for route in ["secure-wrong-name", "secure-untrusted"] {
            await #expect {
                _ = try await session.data(from: try Fixture.url("accessorys://\(route)/status"))
            } throws: { error in
                // The client's message (which names the TLS failure) is the description.
                let urlError = error as? URLError
                let words = route == "secure-wrong-name" ? "is not for 'toaster.accessory'" : "is not trusted"
                return urlError?.code == .serverCertificateUntrusted
                    && urlError?.localizedDescription.contains(words) == true
            }
        }
    }
}
