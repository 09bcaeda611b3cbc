#!/usr/bin/env bash
# Build the `ruststream` image from ../../Containerfile and run it, on a machine with no container
# engine that can run a container and no access to docker.io: what docs/kubernetes.md ("Built and
# run here") reports was done with this script.
#
#   sudo deploy/container/build-here.sh          # build, inspect, run; keeps the two images
#   sudo deploy/container/build-here.sh clean    # removes the images and the work directory
#
# Needs root (debootstrap, mounts, chroot), buildah (1.28 or later: --build-context), debootstrap,
# util-linux (unshare), coreutils, curl, openssl, jq; apt's Debian mirror reachable. Heavy steps
# run under `nice -n 19`.
#
# What is real and what is a stand-in:
# - The image is built by `buildah bud` from the Containerfile itself, target `runtime`: its
#   apt-get install of ca-certificates, the user 10001, the directories, ENV, VOLUME, EXPOSE,
#   USER, WORKDIR, STOPSIGNAL, ENTRYPOINT and CMD all come from the file; this script only checks
#   the result. The Containerfile is not changed for this.
# - Base image stand-in: docker.io is unreachable, so `localhost/debian:bookworm-slim` is made
#   here with `debootstrap --variant=minbase bookworm` from apt's own Debian mirror (the same
#   suite and sources as the real image, but not its exact contents: the real slim image also
#   strips docs and man pages). It is passed as `--build-arg RUNTIME_IMAGE=...`.
# - Builder stand-in: no Rust 1.95 image can be had here, so the builder stage is NOT run.
#   `--build-context builder=DIR` makes `COPY --from=builder /out/ruststream` read DIR/out/
#   ruststream instead, and buildah then skips the builder stage altogether (it never pulls
#   the rust image). DIR/out/ruststream is a copy of the host's own build, by default the
#   DEBUG build target/debug/ruststream (RS_BIN= to give another, e.g. a release build): same
#   source, not the `cargo build --release --locked` binary the builder stage would make.
# - Run: no OCI runtime works here (crun: `setrlimit RLIMIT_NOFILE: Operation not permitted`,
#   likely as the sandbox lacks CAP_SYS_RESOURCE), so the image is run as an engine would, by
#   hand: its root file system (`buildah mount` of a working container from the image) bound
#   read-only, a tmpfs on /tmp, a directory bound writable on the VOLUME /var/lib/ruststream,
#   the tenants file, components and TLS files bound read-only where the Kubernetes pod mounts
#   them, fresh /proc, minimal /dev, read-only /sys, in private mount, PID and network
#   namespaces (loopback only: nothing reaches AWS, and ports 9465/9464 cannot collide with
#   the machine's); the image's Entrypoint + Cmd run there, verbatim, with the image's Env and
#   WorkingDir, as uid/gid 10001 (`setpriv`) with no capabilities. Not an engine's
#   seccomp profile or cgroup limits.
# - The tenants file is the Kubernetes one's shape with `lease_store = "memory"` and no
#   `component_bucket` (no DynamoDB or S3 here), the settlement example component as a tenant
#   image would carry it, Kinesis pointed at a closed loopback port (RS_COMPONENT= to give
#   another component).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=${RS_WORK:-/var/tmp/ruststream-build-here}       # rootfs, stand-in contexts, run dirs
BIN=${RS_BIN:-$REPO/target/debug/ruststream}
COMPONENT=${RS_COMPONENT:-$REPO/target/guests/wasm32-wasip2/release/settlement.wasm}
BASE=localhost/debian:bookworm-slim
IMAGE=${RS_IMAGE:-localhost/ruststream:here}
CTR_NAME=ruststream-build-here-run

step() { printf '\n==> %s\n' "$*"; }
show() { printf '+ %s\n' "$*"; "$@"; }                 # echo each real command before it runs
die() { printf 'build-here: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
# Inside the namespaces (the script re-executes itself under unshare; see step 5).
# ---------------------------------------------------------------------------------------------
inside() {
    local root=$1 R=$WORK/mnt/rootfs run=$WORK/run
    # The image's process settings, as an engine reads them from the image config.
    local -a env entry cmd
    mapfile -t env < <(jq -r '.Env[]' <<<"$RS_CFG")
    mapfile -t entry < <(jq -r '.Entrypoint[]' <<<"$RS_CFG")
    mapfile -t cmd < <(jq -r '.Cmd[]' <<<"$RS_CFG")
    local wd user
    wd=$(jq -r '.WorkingDir' <<<"$RS_CFG")
    user=$(jq -r '.User' <<<"$RS_CFG")
    # Only this run's additions: a closed loopback port for Kinesis (memory leases: no DynamoDB),
    # a region and dummy keys so the SDK has a configuration (nothing is ever signed for AWS).
    local -a extra=(RUSTSTREAM_KINESIS_ENDPOINT=http://127.0.0.1:1 AWS_REGION=us-east-1
                    AWS_ACCESS_KEY_ID=stand-in AWS_SECRET_ACCESS_KEY=stand-in)

    ip link set lo up                                   # the new network namespace: loopback only

    step "mounts: the image's root read-only, tmpfs /tmp, writable state volume, ro config"
    mkdir -p "$R"
    show mount --bind "$root" "$R"
    show mount -o remount,bind,ro "$R"
    mount -t proc -o nosuid,nodev,noexec proc "$R/proc"  # this PID namespace's processes
    mount -t tmpfs -o nosuid,mode=0755,size=64k tmpfs "$R/dev"   # /dev as runc makes it
    local d
    for d in null zero full random urandom tty; do
        touch "$R/dev/$d" && mount --bind "/dev/$d" "$R/dev/$d"
    done
    ln -s /proc/self/fd "$R/dev/fd"
    mount --bind /sys "$R/sys" && mount -o remount,bind,ro "$R/sys"
    show mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$R/tmp"
    show mount --bind "$run/state" "$R/var/lib/ruststream"
    for d in config components tls; do
        mount --bind "$run/$d" "$R/etc/ruststream/$d"
        mount -o remount,bind,ro "$R/etc/ruststream/$d"
    done
    findmnt -R -o TARGET,FSTYPE,OPTIONS "$R" | sed "s|$R|<rootfs>|"

    # As the engine starts the container's process: the image's Env only (env -i), chroot into
    # the root, then (the image's own setpriv, util-linux) the image's USER, numeric, with no
    # supplementary groups, no capabilities, an empty bounding set and no_new_privs (the pod's
    # `capabilities: drop: [ALL]`, `allowPrivilegeEscalation: false`), then the WORKDIR.
    as_image_user() {
        exec env -i "${env[@]}" "${extra[@]}" chroot "$R" \
            setpriv --reuid="${user%:*}" --regid="${user#*:}" --clear-groups \
                --inh-caps=-all --bounding-set=-all --no-new-privs \
            env -C "$wd" -- "$@"
    }

    step "who the process is, and what it may write"
    (as_image_user sh -c 'id; grep -E "^(CapPrm|CapEff|CapBnd|NoNewPrivs)" /proc/self/status; pwd
        touch /usr/local/bin/probe 2>&1 || true
        touch /etc/ruststream/config/probe 2>&1 || true
        touch /var/lib/ruststream/probe && echo "/var/lib/ruststream: writable" && rm /var/lib/ruststream/probe
        touch /tmp/probe && echo "/tmp: writable" && rm /tmp/probe')

    step "the entrypoint: ${entry[*]} --version"
    (as_image_user "${entry[@]}" --version)

    step "the entrypoint: ${entry[*]} check --config /etc/ruststream/config/tenants.toml"
    (as_image_user "${entry[@]}" check --config /etc/ruststream/config/tenants.toml)

    step "the image's Entrypoint + Cmd, verbatim: ${entry[*]} ${cmd[*]}"
    (as_image_user "${entry[@]}" "${cmd[@]}") >"$run/stdout.log" 2>"$run/stderr.log" &
    local pid=$! i code
    ps -o pid,user,group,comm,args -p "$pid" | cut -c1-160
    # curl runs outside the chroot, in the same network namespace, trusting the mounted cert.
    local curl=(curl -sS --max-time 3 --cacert "$run/tls/tls.crt")
    for i in $(seq 1 120); do
        if "${curl[@]}" -o /dev/null https://localhost:9465/healthz 2>/dev/null; then break; fi
        kill -0 "$pid" 2>/dev/null || { cat "$run/stderr.log"; die "run exited before /healthz answered"; }
        sleep 1
    done
    show "${curl[@]}" -w ' (%{http_code})\n' https://localhost:9465/healthz
    sleep 3                                             # let the subscription try the endpoint
    show "${curl[@]}" -w ' (%{http_code})\n' https://localhost:9465/readyz || true
    "${curl[@]}" http://localhost:9464/metrics | grep -m 5 '^ruststream_' || true
    echo "files the process wrote (state volume, /tmp tmpfs):"
    ls -ln "$run/state"
    find "$R/tmp" -maxdepth 3 | sed "s|$R||"

    step "SIGTERM (the image's StopSignal) to pid $pid"
    show kill -TERM "$pid"
    set +e; wait "$pid"; code=$?; set -e
    echo "exit status: $code"
    echo "--- stdout (JSON log) ---"; cat "$run/stdout.log"
    echo "--- stderr ---"; cat "$run/stderr.log"
    [[ $code -eq 0 ]] || die "run did not exit cleanly on SIGTERM ($code)"
}

if [[ ${1:-} == __inside ]]; then
    inside "$2"
    exit 0
fi

# ---------------------------------------------------------------------------------------------
[[ $(id -u) -eq 0 ]] || die "run as root: debootstrap, mounts and chroot need it"
for tool in buildah debootstrap unshare chroot curl openssl jq findmnt; do
    command -v "$tool" >/dev/null || die "$tool is not installed (apt-get install $tool)"
done

if [[ ${1:-} == clean ]]; then
    buildah rm "$CTR_NAME" 2>/dev/null || true
    buildah rmi "$IMAGE" "$BASE" 2>/dev/null || true
    rm -rf "$WORK"
    echo "removed $IMAGE, $BASE and $WORK"
    exit 0
fi
[[ $# -eq 0 ]] || die "usage: $0 [clean]"
[[ -x $BIN ]] || die "no binary at $BIN: cargo build -p ruststream-cli (or RS_BIN=...)"
[[ -f $COMPONENT ]] || die "no component at $COMPONENT (RS_COMPONENT=...)"
mkdir -p "$WORK"

# ---------------------------------------------------------------------------------------------
step "1. stand-in for $BASE (docker.io is unreachable): debootstrap from apt's mirror"
if buildah inspect --type image "$BASE" >/dev/null 2>&1; then
    echo "$BASE exists; kept (\`$0 clean\` to make it again)"
else
    # The mirror apt already uses (deb822 `URIs:` or one-line `deb` entries), not a guess.
    MIRROR=$(grep -hsE '^[[:space:]]*(URIs:|deb )' /etc/apt/sources.list \
                 /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
             | grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n 1 | tr -d ' ') || true
    MIRROR=${MIRROR:-http://deb.debian.org/debian}
    if [[ ! -x $WORK/rootfs/usr/bin/apt-get ]]; then
        rm -rf "$WORK/rootfs"
        show nice -n 19 debootstrap --variant=minbase bookworm "$WORK/rootfs" "$MIRROR"
    fi
    # As in the real image: bookworm, -updates and -security in debian.sources, no package
    # lists or downloaded .debs, empty /dev (the engine makes it).
    rm -f "$WORK/rootfs/etc/apt/sources.list"
    cat >"$WORK/rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: ${MIRROR%/}
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${MIRROR%/debian*}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    rm -rf "$WORK/rootfs/var/lib/apt/lists/"* "$WORK/rootfs/var/cache/apt/archives/"*.deb
    # A tar keeps owners, groups and set-uid bits (/etc/shadow is group shadow); `buildah add`
    # of a local tar unpacks it as it is.
    show nice -n 19 tar --numeric-owner --xattrs --exclude='./dev/*' --exclude='./proc/*' \
        --exclude='./sys/*' -C "$WORK/rootfs" -cf "$WORK/rootfs.tar" .
    ctr=$(buildah from scratch)
    show nice -n 19 buildah add "$ctr" "$WORK/rootfs.tar" /
    # debian:bookworm-slim's own config: its PATH and `bash` as the command.
    show buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --cmd bash --os linux --arch amd64 "$ctr"
    show buildah commit --rm "$ctr" "$BASE"
    rm -f "$WORK/rootfs.tar"
fi

# ---------------------------------------------------------------------------------------------
step "2. stand-in for the builder stage's output: $BIN as /out/ruststream"
# The build context `builder` replaces the stage of that name: the runtime stage's
# `COPY --from=builder /out/ruststream ...` reads this directory.
rm -rf "$WORK/builder" && mkdir -p "$WORK/builder/out"
install -m 0755 "$BIN" "$WORK/builder/out/ruststream"
case $BIN in
    */debug/*) echo "NOTE: the DEBUG build, standing in for the release build of the builder stage" ;;
esac
"$WORK/builder/out/ruststream" --version

# ---------------------------------------------------------------------------------------------
step "3. buildah bud: the Containerfile's runtime stage"
# --isolation chroot: the RUN step (apt-get, useradd) runs without an OCI runtime, which fails
# here. --pull=never: the base must be the local stand-in; nothing is fetched from a registry
# (the RUN's apt-get does reach the Debian mirror, as in a normal build).
old_id=$(buildah images -q --no-trunc "$IMAGE" 2>/dev/null || true)    # a rerun's previous build
show nice -n 19 buildah bud --isolation chroot --pull=never \
    --build-arg RUNTIME_IMAGE="$BASE" \
    --build-context builder="$WORK/builder" \
    --target runtime -f "$REPO/Containerfile" -t "$IMAGE" "$REPO"
if [[ -n $old_id && $old_id != "$(buildah images -q --no-trunc "$IMAGE")" ]]; then
    buildah rmi "$old_id" >/dev/null 2>&1 || true                # untagged by this build
fi

# ---------------------------------------------------------------------------------------------
step "4. the image's config (buildah inspect)"
RS_CFG=$(buildah inspect --type image "$IMAGE" | jq -c .OCIv1.config)
jq . <<<"$RS_CFG"
expect() {                                              # expect JQ-EXPRESSION COMPACT-JSON
    local got
    got=$(jq -c "$1" <<<"$RS_CFG")
    [[ $got == "$2" ]] || die "image config $1 is $got, expected $2"
    printf 'ok  %-22s %s\n' "$1" "$got"
}
expect .User '"10001:10001"'
expect .Entrypoint '["ruststream"]'
expect .Cmd[0] '"run"'
expect .StopSignal '"SIGTERM"'
expect '.Volumes|keys' '["/var/lib/ruststream"]'
expect '.ExposedPorts|keys' '["9464/tcp","9465/tcp"]'
expect .WorkingDir '"/var/lib/ruststream"'
expect '[.Env[]|select(startswith("RUSTSTREAM_STATE_DIR="))]' '["RUSTSTREAM_STATE_DIR=/var/lib/ruststream"]'
buildah images | grep -E "^(REPOSITORY|${IMAGE%:*} |${BASE%:*} )" || true

# ---------------------------------------------------------------------------------------------
step "5. run it: the image's root file system, read-only, as uid 10001"
# What the pod mounts (docs/kubernetes.md): the tenants file, the components a tenant image
# carries, the admin TLS Secret, an empty state volume owned by 10001.
run=$WORK/run
rm -rf "$run" && mkdir -p "$run"/{config,components/acme,tls,state}
install -m 0644 "$COMPONENT" "$run/components/acme/settlement.wasm"
cat >"$run/config/tenants.toml" <<'EOF'
# deploy/kubernetes/configmap.yaml's tenant, on memory leases (no DynamoDB or S3 here).
[host]
lease_store = "memory"

[defaults]
call_deadline = "5s"
memory_mib = 64

[[tenants]]
name = "acme"
components = ["../components/acme/settlement.wasm"]
subscribe = ["ledger"]
publish = ["ledger.dead"]
quarantine_after = 10
limits = { memory_budget_mib = 256 }
EOF
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=ruststream-admin \
    -addext subjectAltName=DNS:ruststream-admin,DNS:localhost,IP:127.0.0.1 \
    -keyout "$run/tls/tls.key" -out "$run/tls/tls.crt" 2>/dev/null
chown 10001:10001 "$run/tls/tls.key" "$run/state"       # the Secret's key, readable by 10001
chmod 0600 "$run/tls/tls.key" && chmod 0700 "$run/state"

buildah rm "$CTR_NAME" >/dev/null 2>&1 || true
show buildah from --pull=never --name "$CTR_NAME" "$IMAGE" >/dev/null
cleanup() { buildah umount "$CTR_NAME" >/dev/null 2>&1 || true; buildah rm "$CTR_NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT
root=$(buildah mount "$CTR_NAME")
# The TLS Secret's mount point: the image has no /etc/ruststream/tls, and an engine makes a
# missing mount point in the container's writable layer; so does this, before it goes read-only.
mkdir -p "$root/etc/ruststream/tls"
# Private mount, PID and network namespaces: every mount goes with the last process in them.
export RS_CFG WORK
show nice -n 19 unshare --mount --propagation private --pid --mount-proc --net --fork \
    "${BASH_SOURCE[0]}" __inside "$root"

step "done: $IMAGE built from the Containerfile's runtime stage and run; \`$0 clean\` removes it"
