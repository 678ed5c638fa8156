import Foundation

/// A user name and password for HTTP authentication (Basic or Digest).
///
/// The password is never printed by `description`, so credentials can appear in logs safely.
public struct Credentials: Sendable, Hashable, CustomStringConvertible {
    /// The user name (UTF-8).
    public var user: String
    /// The password (UTF-8); empty when none was given.
    public var password: String

    /// Creates credentials from a user name and password.
    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// Parses the user information of a URL, `USER[:PASS]`, percent-decoding both parts
    /// (`http://us%40er:p%3Ass@accessory/` gives user `us@er`, password `p:ss`).
    ///
    /// The first colon separates user and password, so a user name cannot contain a literal
    /// colon (it would be `%3A`). Returns `nil` for an empty string or invalid percent-encoding.
    public init?(userInfo: String) {
        guard let (user, password) = Self.split(userInfo) else { return nil }
        guard let decodedUser = user.removingPercentEncoding,
            let decodedPassword = password.map({ $0.removingPercentEncoding }) ?? ""
        else { return nil }
        self.init(user: decodedUser, password: decodedPassword)
    }

    /// Parses a command-line `--user USER[:PASS]` argument literally (no percent-decoding).
    ///
    /// The first colon separates user and password; a missing password is empty. Returns `nil`
    /// for an empty string.
    public init?(userOption: String) {
        guard let (user, password) = Self.split(userOption) else { return nil }
        self.init(user: user, password: password ?? "")
    }

    /// `user` followed by a redacted password.
    public var description: String { "Credentials(user: \(self.user), password: <redacted>)" }

    private static func split(_ text: String) -> (user: String, password: String?)? {
        guard !text.isEmpty else { return nil }
        guard let colon = text.firstIndex(of: ":") else { return (text, nil) }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }
}
