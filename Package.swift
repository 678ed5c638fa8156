// swift-tools-version:6.1
// accessory-http: HTTP/1.1 over any byte stream pair (USB bulk, serial, pipes, socketpairs).
//
// Layers, bottom up (each depends only on the ones before it):
//   Transports (+ USB, FunctionFS) → Session → Security (TLS) → Framing (HTTP/1.1 link) → API (client, responder)
//   → Accessories (emulator) → Adapters (URLProtocol, bridge) → Tools (CLI, benchmark)
// System libraries are reached through `.systemLibrary` targets under Sources/System.
import PackageDescription

let package = Package(
    name: "accessory-http",
    // Linux only (Debian 12 and later): the transports are built on Linux system calls (termios,
    // FunctionFS, socketpair and posix_spawn details) and import Glibc. SwiftPM has no way to
    // declare "Linux only", so no platform is declared rather than a macOS one that would not build.
    products: [
        .library(name: "AccessoryTransport", targets: ["AccessoryTransport"]),
        .library(name: "AccessoryHTTP1", targets: ["AccessoryHTTP1"]),
        .library(name: "AccessoryHTTP2", targets: ["AccessoryHTTP2"]),
        .library(name: "AccessoryClient", targets: ["AccessoryClient"]),
        .library(name: "AccessoryResponder", targets: ["AccessoryResponder"]),
        .library(name: "AccessoryEmulator", targets: ["AccessoryEmulator"]),
        .library(name: "AccessorySession", targets: ["AccessorySession"]),
        .library(name: "AccessoryTLS", targets: ["AccessoryTLS"]),
        .library(name: "AccessoryUSB", targets: ["AccessoryUSB"]),
        .library(name: "AccessoryFunctionFS", targets: ["AccessoryFunctionFS"]),
        .library(name: "AccessoryURLProtocol", targets: ["AccessoryURLProtocol"]),
        .library(name: "AccessoryBridge", targets: ["AccessoryBridge"]),
        .library(name: "AccessoryDevices", targets: ["AccessoryDevices"]),
        .executable(name: "accessory-http", targets: ["AccessoryHTTPTool"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        // `swift package generate-documentation` (scripts/docs); a command plugin, not linked.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
    ],
    targets: [
        // MARK: System libraries
        .systemLibrary(
            name: "COpenSSL",
            path: "Sources/System/COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CLibUSB",
            path: "Sources/System/CLibUSB",
            pkgConfig: "libusb-1.0",
            providers: [.apt(["libusb-1.0-0-dev"])]
        ),
        // CRC-32C with the CPU's instruction (SSE4.2, ARMv8 CRC), for the session layer.
        .target(
            name: "CCRC32C",
            path: "Sources/System/CCRC32C"
        ),
        // ThreadSanitizer's acquire/release annotations, weak (no-ops outside a -sanitize=thread
        // build), for TrackedMutex.
        .target(
            name: "CThreadSanitizer",
            path: "Sources/System/CThreadSanitizer"
        ),
        // epoll's readiness question, which Glibc's Swift module cannot ask (ReadinessWatch).
        .target(
            name: "CEpoll",
            path: "Sources/System/CEpoll"
        ),
        // Linux native AIO system calls (glibc has no wrappers), for FunctionFS endpoint files.
        .target(
            name: "CLinuxAIO",
            path: "Sources/System/CLinuxAIO"
        ),
        // The git commit a packaged binary was built from (`accessory-http --version`).
        .target(
            name: "CBuildInfo",
            path: "Sources/System/CBuildInfo"
        ),
        .target(
            name: "AccessoryCrypto",
            dependencies: ["COpenSSL"],
            path: "Sources/Support/AccessoryCrypto"
        ),

        // MARK: Layer 1: transports (every one reduces to a byte stream pair)
        .target(
            name: "AccessoryTransport",
            dependencies: [
                "CEpoll",
                "CThreadSanitizer",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/Transports/AccessoryTransport"
        ),

        .target(
            name: "AccessoryUSB",
            dependencies: [
                "AccessoryTransport",
                "CLibUSB",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/Transports/AccessoryUSB"
        ),
        .target(
            name: "AccessoryFunctionFS",
            dependencies: [
                "AccessoryTransport",
                "CLinuxAIO",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/Transports/AccessoryFunctionFS"
        ),

        // MARK: Layer 2: the session layer, a restartable, checked byte stream (docs/framing.md)
        .target(
            name: "AccessorySession",
            dependencies: [
                "AccessoryTransport",
                "CCRC32C",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Sources/Session/AccessorySession"
        ),

        // MARK: Layer 3: TLS, itself a byte stream transport wrapping another (system OpenSSL)
        .target(
            name: "AccessoryTLS",
            dependencies: [
                "AccessoryTransport",
                "COpenSSL",
                "AccessoryCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/Security/AccessoryTLS"
        ),

        // MARK: Layer 4: HTTP/1.1 framing and the persistent link (over any transport, TLS or not)
        .target(
            name: "AccessoryHTTP1",
            dependencies: [
                "AccessoryTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/Framing/AccessoryHTTP1"
        ),

        // MARK: Layer 4: HTTP/2 over the link (prior knowledge), streams of one connection
        .target(
            name: "AccessoryHTTP2",
            dependencies: [
                "AccessoryHTTP1",
                "AccessoryTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP2", package: "swift-nio-extras"),
                // Decoding compressed responses (`decompressResponses`) with NIO's decompressor,
                // which speaks HTTP/1 parts: a stream converts to them and back for it.
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/Framing/AccessoryHTTP2"
        ),

        // MARK: Layer 5: client API and responder
        .target(
            name: "AccessoryClient",
            dependencies: [
                "AccessoryHTTP1",
                "AccessoryHTTP2",
                "AccessoryTLS",
                "AccessoryTransport",
                "AccessoryCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/API/AccessoryClient"
        ),
        .target(
            name: "AccessoryResponder",
            dependencies: [
                "AccessoryTransport",
                "AccessorySession",
                "AccessoryHTTP2",
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHTTPTypesHTTP2", package: "swift-nio-extras"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/API/AccessoryResponder"
        ),

        // MARK: Accessories: the built-in emulated accessory
        .target(
            name: "AccessoryEmulator",
            dependencies: [
                "AccessoryResponder",
                "AccessoryTransport",
                "AccessoryCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/Accessories/AccessoryEmulator"
        ),

        // MARK: Devices: every device spec resolved to its transport (emulator and USB included)
        .target(
            name: "AccessoryDevices",
            dependencies: [
                "AccessoryTransport",
                "AccessorySession",
                "AccessoryUSB",
                "AccessoryEmulator",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Sources/Devices/AccessoryDevices"
        ),

        // MARK: Adapters: URLSession through a URLProtocol
        .target(
            name: "AccessoryURLProtocol",
            dependencies: [
                "AccessoryClient",
                "AccessoryDevices",
                "AccessoryHTTP1",
                "AccessoryTransport",
                "AccessoryTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/Adapters/AccessoryURLProtocol"
        ),
        // The bridge: one process owns an accessory's link and serves it as local HTTP/1.1.
        .target(
            name: "AccessoryBridge",
            dependencies: [
                "AccessoryClient",
                "AccessoryHTTP1",
                "AccessoryTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/Adapters/AccessoryBridge"
        ),

        // MARK: Tools: the command-line interface and the benchmark
        .executableTarget(
            name: "AccessoryHTTPTool",
            dependencies: [
                "AccessoryClient",
                "AccessoryDevices",
                "AccessoryResponder",
                "AccessoryEmulator",
                "AccessoryTransport",
                "AccessoryHTTP1",
                "AccessoryTLS",
                "AccessoryUSB",
                "AccessoryFunctionFS",
                "AccessoryBridge",
                "CBuildInfo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/Tools/accessory-http"
        ),
        .executableTarget(
            name: "AccessoryHTTPBench",
            dependencies: [
                "AccessoryClient",
                "AccessorySession",
                "AccessoryResponder",
                "AccessoryEmulator",
                "AccessoryTransport",
                "AccessoryHTTP1",
                "AccessoryHTTP2",
                "AccessoryURLProtocol",
                "AccessoryCrypto",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/Tools/accessory-http-bench"
        ),

        // MARK: Tests
        // What several test targets share (time bounds that know about sanitized builds, a
        // shared line, an abandoned download, a device that restarts after a graceful shutdown).
        .target(
            name: "AccessoryTestSupport",
            dependencies: [
                "AccessoryClient", "AccessoryTransport", "AccessoryResponder", "AccessoryEmulator", "AccessoryCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Tests/Support"
        ),
        .testTarget(
            name: "AccessoryTransportTests",
            dependencies: [
                "AccessoryTransport", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "AccessorySessionTests",
            dependencies: [
                "AccessoryTestSupport",
                "AccessorySession", "AccessoryTransport", "AccessoryClient", "AccessoryResponder", "AccessoryEmulator",
                "AccessoryDevices", "AccessoryCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        .testTarget(
            name: "AccessoryHTTP1Tests",
            dependencies: [
                "AccessoryHTTP1", "AccessoryTransport", "AccessoryTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        .testTarget(
            name: "AccessoryClientTests",
            dependencies: [
                "AccessoryTestSupport",
                "AccessoryClient", "AccessoryResponder", "AccessoryEmulator", "AccessoryTransport", "AccessoryHTTP1",
                "AccessoryCrypto", "AccessorySession",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        // HTTP/2 end to end: its own target, so its bulk transfers never share the CPU with the
        // client's latency-bounded tests (scripts/test runs targets one after another).
        .testTarget(
            name: "AccessoryHTTP2Tests",
            dependencies: [
                "AccessoryTestSupport",
                "AccessoryClient", "AccessoryHTTP2", "AccessoryHTTP1", "AccessoryEmulator", "AccessoryTransport",
                "AccessoryCrypto", "AccessoryResponder", "AccessorySession",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ]
        ),
        .testTarget(
            name: "AccessoryResponderTests",
            dependencies: [
                "AccessoryResponder", "AccessoryEmulator", "AccessoryTransport", "AccessoryHTTP1", "AccessoryCrypto",
                "AccessoryTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        .testTarget(
            name: "InteropTests",
            dependencies: [
                "AccessoryTestSupport",
                "AccessoryClient", "AccessoryResponder", "AccessoryEmulator", "AccessoryTransport", "AccessoryCrypto",
                "AccessorySession", "AccessoryBridge",
                "AccessoryHTTP1", "AccessoryURLProtocol",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        .testTarget(
            name: "AccessoryTLSTests",
            dependencies: [
                "AccessoryTLS", "AccessoryClient", "AccessoryResponder", "AccessoryEmulator", "AccessoryTransport",
                "AccessoryHTTP1", "AccessoryCrypto", "AccessorySession", "AccessoryTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        .testTarget(
            name: "AccessoryUSBTests",
            dependencies: [
                "AccessoryUSB", "AccessoryFunctionFS", "AccessoryTransport", "AccessoryClient", "AccessoryResponder",
                "AccessoryEmulator", "AccessoryCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "AccessoryDevicesTests",
            dependencies: [
                "AccessoryDevices", "AccessoryClient", "AccessoryEmulator", "AccessoryResponder", "AccessoryTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "AccessoryURLProtocolTests",
            dependencies: [
                "AccessoryURLProtocol", "AccessoryClient", "AccessoryEmulator", "AccessoryResponder",
                "AccessoryTransport", "AccessoryTestSupport",
                "AccessoryTLS", "AccessoryCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        // The Swift blocks of README.md, docs/ and the DocC articles, compiled as written (DocExamplesTests.swift).
        .testTarget(
            name: "DocExamplesTests",
            dependencies: [
                "AccessoryClient", "AccessoryResponder", "AccessoryTLS", "AccessoryTransport",
                "AccessoryURLProtocol", "AccessoryUSB", "AccessoryDevices", "AccessoryFunctionFS",
                "AccessoryHTTP1", "AccessoryEmulator",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        .testTarget(
            name: "CLITests",
            dependencies: ["AccessoryTestSupport", "AccessoryHTTPTool", "AccessoryCrypto"]
        ),
    ]
)

// The libFuzzer targets (docs/testing.md, "Fuzzing"): only in a build that scripts/fuzz makes
// with ACCESSORY_HTTP_FUZZ=1 and `-sanitize=fuzzer`, which supplies `main`; an ordinary build
// and the test suite never see them.
if Context.environment["ACCESSORY_HTTP_FUZZ"] == "1" {
    package.targets.append(.target(name: "CLibFuzzer", path: "Sources/System/CLibFuzzer"))
    package.targets.append(
        .executableTarget(
            name: "AccessoryHTTPFuzz",
            dependencies: [
                "CLibFuzzer", "AccessoryHTTP1", "AccessorySession", "AccessoryTLS", "AccessoryClient",
                "AccessoryResponder", "AccessoryTransport", "AccessoryBridge", "AccessoryDevices",
                "AccessoryHTTP2",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/Tools/accessory-http-fuzz",
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        )
    )
}
