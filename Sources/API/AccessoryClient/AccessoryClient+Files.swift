import AccessoryHTTP1
import AccessoryTransport
import HTTPTypes
import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension AccessoryClient {
    /// Downloads the response body of `request` to the file at `path`, reporting progress.
    ///
    /// The body goes to a temporary file beside `path`, renamed into place only when complete,
    /// so a failed download never leaves a truncated file that looks whole. The temporary file
    /// has a random name and is created `O_EXCL|O_NOFOLLOW` with mode 0600 (a file or symlink
    /// planted beside `path` is never followed or reused); on success it takes the mode of the
    /// file it replaces, or for a new file 0666 less the umask, as curl does. A destination
    /// that is not a regular file (`/dev/null`, a FIFO) is written directly.
    ///
    /// - Returns: the response head. The file is written whatever the status; check it.
    @discardableResult
    public func download(
        _ request: AccessoryRequest,
        to path: String,
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws(AccessoryClientError) -> HTTPResponse {
        let fileIO = NonBlockingFileIO(threadPool: .singleton)
        var existing = stat()
        let exists = stat(path, &existing) == 0
        let writesDirectly = exists && (existing.st_mode & S_IFMT) != S_IFREG
        let finalMode = exists ? existing.st_mode & 0o777 : 0o666 & ~Self.currentUmask()
        let temporaryPath: String
        let handle: NIOFileHandle
        if writesDirectly {
            temporaryPath = path
            do {
                handle = try await fileIO.openFile(
                    _deprecatedPath: path,
                    mode: .write,
                    flags: .default,
                    eventLoop: MultiThreadedEventLoopGroup.singleton.next()
                ).get()
            } catch {
                throw AccessoryClientError(
                    .fileError,
                    "cannot write \(path): \(Self.describe(error))",
                    underlying: error
                )
            }
        } else {
            (temporaryPath, handle) = try Self.createTemporaryFile(beside: path)
        }
        var completed = false
        defer {
            try? handle.close()
            if !completed && !writesDirectly { _ = unlink(temporaryPath) }
        }
        let head: HTTPResponse
        do {
            head = try await self.execute(request) { response in
                // A decoded body (decompressResponses) is longer than the Content-Length, which
                // counts the compressed bytes: its total is then unknown, not a fraction past 1.
                let decoded =
                    self.configuration.link.decompressResponses
                    && response.head.headerFields[.contentEncoding].map { !$0.isEmpty && $0 != "identity" } == true
                let total = decoded ? nil : response.head.headerFields[.contentLength].flatMap { Int64($0) }
                var written: Int64 = 0
                progress?(TransferProgress(bytesTransferred: 0, totalBytes: total))
                for try await buffer in response.body {
                    do {
                        try await fileIO.write(fileHandle: handle, buffer: buffer)
                    } catch {
                        throw AccessoryClientError(
                            .fileError,
                            "cannot write \(path): \(Self.describe(error))",
                            underlying: error
                        )
                    }
                    written += Int64(buffer.readableBytes)
                    progress?(TransferProgress(bytesTransferred: written, totalBytes: total))
                }
                return response.head
            }
        } catch {
            throw AccessoryClientError.wrapping(error)
        }
        if !writesDirectly {
            let modeSet = (try? handle.withUnsafeFileDescriptor { fchmod($0, finalMode) }) == 0
            guard modeSet, rename(temporaryPath, path) == 0 else {
                throw AccessoryClientError(
                    .fileError,
                    "cannot move the download into place at \(path): \(String(cString: strerror(errno)))"
                )
            }
        }
        completed = true
        return head
    }

    /// Uploads the file at `path` as the body of `request` (sent with `Content-Length`),
    /// reporting progress, and collects the response body (at most `maxResponseSize` bytes).
    public func upload(
        _ request: AccessoryRequest,
        fromFile path: String,
        maxResponseSize: Int = 16 * 1024 * 1024,
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws(AccessoryClientError) -> (HTTPResponse, ByteBuffer) {
        var request = request
        request.body = try Self.fileBody(path: path, progress: progress)
        return try await self.data(request, maxBodySize: maxResponseSize)
    }

    /// A streamed request body read from a file in 256 KiB pieces (each piece costs a hop to
    /// NIO's file thread pool and back, so fewer pieces cost less CPU: 64 KiB pieces took about
    /// 49 000 futex calls per GiB, 256 KiB about 12 000). The producer reopens the file
    /// each time it runs, so a redirect or authentication retry re-sends the same bytes.
    public static func fileBody(
        path: String,
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) throws(AccessoryClientError) -> HTTPRequestBody {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw AccessoryClientError(.fileError, "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        let kind = info.st_mode & S_IFMT
        let isRegular = kind == S_IFREG
        // A FIFO, socket or character device has a writer that may go quiet: PipeFileReader
        // waits for its bytes. Other files (regular ones, block devices) never make a read wait.
        let waitsForAWriter = kind == S_IFIFO || kind == S_IFSOCK || kind == S_IFCHR
        let length: Int? = isRegular ? Int(info.st_size) : nil
        let runs = TrackedMutex(0)
        return .stream(length: length) { writer in
            // A pipe's bytes are gone once read: a redirect (307, 308) or an authentication retry
            // that asks for the body again gets an error, not what is left of the stream (curl
            // likewise cannot rewind a pipe).
            let run = runs.withLock { runs in
                runs += 1
                return runs
            }
            if !isRegular && run > 1 {
                throw AccessoryClientError(
                    .fileError,
                    "\(path) is not a regular file, so its bytes cannot be sent again (a redirect or an authentication challenge asked for the body a second time); send it from a regular file"
                )
            }
            let fileIO = NonBlockingFileIO(threadPool: .singleton)
            let handle: NIOFileHandle
            do {
                // Opened without a FileRegion, which seeks to find the size: a FIFO (curl
                // --data-binary @fifo, a process substitution) has none and cannot seek. A
                // FIFO is opened non-blocking, so that a writer that never comes cannot hold
                // the open (PipeFileReader waits for its bytes, cancellably).
                handle = try await fileIO.openFile(
                    _deprecatedPath: path,
                    mode: .read,
                    flags: isRegular ? .default : .posix(flags: O_NONBLOCK, mode: 0),
                    eventLoop: MultiThreadedEventLoopGroup.singleton.next()
                ).get()
            } catch {
                throw AccessoryClientError(
                    .fileError,
                    "cannot read \(path): \(Self.describe(error))",
                    underlying: error
                )
            }
            defer { try? handle.close() }
            var pump = FileBodyPump(path: path, length: length, writer: writer, progress: progress)
            progress?(TransferProgress(bytesTransferred: 0, totalBytes: length.map(Int64.init)))
            do {
                if waitsForAWriter {
                    try await PipeFileReader.readAll(handle) { try await pump.send($0) }
                } else {
                    while true {
                        let chunk = try await fileIO.read(
                            fileHandle: handle,
                            byteCount: 256 * 1024,
                            allocator: ByteBufferAllocator()
                        )
                        if chunk.readableBytes == 0 { break }
                        try await pump.send(chunk)
                    }
                }
            } catch let error as CancellationError {
                throw error
            } catch let error as AccessoryClientError {
                throw error
            } catch  where pump.isWriting {
                throw error
            } catch {
                throw AccessoryClientError(
                    .fileError,
                    "cannot read \(path): \(Self.describe(error))",
                    underlying: error
                )
            }
            if let length, pump.sent != Int64(length) {
                throw AccessoryClientError(.fileError, "\(path) shrank while it was being sent")
            }
        }
    }

    /// NIO's file errors name the system call; people want the reason.
    static func describe(_ error: any Error) -> String {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        return "\(error)"
    }

    /// `PATH.accessory-http-RANDOM.part`, in the destination's directory (the final rename never
    /// crosses file systems), 64 random bits (not guessable in advance), created
    /// `O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC` with mode 0600; a name that exists is
    /// never opened: another is tried.
    static func createTemporaryFile(beside path: String) throws(AccessoryClientError) -> (String, NIOFileHandle) {
        for _ in 0..<16 {
            let candidate = "\(path).accessory-http-\(String(UInt64.random(in: 0 ... .max), radix: 16)).part"
            let descriptor = open(candidate, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if descriptor >= 0 { return (candidate, NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: descriptor)) }
            if errno != EEXIST {
                throw AccessoryClientError(.fileError, "cannot write \(path): \(String(cString: strerror(errno)))")
            }
        }
        throw AccessoryClientError(
            .fileError,
            "cannot write \(path): every temporary name tried beside it already exists; remove stale *.accessory-http-*.part files there"
        )
    }

    /// The process's umask (read by setting it and putting it back at once).
    static func currentUmask() -> mode_t {
        let mask = umask(0o022)
        umask(mask)
        return mask
    }
}
