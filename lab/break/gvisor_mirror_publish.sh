#!/bin/sh
# Lab helper for lab/break/gvisor_mirror.yml: publish the extracted runsc in the
# upstream bucket layout in ONE run on the node (a task per file cost ~1.5 min
# on the emulated VM node). Idempotent; prints the architecture directory used.
#
#   gvisor_mirror_publish.sh DIR WORK RELEASE BAD_RELEASE
#     DIR/release/RELEASE/ARCH/{runsc,containerd-shim-runsc-v1,gvisor.tar.bz2}{,.sha512}
#     DIR/release/BAD_RELEASE/ARCH/runsc + a runsc.sha512 that does not match
#     WORK/extract/usr/bin/runsc is the binary, WORK/stage the tarball's content
set -eu
# newer A B: A exists and was modified after B (POSIX sh has no -nt)
newer() { [ -n "$(find "$1" -prune -newer "$2" 2>/dev/null)" ]; }
dir=$1 work=$2 release=$3 bad=$4
arch=$(uname -m)
good=$dir/release/$release/$arch
wrong=$dir/release/$bad/$arch
mkdir -p "$work/stage" "$good" "$wrong"
# a file already published with the same bytes is left as it is (and so is its
# .sha512, newer than it): the lab VM's image is published at build time
# (lab/vm/build.sh), natively, and the lab's run on the emulated VM only checks it
for d in "$good" "$wrong" "$work/stage"; do
  cmp -s "$work/extract/usr/bin/runsc" "$d/runsc" || install -m 0755 "$work/extract/usr/bin/runsc" "$d/runsc"
done
# containerd-shim-runsc-v1 is NOT packaged by Debian: a TEST DOUBLE (see gvisor_mirror.yml)
for d in "$good" "$work/stage"; do
  cat > "$d/containerd-shim-runsc-v1.tmp" <<SHIM
#!/bin/sh
# nodefix.k8s lab TEST DOUBLE of gVisor's containerd-shim-runsc-v1 (Debian
# packages no shim). Answers -v like containerd's shim framework; refuses
# anything else.
case "\$1" in
  -v|--version|-version)
    printf 'containerd-shim-runsc-v1:\\n  Version:  release-$release-nodefix-lab-double\\n  Revision: 0000000\\n  Go version: none\\n\\n'
    exit 0;;
esac
echo "containerd-shim-runsc-v1: nodefix lab test double, cannot run sandboxes (args: \$*)" >&2
exit 1
SHIM
  chmod 0755 "$d/containerd-shim-runsc-v1.tmp"
  if cmp -s "$d/containerd-shim-runsc-v1.tmp" "$d/containerd-shim-runsc-v1"; then
    rm "$d/containerd-shim-runsc-v1.tmp"
  else
    mv "$d/containerd-shim-runsc-v1.tmp" "$d/containerd-shim-runsc-v1"
  fi
done
# the tarball again only when a file it holds changed since it was made
if ! newer "$good/gvisor.tar.bz2" "$work/stage/runsc" \
   || ! newer "$good/gvisor.tar.bz2" "$work/stage/containerd-shim-runsc-v1"; then
  tar -C "$work/stage" -cjf "$good/gvisor.tar.bz2" runsc containerd-shim-runsc-v1
fi
# .sha512 files in the upstream format ("<hash>  <file>")
for f in runsc containerd-shim-runsc-v1 gvisor.tar.bz2; do
  newer "$good/$f.sha512" "$good/$f" || (cd "$good" && sha512sum "$f" > "$f.sha512")
done
printf '%s  runsc\n' "$(printf 'not the runsc binary' | sha512sum | cut -d' ' -f1)" > "$wrong/runsc.sha512"
chmod 0644 "$good"/*.sha512 "$wrong/runsc.sha512"
echo "$arch"
