import CLibUSB

/// One libusb transfer and its buffer.
///
/// `@unchecked Sendable`: a slot has one owner at a time: libusb and the kernel while it is
/// submitted, otherwise the thread that took it from the bridge's state (under the bridge's
/// mutex) or the completion callback that libusb hands it to; every hand-off goes through
/// that mutex or through `libusb_submit_transfer`/the completion, which order memory. The
/// transfer and buffer are freed in `deinit`, which runs only after the bridge has seen every
/// submitted transfer come back.
final class TransferSlot: @unchecked Sendable {
    let transfer: UnsafeMutablePointer<libusb_transfer>
    let buffer: UnsafeMutablePointer<UInt8>
    let capacity: Int
    let isInput: Bool
    /// Set while libusb owns the transfer; read and written under the bridge's mutex.
    var submitted = false
    /// The bridge this slot belongs to; the reference cycle is broken by `USBLinkBridge.teardown`.
    var bridge: USBLinkBridge?

    init?(capacity: Int, isInput: Bool) {
        guard let transfer = libusb_alloc_transfer(0) else { return nil }
        self.transfer = transfer
        self.capacity = capacity
        self.buffer = .allocate(capacity: capacity)
        self.isInput = isInput
    }

    deinit {
        libusb_free_transfer(self.transfer)
        self.buffer.deallocate()
    }
}
