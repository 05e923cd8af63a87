#!/usr/bin/env bash
# Lab helper for lab/break/https_mirror.yml, in ONE run on the node (a task per
# step cost ~35 s on the emulated VM node): a lab CA made once per node with
# openssl (ECDSA P-256 keys: each RSA key cost seconds of the emulated VM's CPU),
# a server certificate for 127.0.0.1 and 10.0.2.2 (the address a QEMU user-mode
# guest reaches its host by), python3's http.server behind TLS in a transient
# systemd unit, and a wait until it answers. Idempotent.
#
#   https_mirror_setup.sh DIR PORT UNIT TLS_DIR
set -euo pipefail
dir=$1 port=$2 unit=$3 tls=$4
mkdir -p "$tls"
chmod 0755 "$tls"
umask 077
printf 'subjectAltName = IP:127.0.0.1, IP:10.0.2.2\nextendedKeyUsage = serverAuth\nbasicConstraints = CA:FALSE\n' \
  > "$tls/server.ext"
[ -e "$tls/ca.crt" ] || openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 -subj "/CN=nodefix lab mirror CA" \
  -keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null
[ -e "$tls/server.key" ] || openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=127.0.0.1" \
  -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
[ -e "$tls/server.crt" ] || openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" \
  -CAcreateserial -days 3650 -extfile "$tls/server.ext" -out "$tls/server.crt" 2>/dev/null
chmod 0644 "$tls/ca.crt"
umask 022
cat > "$tls/serve.py" <<'PY'
# nodefix lab mirror: http.server behind TLS
import functools, http.server, ssl, sys
directory, port, cert, key = sys.argv[1:5]
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=directory)
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
PY
if ! systemctl is-active --quiet "$unit.service"; then
  systemd-run --unit="$unit" --collect --description="nodefix lab mirror (HTTPS)" \
    python3 "$tls/serve.py" "$dir" "$port" "$tls/server.crt" "$tls/server.key" > /dev/null
fi
for _ in $(seq 1 60); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && exit 0
  sleep 0.5
done
echo "the mirror on 127.0.0.1:$port did not answer in 30 s" >&2
exit 1
