import AccessoryTransport
import Testing

@Suite struct UntrustedTextTests {
    @Test func controlsAreEscapedAndTextStaysOnOneLine() {
        let forged = "meter\nkey pin:     sha256:AAAA\u{1B}[8m hidden\r\t\u{7F}\u{9B}31m"
        let printed = UntrustedText.printable(forged)
        #expect(printed == "meter\\x0Akey pin:     sha256:AAAA\\x1B[8m hidden\\x0D\\x09\\x7F\\u{009B}31m")
        #expect(!printed.unicodeScalars.contains { $0.value < 0x20 || ($0.value >= 0x7F && $0.value < 0xA0) })
    }

    @Test func backslashesAndBidiOverridesCannotForgeAnEscape() {
        #expect(UntrustedText.printable("a\\x0Ab") == "a\\\\x0Ab")
        #expect(UntrustedText.printable("abc\u{202E}fed") == "abc\\u{202E}fed")
    }

    @Test func printableTextIsKept() {
        #expect(UntrustedText.printable("Zähler Küche — CN=meter, O=Maker") == "Zähler Küche — CN=meter, O=Maker")
    }

    @Test func invalidUTF8BecomesReplacementCharacters() {
        #expect(UntrustedText.printable(bytes: [0x41, 0xFF, 0x0A]) == "A\u{FFFD}\\x0A")
    }
}
