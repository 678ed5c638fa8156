import AccessoryClient
import AccessoryDevices
import AccessoryHTTP1
import ArgumentParser
import HTTPTypes
import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// The curl-like options of the request commands.
struct RequestOptions: ParsableArguments {
    @Option(
        name: [.customShort("H"), .customLong("header")],
        help: ArgumentHelp("Add a header, 'Name: value'. Repeatable.", valueName: "header")
    )
    var headers: [String] = []

    @Option(
        name: [.customShort("d"), .customLong("data")],
        help: ArgumentHelp(
            "Send a body: DATA as given, @FILE from a file, @- from stdin. Sent as is (like curl --data-binary).",
            valueName: "data"
        )
    )
    var data: String?

    @Option(
        name: [.customShort("o"), .customLong("output")],
        help: ArgumentHelp("Write the body to FILE instead of stdout.", valueName: "file")
    )
    var output: String?

    @Flag(name: [.customShort("i"), .customLong("include")], help: "Print the response head before the body.")
    var include = false

    @Flag(name: .long, help: "Exit with status 22, printing no body, when the device answers 400 or more.")
    var fail = false

    @Option(
        name: .long,
        help: ArgumentHelp("Give up if the whole exchange takes longer than this.", valueName: "seconds")
    )
    var timeout: Double?

    @Option(
        name: .long,
        help: ArgumentHelp("Give up if opening the device takes longer than this.", valueName: "seconds")
    )
    var connectTimeout: Double?

    @Option(
        name: [.customShort("u"), .customLong("user")],
        help: ArgumentHelp("Credentials for Basic or Digest authentication.", valueName: "user[:password]")
    )
    var user: String?

    @Option(
        name: .long,
        help: ArgumentHelp("Follow at most this many redirects (0: return the redirect itself).", valueName: "n")
    )
    var maxRedirs: Int = 10

    @Flag(
        name: .long,
        help: "Ask for a compressed response (deflate, gzip) and write it decoded, as curl --compressed does."
    )
    var compressed = false

    func validate() throws {
        // Bounded above as well: a Duration made from `inf` or 1e300 seconds traps.
        for (name, value) in [("--timeout", self.timeout), ("--connect-timeout", self.connectTimeout)] {
            if let value, !ConfigFile.isTimeout(value) {
                throw ValidationError(
                    "\(name) must be a number of seconds above 0 and at most \(Int(ConfigFile.maximumTimeout)), not \(value)"
                )
            }
        }
        if maxRedirs < 0 { throw ValidationError("--max-redirs must be 0 or more") }
    }

    /// Parses `-H` lines, refusing CR, LF or NUL and malformed names before anything is sent.
    func headerFields() throws(CLIError) -> HTTPFields {
        var fields = HTTPFields()
        for line in self.headers {
            do {
                fields.append(try RequestValidation.headerLine(line))
            } catch {
                throw CLIError(.usage, "-H: \(error.message)")
            }
        }
        return fields
    }

    func credentials() -> Credentials? {
        guard let user = self.user else { return nil }
        if !user.contains(":"), isatty(0) == 1, let typed = getpass("Enter the password for user '\(user)': ") {
            return Credentials(user: user, password: String(cString: typed))
        }
        return Credentials(userOption: user)
    }

    /// The request body from `-d`; `-d @-` reads stdin to its end within `time`.
    func body(within time: RunDeadline) throws(CLIError) -> HTTPRequestBody {
        guard let data = self.data else { return .none }
        guard data.hasPrefix("@") else { return .bytes(ByteBuffer(string: data)) }
        let path = String(data.dropFirst())
        if path == "-" { return .bytes(try Self.readStandardInput(within: time)) }
        do {
            return try AccessoryClient.fileBody(path: path)
        } catch {
            throw CLIError(.file, "-d @\(path): \(error.message)")
        }
    }

    /// Reads stdin whole (as curl does for `-d @-`), within the run's time: a stdin that never
    /// ends must not hold the run past `--timeout`, nor past SIGINT.
    private static func readStandardInput(within time: RunDeadline) throws(CLIError) -> ByteBuffer {
        do throws(BoundedIOError) {
            if StandardDescriptors.wasClosed(0) { throw .failed(errno: EBADF) }
            return try BoundedReader.readAll(0, deadline: time.deadline)
        } catch .deadlinePassed {
            let limit = time.seconds.map { " (\($0.formatted) s)" } ?? ""
            throw CLIError(
                .timeout,
                "the exchange took longer than its timeout\(limit) while -d @- read stdin, which did not end (close it, or name a file with -d @FILE: a FIFO or device there is streamed as it comes)"
            )
        } catch .cancelled {
            throw CLIError(.failure, "cancelled while -d @- read stdin")
        } catch {
            throw CLIError(.file, "-d @-: cannot read stdin: \(error.reason)")
        }
    }
}
