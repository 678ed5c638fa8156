import HTTPTypes
import Testing

@testable import AccessoryClient

@Suite struct BasicAndCredentialsTests {
    /// RFC 7617 §2.
    @Test func rfc7617Vector() throws {
        let value = try BasicAuthorization.value(for: Credentials(user: "Aladdin", password: "open sesame"))
        #expect(value == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
    }

    @Test func basicIsUTF8() throws {
        // RFC 7617 §2.1 example: "test" / "123£".
        #expect(
            try BasicAuthorization.value(for: Credentials(user: "test", password: "123\u{A3}"))
                == "Basic dGVzdDoxMjPCow=="
        )
    }

    @Test func basicRejectsColonInUser() {
        #expect(throws: AuthenticationFailure.self) {
            try BasicAuthorization.value(for: Credentials(user: "a:b", password: "c"))
        }
    }

    @Test func userInfoIsPercentDecoded() {
        #expect(Credentials(userInfo: "us%40er:p%3Ass:w") == Credentials(user: "us@er", password: "p:ss:w"))
        #expect(Credentials(userInfo: "user") == Credentials(user: "user", password: ""))
        #expect(Credentials(userInfo: "user:") == Credentials(user: "user", password: ""))
        #expect(Credentials(userInfo: ":secret") == Credentials(user: "", password: "secret"))
        #expect(Credentials(userInfo: "") == nil)
        #expect(Credentials(userInfo: "bad%zz:x") == nil)
    }

    @Test func userOptionIsLiteral() {
        #expect(Credentials(userOption: "us%40er:p:ss") == Credentials(user: "us%40er", password: "p:ss"))
        #expect(Credentials(userOption: "admin") == Credentials(user: "admin", password: ""))
        #expect(Credentials(userOption: "") == nil)
    }

    @Test func descriptionRedactsPassword() {
        #expect(!"\(Credentials(user: "u", password: "hunter2"))".contains("hunter2"))
    }
}
