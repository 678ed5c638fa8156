import AccessoryCrypto
import AccessoryEmulator
import AccessoryTestSupport
import Foundation
import FoundationNetworking
import Glibc
import Testing

/// Clients of other languages and stacks through the bridge (issue 11): Python's standard
/// library over TCP and the unix socket, and URLSession with a plain `http://127.0.0.1` URL
/// doing what `AccessoryURLProtocol` cannot on Linux (download and upload tasks, a conditional
/// request, authentication challenges answered by the delegate, a redirect).
@Suite("Python and URLSession through the bridge")
struct BridgeClientsTests {
    static let python = "/usr/bin/env"

    @Test("Python http.client and urllib: keep-alive, bodies both ways, chunked, the unix socket")
    func python() async throws {
        try await withBridge { fixture in
            let script = """
                import hashlib, http.client, json, socket, sys, urllib.request
                port, path = int(sys.argv[1]), sys.argv[2]
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                c.request("GET", "/status"); r = c.getresponse(); body = r.read()
                assert r.status == 200 and b"EMU0001" in body, (r.status, body)
                first = c.sock
                c.request("POST", "/echo", body=b"hello bridge", headers={"Content-Type": "text/plain"})
                r = c.getresponse(); echo = json.loads(r.read())
                assert echo["body"] == "hello bridge" and echo["method"] == "POST", echo
                c.request("GET", "/bytes/1000000"); r = c.getresponse(); data = r.read()
                assert len(data) == 1000000 and c.sock is first, "keep-alive lost"
                data = urllib.request.urlopen("http://127.0.0.1:%d/stream/300001" % port, timeout=30).read()
                assert len(data) == 300001, len(data)
                payload = bytes(range(256)) * 20000
                request = urllib.request.Request("http://127.0.0.1:%d/upload" % port, data=payload, method="PUT")
                answer = json.load(urllib.request.urlopen(request, timeout=30))
                assert answer["sha256"] == hashlib.sha256(payload).hexdigest(), answer
                class UnixConnection(http.client.HTTPConnection):
                    def connect(self):
                        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(path)
                u = UnixConnection("accessory", timeout=30)
                u.request("GET", "/echo?via=unix"); r = u.getresponse(); echo = json.loads(r.read())
                assert echo["path"] == "/echo?via=unix" and echo["headers"]["host"] == "accessory", echo
                u.request("HEAD", "/bytes/4096"); r = u.getresponse(); r.read()
                assert r.getheader("Content-Length") == "4096", r.getheaders()
                print("python: all answered")
                """
            let file = fixture.directory.path("client.py")
            try writeFile(file, Array(script.utf8))
            let (status, output) = try await run(
                [Self.python, "python3", file, String(fixture.port), fixture.socket],
                in: fixture.directory
            )
            #expect(status == 0 && output.contains("python: all answered"), "\(output)")
        }
    }

    /// Answers Basic and Digest challenges with fixed credentials and counts them.
    final class ChallengeAnswerer: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
        // @unchecked: `challenges` is only touched on the session's serial delegate queue.
        var challenges: [String] = []

        func urlSession(
            _ session: URLSession,
            task: URLSessionTask,
            didReceive challenge: URLAuthenticationChallenge,
            completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
        ) {
            self.challenges.append(challenge.protectionSpace.authenticationMethod)
            guard challenge.previousFailureCount == 0 else {
                completionHandler(.cancelAuthenticationChallenge, nil)
                return
            }
            completionHandler(.useCredential, URLCredential(user: "user", password: "secret", persistence: .forSession))
        }
    }

    @Test(
        "URLSession: data, download and upload tasks, an ETag revalidation, a Basic challenge, a Digest 401, a redirect"
    )
    func urlSession() async throws {
        try await withBridge { fixture in
            let base = fixture.baseURL
            let configuration = URLSessionConfiguration.ephemeral
            configuration.urlCache = URLCache(memoryCapacity: 4 << 20, diskCapacity: 0, diskPath: nil)
            configuration.requestCachePolicy = .useProtocolCachePolicy
            let delegateQueue = OperationQueue()
            delegateQueue.maxConcurrentOperationCount = 1
            let answerer = ChallengeAnswerer()
            let session = URLSession(configuration: configuration, delegate: answerer, delegateQueue: delegateQueue)
            defer { session.invalidateAndCancel() }

            // Data.
            let (status, statusResponse) = try await session.data(from: URL(string: base + "/status")!)
            #expect((statusResponse as? HTTPURLResponse)?.statusCode == 200)
            #expect(String(decoding: status, as: UTF8.self).contains("EMU0001"))

            // Download (a file on disk, which a custom URLProtocol cannot give on Linux).
            let (location, downloadResponse) = try await session.download(from: URL(string: base + "/bytes/3000000")!)
            #expect((downloadResponse as? HTTPURLResponse)?.statusCode == 200)
            let downloaded = try Data(contentsOf: location)
            #expect(downloaded.count == 3_000_000)
            #expect(Array(downloaded.prefix(65536)) == EmulatedAccessory.patternBytes(offset: 0, count: 65536))

            // Upload.
            var upload = URLRequest(url: URL(string: base + "/upload")!)
            upload.httpMethod = "POST"
            let payload = Data(secureRandomBytes(2_000_001))
            let (uploadAnswer, uploadResponse) = try await session.upload(for: upload, from: payload)
            #expect((uploadResponse as? HTTPURLResponse)?.statusCode == 200)
            #expect(String(decoding: uploadAnswer, as: UTF8.self).contains("\"length\":2000001"))

            // A redirect, followed by URLSession itself (the bridge passes the 302 through).
            let (redirected, redirectResponse) = try await session.data(from: URL(string: base + "/redirect/2")!)
            #expect(
                redirectResponse.url?.path == "/status" || (redirectResponse as? HTTPURLResponse)?.statusCode == 200
            )
            #expect(
                String(decoding: redirected, as: UTF8.self).contains("EMU0001"),
                "\(String(decoding: redirected, as: UTF8.self))"
            )

            // A Basic challenge answered by the delegate.
            let (basic, basicResponse) = try await session.data(from: URL(string: base + "/basic-auth/user/secret")!)
            #expect((basicResponse as? HTTPURLResponse)?.statusCode == 200, "\(String(decoding: basic, as: UTF8.self))")
            #expect(answerer.challenges.contains(NSURLAuthenticationMethodHTTPBasic), "\(answerer.challenges)")

            // A Digest challenge reaches URLSession intact, but FoundationNetworking (Swift 6.3.1)
            // hands only Basic challenges to the delegate ("`Basic` is the only supported scheme
            // at the moment", its _HTTPMessage._Challenge parser): the 401 is delivered as the
            // response, the delegate never asked. What a client that speaks Digest does with the
            // same challenge through the bridge: BridgeCurlTests' `curl --digest`. If this
            // starts failing, Foundation answers Digest now: assert the 200 instead.
            let (digest, digestResponse) = try await session.data(
                from: URL(string: base + "/digest-auth/auth/user/secret")!
            )
            let digestHTTP = digestResponse as? HTTPURLResponse
            #expect(digestHTTP?.statusCode == 401, "\(String(decoding: digest, as: UTF8.self))")
            #expect(
                digestHTTP?.value(forHTTPHeaderField: "WWW-Authenticate")?.hasPrefix("Digest realm=\"accessory\"")
                    == true,
                "\(String(describing: digestHTTP?.allHeaderFields))"
            )
            #expect(!answerer.challenges.contains(NSURLAuthenticationMethodHTTPDigest), "\(answerer.challenges)")

            // A revalidation by entity tag: a 304 passes through. (FoundationNetworking's own
            // URLCache is not consulted by its data tasks on Linux — measured with Swift 6.3.1
            // against Python's http.server and max-age=60: every request went out, none
            // conditional — so the conditional request is made here by hand.)
            let etagURL = URL(string: base + "/etag")!
            let (first, firstResponse) = try await session.data(from: etagURL)
            let tag = (firstResponse as? HTTPURLResponse)?.value(forHTTPHeaderField: "ETag")
            #expect(tag == "\"emu-etag-1\"" && !first.isEmpty)
            var conditional = URLRequest(url: etagURL, cachePolicy: .reloadIgnoringLocalCacheData)
            conditional.setValue(tag, forHTTPHeaderField: "If-None-Match")
            let (_, secondResponse) = try await session.data(for: conditional)
            #expect((secondResponse as? HTTPURLResponse)?.statusCode == 304)
            // The bridge counts an exchange just after its last byte went out.
            _ = await waitUntil(timeout: .seconds(5)) { fixture.bridge.status.requests >= 11 }
            let counts = fixture.bridge.status
            #expect(counts.responses[304] == 1, "the conditional request was not answered 304: \(counts.responses)")
            #expect(counts.responses[401] == 2 && counts.responses[302] == 2, "\(counts.responses)")
            print("bridge: URLSession made \(counts.requests) requests through the bridge: \(counts.responses)")
        }
    }
}
