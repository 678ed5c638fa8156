import Foundation
import Testing

/// The DocC articles' examples that need no hardware (they use the built-in emulated accessory)
/// are run, not only compiled: what *Getting started* and *The native client* show works as
/// shown. The others name a serial port, a USB gadget or a socket that a test machine lacks.
@Suite struct RunnableDocExamplesTests {
    @Test func gettingStartedRunsAgainstTheEmulator() async throws {
        try await gettingstartedExample1()
        try await gettingstartedExample2()
    }

    @Test func theNativeClientsExamplesRunAgainstTheEmulator() async throws {
        // Example 2 downloads to /tmp/blob, as written in the article.
        defer { try? FileManager.default.removeItem(atPath: "/tmp/blob") }
        try await nativeclientExample1()
        try await nativeclientExample2()
        try await nativeclientExample3()
        try await nativeclientExample4()
        try await nativeclientExample5()
        try await nativeclientExample6()
    }
}
