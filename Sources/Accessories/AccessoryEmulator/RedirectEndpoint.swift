import AccessoryResponder
import Foundation
import HTTPTypes

/// `/redirect/N`, `/absolute-redirect/N` and `/redirect-to?url=…&status=…`.
enum RedirectEndpoint {
    /// Longer chains than this are refused; clients cap redirects far below it.
    static let maxCount = 1000

    /// `/redirect/N`: `302` to `/redirect/N-1`, and from `/redirect/1` to `/status`.
    static func relative(count text: String) -> ResponderResponse {
        guard let count = Self.parseCount(text) else { return Self.badCount() }
        return Self.redirect(to: count == 1 ? "/status" : "/redirect/\(count - 1)", status: .found)
    }

    /// `/absolute-redirect/N`: like `/redirect/N` with an absolute `http://HOST/…` location.
    static func absolute(count text: String, host: String?) -> ResponderResponse {
        guard let count = Self.parseCount(text) else { return Self.badCount() }
        let origin = "http://\(host ?? "accessory")"
        return Self.redirect(to: origin + (count == 1 ? "/status" : "/absolute-redirect/\(count - 1)"), status: .found)
    }

    /// `/redirect-to?url=URL&status=CODE`: a redirect to any URL with 301, 302, 303, 307 or 308.
    static func redirectTo(target: String) -> ResponderResponse {
        let items = URLComponents(string: target)?.queryItems ?? []
        guard let url = items.first(where: { $0.name == "url" })?.value, !url.isEmpty else {
            return EmulatorResponses.error(.badRequest, "redirect-to needs a url query parameter")
        }
        var code = 302
        if let text = items.first(where: { $0.name == "status" })?.value {
            guard let parsed = Int(text), [301, 302, 303, 307, 308].contains(parsed) else {
                return EmulatorResponses.error(.badRequest, "status must be 301, 302, 303, 307 or 308")
            }
            code = parsed
        }
        // A location with CR or LF would split the response; refuse it.
        guard !url.contains(where: { $0 == "\r" || $0 == "\n" }) else {
            return EmulatorResponses.error(.badRequest, "the url must not contain line breaks")
        }
        return Self.redirect(to: url, status: HTTPResponse.Status(code: code))
    }

    private static func redirect(to location: String, status: HTTPResponse.Status) -> ResponderResponse {
        EmulatorResponses.json(["location": location], status: status, headerFields: [.location: location])
    }

    private static func parseCount(_ text: String) -> Int? {
        guard let count = Int(text), count >= 1, count <= Self.maxCount else { return nil }
        return count
    }

    private static func badCount() -> ResponderResponse {
        EmulatorResponses.error(.badRequest, "the redirect count must be an integer from 1 to \(Self.maxCount)")
    }
}
