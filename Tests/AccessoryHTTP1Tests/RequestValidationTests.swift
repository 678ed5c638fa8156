import HTTPTypes
import Testing

@testable import AccessoryHTTP1

@Suite struct RequestValidationTests {
    func code(_ body: () throws -> Void) -> HTTPLinkError.Code? {
        do {
            try body()
            return nil
        } catch {
            return (error as? HTTPLinkError)?.code
        }
    }

    @Test(arguments: ["a\rb", "a\nb", "a\0b", "a\r\nInjected: 1", "\n"])
    func controlCharactersInValuesAreRefused(_ value: String) {
        #expect(code { _ = try RequestValidation.field(name: "X-Test", value: value) } == .invalidRequest)
        #expect(code { _ = try RequestValidation.headerLine("X-Test: \(value)") } == .invalidRequest)
    }

    @Test(arguments: ["", "Bad Name", "Bad:Name", "Bad\rName", "Bad\nName", "Bad\0Name", "Ümlaut", "(x)"])
    func badNamesAreRefused(_ name: String) {
        #expect(code { _ = try RequestValidation.field(name: name, value: "v") } == .invalidRequest)
    }

    @Test func goodField() throws {
        let field = try RequestValidation.field(name: "X-Token_1", value: "a b\tc; d=\"e\"")
        #expect(field.name.rawName == "X-Token_1")
        #expect(field.value == "a b\tc; d=\"e\"")
    }

    @Test func headerLine() throws {
        let field = try RequestValidation.headerLine("Name: value")
        #expect(field.name.rawName == "Name")
        #expect(field.value == "value")
        let tight = try RequestValidation.headerLine("Accept:text/plain")
        #expect(tight.value == "text/plain")
        let colons = try RequestValidation.headerLine("X-Time: \t12:30:00")
        #expect(colons.value == "12:30:00")
        let empty = try RequestValidation.headerLine("X-Empty:")
        #expect(empty.value == "")
        #expect(code { _ = try RequestValidation.headerLine("NoColon") } == .invalidRequest)
        #expect(code { _ = try RequestValidation.headerLine(": value") } == .invalidRequest)
        #expect(code { _ = try RequestValidation.headerLine("Name : value") } == .invalidRequest)
    }

    // `HTTPRequest` itself turns CR, LF, NUL and DEL in a path into spaces (and trims them at the
    // ends), so what reaches validation is a path with a space: refused either way.
    @Test(arguments: ["/a b", "/a\r\nHost: evil", "/a\nb", "/\0x", "/a\u{7F}b", "/tab\there", ""])
    func badPathsAreRefused(_ path: String) {
        let request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: path)
        #expect(code { try RequestValidation.validate(request) } == .invalidRequest)
    }

    @Test func missingPathIsRefused() {
        var request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/")
        request.path = nil
        #expect(code { try RequestValidation.validate(request) } == .invalidRequest)
    }

    @Test(arguments: ["a b", "host/x", "a\r\nb"])
    func badAuthoritiesAreRefused(_ authority: String) {
        let request = HTTPRequest(method: .get, scheme: nil, authority: authority, path: "/")
        #expect(code { try RequestValidation.validate(request) } == .invalidRequest)
    }

    @Test func goodRequestPasses() {
        let request = HTTPRequest(method: .get, scheme: nil, authority: "printer.local:631", path: "/ipp/print?x=%20y")
        #expect(code { try RequestValidation.validate(request) } == nil)
    }
}
