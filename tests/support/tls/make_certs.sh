#!/bin/sh
# The TLS test fixtures (tests/support/tls): a CA, two service certificates of it
# (the second replaces the first in the rotation test), a client certificate of it,
# and a client certificate of another CA (refused by mutual TLS). Valid for 100
# years; `sh make_certs.sh` (needs openssl) makes a new set, CA included.
set -eu
cd "$(dirname "$0")"
days=36500
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {  # name
    key "$1-key.pem"
    openssl req -x509 -new -key "$1-key.pem" -sha256 -days $days -subj "/CN=Strand test $1" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -out "$1.pem"
}
leaf() {  # name ca cn extensions
    key "$1-key.pem"
    openssl req -new -key "$1-key.pem" -subj "/CN=$3" -out "$1.csr"
    printf '%s\n' "$4" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2-key.pem" -CAcreateserial \
        -sha256 -days $days -extfile "$1.ext" -out "$1.pem" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
}
service="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=IP:127.0.0.1,DNS:localhost"
client="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
ca ca
ca other-ca
leaf service ca "strand-service" "$service"
leaf service-rotated ca "strand-service-rotated" "$service"
leaf client ca "alice" "$client"
leaf stranger other-ca "mallory" "$client"
rm -f ./*.srl ca-key.pem other-ca-key.pem  # no signing key is kept
