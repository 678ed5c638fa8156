#!/usr/bin/env python3
"""Writes forged.pem and forged.key in the current directory: a self-signed certificate whose
CN and DNS SAN try to forge terminal output (a newline, a fake 'key pin:' line, ESC[8m).
Used by the TLS and CLI tests to check that such names are escaped. Argument: the fake pin text."""
import datetime
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

fake_pin = sys.argv[1] if len(sys.argv) > 1 else "FAKE"
key = ec.generate_private_key(ec.SECP256R1())
forged = "meter\n  key pin:     sha256:" + fake_pin + "\x1b[8m"
name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, forged)])
now = datetime.datetime.now(datetime.timezone.utc)
cert = (
    x509.CertificateBuilder()
    .subject_name(name)
    .issuer_name(name)
    .public_key(key.public_key())
    .serial_number(x509.random_serial_number())
    .not_valid_before(now - datetime.timedelta(days=1))
    .not_valid_after(now + datetime.timedelta(days=30))
    .add_extension(x509.SubjectAlternativeName([x509.DNSName(forged)]), critical=False)
    .sign(key, hashes.SHA256())
)
open("forged.pem", "wb").write(cert.public_bytes(serialization.Encoding.PEM))
open("forged.key", "wb").write(
    key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
)
