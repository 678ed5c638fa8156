/// What every public error type of accessory-http has in common: a stable ``code`` for
/// programs, a readable ``message`` for people that says what was wrong and what to do, and
/// the lower-level error that caused it, if any.
///
/// Each module has one such type (``TransportError``, `HTTPLinkError`, `TLSError`,
/// `AccessoryClientError`, `ResponderError`, `AccessoryURLProtocolError`, …). A program decides
/// by ``code`` or by the typed values an error carries in ``underlying`` (a `TLSError`, a
/// redirect failure), never by the text of a message: messages may be reworded, codes never
/// change.
public protocol AccessoryError: Error, Sendable, CustomStringConvertible {
    /// The type of ``code``: a string-backed identifier such as `"transport-failed"`.
    associatedtype Code: AccessoryErrorCode
    /// A stable, machine-readable identifier.
    var code: Code { get }
    /// What went wrong and what to do about it, for people.
    var message: String { get }
    /// The error that caused this one, if any.
    var underlying: (any Error)? { get }
}

extension AccessoryError {
    /// The ``message``.
    public var description: String { self.message }

    /// This error followed by its ``underlying`` errors, outermost first.
    public var causes: [any Error] {
        var result: [any Error] = [self]
        var next = self.underlying
        while let error = next, result.count < 32 {
            result.append(error)
            next = (error as? any AccessoryError)?.underlying
        }
        return result
    }

    /// The first error of type `type` in ``causes`` (this error included).
    public func cause<Cause: Error>(_ type: Cause.Type) -> Cause? {
        for error in self.causes {
            if let match = error as? Cause { return match }
        }
        return nil
    }
}

/// A string-backed error code: each module's `Code` type conforms.
public protocol AccessoryErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible
where RawValue == String {}

extension AccessoryErrorCode {
    /// The raw value, as printed in logs and JSON.
    public var description: String { self.rawValue }
}
