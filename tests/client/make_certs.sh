#!/usr/bin/env bash
# make_certs.sh DIR: a throw-away CA, a server certificate for localhost and
# 127.0.0.1, and a client certificate, all signed by the CA, for the TLS
# tests. Writes ca.pem, server.pem, server.key, client.pem, client.key and
# other-ca.pem (a second CA that signed nothing here) into DIR.
set -euo pipefail
dir=$1
cd "$dir"
days=2
quiet() { "$@" >/dev/null 2>&1 || { "$@"; exit 1; }; }

quiet openssl req -x509 -newkey rsa:2048 -nodes -days $days \
  -keyout ca.key -out ca.pem -subj "/CN=kiln test CA"
quiet openssl req -x509 -newkey rsa:2048 -nodes -days $days \
  -keyout other-ca.key -out other-ca.pem -subj "/CN=another CA"

sign() {  # sign NAME SUBJECT EXTENSIONS
  quiet openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" \
    -subj "$2"
  printf '%s\n' "$3" > "$1.ext"
  quiet openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key \
    -CAcreateserial -days $days -out "$1.pem" -extfile "$1.ext"
}
sign server "/CN=localhost" \
  "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
sign client "/CN=kiln test client" "extendedKeyUsage=clientAuth"
