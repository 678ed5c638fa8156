import AccessoryClient
import AccessoryHTTP1
import HTTPTypes
import NIOCore

/// Runs one request command: builds the request from the options, sends it, prints the result.
struct RequestRunner {
    let globals: GlobalOptions
    let options: RequestOptions

    func run(method: HTTPRequest.Method, path: String, progressBar: Bool = false) async throws(CLIError) {
        let (client, config, renderer) = try self.makeClient()
        defer { Task { await client.shutdown() } }
        // The last message's "bytes not shown" note would otherwise wait for a next message.
        defer { renderer?.flushHidden() }
        var request: AccessoryRequest
        do {
            request = try AccessoryRequest(method: method, url: path)
        } catch {
            throw CLIError(.usage, error.message)
        }
        request.headerFields = try self.options.headerFields()
        request.body = try self.options.body()
        if let credentials = self.options.credentials() { request.credentials = credentials }
        if let seconds = self.options.timeout ?? config?.timeout { request.timeout = .seconds(seconds) }

        let status: HTTPResponse.Status
        do {
            status = try await withTaskCancellationHandler {
                // One link, one request, nothing else to serve: the whole exchange, writing the
                // body out included, runs on the link's event loop thread, with no thread hop
                // per body part (curl's single-threaded loop, in effect). Output that blocks (a
                // pipe nobody reads yet) holds the link back, and is not mistaken for an idle device.
                try await withTaskExecutorPreference(client.taskExecutor) { () async throws -> HTTPResponse.Status in
                    if let output = self.options.output {
                        return try await self.download(client, request, to: output, progressBar: progressBar)
                    } else {
                        return try await self.printResponse(client, request, method: method)
                    }
                }
            } onCancel: {
                // A cancelled exchange waits for the device to finish answering (so a link can be
                // reused); this run will not reuse it, so close it and stop at once.
                Task { await client.shutdown() }
            }
        } catch {
            await client.shutdown()
            if let error = error as? CLIError { throw error }
            let clientError = AccessoryClientError.wrapping(error)
            throw CLIError(ExitStatus(for: clientError), clientError.message)
        }
        await client.shutdown()
        if self.options.fail && status.code >= 400 {
            throw CLIError(.httpError, "the device answered \(status.code) \(status.reasonPhrase)")
        }
    }

    private func makeClient() throws(CLIError) -> (AccessoryClient, ConfigFile?, TraceRenderer?) {
        try self.globals.makeClient(
            redirects: RedirectPolicy(maxRedirects: self.options.maxRedirs),
            connectTimeout: self.options.connectTimeout
        )
    }

    private func printResponse(_ client: AccessoryClient, _ request: AccessoryRequest, method: HTTPRequest.Method)
        async throws -> HTTPResponse.Status
    {
        let include = self.options.include || method == .head
        let fail = self.options.fail
        return try await client.execute(request) { response in
            if fail && response.status.code >= 400 { return response.status }
            if include { StandardOutput.write(Self.render(response.head)) }
            for try await buffer in response.body {
                let ok = buffer.withUnsafeReadableBytes { StandardOutput.write($0) }
                if !ok { throw CLIError(.file, "cannot write to stdout: \(String(cString: strerror(errno)))") }
            }
            return response.status
        }
    }

    private func download(_ client: AccessoryClient, _ request: AccessoryRequest, to path: String, progressBar: Bool)
        async throws -> HTTPResponse.Status
    {
        let bar = progressBar && StandardError.isTerminal ? ProgressBar() : nil
        var progress: (@Sendable (TransferProgress) -> Void)? = nil
        if let bar { progress = { bar.update($0) } }
        // The client writes the body whatever the status; with --fail an error body must not
        // replace the file, so download beside it and move it into place only on success.
        let staged = self.options.fail && !Self.isSpecialFile(path)
        let target = staged ? "\(path).accessory-http-\(String(UInt32.random(in: 0 ... .max), radix: 16)).fail" : path
        let head: HTTPResponse
        do {
            head = try await client.download(request, to: target, progress: progress)
        } catch {
            guard staged else { throw error }
            _ = unlink(target)
            // Name the user's path, not the staging file, in the message.
            throw CLIError(ExitStatus(for: error), error.message.replacing(target, with: path))
        }
        if staged {
            if head.status.code >= 400 {
                _ = unlink(target)
            } else if rename(target, path) != 0 {
                let reason = String(cString: strerror(errno))
                _ = unlink(target)
                throw CLIError(.file, "cannot move the download into place at \(path): \(reason)")
            }
        }
        bar?.finish()
        if self.options.include { StandardOutput.write(Self.render(head)) }
        return head.status
    }

    /// True for an existing destination that is not a regular file (`/dev/null`, a FIFO).
    private static func isSpecialFile(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { return false }
        return (info.st_mode & S_IFMT) != S_IFREG
    }

    static func render(_ head: HTTPResponse) -> String {
        var text = "HTTP/1.1 \(head.status.code) \(head.status.reasonPhrase)\r\n"
        for field in head.headerFields { text += "\(field.name): \(field.value)\r\n" }
        return text + "\r\n"
    }
}

#if canImport(Glibc)
    import Glibc
#endif
