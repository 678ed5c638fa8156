import HTTPTypes
import Testing

@testable import AccessoryHTTP1

@Suite("Title-Case header names (the USB title-case-headers quirk)")
struct TitleCaseHeaderTests {
    @Test func namesAreTitleCased() {
        #expect(RequestHead.titleCased("content-type") == "Content-Type")
        #expect(RequestHead.titleCased("X-API-KEY") == "X-Api-Key")
        #expect(RequestHead.titleCased("host") == "Host")
        #expect(RequestHead.titleCased("a--b") == "A--B")
        #expect(RequestHead.titleCased("") == "")
    }

    @Test func theRequestHeadCarriesTitleCaseNamesOnlyWhenAsked() async throws {
        for titleCase in [false, true] {
            let device = ScriptedDevice([[.readRequest, .write(Reply.ok("ok"))]])
            var configuration = testConfiguration()
            configuration.titleCaseHeaderNames = titleCase
            let link = HTTPLink(transport: device.transport, configuration: configuration)
            let headers: HTTPFields = [HTTPField.Name("x-api-key")!: "k"]
            #expect(try await link.fetch("/", headers: headers).body == "ok")
            await link.shutdown()
            #expect(await device.waitUntilFinished())
            let names = device.allRequests.first?.headers.map(\.name) ?? []
            #expect(names.contains(titleCase ? "X-Api-Key" : "x-api-key"))
            if titleCase { #expect(names.allSatisfy { $0 == RequestHead.titleCased($0) }) }
        }
    }
}
