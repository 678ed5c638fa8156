import CThreadSanitizer
import Synchronization

/// `Synchronization.Mutex`, with each critical section announced to ThreadSanitizer.
///
/// On Linux the standard library's Mutex is a futex inside the standard library, which is not
/// built with ThreadSanitizer: the tool sees no happens-before between two holders of the lock
/// and reports every access to the state it guards as a race. Inside the lock this type calls
/// `__tsan_acquire` and, before leaving it, `__tsan_release` on an address that stands for the
/// lock, so a ThreadSanitizer report is about state that is really unguarded. Outside a
/// `-sanitize=thread` build those calls are a test of a null function pointer.
package struct TrackedMutex<Value: ~Copyable>: ~Copyable, Sendable {
    private let mutex: Mutex<Value>
    /// Its address identifies the lock to ThreadSanitizer (a Mutex's own address is not stable
    /// to take from Swift).
    private let identity = LockIdentity()

    /// A mutex guarding `initialValue`.
    package init(_ initialValue: consuming sending Value) {
        self.mutex = Mutex(initialValue)
    }

    /// Runs `body` with the guarded value, holding the lock.
    package borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let address = Unmanaged.passUnretained(self.identity).toOpaque()
        return try self.mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            accessory_tsan_acquire(address)
            defer { accessory_tsan_release(address) }
            return try body(&value)
        }
    }
}

/// An object whose only use is its address.
private final class LockIdentity: Sendable {}
