#!/usr/bin/env bash
# peers.sh — dsh beside the peer harnesses on the peer rig (issue 12).
#
# Runs ../shared/peer-bench (a scripted fake model and a driver) with dsh as
# two more peers, sandboxed (the default permission preset) and with full
# access, in the same invocation as the peers, so that all of them share the
# machine's load; then prints the rig's tables and, per repetition, dsh's
# ratio to the best other peer. Re-runnable on any tree: it builds dsh from
# the checkout it lives in (CGO_ENABLED=0, as releases are built).
#
#   bench/peers.sh                       # STEPS="1 10 40" REPS=5
#   REPS=3 PEERS_EXTRA="codex" bench/peers.sh
#
# Knobs (defaults in brackets):
#   PEER_BENCH   the rig to copy [../shared/peer-bench beside the repo, else /work/shared/peer-bench]
#   WORK         writable scratch folder [a new /var/tmp/dsh-peers.XXXX]
#   DSH_BIN      a dsh binary to measure instead of building one
#   PEERS_NM     node_modules holding codex and claude [$HOME/.cache/dsh-peers/node_modules]
#   CRUSH_BIN    a crush binary (built from source, see the rig's METHOD.md); crush is left out without one
#   PEERS_EXTRA  the other peers [codex claude, plus crush when CRUSH_BIN is set]
#   STEPS, REPS, STARTUP_REPS, CMD, OUT: as run-peers.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PEER_BENCH=${PEER_BENCH:-}
if [ -z "$PEER_BENCH" ]; then
	for d in "$ROOT/../shared/peer-bench" /work/shared/peer-bench; do
		[ -x "$d/run-peers.sh" ] && PEER_BENCH=$d && break
	done
fi
[ -n "$PEER_BENCH" ] && [ -x "$PEER_BENCH/run-peers.sh" ] || { echo "peers.sh: no peer rig (set PEER_BENCH)" >&2; exit 1; }
WORK=${WORK:-$(mktemp -d /var/tmp/dsh-peers.XXXX)}
mkdir -p "$WORK"
export PATH=/usr/local/go/bin:$PATH

# The rig writes fakellm and its results next to itself: copy it.
rm -rf "$WORK/rig"
cp -r "$PEER_BENCH" "$WORK/rig"
chmod -R u+w "$WORK/rig"

if [ -z "${DSH_BIN:-}" ]; then
	DSH_BIN=$WORK/dsh
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$DSH_BIN" ./cmd/dsh)
fi

# run-peers.sh finds node peers under $PEERS_DIR/node_modules and crush at
# $PEERS_DIR/bin/crush: a folder of links puts both where it looks.
PEERS_NM=${PEERS_NM:-$HOME/.cache/dsh-peers/node_modules}
mkdir -p "$WORK/peers/bin"
ln -sfn "$PEERS_NM" "$WORK/peers/node_modules"
extra=${PEERS_EXTRA:-codex claude}
if [ -n "${CRUSH_BIN:-}" ]; then
	ln -sf "$CRUSH_BIN" "$WORK/peers/bin/crush"
	[ -n "${PEERS_EXTRA:-}" ] || extra="$extra crush"
fi

OUT=${OUT:-$WORK/peers-$(date +%Y%m%d-%H%M).tsv}
echo "peers.sh: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg), out $OUT" >&2
PEERS="custom custom2 $extra" PEERS_DIR=$WORK/peers RUN_ROOT=$WORK/runs OUT=$OUT \
	CUSTOM_NAME=dsh CUSTOM_BIN=$DSH_BIN CUSTOM_SETUP="$(cat "$PEER_BENCH/dsh-setup.sh")" \
	CUSTOM_CMD='"$CUSTOM_BIN" run "$PROMPT"' CUSTOM_ENV=FAKE_API_KEY=dummy CUSTOM2_ENV=FAKE_API_KEY=dummy \
	CUSTOM2_NAME=dsh-fullaccess CUSTOM2_BIN=$DSH_BIN \
	CUSTOM2_CMD='"$CUSTOM_BIN" run --permission full-access "$PROMPT"' \
	STEPS=${STEPS:-"1 10 40"} REPS=${REPS:-5} STARTUP_REPS=${STARTUP_REPS:-10} \
	"$WORK/rig/run-peers.sh" "${1:-all}" >&2
echo "peers.sh: done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 "$ROOT/bench/peers_paired.py" "$OUT"
python3 "$WORK/rig/summarize.py" "$OUT"
