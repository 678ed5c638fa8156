import Glibc

/// A serial tty opened exclusively and configured for raw bytes, remembering the settings it
/// had before so ``release()`` can put them back.
///
/// It owns `descriptor` from ``open(path:settings:)`` until ``release()``. The channel reads
/// and writes through duplicates of it; the original carries the lock and the saved settings.
struct SerialPort: Sendable {
    let path: String
    let descriptor: FileDescriptor
    let savedAttributes: termios

    /// Opens `path`, takes it exclusively, applies `settings` in raw mode and drops stale input.
    static func open(path: String, settings: SerialSettings) throws(TransportError) -> SerialPort {
        guard let speed = BaudRate.constant(for: settings.baudRate) else {
            let rates = BaudRate.supportedRates.map(String.init).joined(separator: ", ")
            throw TransportError(
                .unsupportedSetting,
                "\(settings.baudRate) baud is not a rate Linux termios can set for \(path); use one of \(rates)"
            )
        }
        // O_NONBLOCK: open must not wait for carrier detect on a modem line.
        // O_NOCTTY: the accessory must never become this process's controlling terminal.
        let descriptor: FileDescriptor
        do {
            descriptor = try FileDescriptor.open(path, flags: O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
        } catch {
            throw Self.openError(error, path: path)
        }
        let saved: termios
        do {
            saved = try Self.takeExclusively(descriptor, path: path)
        } catch {
            try? descriptor.close()
            throw error
        }
        let port = SerialPort(path: path, descriptor: descriptor, savedAttributes: saved)
        do {
            try port.apply(settings, speed: speed)
        } catch {
            port.release()
            throw error
        }
        return port
    }

    /// Checks that the descriptor is a tty, locks it and returns its current settings.
    private static func takeExclusively(_ descriptor: FileDescriptor, path: String) throws(TransportError) -> termios {
        guard descriptor.isTerminal else {
            let kind = (try? descriptor.kind()).map(\.description) ?? "not a terminal"
            throw TransportError(
                .wrongKindOfFile,
                "\(path) is \(kind), not a serial tty; serial: needs a device such as /dev/ttyACM0 or /dev/ttyUSB0"
            )
        }
        // flock keeps out other processes that lock too (socat, minicom, ModemManager);
        // TIOCEXCL makes the kernel refuse further open()s by anyone but root.
        do {
            try descriptor.lock(LOCK_EX | LOCK_NB)
        } catch  where error == .wouldBlock {
            throw Self.busy(path)
        } catch {
            throw TransportError(.openFailed, "could not lock \(path): \(error)")
        }
        do {
            try descriptor.ioctl(TIOCEXCL)
            return try descriptor.terminalAttributes()
        } catch {
            try? descriptor.lock(LOCK_UN)
            throw TransportError(.openFailed, "could not take \(path) exclusively or read its settings: \(error)")
        }
    }

    /// Raw mode with `settings`; reads the result back because `tcsetattr` reports success when
    /// the driver accepted only some of the changes.
    private func apply(_ settings: SerialSettings, speed: speed_t) throws(TransportError) {
        var attributes = self.savedAttributes
        cfmakeraw(&attributes)
        attributes.c_iflag &= ~tcflag_t(IXOFF | IXANY)
        attributes.c_cflag |= tcflag_t(CLOCAL | CREAD)
        attributes.c_cflag &= ~tcflag_t(CSIZE | PARENB | PARODD | CSTOPB)
        attributes.c_cflag &= ~tcflag_t(CRTSCTS)
        let characterSize =
            switch settings.dataBits {
            case .five: CS5
            case .six: CS6
            case .seven: CS7
            case .eight: CS8
            }
        attributes.c_cflag |= tcflag_t(characterSize)
        switch settings.parity {
        case .none: break
        case .even: attributes.c_cflag |= tcflag_t(PARENB)
        case .odd: attributes.c_cflag |= tcflag_t(PARENB | PARODD)
        }
        if settings.stopBits == .two { attributes.c_cflag |= tcflag_t(CSTOPB) }
        if settings.flowControl == .rtscts { attributes.c_cflag |= tcflag_t(CRTSCTS) }
        // VMIN=1 VTIME=0: a read returns as soon as one byte is there (NIO reads non-blocking
        // anyway, but this is what a blocking reader sharing the settings expects).
        withUnsafeMutableBytes(of: &attributes.c_cc) { bytes in
            bytes[Int(VMIN)] = 1
            bytes[Int(VTIME)] = 0
        }
        _ = cfsetispeed(&attributes, speed)
        _ = cfsetospeed(&attributes, speed)

        let applied: TerminalSettings
        do {
            try self.descriptor.setTerminalAttributes(attributes)
            applied = TerminalSettings(try self.descriptor.terminalAttributes())
        } catch {
            throw TransportError(.openFailed, "could not configure \(self.path): \(error)")
        }
        let wanted = TerminalSettings(attributes)
        guard applied == wanted else {
            throw TransportError(
                .unsupportedSetting,
                "the driver of \(self.path) did not accept \(settings) (it has \(applied)); try other settings"
            )
        }
        // Bytes that arrived before we owned the line belong to someone else's exchange.
        do {
            try self.descriptor.flushTerminal(TCIOFLUSH)
        } catch {
            throw TransportError(.openFailed, "could not discard stale input on \(self.path): \(error)")
        }
    }

    /// Restores the saved settings, unlocks and closes the descriptor. Best effort: the device
    /// may be gone (unplugged), and then there is nothing left to restore.
    ///
    /// It may block: the last close of a tty waits (up to the driver's closing_wait, 30 s by
    /// default) for queued output to drain, so call it off the event loop.
    func release() {
        try? self.descriptor.setTerminalAttributes(self.savedAttributes)
        try? self.descriptor.ioctl(TIOCNXCL)
        try? self.descriptor.lock(LOCK_UN)
        try? self.descriptor.close()
    }

    static func busy(_ path: String) -> TransportError {
        TransportError(.deviceBusy, "\(path) is in use by another process; `fuser \(path)` shows which one")
    }

    static func openError(_ error: Errno, path: String) -> TransportError {
        switch error.rawValue {
        case ENOENT, ENOTDIR, ENXIO, ENODEV:
            return TransportError(
                .deviceNotFound,
                "no serial device at \(path) (\(error)); is the accessory plugged in? `ls /dev/ttyACM* /dev/ttyUSB*` lists serial devices"
            )
        case EACCES, EPERM:
            return TransportError(
                .permissionDenied,
                "no permission to open \(path) (\(error)); join the group that owns it, usually dialout (`sudo usermod -aG dialout $USER`, then log in again)"
            )
        case EBUSY:
            return Self.busy(path)
        case EISDIR:
            return TransportError(
                .wrongKindOfFile,
                "\(path) is a directory, not a serial tty; serial: needs a device such as /dev/ttyACM0 or /dev/ttyUSB0"
            )
        default:
            return TransportError(.openFailed, "could not open \(path): \(error)")
        }
    }
}
