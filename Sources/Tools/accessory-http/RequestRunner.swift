import AccessoryClient
import AccessoryDevices
import AccessoryHTTP1
import AccessoryTransport
import HTTPTypes
import NIOCore

/// Runs one request command: builds the request from the options, sends it, prints the result.
struct RequestRunner {
    let globals: GlobalOptions
    let options: RequestOptions

    func run(method: HTTPRequest.Method, path: String, progressBar: Bool = false) async throws(CLIError) {
        let (client, config, renderer) = try self.makeClient()
        // The last message's "bytes not shown" note would otherwise wait for a next message.
        defer { renderer?.flushHidden() }
        let outcome: Result<HTTPResponse.Status, CLIError>
        do {
            outcome = .success(
                try await self.send(client, config, method: method, path: path, progressBar: progressBar)
            )
        } catch {
            outcome = .failure(error)
        }
        // Once, whatever happened: closes the link and waits until the transport has let go of
        // the device (an exec: child reaped, a serial line's settings restored).
        await client.shutdown()
        let status = try outcome.get()
        if self.options.fail && status.code >= 400 {
            throw CLIError(
                .httpError,
                "the device answered \(status.code) \(UntrustedText.printable(status.reasonPhrase))"
            )
        }
    }

    private func send(
        _ client: AccessoryClient,
        _ config: ConfigFile?,
        method: HTTPRequest.Method,
        path: String,
        progressBar: Bool
    ) async throws(CLIError) -> HTTPResponse.Status {
        var request: AccessoryRequest
        do {
            request = try AccessoryRequest(method: method, url: path)
        } catch {
            throw CLIError(.usage, error.message)
        }
        request.headerFields = try self.options.headerFields()
        // The client bounds the exchange; what this run reads and writes itself (stdin for
        // -d @-, stdout, a -o FIFO) is bounded by the same clock: a pipe that never ends or that
        // nobody reads must not hold the run past it.
        let output = RunDeadline(seconds: self.options.timeout ?? config?.timeout)
        // stderr too (the -v trace, the progress bar): waited for until then, not after.
        if let deadline = output.deadline { StandardError.waitNoLongerThan(deadline) }
        request.body = try self.options.body(within: output)
        if let credentials = self.options.credentials() { request.credentials = credentials }
        if let deadline = output.deadline {
            // Reading stdin came out of the run's time: the exchange gets what is left.
            request.timeout = max(.milliseconds(1), ContinuousClock.now.duration(to: deadline))
        }
        do {
            return try await withTaskCancellationHandler {
                // One link, one request, nothing else to serve: the whole exchange, writing the
                // body out included, runs on the link's event loop thread, with no thread hop
                // per body part (curl's single-threaded loop, in effect). Output that blocks (a
                // pipe nobody reads yet) holds the link back, and is not mistaken for an idle device.
                try await withTaskExecutorPreference(client.taskExecutor) { () async throws -> HTTPResponse.Status in
                    if let file = self.options.output {
                        return try await self.download(client, request, to: file, output, progressBar: progressBar)
                    } else {
                        return try await self.printResponse(client, request, method: method, output)
                    }
                }
            } onCancel: {
                // This run will not reuse the link: close it now, so the call ends at once
                // instead of waiting for the device (the run's own shutdown follows).
                Task { await client.shutdown() }
            }
        } catch {
            if let error = error as? CLIError { throw error }
            let clientError = AccessoryClientError.wrapping(error)
            throw CLIError(ExitStatus(for: clientError), clientError.message)
        }
    }

    private func makeClient() throws(CLIError) -> (AccessoryClient, ConfigFile?, TraceRenderer?) {
        let (spec, config) = try self.globals.resolveDevice()
        if spec.kind == .stdio { try StandardDescriptors.requireStdioLink() }
        if spec.kind == .stdio && (self.options.output == nil || self.options.include) {
            // The response printed to stdout would go down the link, into the device.
            throw CLIError(
                .usage,
                "--device stdio carries the link on this process's stdin and stdout, so the response cannot be printed: write the body with -o FILE, and leave out -i"
            )
        }
        if spec.kind == .stdio && self.options.data == "@-" {
            // The body read from stdin would be the device's bytes.
            throw CLIError(
                .usage,
                "--device stdio carries the link on this process's stdin, so -d @- cannot read a body from it: name a file with -d @FILE"
            )
        }
        let (client, renderer) = try self.globals.makeClient(
            for: spec,
            config: config,
            host: self.globals.host ?? config?.host,
            redirects: RedirectPolicy(maxRedirects: self.options.maxRedirs),
            connectTimeout: self.options.connectTimeout,
            compressed: self.options.compressed
        )
        return (client, config, renderer)
    }

    private func printResponse(
        _ client: AccessoryClient,
        _ request: AccessoryRequest,
        method: HTTPRequest.Method,
        _ output: RunDeadline
    ) async throws -> HTTPResponse.Status {
        let include = self.options.include || method == .head
        let fail = self.options.fail
        return try await client.execute(request) { response in
            if fail && response.status.code >= 400 { return response.status }
            if include {
                try output.write(Self.render(response.head, http2: client.configuration.link.httpVersion == .http2))
            }
            for try await buffer in response.body {
                try buffer.withUnsafeReadableBytes { (bytes) throws(CLIError) in try output.write(bytes) }
            }
            // Trailer fields after the body, as curl -i prints them.
            if include, let trailers = response.body.trailers { try output.write(Self.render(trailers)) }
            return response.status
        }
    }

    private func download(
        _ client: AccessoryClient,
        _ request: AccessoryRequest,
        to path: String,
        _ output: RunDeadline,
        progressBar: Bool
    ) async throws -> HTTPResponse.Status {
        let bar = progressBar && StandardError.isTerminal ? ProgressBar() : nil
        let fail = self.options.fail
        // The body goes to a private temporary file renamed into place on success (see
        // OutputFile); with --fail an error body is never written, so the file stays as it was.
        let file = try await OutputFile.open(path: path, deadline: output.deadline, timeout: output.seconds)
        // A wait for a FIFO's reader came out of the run's time: the exchange gets what is left.
        var request = request
        if let deadline = output.deadline {
            request.timeout = max(.milliseconds(1), ContinuousClock.now.duration(to: deadline))
        }
        let head: HTTPResponse
        var trailers: HTTPFields?
        do {
            (head, trailers) = try await client.execute(request) { response in
                if fail && response.status.code >= 400 { return (response.head, nil) }
                let total = response.head.headerFields[.contentLength].flatMap { Int64($0) }
                var written: Int64 = 0
                bar?.update(TransferProgress(bytesTransferred: 0, totalBytes: total))
                for try await buffer in response.body {
                    try file.write(buffer, deadline: output.deadline, timeout: output.seconds)
                    written += Int64(buffer.readableBytes)
                    bar?.update(TransferProgress(bytesTransferred: written, totalBytes: total))
                }
                return (response.head, response.body.trailers)
            }
        } catch {
            file.discard()
            throw error
        }
        if fail && head.status.code >= 400 {
            file.discard()
        } else {
            try file.commit()
        }
        bar?.finish()
        if self.options.include {
            try output.write(Self.render(head, http2: client.configuration.link.httpVersion == .http2))
            if let trailers { try output.write(Self.render(trailers)) }
        }
        return head.status
    }

    /// The head as `-i` prints it. The device chose the reason phrase and the values: control
    /// characters (the parser lets C1 controls such as U+009B, an 8-bit CSI, through) are escaped
    /// by `UntrustedText`, so they can neither forge a line nor drive the terminal. An HTTP/2
    /// answer has no reason phrase and its status line names HTTP/2, as curl prints it.
    static func render(_ head: HTTPResponse, http2: Bool) -> String {
        var text =
            http2
            ? "HTTP/2 \(head.status.code) \r\n"
            : "HTTP/1.1 \(head.status.code) \(UntrustedText.printable(head.status.reasonPhrase))\r\n"
        for field in head.headerFields {
            text += "\(UntrustedText.printable("\(field.name)")): \(UntrustedText.printable(field.value))\r\n"
        }
        return text + "\r\n"
    }

    /// Trailer fields as `-i` prints them after the body: one line each, escaped like the head.
    static func render(_ trailers: HTTPFields) -> String {
        trailers.map { "\(UntrustedText.printable("\($0.name)")): \(UntrustedText.printable($0.value))\r\n" }.joined()
    }
}

#if canImport(Glibc)
    import Glibc
#endif

extension Double {
    /// `1` for 1.0, `0.5` for 0.5: a number of seconds as the user would have typed it.
    var formatted: String {
        self == self.rounded() && abs(self) < 1e15 ? String(Int64(self)) : String(self)
    }
}

/// The run's `--timeout` as a point in time, for what the run reads and writes itself (stdin
/// for `-d @-`, stdout, a `-o` FIFO or device); the client bounds the exchange.
struct RunDeadline: Sendable {
    /// `--timeout` (or the settings file's `timeout`), for messages.
    let seconds: Double?
    /// When the run's time is up; `nil`: no limit.
    let deadline: ContinuousClock.Instant?

    init(seconds: Double?) {
        self.seconds = seconds
        self.deadline = seconds.map { ContinuousClock.now.advanced(by: .seconds($0)) }
    }

    /// Writes to stdout within the deadline.
    func write(_ bytes: UnsafeRawBufferPointer) throws(CLIError) {
        do {
            try StandardOutput.write(bytes, deadline: self.deadline)
        } catch {
            throw Self.error(error, writing: .standardOutput, timeout: self.seconds)
        }
    }

    func write(_ text: String) throws(CLIError) {
        var text = text
        // withUTF8 rethrows untyped errors: carry the typed one out in a Result.
        try text.withUTF8 { bytes in
            Result { () throws(CLIError) in try self.write(UnsafeRawBufferPointer(bytes)) }
        }.get()
    }

    /// Where the run writes: stdout, or the `-o` destination (a FIFO or device written directly).
    enum Target {
        case standardOutput
        case file(String)
    }

    /// The CLI's error for a write to `target` that stopped.
    static func error(_ error: BoundedIOError, writing target: Target, timeout: Double?) -> CLIError {
        let (name, advice) =
            switch target {
            case .standardOutput: ("stdout", "read it faster, or write the body to a file with -o")
            case .file(let path): (path, "its reader must read as fast as the body arrives")
            }
        switch error {
        case .failed:
            return CLIError(.file, "cannot write \(name): \(error.reason)")
        case .deadlinePassed:
            let limit = timeout.map { " (\($0.formatted) s)" } ?? ""
            return CLIError(
                .timeout,
                "the exchange took longer than its timeout\(limit) while \(name) took no more output: nothing was reading it (\(advice))"
            )
        case .cancelled:
            return CLIError(.failure, "cancelled while writing \(name)")
        }
    }
}
