import AccessoryEmulator
import AccessoryFunctionFS
import AccessoryResponder
import ArgumentParser
import Dispatch
import Logging
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

/// `accessory-http serve-gadget DIR`: the emulated accessory as a USB gadget function.
struct ServeGadget: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve-gadget",
        abstract: "Serve the emulated accessory as a USB gadget through FunctionFS (Linux gadget hardware).",
        discussion: """
            DIR is where functionfs is mounted for the function (scripts/usb-gadget setup mounts it \
            at /dev/ffs-accessory). Start this first, then bind the gadget to its UDC \
            (scripts/usb-gadget bind): the descriptors must be written before binding. Each host \
            session (the host selecting the interface) is a fresh link. Run it as the unprivileged \
            user that owns the functionfs mount, not as root: it parses what the host sends.
            See docs/usb.md.
              sudo scripts/usb-gadget setup --user accessory-http   # or --create-user
              sudo -u accessory-http accessory-http serve-gadget /dev/ffs-accessory &
              sudo scripts/usb-gadget bind
            SIGUSR1 stalls the bulk IN endpoint; SIGUSR2 stalls the bulk OUT endpoint when the next \
            host enables the function (fault injection for tests of the host's stall recovery).
            """
    )
    @OptionGroup var globals: GlobalOptions
    @OptionGroup var limits: ResponderOptions
    @Argument(help: ArgumentHelp("The functionfs mount point.", valueName: "dir")) var directory: String =
        "/dev/ffs-accessory"
    @Option(
        help: ArgumentHelp(
            "USB transfers queued on each endpoint at once through the kernel's native AIO (1: one blocking read and one blocking write at a time).",
            valueName: "count"
        )
    )
    var transfersInFlight = 4

    func validate() throws {
        guard (1...64).contains(self.transfersInFlight) else {
            throw ValidationError("--transfers-in-flight \(self.transfersInFlight) is not a count from 1 to 64")
        }
    }

    func run() async throws {
        let (directory, verbose, inFlight) = (self.directory, self.globals.verbose, self.transfersInFlight)
        let configuration = self.limits.makeConfiguration()
        // The transport logs each link's life (enable, disable, unbind, bytes, why it ended): at
        // info level with -v, else warnings and errors only, on standard error.
        LoggingSystem.bootstrap { label in
            ServiceLogHandler(label: label, level: verbose ? .info : .warning)
        }
        let emulator = EmulatedAccessory().handler
        // With -v, each request served is logged: the USB VM test reads it to see which
        // interface (which gadget function) carried a request.
        let responder = HTTPResponder(
            configuration: configuration,
            handler: { request in
                if verbose {
                    StandardError.write(
                        "\(ServiceLogHandler.timestamp()) * request \(request.head.method.rawValue) \(request.head.path ?? "")\n"
                    )
                }
                return try await emulator(request)
            }
        )
        // SIGTERM: the host's exchange under way is finished (an HTTP/2 host gets GOAWAY), then
        // the gadget stops; while no host is served, it stops at once.
        try await runReportingErrors(shutdown: responder.shutdown, grace: configuration.shutdownGrace + .seconds(1)) {
            var functionConfiguration = FunctionFSTransport.Configuration()
            functionConfiguration.readsInFlight = inFlight
            functionConfiguration.writesInFlight = inFlight
            let transport = FunctionFSTransport(directory: directory, configuration: functionConfiguration)
            let loop = MultiThreadedEventLoopGroup.singleton.next()
            if verbose { StandardError.write("* serving the emulated accessory on \(transport)\n") }
            signal(SIGUSR1, SIG_IGN)
            let stall = DispatchSource.makeSignalSource(signal: SIGUSR1, queue: .global())
            stall.setEventHandler {
                let halted = transport.haltInputEndpoint()
                StandardError.write("* SIGUSR1: bulk IN endpoint \(halted ? "halted" : "could not be halted")\n")
            }
            stall.resume()
            defer { stall.cancel() }
            signal(SIGUSR2, SIG_IGN)
            let outputStall = DispatchSource.makeSignalSource(signal: SIGUSR2, queue: .global())
            outputStall.setEventHandler {
                transport.haltOutputEndpointAfterNextEnable()
                StandardError.write("* SIGUSR2: bulk OUT endpoint will halt when the next host enables the function\n")
            }
            outputStall.resume()
            defer { outputStall.cancel() }
            while !Task.isCancelled && !responder.shutdown.hasBegun {
                do {
                    try await responder.serve(transport: transport, on: loop)
                } catch  where Task.isCancelled {
                    break  // SIGTERM or SIGINT while waiting for a host: a clean stop, not an error
                }
                if verbose { StandardError.write("* link ended; waiting for the next host session\n") }
            }
        }
    }
}
