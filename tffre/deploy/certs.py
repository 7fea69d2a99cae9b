"""Demo and test certificates: a CA, the SuperLink's TLS certificate, one key pair per site.

``python -m tffre deploy certs --out DIR --sites a,b,c`` writes::

    DIR/ca.crt, ca.key          a self-signed certificate authority (EC P-256)
    DIR/server.pem, server.key  the SuperLink's certificate, signed by the CA, for
                                localhost, 127.0.0.1, ::1 and the --host names given
    DIR/sites/<site>.key        each site's SuperNode authentication key (EC P-384,
    DIR/sites/<site>.pub        OpenSSH format, as flower-supernode and `flwr supernode
                                register` read them)

Private keys are written readable by their owner only. For a real federation use
your institution's CA and give each site its own key, made at the site; only the
public keys travel (to be registered at the SuperLink).
"""

import datetime
import ipaddress
import os

VALID_DAYS = 365


def _write(path, data, private=False):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _name(common_name):
    from cryptography import x509
    from cryptography.x509.oid import NameOID
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key):
    from cryptography.hazmat.primitives import serialization
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def _certificate(subject, issuer, public_key, signing_key, *, ca, hosts=()):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
               .public_key(public_key).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if hosts:
        names = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


def make_certificates(out, hosts=(), sites=()):
    """Writes the CA, the server certificate and the sites' keys into ``out`` (see the module
    docstring); returns {name: path}."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    os.makedirs(out, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate(_name("tffre demo CA"), _name("tffre demo CA"), ca_key.public_key(),
                      ca_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    all_hosts = list(dict.fromkeys(["localhost", "127.0.0.1", "::1", *hosts]))
    server = _certificate(_name(all_hosts[0]), ca.subject, server_key.public_key(), ca_key,
                          ca=False, hosts=all_hosts)
    paths = {
        "ca": _write(os.path.join(out, "ca.crt"), ca.public_bytes(serialization.Encoding.PEM)),
        "ca_key": _write(os.path.join(out, "ca.key"), _pem_key(ca_key), private=True),
        "server": _write(os.path.join(out, "server.pem"),
                         server.public_bytes(serialization.Encoding.PEM)),
        "server_key": _write(os.path.join(out, "server.key"), _pem_key(server_key),
                             private=True),
    }
    for site in sites:
        paths.update(site_keys(out, site))
    return paths


def site_keys(out, site):
    """Writes ``out/sites/<site>.key`` and ``.pub`` (EC P-384, OpenSSH); returns their paths."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    key = ec.generate_private_key(ec.SECP384R1())
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH)
    folder = os.path.join(out, "sites")
    return {f"{site}_key": _write(os.path.join(folder, f"{site}.key"), private, private=True),
            f"{site}_pub": _write(os.path.join(folder, f"{site}.pub"), public + b"\n")}
