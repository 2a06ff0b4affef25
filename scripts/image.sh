#!/usr/bin/env bash
# Builds the OCI image of the service with buildah (Debian's package), with
# no base image from any registry: FROM scratch plus
#   - /usr/local/bin/coordinator and /usr/local/bin/coordinatorctl, the
#     release binaries;
#   - exactly the shared libraries `ldd` finds for the two binaries (and the
#     dynamic loader), at the paths ldd names, so the image follows the build;
#   - /etc/ssl/certs/ca-certificates.crt (Debian's ca-certificates), the
#     roots rustls reads for TLS to PostgreSQL and the products;
#   - /etc/passwd and /etc/group with one user, registry-coordinator
#     (uid/gid 10001), whom the image runs as, and its directory for the
#     audit journal, /var/lib/registry-coordinator (0700);
# No shell, no package manager, nothing else. Entrypoint `coordinator`
# (command: --runtime-config /etc/registry-coordinator/runtime.yaml);
# labels org.opencontainers.image.{version,revision,source,licenses}.
#
# Reproducible: one layer, its files root-owned and stamped with
# SOURCE_DATE_EPOCH (default: the commit time of the source revision the
# binaries carry, else 0), the image's creation time the same, so the same
# binaries and libraries give the same digest (docs/install.md).
#
#   scripts/image.sh [--tag NAME] [--output FILE]
#     --tag NAME     the image's name in local storage
#                    (default localhost/registry-coordinator:VERSION)
#     --output FILE  also write the image as an OCI archive to FILE
#
# COORDINATOR_IMAGE_BIN_DIR=D   take the two binaries from D (already built)
#                               instead of `cargo build --release`.
# COORDINATOR_IMAGE_SOURCE=URL  the source label (default: git's
#                               remote.origin.url, else "unknown").
# SOURCE_DATE_EPOCH=N           the timestamp of every file and of the image.
# CONTAINERS_STORAGE_DRIVER=D   buildah's (and podman's) --storage-driver;
#                               unset: the containers/storage default.
#
# Prints, last, `image: NAME`, `digest: sha256:...` (the manifest's digest)
# and `size: N bytes (M MiB)` (the uncompressed layer, as podman reports it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
die() {
  printf 'image.sh: error: %s\n' "$*" >&2
  exit 1
}

tag=""
output=""
usage() {
  printf 'usage: scripts/image.sh [--tag NAME] [--output FILE]\n' >&2
  [ -n "${1:-}" ] && printf 'image.sh: %s\n' "$1" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) [ -n "${2:-}" ] || usage "--tag takes a name"; tag="$2"; shift 2 ;;
    --output) [ -n "${2:-}" ] || usage "--output takes a file"; output="$2"; shift 2 ;;
    *) usage ;;
  esac
done
command -v buildah >/dev/null || die "buildah is missing: apt-get install buildah podman runc (Debian packages)"
storage=()
if [ -n "${CONTAINERS_STORAGE_DRIVER:-}" ]; then storage=(--storage-driver "$CONTAINERS_STORAGE_DRIVER"); fi

if [ -n "${COORDINATOR_IMAGE_BIN_DIR:-}" ]; then
  bin="$(cd "$COORDINATOR_IMAGE_BIN_DIR" && pwd)" || die "COORDINATOR_IMAGE_BIN_DIR=$COORDINATOR_IMAGE_BIN_DIR is not a directory"
else
  cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p registry-coordinator
  bin="$(cd "${CARGO_TARGET_DIR:-$root/target}" && pwd)/release"
fi
binaries=("$bin/coordinator" "$bin/coordinatorctl")
for b in "${binaries[@]}"; do
  [ -x "$b" ] || die "$b is missing (build it, or unset COORDINATOR_IMAGE_BIN_DIR)"
done

# Version and source revision as the binaries report them
# (`coordinatorctl 0.1.0 (source <commit>)`), so the labels follow the build.
version_line="$("$bin/coordinatorctl" --version)"
version="$(printf '%s' "$version_line" | sed -n 's/^coordinatorctl \([^ ]*\) .*/\1/p')"
revision="$(printf '%s' "$version_line" | sed -n 's/.*(source \([^)]*\)).*/\1/p')"
[ -n "$version" ] && [ -n "$revision" ] || die "cannot read the version and source from '$version_line'"
source_url="${COORDINATOR_IMAGE_SOURCE:-$(git -C "$root" config --get remote.origin.url 2>/dev/null || echo unknown)}"
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH="$(git -C "$root" show -s --format=%ct "$revision" 2>/dev/null || echo 0)"
fi
[[ "$SOURCE_DATE_EPOCH" =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH is not a number of seconds"
tag="${tag:-localhost/registry-coordinator:$version}"

# The root file system, staged in a scratch directory.
stage="$(mktemp -d)"
container=""
cleanup() {
  [ -z "$container" ] || buildah "${storage[@]}" rm "$container" >/dev/null 2>&1 || true
  rm -rf "$stage"
}
trap cleanup EXIT
rootfs="$stage/rootfs"
install -d -m 0755 "$rootfs/usr/local/bin" "$rootfs/etc/ssl/certs" "$rootfs/etc/registry-coordinator" "$rootfs/var/lib"
install -m 0755 "${binaries[@]}" "$rootfs/usr/local/bin/"

# Every library ldd names with a path (`name => /path (addr)` or the
# loader's `/path (addr)`), sorted and once, copied (symbolic links
# followed) to the path ldd names; linux-vdso has no file.
libraries="$(ldd "${binaries[@]}" | awk '
  $2 == "=>" && $3 ~ /^\// { print $3 }
  $1 ~ /^\// && $1 !~ /:$/ { print $1 }' | LC_ALL=C sort -u)"
[ -n "$libraries" ] || die "ldd found no shared library for ${binaries[*]}"
while IFS= read -r library; do
  install -D -m 0755 "$(readlink -f "$library")" "$rootfs$library"
done <<<"$libraries"

certificates=/etc/ssl/certs/ca-certificates.crt
[ -s "$certificates" ] || die "$certificates is missing: apt-get install ca-certificates"
install -m 0644 "$certificates" "$rootfs$certificates"
printf 'registry-coordinator:x:10001:10001:Registry Coordinator:/nonexistent:/nonexistent\n' >"$rootfs/etc/passwd"
printf 'registry-coordinator:x:10001:\n' >"$rootfs/etc/group"
chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"
# Directories are 0755 whatever the umask; every file and directory has
# the one timestamp.
find "$rootfs" -type d -exec chmod 0755 {} +
find "$rootfs" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +

container="$(buildah "${storage[@]}" from --quiet scratch)"
buildah "${storage[@]}" copy --quiet --chown 0:0 "$container" "$rootfs/" / >/dev/null
# The audit journal's directory, the one the service writes: its user's,
# 0700 (a volume mounted there starts as a copy of it).
install -d -m 0700 "$stage/state/registry-coordinator"
touch --date="@$SOURCE_DATE_EPOCH" "$stage/state/registry-coordinator"
buildah "${storage[@]}" copy --quiet --chown 10001:10001 "$container" "$stage/state/" /var/lib/ >/dev/null
buildah "${storage[@]}" config \
  --user 10001:10001 \
  --workingdir / \
  --entrypoint '["/usr/local/bin/coordinator"]' \
  --cmd '--runtime-config /etc/registry-coordinator/runtime.yaml' \
  --env SSL_CERT_FILE="$certificates" \
  --stop-signal SIGTERM \
  --label org.opencontainers.image.title=registry-coordinator \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.revision="$revision" \
  --label org.opencontainers.image.source="$source_url" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label org.opencontainers.image.created="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)" \
  "$container"
buildah "${storage[@]}" commit --quiet --format oci --timestamp "$SOURCE_DATE_EPOCH" \
  --rm "$container" "$tag" >/dev/null
container=""

digest="$(buildah "${storage[@]}" inspect --type image --format '{{.FromImageDigest}}' "$tag")"
[[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || die "no manifest digest for $tag ('$digest')"
if [ -n "$output" ]; then
  rm -f "$output"
  buildah "${storage[@]}" push --quiet "$tag" "oci-archive:$output:$tag" >/dev/null
fi
size="$(du -sb "$rootfs" | cut -f1)"
echo "image: $tag"
echo "digest: $digest"
echo "size: $size bytes ($((size / 1048576)) MiB)"
