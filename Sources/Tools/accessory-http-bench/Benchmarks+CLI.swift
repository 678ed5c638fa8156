import AccessoryClient
import AccessoryEmulator
import AccessoryHTTP1
import AccessoryTransport
import ArgumentParser
import Glibc
import NIOCore
import NIOPosix
import Synchronization

/// The CLI's rows on a socketpair, and its memory.
extension Benchmarks {
    // MARK: Socketpair: the CLI

    /// Runs the CLI on one end of a socketpair (`--device stdio`) and the responder on the
    /// other; returns the CLI's and the responder's exits and the CLI's wall time.
    func runCLI(_ arguments: [String]) throws -> (cli: Sys.Exit, serve: Sys.Exit, time: Duration) {
        let run = try self.runCLI(arguments, watchingPeaks: false)
        return (run.cli, run.serve, run.time)
    }

    /// With `watchingPeaks`, also returns the peak RSS (`VmHWM`) of the CLI and the responder,
    /// polled while the CLI runs (which costs the wall time up to 2 ms).
    func runCLI(
        _ arguments: [String],
        watchingPeaks: Bool
    ) throws -> (cli: Sys.Exit, serve: Sys.Exit, time: Duration, cliPeak: Int, servePeak: Int) {
        let (cliEnd, serveEnd) = try Sys.socketPair()
        let log = try self.childStderr()
        defer { close(log) }
        let serve = try Sys.spawn(self.serveCommand, stdin: serveEnd, stdout: serveEnd, stderr: log)
        close(serveEnd)
        let start = Sys.now()
        let cli = try Sys.spawn(
            [self.cli, "--device", "stdio"] + arguments,
            stdin: cliEnd,
            stdout: cliEnd,
            stderr: log
        )
        close(cliEnd)
        let cliExit: Sys.Exit
        var peaks: [pid_t: Int] = [:]
        if watchingPeaks {
            (cliExit, peaks) = Sys.waitWatchingPeak(cli, others: [serve])
        } else {
            cliExit = Sys.wait(cli)
        }
        let time = Sys.now() - start
        let serveExit = Sys.wait(serve)
        guard cliExit.succeeded else {
            throw BenchError(
                "accessory-http \(arguments.joined(separator: " ")) failed (\(cliExit.status)); see \(self.childLog)"
            )
        }
        return (cliExit, serveExit, time, peaks[cli] ?? 0, peaks[serve] ?? 0)
    }

    func cliBulk(into table: inout Table) throws {
        var rates: [Double] = []
        for _ in 0..<self.reps {
            let run = try self.runCLI(["get", "/bytes/\(self.bulkBytes)", "-o", "/dev/null"])
            rates.append(Self.mibPerSecond(self.bulkBytes, run.time))
        }
        table.add(Names.cliBulk, "MiB/s", rates, note: "accessory-http get -o /dev/null, process start included")
    }

    /// `post -d @FILE` from a regular file and from a FIFO that `cat` fills from the same file
    /// (a process substitution's case): the FIFO is read by `PipeFileReader`, a thread per piece.
    func cliUpload(into table: inout Table) throws {
        let source = "\(self.workDir)/upload.bin"
        let fifo = "\(self.workDir)/upload.fifo"
        let file = try Sys.createFile(source)
        let sized = ftruncate(file, off_t(self.bulkBytes)) == 0
        close(file)
        guard sized else { throw BenchError("cannot size \(source)") }
        let null = try Sys.devNull()
        defer { close(null) }
        var fromFile: [Double] = []
        var fromFIFO: [Double] = []
        for _ in 0..<self.reps {
            let run = try self.runCLI(["post", "-d", "@\(source)", "/upload?digest=none", "-o", "/dev/null"])
            fromFile.append(Self.mibPerSecond(self.bulkBytes, run.time))
            unlink(fifo)
            guard mkfifo(fifo, 0o600) == 0 else { throw BenchError("cannot make \(fifo)") }
            let writer = try Sys.spawn(
                ["/bin/sh", "-c", "exec cat \"$0\" > \"$1\"", source, fifo],
                stdin: null,
                stdout: null
            )
            let piped: (cli: Sys.Exit, serve: Sys.Exit, time: Duration)
            do {
                piped = try self.runCLI(["post", "-d", "@\(fifo)", "/upload?digest=none", "-o", "/dev/null"])
            } catch {
                // cat may still wait for a reader to open the FIFO.
                kill(writer, SIGKILL)
                _ = Sys.wait(writer)
                throw error
            }
            _ = Sys.wait(writer)
            fromFIFO.append(Self.mibPerSecond(self.bulkBytes, piped.time))
        }
        unlink(fifo)
        unlink(source)
        table.add(Names.cliUploadFile, "MiB/s", fromFile, note: "accessory-http post -d @FILE, process start included")
        table.add(Names.cliUploadFIFO, "MiB/s", fromFIFO, note: "the same bytes through a FIFO that cat fills")
    }

    // MARK: Memory

    func memory(into table: inout Table) throws {
        // The peaks are each process's own VmHWM, polled while it runs (see `waitWatchingPeak`).
        let baseline = try self.runCLI(["get", "/status", "-o", "/dev/null"], watchingPeaks: true).cliPeak
        var growth: [Double] = [], peaks: [Double] = [], servePeaks: [Double] = []
        let file = "\(self.workDir)/download.bin"
        for _ in 0..<self.reps {
            let run = try self.runCLI(["download", "/bytes/\(self.memoryBytes)", "-o", file], watchingPeaks: true)
            var info = stat()
            guard stat(file, &info) == 0, Int(info.st_size) == self.memoryBytes else {
                throw BenchError("the download is not \(self.memoryBytes) bytes")
            }
            unlink(file)
            peaks.append(Double(run.cliPeak) / 1_048_576)
            growth.append(Double(run.cliPeak - baseline) / 1_048_576)
            servePeaks.append(Double(run.servePeak) / 1_048_576)
        }
        let size = "\(self.memoryBytes >> 20) MiB"
        table.add(
            Names.memoryGrowth,
            "MiB",
            growth,
            note: "CLI download of \(size) to a file; peak RSS minus that of GET /status (\(baseline >> 20) MiB)"
        )
        table.add(Names.memoryPeak, "MiB", peaks, note: "the CLI's own peak RSS (VmHWM)")
        table.add(Names.memoryServe, "MiB", servePeaks, note: "the responder's own peak RSS (VmHWM)")
    }
}

/// Like `SocketPairTransport` with a peer that spawns the responder, but the child is started
/// before NIO takes the socket: NIO writes through a dup(2) of it that is not close-on-exec,
/// and a child that inherited that dup would keep the socket from ever reaching EOF.
struct ChildOnSocketPair: ByteStreamTransport {
    let command: [String]
    let children: ChildList
    let log: CInt?

    var description: String { "socketpair to a child's stdio" }

    func open(
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> OpenedByteStream {
        let (local, remote) = try Sys.socketPair()
        let pid: pid_t
        do {
            pid = try Sys.spawn(self.command, stdin: remote, stdout: remote, stderr: self.log)
        } catch {
            close(local)
            close(remote)
            throw error
        }
        close(remote)
        self.children.pids.withLock { $0.append(pid) }
        do {
            let channel = try await NIOPipeBootstrap(group: eventLoop)
                .channelInitializer(configure)
                .takingOwnershipOfDescriptor(inputOutput: local)
                .get()
            return OpenedByteStream(channel: channel)
        } catch {
            close(local)
            throw error
        }
    }
}
