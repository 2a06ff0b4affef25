#!/usr/bin/env bash
# The image journey (issue 39 item 2; run by server/tests/image/): the
# starter served from the OCI image of scripts/image.sh with Podman, as an
# operator runs it.
#
#   scripts/image-journey.sh IMAGE WORK
#
#  1. the starter (`coordinatorctl init`, `package`, on the host), the
#     sandbox's stand-ins (coordinator-sandbox, on the host), the keys and
#     database URL secrets copied for the image's user (uid 10001, 0600);
#  2. `coordinatorctl plan`, `apply`, `deployment-status` from the image;
#  3. `coordinator` from the image: non-root, read-only root file system
#     without podman's tmpfs, the runtime file, the secrets and the package
#     mounted read-only, the audit journal on a writable volume; /ready
#     200; one run started with curl, followed to `finished`;
#  4. `podman stop` (SIGTERM, SIGKILL only after 30 s): prints the seconds
#     it took and the container's exit code (0 is a drained stop, 137 a
#     kill);
#  5. the Kubernetes way: the secrets, the runtime file and the package
#     laid out as the kubelet mounts a Secret and ConfigMaps; the service
#     on the Secret as mounted exits 1; `coordinatorctl copy-secrets` (the
#     Deployment's init step) copies it into an emptyDir stand-in; a second
#     container with those mounts and the same audit volume: /ready 200,
#     the same run `finished` through it; stopped the same way.
# Prints `image-journey: ...` lines the test reads; exits 0 only when every
# step did what it says. Everything it started (containers, the volume,
# the sandbox) is removed on exit; the namespace it applied (`namespace:`
# in WORK/runtime.yaml) is left to the caller.
#
# COORDINATOR_RUN_BIN_DIR=D  coordinatorctl and coordinator-sandbox on the
#                            host (required).
# COORDINATOR_TEST_RUNTIME_URL, _MIGRATION_URL: the PostgreSQL 17 to use
#   (scripts/postgres.sh start), reached over the host's loopback.
# CONTAINERS_STORAGE_DRIVER=D  podman's --storage-driver, as for scripts/image.sh.
#
# The podman flags this machine (a container sandbox) needs, and no more:
# explicit --ulimit nofile and nproc (runc cannot raise the inherited
# limits: "error setting rlimits ... operation not permitted"), and
# --network host (the PostgreSQL and the stand-ins listen on loopback).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
die() {
  printf 'image-journey.sh: error: %s\n' "$*" >&2
  exit 1
}
[ $# -eq 2 ] || { printf 'usage: scripts/image-journey.sh IMAGE WORK\n' >&2; exit 2; }
image="$1"
mkdir -p "$2"
work="$(cd "$2" && pwd)"
bin="$(cd "${COORDINATOR_RUN_BIN_DIR:?COORDINATOR_RUN_BIN_DIR names the directory of coordinatorctl and coordinator-sandbox}" && pwd)"
ctl="$bin/coordinatorctl"
[ -n "${COORDINATOR_TEST_RUNTIME_URL:-}" ] && [ -n "${COORDINATOR_TEST_MIGRATION_URL:-}" ] \
  || die "COORDINATOR_TEST_RUNTIME_URL and _MIGRATION_URL are unset (scripts/postgres.sh start)"
# shellcheck source=scripts/sandbox-deployment.sh
. "$root/scripts/sandbox-deployment.sh"

storage=()
if [ -n "${CONTAINERS_STORAGE_DRIVER:-}" ]; then storage=(--storage-driver "$CONTAINERS_STORAGE_DRIVER"); fi
podman=(podman "${storage[@]}")
suffix="$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
volume="coordinator-audit-$suffix"
containers=()
serve_args=()
sandbox_pid=""
cleanup() {
  local rc=$?
  set +e
  for c in "${containers[@]}"; do "${podman[@]}" rm --force --time 0 "$c" >/dev/null 2>&1; done
  "${podman[@]}" volume rm --force "$volume" >/dev/null 2>&1
  if [ -n "$sandbox_pid" ]; then kill -TERM "$sandbox_pid" 2>/dev/null; wait "$sandbox_pid" 2>/dev/null; fi
  if [ "$rc" -ne 0 ] && [ -s "$work/logs/coordinator-1.log" ]; then
    printf -- '--- last 20 lines of the first container ---\n' >&2
    tail -n 20 "$work/logs/coordinator-1.log" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT

cd "$work"
rm -rf follow-up follow-up-package sandbox runtime.yaml runtime-kubernetes secrets logs
mkdir -m 0700 logs
"$ctl" init --directory follow-up >/dev/null
"$ctl" package --project follow-up --output follow-up-package >logs/package.txt

sandbox_start "$bin/coordinator-sandbox" "$work/sandbox" "$work/logs/sandbox.log"
sandbox_write_secrets "$work/unused-audit"
digest="$(sandbox_package_digest logs/package.txt)"
revision="$(sandbox_package_revision follow-up-package)"
namespace="coordinator_image_$suffix"
# The runtime file as the container sees it: the package, the secrets and
# the audit journal at the image's paths.
etc=/etc/registry-coordinator
sandbox_runtime_file follow-up/runtime.yaml runtime.yaml "$namespace" "image-$suffix" \
  "$etc/packages/follow-up" "$digest" /var/lib/registry-coordinator
sed -i "s|root: \"$SANDBOX_SECRETS\"|root: $etc/secrets|" runtime.yaml
grep -q "root: $etc/secrets" runtime.yaml || die "the runtime file names no secret root"
# The secrets for the image's user: owned by uid 10001, 0600, in a 0700
# directory of its own (the service refuses any other owner or mode).
cp -R "$SANDBOX_SECRETS" secrets
chmod 0700 secrets
chmod 0600 secrets/*
chown -R 10001:10001 secrets
chmod 0644 runtime.yaml

common=(--ulimit nofile=16384:16384 --ulimit nproc=4096:4096 --network host
  --user 10001:10001 --read-only --read-only-tmpfs=false --security-opt no-new-privileges --cap-drop all)
# The Podman way: the runtime file, the secret files and the package from
# the host.
host_secrets=(--volume "$work/runtime.yaml:$etc/runtime.yaml:ro" --volume "$work/secrets:$etc/secrets:ro"
  --volume "$work/follow-up-package:$etc/packages/follow-up:ro")

# The audit journal on a named volume (apply writes there too): podman
# copies the image's /var/lib/registry-coordinator (uid 10001, 0700) into it.
"${podman[@]}" volume create "$volume" >/dev/null
common+=(--volume "$volume:/var/lib/registry-coordinator:rw")

# 2. plan, apply, deployment-status from the image.
for command in plan apply deployment-status; do
  rc=0
  "${podman[@]}" run --rm "${common[@]}" "${host_secrets[@]}" --entrypoint /usr/local/bin/coordinatorctl "$image" \
    --runtime-config "$etc/runtime.yaml" "$command" >"logs/$command.txt" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || { cat "logs/$command.txt" >&2; die "coordinatorctl $command from the image exited $rc"; }
  echo "image-journey: $command from the image: exit 0"
done

# 3. The service.
base="http://127.0.0.1:$SANDBOX_LISTENER_PORT"
# serve N ARGS...: container N with the mounts ARGS, until /ready 200.
serve() {
  local name="coordinator-$suffix-$1"
  shift
  containers+=("$name")
  "${podman[@]}" run --detach --name "$name" "${common[@]}" "$@" \
    --env RUST_LOG=info,sqlx=warn "$image" "${serve_args[@]}" >/dev/null
  for _ in $(seq 1 240); do
    if [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$base/ready")" = 200 ]; then
      echo "image-journey: container ${name##*-} /ready 200"
      return 0
    fi
    [ "$("${podman[@]}" inspect --format '{{.State.Running}}' "$name")" = true ] \
      || { "${podman[@]}" logs "$name" >&2; die "container ${name##*-} exited before it was ready"; }
    sleep 0.25
  done
  "${podman[@]}" logs "$name" >&2
  die "container ${name##*-} did not answer /ready 200 within 60 s"
}
# 4. podman stop: SIGTERM, the drain, SIGKILL only after 30 s.
stop() {
  local name="coordinator-$suffix-$1" started took code
  started="$(date +%s%N)"
  "${podman[@]}" stop --time 30 "$name" >/dev/null
  took="$((($(date +%s%N) - started) / 1000000))"
  code="$("${podman[@]}" inspect --format '{{.State.ExitCode}}' "$name")"
  "${podman[@]}" logs "$name" >"logs/coordinator-$1.log" 2>&1
  echo "image-journey: container $1 stopped in $((took / 1000)).$(printf '%03d' $((took % 1000))) s, exit code $code"
}

serve 1 "${host_secrets[@]}"
header="$work/sandbox/producer-authorization"
(umask 077 && printf 'Authorization: Bearer %s\n' "$(<"$SANDBOX_PRODUCER_TOKEN_FILE")" >"$header")
body="{\"workflow\":\"follow-up\",\"revision\":\"$revision\",\"input\":{\"applicationId\":\"$SANDBOX_APPLICATION_ID\",\"sendAfter\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"}}"
status="$(curl -sS --max-time 10 -o logs/start.json -w '%{http_code}' -X POST "$base/v1/runs" \
  -H @"$header" -H 'Content-Type: application/json' -H "Idempotency-Key: image-$suffix" --data "$body")"
[ "$status" = 201 ] || [ "$status" = 200 ] || { cat logs/start.json >&2; die "POST /v1/runs answered $status"; }
run="$(sed -n 's/.*"run" *: *"\([^"]*\)".*/\1/p' logs/start.json)"
[ -n "$run" ] || die "no run id in the answer to POST /v1/runs"
# follow RUN: waits up to 60 s for `state: finished`.
follow() {
  local out state=""
  for _ in $(seq 1 60); do
    out="$("$ctl" status --run "$run" --url "$base" --token-file "$SANDBOX_OPERATOR_TOKEN_FILE" 2>&1)" \
      || die "coordinatorctl status failed: $out"
    state="$(printf '%s\n' "$out" | sed -n 's/^state: //p')"
    case "$state" in
      finished) printf '%s\n' "$out" | sed -n 's/^outcome: /image-journey: outcome: /p'; return 0 ;;
      running) sleep 1 ;;
      *) die "run $run is $state: $out" ;;
    esac
  done
  die "run $run is still $state after 60 s"
}
follow
echo "image-journey: run $run finished through container 1"
stop 1

# 5. The Kubernetes way (deploy/kubernetes/deployment.yaml) for a second
# container on the same volume, every file mounted as the kubelet mounts a
# Secret or a ConfigMap: each name a link into ..data/, a link to a
# timestamped directory of root-owned files. The Secret's files are of
# group 10001 (the pod's fsGroup), mode 0440 (defaultMode), which the
# service refuses as they are; the init step `coordinatorctl copy-secrets`
# copies them into an emptyDir (0777; in memory under Kubernetes) and the
# service reads the copies read-only. The runtime file and the package
# are ConfigMaps (0644): the runtime file read through its link, the
# package's two files mounted one by one (subPath).
# kubelet_volume DIR MODE GROUP FILE...: FILEs laid out as the kubelet does.
kubelet_volume() {
  local dir="$1" mode="$2" group="$3" stamp="..2026_01_01_00_00_00.000000001" file
  shift 3
  rm -rf "$dir"
  install -d -m 0755 "$dir/$stamp"
  for file in "$@"; do
    install -m "$mode" -o 0 -g "$group" "$file" "$dir/$stamp/"
    ln -s "..data/${file##*/}" "$dir/${file##*/}"
  done
  ln -s "$stamp" "$dir/..data"
}
kube=/run/registry-coordinator
mkdir runtime-kubernetes
sed "s|root: $etc/secrets|root: $kube/secrets|" runtime.yaml >runtime-kubernetes/runtime.yaml
kubelet_volume "$work/kubelet-secret" 0440 10001 secrets/*
kubelet_volume "$work/kubelet-runtime" 0644 0 runtime-kubernetes/runtime.yaml
kubelet_volume "$work/kubelet-package" 0644 0 follow-up-package/*
rm -rf "$work/emptydir"
install -d -m 0777 "$work/emptydir"
# The package's two files by subPath (a ConfigMap's directory holds the
# kubelet's ..data entries, which a package may not): bind mounts of the
# files themselves, as the kubelet makes them.
kube_files=(--volume "$work/kubelet-runtime:$etc/runtime:ro"
  --volume "$work/kubelet-package/..data/definition.json:$etc/packages/follow-up/definition.json:ro"
  --volume "$work/kubelet-package/..data/SHA256SUMS:$etc/packages/follow-up/SHA256SUMS:ro")
sed "s|root: $etc/secrets|root: /var/run/secrets/registry-coordinator|" runtime.yaml >runtime-kubelet.yaml
chmod 0644 runtime-kubelet.yaml
rc=0
"${podman[@]}" run --rm "${common[@]}" --volume "$work/runtime-kubelet.yaml:$etc/runtime.yaml:ro" \
  --volume "$work/follow-up-package:$etc/packages/follow-up:ro" \
  --volume "$work/kubelet-secret:/var/run/secrets/registry-coordinator:ro" "$image" >logs/kubelet-refused.log 2>&1 || rc=$?
echo "image-journey: the service on the kubelet's Secret files as mounted: exit $rc, $(grep -o 'coordinator\.secret\.[a-z-]*' logs/kubelet-refused.log | head -n 1)"
"${podman[@]}" run --rm "${common[@]}" --volume "$work/kubelet-secret:/var/run/secrets/registry-coordinator:ro" \
  --volume "$work/emptydir:$kube:rw" --entrypoint /usr/local/bin/coordinatorctl "$image" \
  copy-secrets --from /var/run/secrets/registry-coordinator --to "$kube/secrets" >logs/copy-secrets.txt 2>&1 \
  || { cat logs/copy-secrets.txt >&2; die "copy-secrets from the kubelet's layout failed"; }
echo "image-journey: init step: $(head -n 1 logs/copy-secrets.txt)"
serve_args=(--runtime-config "$etc/runtime/runtime.yaml")
serve 2 "${kube_files[@]}" --volume "$work/emptydir:$kube:ro"
follow
echo "image-journey: run $run finished through container 2"
stop 2
mountpoint="$("${podman[@]}" volume inspect --format '{{.Mountpoint}}' "$volume")"
journals="$(find "$mountpoint" -name 'audit*' -user 10001 -perm 0600 | wc -l)"
echo "image-journey: audit journal files owned by 10001, 0600, on the volume: $journals"
