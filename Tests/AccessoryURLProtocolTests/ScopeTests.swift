import AccessoryCrypto
import AccessoryEmulator
import Foundation
import Testing

@testable import AccessoryURLProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("Scope, canonical requests and what fails at once")
struct ScopeTests {
    @Test("canInit claims configured routes only")
    func claims() throws {
        _ = Fixture.setUp
        #expect(AccessoryURLProtocol.canInit(with: URLRequest(url: try Fixture.url("accessory://emu0/status"))))
        #expect(AccessoryURLProtocol.canInit(with: URLRequest(url: try Fixture.url("ACCESSORY://EMU1/status"))))
        #expect(AccessoryURLProtocol.canInit(with: URLRequest(url: try Fixture.url("http://emu-http.test/status"))))
        #expect(!AccessoryURLProtocol.canInit(with: URLRequest(url: try Fixture.url("accessory://unknown/status"))))
        #expect(!AccessoryURLProtocol.canInit(with: URLRequest(url: try Fixture.url("http://example.com/"))))
        #expect(!AccessoryURLProtocol.canInit(with: URLRequest(url: try Fixture.url("https://emu-http.test/"))))
        #expect(!AccessoryURLProtocol.canInit(with: URLRequest(url: try Fixture.url("file:///tmp/x"))))
    }

    @Test("the recursion guard is a header, so it survives request copies")
    func recursionGuard() throws {
        _ = Fixture.setUp
        let marked = AccessoryURLProtocol.markedAsHandled(URLRequest(url: try Fixture.url("accessory://emu0/status")))
        #expect(!AccessoryURLProtocol.canInit(with: marked))
        var copy = marked
        copy.httpMethod = "POST"
        #expect(!AccessoryURLProtocol.canInit(with: copy))
        let bridged = try #require((marked as NSURLRequest).mutableCopy() as? NSMutableURLRequest)
        #expect(!AccessoryURLProtocol.canInit(with: bridged as URLRequest))
    }

    @Test("configuration puts the protocol first and clears urlCache")
    func configuration() {
        let configuration = URLSessionConfiguration.default
        configuration.registerAccessoryProtocol()
        configuration.registerAccessoryProtocol()
        #expect(configuration.protocolClasses?.first == AccessoryURLProtocol.self)
        #expect(configuration.protocolClasses?.filter { $0 == AccessoryURLProtocol.self }.count == 1)
        #expect(configuration.urlCache == nil)
    }

    @Test("canonical form: lowercase scheme and host, / for an empty path, Accept, additional headers")
    func canonical() throws {
        let request = CanonicalRequest.make(
            URLRequest(url: try Fixture.url("ACCESSORY://Emu0?q=1")),
            additionalHeaders: ["X-App": "demo", "Accept": "ignored"]
        )
        #expect(request.url?.absoluteString == "accessory://emu0/?q=1")
        #expect(request.value(forHTTPHeaderField: "Accept") == "ignored")
        #expect(request.value(forHTTPHeaderField: "X-App") == "demo")
        var own = URLRequest(url: try Fixture.url("accessory://emu0/x"))
        own.setValue("mine", forHTTPHeaderField: "X-App")
        #expect(
            CanonicalRequest.make(own, additionalHeaders: ["X-App": "demo"]).value(forHTTPHeaderField: "X-App")
                == "mine"
        )
    }

    @Test("the accessory sees the canonical request with httpAdditionalHeaders and without the private header")
    func headersOnTheWire() async throws {
        let session = Fixture.session { $0.httpAdditionalHeaders = ["X-App": "demo"] }
        defer { session.finishTasksAndInvalidate() }
        var request = URLRequest(url: try Fixture.url("ACCESSORY://EMU0/echo"))
        request.setValue("yes", forHTTPHeaderField: "X-Own")
        let (data, _) = try await session.data(for: request)
        let headers = try #require(try json(data)["headers"] as? [String: String])
        #expect(headers["x-app"] == "demo")
        #expect(headers["x-own"] == "yes")
        #expect(headers["accept"] == "*/*")
        #expect(headers["x-accessory-urlprotocol-handled"] == nil)
    }

    @Test("http:// hosts mapped to an accessory go over its link")
    func mappedHTTPHost() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(from: try Fixture.url("http://emu-http.test/echo?x=1"))
        #expect(response.url?.absoluteString == "http://emu-http.test/echo?x=1")
        #expect(try json(data)["path"] as? String == "/echo?x=1")
    }

    @Test("a download task fails at once and names the native API")
    func download() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let url = try Fixture.url("accessory://emu0/bytes/10")
        let outcome: (any Error)? = await withCheckedContinuation { continuation in
            let task = session.downloadTask(with: url) { _, _, error in
                let error = error
                continuation.resume(returning: error)
            }
            task.resume()
        }
        let failure = try #require(outcome as? AccessoryURLProtocolError)
        #expect(failure.code == .downloadNotSupported)
        #expect(failure.message.contains("AccessoryClient.download(_:to:progress:)"))
    }

    @Test("a delegate-based download task fails at once instead of crashing")
    func delegateDownload() async throws {
        let delegate = RecordingDelegate()
        let session = Fixture.session(delegate: delegate)
        defer { session.finishTasksAndInvalidate() }
        session.downloadTask(with: try Fixture.url("accessory://emu0/bytes/10")).resume()
        let (_, _, error) = await delegate.completion()
        #expect((error as? AccessoryURLProtocolError)?.code == .downloadNotSupported)
    }

    @Test("uploadTask(with:from:) fails at once instead of sending an empty body")
    func uploadFromData() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        var request = URLRequest(url: try Fixture.url("accessory://emu1/upload"))
        request.httpMethod = "POST"
        await #expect {
            _ = try await session.upload(for: request, from: Data("hello".utf8))
        } throws: { error in
            guard let error = error as? AccessoryURLProtocolError else { return false }
            return error.code == .uploadBodyNotSupported
                && error.message.contains("AccessoryClient.upload(_:fromFile:)")
        }
    }

    @Test("accessorys:// runs over TLS on a route with a TLS configuration")
    func secure() async throws {
        #expect(try await SecureAccessory.ready(), "the TLS accessory did not start (is openssl installed?)")
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        for url in ["accessorys://secure/status", "accessory://secure/bytes/70000"] {
            let (data, response) = try await session.data(from: try Fixture.url(url))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(!data.isEmpty)
        }
        let (data, _) = try await session.data(from: try Fixture.url("accessorys://secure/bytes/70000"))
        #expect(
            Digest.hex(.sha256, of: data)
                == Digest.hex(.sha256, of: EmulatedAccessory.patternBytes(offset: 0, count: 70000))
        )
    }

    @Test("accessorys:// on a route without TLS fails at once with a clear error")
    func secureSchemeNeedsTLS() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        await #expect {
            _ = try await session.data(from: try Fixture.url("accessorys://emu0/status"))
        } throws: { error in
            guard let error = error as? AccessoryURLProtocolError else { return false }
            return error.code == .tlsNotConfigured && error.message.contains("emu0")
        }
    }
}
