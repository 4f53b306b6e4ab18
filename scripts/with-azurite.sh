#!/usr/bin/env bash
# Runs a command against a private, in-memory Azurite.
#
#   scripts/with-azurite.sh cargo test --test it azure_backend::
#
# Installs the pinned Azurite (package-lock.json) when node_modules is missing
# or older than the lockfile, starts Azurite on free loopback ports, exports
# LEASEHOLD_TEST_AZURITE (a connection string for those ports and the
# well-known devstoreaccount1 key), runs the command, always stops Azurite, and
# exits with the command's exit code. Azurite's log is printed when Azurite
# fails to start or the command fails.
#
# It also starts a second Azurite with OAuth (`--oauth basic`, which needs
# HTTPS) on a certificate made for this run by scripts/test-cert.js (a test
# CA and a server certificate with 127.0.0.1 in its subject alternative
# names; Node and the pinned node-forge, no openssl command needed), and
# exports LEASEHOLD_TEST_AZURITE_OAUTH (a connection string with its https
# endpoints) and LEASEHOLD_TEST_AZURITE_OAUTH_CA (the CA's PEM file).
set -euo pipefail

if [ "$#" -eq 0 ]; then
    echo "usage: $0 <command> [args...]" >&2
    exit 64
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

command -v node >/dev/null 2>&1 || { echo "with-azurite: node is required (Node 20)" >&2; exit 69; }
command -v npm >/dev/null 2>&1 || { echo "with-azurite: npm is required" >&2; exit 69; }

# Install the pinned Azurite when missing or stale. npm records the installed
# tree in node_modules/.package-lock.json; it is older than the lockfile when
# the lockfile changed since the last install.
installed="node_modules/.package-lock.json"
if [ ! -x node_modules/.bin/azurite ] || [ ! -f "$installed" ] || [ package-lock.json -nt "$installed" ]; then
    echo "with-azurite: npm ci (installing the pinned Azurite)" >&2
    npm ci --no-audit --no-fund >&2
fi

workdir="$(mktemp -d "${TMPDIR:-/tmp}/leasehold-azurite.XXXXXX")"
log="$workdir/azurite.log"
azurite_pids=""
oauth_pids=""

stop() {
    local pid="$1"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        # Give it a moment to exit cleanly, then make sure.
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
}

cleanup() {
    for pid in $azurite_pids $oauth_pids; do
        stop "$pid"
    done
    rm -rf "$workdir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

print_log() {
    echo "---- azurite log ($log) ----" >&2
    cat "$log" >&2 || true
    echo "---- end of azurite log ----" >&2
}

# Three free loopback ports, chosen by the OS. A port can be taken between
# this probe and Azurite's bind; startup is retried with new ports then.
free_ports() {
    node -e '
        const net = require("net");
        const servers = [0, 1, 2].map(() => net.createServer());
        Promise.all(servers.map(s => new Promise((ok, fail) => {
            s.once("error", fail);
            s.listen(0, "127.0.0.1", () => ok(s.address().port));
        }))).then(ports => {
            console.log(ports.join(" "));
            servers.forEach(s => s.close());
        }, e => { console.error(e.message); process.exit(1); });
    '
}

# Waits until every given loopback port accepts connections, up to $1
# seconds; gives up at once when process $2 (Azurite) has exited.
wait_for_ports() {
    node -e '
        const net = require("net");
        const deadline = Date.now() + Number(process.argv[1]) * 1000;
        const pid = Number(process.argv[2]);
        const ports = process.argv.slice(3).map(Number);
        const alive = () => { try { process.kill(pid, 0); return true; } catch (e) { return false; } };
        const probe = port => new Promise(ok => {
            const s = net.connect({ host: "127.0.0.1", port });
            s.once("connect", () => { s.destroy(); ok(true); });
            s.once("error", () => { s.destroy(); ok(false); });
        });
        (async () => {
            for (;;) {
                const up = await Promise.all(ports.map(probe));
                if (up.every(Boolean)) process.exit(0);
                if (Date.now() > deadline || !alive()) process.exit(1);
                await new Promise(r => setTimeout(r, 100));
            }
        })();
    ' "$@"
}

# `setsid` where there is one (util-linux); it runs the command in this
# process (no fork: a background subshell leads no process group), so `$!`
# stays Azurite's pid.
own_session=""
if command -v setsid >/dev/null 2>&1; then
    own_session=setsid
fi

# Starts one Azurite (extra arguments after the first, which names its log)
# on free ports, retrying with new ports; sets started_pids (its blob and
# its table service), blob_port and table_port, or leaves started_pids
# empty.
#
# The blob and the table service run as two processes, as on Azure, where
# they are separate services: each answers from one thread, and a lease
# renewal must not wait behind a queue of table batches (nor the other way
# round). Telemetry is off (Azurite's default sends it, which here means
# retrying an export that cannot leave the machine, on the thread that
# answers). Each runs from the temp dir so that nothing it writes lands in
# the worktree (--location cannot be combined with --inMemoryPersistence),
# in a session of its own, like a service started apart from its clients:
# where the kernel shares the processor between sessions (autogroups), the
# tests and whatever else runs in this session cannot crowd it out and turn
# its replies into seconds. scripts/azurite-preload.js puts off the blob
# service's periodic GC, whose pass over a full run's blobs stops every
# reply for minutes.
start_azurite() {
    local out="$1"
    shift
    started_pids=""
    for attempt in 1 2 3; do
        read -r blob_port table_port _ < <(free_ports)
        (cd "$workdir" && exec $own_session node --require "$root/scripts/azurite-preload.js" \
            "$root/node_modules/azurite/dist/src/blob/main.js" --silent --inMemoryPersistence \
            --disableTelemetry --skipApiVersionCheck \
            --blobHost 127.0.0.1 --blobPort "$blob_port" "$@") >>"$out" 2>&1 &
        local blob_pid=$!
        (cd "$workdir" && exec $own_session node \
            "$root/node_modules/azurite/dist/src/table/main.js" --silent --inMemoryPersistence \
            --disableTelemetry --skipApiVersionCheck \
            --tableHost 127.0.0.1 --tablePort "$table_port" "$@") >>"$out" 2>&1 &
        local table_pid=$!
        if wait_for_ports 30 "$blob_pid" "$blob_port" && wait_for_ports 30 "$table_pid" "$table_port" \
            && kill -0 "$blob_pid" 2>/dev/null && kill -0 "$table_pid" 2>/dev/null; then
            started_pids="$blob_pid $table_pid"
            return 0
        fi
        echo "with-azurite: Azurite did not come up on ports $blob_port/$table_port (attempt $attempt)" >&2
        for pid in "$blob_pid" "$table_pid"; do
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        done
    done
}

start_azurite "$log"
azurite_pids="$started_pids"
if [ -z "$azurite_pids" ]; then
    echo "with-azurite: giving up: Azurite did not start" >&2
    print_log
    exit 70
fi

account=devstoreaccount1
# The well-known development storage key (public, documented by Microsoft).
key="Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
export LEASEHOLD_TEST_AZURITE="DefaultEndpointsProtocol=http;AccountName=$account;AccountKey=$key;BlobEndpoint=http://127.0.0.1:$blob_port/$account;TableEndpoint=http://127.0.0.1:$table_port/$account;"
echo "with-azurite: Azurite $(node -p 'require("./node_modules/azurite/package.json").version') on blob :$blob_port, table :$table_port" >&2

# The OAuth Azurite: a test CA, a server certificate for 127.0.0.1 signed by
# it (both valid two days, made fresh for this run), then Azurite over HTTPS
# checking bearer tokens (`--oauth basic`: lifetime, issuer, audience).
oauth_log="$workdir/azurite-oauth.log"
tls="$workdir/tls"
mkdir -p "$tls"
if node scripts/test-cert.js "$tls" >"$tls/cert.log" 2>&1; then
    start_azurite "$oauth_log" --oauth basic --cert "$tls/server.pem" --key "$tls/server.key"
    oauth_pids="$started_pids"
    if [ -n "$oauth_pids" ]; then
        export LEASEHOLD_TEST_AZURITE_OAUTH="DefaultEndpointsProtocol=https;AccountName=$account;AccountKey=$key;BlobEndpoint=https://127.0.0.1:$blob_port/$account;TableEndpoint=https://127.0.0.1:$table_port/$account;"
        export LEASEHOLD_TEST_AZURITE_OAUTH_CA="$tls/ca.pem"
        echo "with-azurite: OAuth Azurite (HTTPS) on blob :$blob_port, table :$table_port" >&2
    else
        echo "with-azurite: the OAuth Azurite did not start; its tests will skip (fail in CI)" >&2
        cat "$oauth_log" >&2 || true
    fi
else
    echo "with-azurite: could not make the test certificate; OAuth tests will skip (fail in CI)" >&2
    cat "$tls/cert.log" >&2 || true
fi

status=0
"$@" || status=$?

if [ "$status" -ne 0 ]; then
    print_log
    if [ -s "$oauth_log" ]; then
        echo "---- OAuth azurite log ($oauth_log) ----" >&2
        cat "$oauth_log" >&2 || true
    fi
fi
exit "$status"
