import AccessoryClient
import AccessoryTransport
import Glibc

/// The serial path: a pseudo-terminal stands in for a USB CDC-ACM or UART line. The
/// responder (or the raw source) runs in a child on the master side, as the accessory; this
/// process opens the slave as the host's serial port.
extension Benchmarks {
    struct Pty {
        let master: CInt
        let slavePath: String
    }

    /// `posix_openpt`/`grantpt`/`unlockpt`/`ptsname` are hidden behind `_XOPEN_SOURCE` in the
    /// Glibc module, so this does what they do with the kernel's own ioctls.
    func openPty() throws -> Pty {
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { throw BenchError("cannot open /dev/ptmx: \(String(cString: strerror(errno)))") }
        // asm-generic ioctl numbers (x86_64 and aarch64): TIOCSPTLCK = _IOW('T', 0x31, int),
        // TIOCGPTN = _IOR('T', 0x30, unsigned int).
        let tiocsptlck: UInt = 0x4004_5431
        let tiocgptn: UInt = 0x8004_5430
        var unlock: CInt = 0
        var number: CUnsignedInt = 0
        guard ioctl(master, tiocsptlck, &unlock) == 0, ioctl(master, tiocgptn, &number) == 0 else {
            close(master)
            throw BenchError("cannot unlock the pty: \(String(cString: strerror(errno)))")
        }
        return Pty(master: master, slavePath: "/dev/pts/\(number)")
    }

    func openRawSlave(_ path: String) throws -> CInt {
        let fd = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { throw BenchError("cannot open \(path)") }
        var settings = termios()
        tcgetattr(fd, &settings)
        cfmakeraw(&settings)
        tcsetattr(fd, TCSANOW, &settings)
        return fd
    }

    func pty(into table: inout Table) async throws {
        // The limit: a child writes the bytes into the master, this process reads the raw slave.
        do {
            let pty = try self.openPty()
            let slave = try self.openRawSlave(pty.slavePath)
            let pid = try Sys.spawn(
                [self.selfPath, "raw-source", String(self.ptyBytes)],
                stdin: pty.master,
                stdout: pty.master,
                stderr: try self.childStderr()
            )
            close(pty.master)
            let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: RawLimits.blockSize, alignment: 4096)
            defer { scratch.deallocate() }
            var rates: [Double] = []
            for _ in 0..<(self.reps + 1) {
                let start = Sys.now()
                try Sys.writeAll(slave, [1])
                let got = try Sys.drain(slave, count: self.ptyBytes, scratch: scratch)
                guard got == self.ptyBytes else { throw BenchError("the pty carried \(got) of \(self.ptyBytes) bytes") }
                rates.append(Self.mibPerSecond(got, Sys.now() - start))
            }
            close(slave)
            Sys.terminate(pid)
            table.add(
                Names.ptyRaw,
                "MiB/s",
                Array(rates.dropFirst()),
                note: "\(self.ptyBytes >> 20) MiB, read(2) of the raw slave"
            )
        }
        // HTTP: the responder serves on the master; the client opens the slave as serial:PATH.
        do {
            let pty = try self.openPty()
            // Held open so the master never sees a hang-up while the client opens the slave.
            let holder = try self.openRawSlave(pty.slavePath)
            let pid = try Sys.spawn(
                self.serveCommand,
                stdin: pty.master,
                stdout: pty.master,
                stderr: try self.childStderr()
            )
            close(pty.master)
            let client = AccessoryClient(transport: SerialTransport(path: pty.slavePath))
            _ = try await client.data(try AccessoryRequest(url: "/status"))
            for caller in CallerExecutor.allCases {
                table.add(
                    Names.ptyNative + caller.suffix,
                    "MiB/s",
                    try await self.nativeDownloadRates(client, caller, bytes: self.ptyBytes),
                    note: "serve --device stdio on the master"
                )
            }
            await client.shutdown()
            close(holder)
            Sys.terminate(pid)
        }
    }
}
