import AccessoryURLProtocol
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("Bodies through URLSession")
struct BodyDeliveryTests {
    @Test("a completion handler gets the whole body of a multi-chunk response", arguments: ["bytes", "stream"])
    func completionHandlerWholeBody(kind: String) async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let count = 300_000
        let (data, response, error) = await completionHandlerLoad(
            session,
            URLRequest(url: try Fixture.url("accessory://emu1/\(kind)/\(count)"))
        )
        #expect(error == nil)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(data?.count == count)
        #expect(data.map(sha256) == patternSHA256(count: count))
    }

    @Test("data(for:) gets the whole body")
    func asyncDataWholeBody() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let count = 200_003
        let (data, response) = try await session.data(
            for: URLRequest(url: try Fixture.url("accessory://emu2/stream/\(count)"))
        )
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(sha256(data) == patternSHA256(count: count))
        #expect(response.url?.absoluteString == "accessory://emu2/stream/\(count)")
    }

    @Test("a delegate-based data task receives the body in several chunks, as it arrives")
    func delegateStreaming() async throws {
        let delegate = RecordingDelegate()
        let session = Fixture.session(delegate: delegate)
        defer { session.finishTasksAndInvalidate() }
        let count = 3 * 1024 * 1024
        session.dataTask(with: try Fixture.url("accessory://emu3/bytes/\(count)")).resume()
        let (response, chunks, error) = await delegate.completion()
        #expect(error == nil)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(chunks.count > 1)
        #expect(chunks.map(\.count).max() ?? 0 <= 1024 * 1024 + 64 * 1024)
        var all = Data()
        for chunk in chunks { all.append(chunk) }
        #expect(sha256(all) == patternSHA256(count: count))
    }

    @Test("httpBody is sent to the accessory")
    func httpBody() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        var request = URLRequest(url: try Fixture.url("accessory://emu0/upload"))
        request.httpMethod = "POST"
        let body = Data((0..<150_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        request.httpBody = body
        let (data, _) = try await session.data(for: request)
        let object = try json(data)
        #expect(object["length"] as? Int == body.count)
        #expect(object["sha256"] as? String == sha256(body))
    }

    @Test("httpBodyStream is streamed to the accessory, with and without Content-Length", arguments: [true, false])
    func httpBodyStream(declareLength: Bool) async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        var request = URLRequest(url: try Fixture.url("accessory://emu1/upload"))
        request.httpMethod = "PUT"
        let body = Data((0..<333_333).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) })
        request.httpBodyStream = InputStream(data: body)
        if declareLength { request.setValue("\(body.count)", forHTTPHeaderField: "Content-Length") }
        let (data, _) = try await session.data(for: request)
        let object = try json(data)
        #expect(object["length"] as? Int == body.count)
        #expect(object["sha256"] as? String == sha256(body))
    }

    @Test("many concurrent tasks to one accessory and to several at once each get their own response")
    func concurrency() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<80 {
                let name = index < 40 ? "emu0" : Fixture.names[index % 4]
                let url = try Fixture.url("accessory://\(name)/echo?n=\(index)")
                group.addTask {
                    let (data, _) = try await session.data(from: url)
                    #expect(try json(data)["path"] as? String == "/echo?n=\(index)")
                }
            }
            try await group.waitForAll()
        }
    }

    @Test("cancelling a task mid-request ends it with URLError.cancelled, quickly")
    func cancellation() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let started = ContinuousClock.now
        let url = try Fixture.url("accessory://emu2/delay/5")
        let result: (Data?, URLResponse?, (any Error)?) = await withCheckedContinuation { continuation in
            let task = session.dataTask(with: URLRequest(url: url)) { data, response, error in
                let result = (data, response, error)
                continuation.resume(returning: result)
            }
            task.resume()
            let cancelled = task
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { cancelled.cancel() }
        }
        #expect((result.2 as? URLError)?.code == .cancelled)
        #expect(ContinuousClock.now - started < .seconds(2))
        // The link is still usable afterwards.
        let (data, _) = try await session.data(from: try Fixture.url("accessory://emu2/status"))
        #expect(try json(data)["model"] as? String == "AH-EMU-1")
    }

    @Test("cancelling the Swift task around data(for:) throws URLError.cancelled")
    func swiftTaskCancellation() async throws {
        let session = Fixture.session()
        defer { session.finishTasksAndInvalidate() }
        let url = try Fixture.url("accessory://emu3/delay/5")
        let load = Task { try await session.data(from: url) }
        try await Task.sleep(for: .milliseconds(100))
        load.cancel()
        await #expect(throws: URLError.self) { _ = try await load.value }
    }
}
