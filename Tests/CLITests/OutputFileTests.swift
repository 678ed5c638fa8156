import AccessoryTestSupport
import Foundation
import NIOCore
import Testing

@testable import AccessoryHTTPTool

#if canImport(Glibc)
    import Glibc
#endif

/// `-o FILE`: the destination keeps its mode, the temporary file is private (0600, O_EXCL,
/// O_NOFOLLOW) until it is renamed into place.
@Suite("output file")
struct OutputFileTests {
    let scratch: Scratch

    init() throws {
        self.scratch = try Scratch()
    }

    func cli(_ arguments: [String], env: [String: String] = [:]) async throws -> RunResult {
        try await runCLI(arguments, scratch: scratch, env: env)
    }

    func mode(_ path: String) -> String? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return String(info.st_mode & 0o7777, radix: 8)
    }

    @Test(arguments: ["download", "get"])
    func replacingA0600FileKeeps0600(command: String) async throws {
        let path = scratch.file("secret-\(command).bin")
        try Data("old".utf8).write(to: URL(fileURLWithPath: path))
        #expect(chmod(path, 0o600) == 0)
        let result = try await cli(["--device", "emulator", command, "/bytes/1000", "-o", path])
        #expect(result.status == 0, "\(result)")
        #expect(readFile(path)?.count == 1000, "\(result)")
        #expect(self.mode(path) == "600")
    }

    @Test func aNewFileGets0666LessTheUmask() async throws {
        let path = scratch.file("new.bin")
        let mask = umask(0o022)
        umask(mask)
        let result = try await cli(["--device", "emulator", "download", "/bytes/10", "-o", path])
        #expect(result.status == 0, "\(result)")
        #expect(self.mode(path) == String(0o666 & ~mask, radix: 8))
    }

    /// While the body arrives, the only new file beside the destination is a regular file with
    /// mode 0600 (before: 0644, readable by every local user until the download ended).
    @Test func theTemporaryFileIsPrivateWhileTheBodyArrives() async throws {
        let path = scratch.file("slow.bin")
        // A device that reads the request head, sends half the body, and sends the rest only
        // when the test has looked (or after 60 s): the window does not depend on how fast the
        // CLI starts (a cold one beside the other suites once took over 5 s).
        let looked = scratch.file("looked")
        let script = scratch.file("slow-device.sh")
        try Data(
            """
            cr=$(printf '\\r')
            while IFS= read -r line; do [ "$line" = "$cr" ] && break; done
            printf 'HTTP/1.1 200 OK\\r\\nContent-Length: 10\\r\\n\\r\\nhello'
            n=0
            while [ ! -e '\(looked)' ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done
            printf 'world'
            sleep 1

            """.utf8
        ).write(to: URL(fileURLWithPath: script))
        let device = "exec:sh '\(script)'"
        let child = try startCLI(["--device", device, "download", "/slow", "-o", path], scratch: scratch)
        var seen: [String: String] = [:]
        let appeared = await eventually(timeout: 30 * Double(TimeBounds.factor)) {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: scratch.path)) ?? []
            for name in names where name.hasPrefix("slow.bin.") {
                if let mode = self.mode(scratch.file(name)) { seen[name] = mode }
            }
            return !seen.isEmpty || !child.isRunning
        }
        _ = FileManager.default.createFile(atPath: looked, contents: nil)
        let result = await child.finish(timeout: 30 * Double(TimeBounds.factor))
        #expect(appeared && !seen.isEmpty, "no temporary file seen: \(result)")
        for (name, mode) in seen {
            #expect(mode == "600", "\(name) has mode \(mode)")
            #expect(name.hasSuffix(".part"), "\(name)")
        }
        #expect(result.status == 0, "\(result)")
        #expect(readFile(path) == Array("helloworld".utf8), "\(result)")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: scratch.path).filter {
            $0.contains(".part")
        }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    /// A symlink (or any file) planted at the temporary name is neither followed nor reused:
    /// its target is untouched, and another name is used.
    @Test func aSymlinkPlantedAtTheTemporaryNameIsNotFollowed() throws {
        let path = scratch.file("download.bin")
        let victim = scratch.file("victim")
        try Data("precious".utf8).write(to: URL(fileURLWithPath: victim))
        let planted = path + ".planted.part"
        #expect(symlink(victim, planted) == 0)
        let danglingTarget = scratch.file("would-be-created")
        let dangling = path + ".dangling.part"
        #expect(symlink(danglingTarget, dangling) == 0)

        var names = [planted, dangling, path + ".fresh.part"].makeIterator()
        let file = try OutputFile(path: path) { _ in names.next() ?? (path + ".other.part") }
        #expect(file.writtenPath == path + ".fresh.part")
        try file.write(ByteBuffer(string: "body"))
        try file.commit()

        #expect(readFile(victim) == Array("precious".utf8), "the symlink's target was written")
        #expect(!FileManager.default.fileExists(atPath: danglingTarget), "a dangling symlink was followed")
        #expect(readFile(path) == Array("body".utf8))
        #expect(self.mode(planted).map { _ in true } == true, "the planted link is left alone")
    }
}
