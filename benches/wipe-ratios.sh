#!/usr/bin/env bash
# Wipe ratios (member offload and resume): the guest bench's figures (tests/vm/scenarios/07-bench.sh and the
# member-offload lines of 08-wipe-offload.sh, read from a VM log) beside a host loop-device run
# of the same writers, and a host resume count (a random wipe SIGKILLed at 50% and resumed:
# bytes written twice, and whether the resumed wipe verifies). Prints tables and ratios; asserts
# nothing.
#
#   sudo benches/wipe-ratios.sh [VM_LOG]   # VM_LOG default target/vm-cache/logs/all.log
#   HOST=0 benches/wipe-ratios.sh LOG      # guest figures only (no root needed)
#   SIZE_MIB=2048 BACKING=file ...         # host device size; sparse file on /var/tmp
#
# VM_LOG is the console log of `MDPILOT_VM_JOBS=1 tests/vm/run bench wipe-offload` (07-bench is a
# benchmark: the default run leaves it out) (lines `@@INFO <writer> <N> MB/s <S> s to
# wiped+redundant`) or its summary (the same lines indented); this script never boots the VM.
# The host has no resync (a loop device, no md driver needed): its column is writer speed only.
# Writes ONLY to the loop devices it attaches (over its own temp files); detaches on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
LOG=${1:-target/vm-cache/logs/all.log}
HOST=${HOST:-1}
SIZE_MIB=${SIZE_MIB:-1024}
BACKING=${BACKING:-tmpfs}
REPS=${REPS:-3}          # host writers: the best of REPS runs (the machine may be shared)
MDPILOT=${MDPILOT:-target/release/mdpilot}

declare -A G_MBS G_S H_MBS
G_ORDER=()
if [ -r "$LOG" ]; then
    while IFS=$'\t' read -r label mbs secs; do
        G_MBS[$label]=$mbs; G_S[$label]=$secs; G_ORDER+=("$label")
    done < <(sed -nE 's/^(@@INFO |[[:space:]|]*)?(.*[^[:space:]])[[:space:]]+([0-9.]+) MB\/s[[:space:]]+([0-9.]+) s to wiped\+redundant.*/\2\t\3\t\4/p' "$LOG" | sed -E 's/^@@INFO //' | awk -F'\t' '!seen[$1]++')
    OFFLOAD=$(sed -nE 's/.*member offload ([0-9]+): ([0-9]+) bytes in ([0-9.]+) s.*/\1 \2 \3/p' "$LOG" | sort -u)
else
    echo "wipe-ratios: no VM log at $LOG (run tests/vm/run, or pass a log): guest columns empty" >&2
    OFFLOAD=""
fi

WORK=""
LOOP=""
cleanup() {
    [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null || true
    if [ -n "$WORK" ]; then
        [ "$BACKING" = tmpfs ] && { umount "$WORK/mnt" 2>/dev/null || true; }
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

RESUME=""
if [ "$HOST" = 1 ]; then
    [ "$(id -u)" = 0 ] || { echo "wipe-ratios: the host run needs root (loop devices); HOST=0 skips it" >&2; exit 1; }
    [ -x "$MDPILOT" ] || cargo build --release --locked
    MDPILOT=$(readlink -f "$MDPILOT")
    WORK=$(mktemp -d /var/tmp/mdpilot-ratios.XXXXXX)
    mkdir -p "$WORK/mnt" "$WORK/state"
    [ "$BACKING" = tmpfs ] && mount -t tmpfs -o size=$((SIZE_MIB + 64))m tmpfs "$WORK/mnt"
    IMG=$WORK/mnt/disk.img
    # The installer's writer: 512 KiB buffered writes, fdatasync at most once a second.
    cat > "$WORK/installer.py" <<'PY'
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY)
size = os.lseek(fd, 0, os.SEEK_END); os.lseek(fd, 0, os.SEEK_SET)
buf = bytes(512 * 1024); done = 0; last = time.monotonic()
while done < size:
    done += os.write(fd, buf[: min(len(buf), size - done)])
    if time.monotonic() - last >= 1.0:
        os.fdatasync(fd); last = time.monotonic()
os.fdatasync(fd); os.close(fd)
PY
    fresh() {
        [ -n "$LOOP" ] && losetup -d "$LOOP"
        rm -f "$IMG"; truncate -s "${SIZE_MIB}M" "$IMG"
        LOOP=$(losetup --find --show --direct-io=on "$IMG")
        sync
    }
    # host NAME CMD... (@DEV@ = the loop device): MB/s, the best of REPS runs on a fresh device.
    host() {
        local name=$1; shift
        local best=0 i t0 t1 mbs cmd
        for ((i = 0; i < REPS; i++)); do
            fresh
            cmd=("${@//@DEV@/$LOOP}")
            t0=$(date +%s.%N)
            "${cmd[@]}" >/dev/null 2>"$WORK/err" || { echo "$name failed:"; cat "$WORK/err"; exit 1; }
            t1=$(date +%s.%N)
            mbs=$(awk -v s="$SIZE_MIB" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", s*1048576/(b-a)/1e6}')
            best=$(awk -v a="$mbs" -v b="$best" 'BEGIN {print (a > b ? a : b)}')
        done
        H_MBS[$name]=$best
        echo "  host $name: $best MB/s (best of $REPS)" >&2
    }
    host "mdpilot wipe (zero)" "$MDPILOT" wipe --yes --progress none --state-dir "$WORK/state" @DEV@
    host "dd bs=4M oflag=direct" dd if=/dev/zero of=@DEV@ bs=4M count=$((SIZE_MIB / 4)) oflag=direct status=none
    host "installer 512 KiB buffered + fdatasync" python3 "$WORK/installer.py" @DEV@

    # Resume: random wipe SIGKILLed once half is durable, then --resume --verify; count the
    # bytes written to the device (sysfs stat field 7, sectors) beyond its size.
    fresh
    name=$(basename "$LOOP")
    written() { awk '{printf "%.0f\n", $7 * 512}' "/sys/block/$name/stat"; }
    w0=$(written)
    python3 - "$MDPILOT" "$LOOP" "$WORK/state" <<'PY'
import json, subprocess, sys
mdp, dev, state = sys.argv[1:]
p = subprocess.Popen([mdp, "wipe", dev, "--yes", "--progress", "json", "--method", "random",
                      "--state-dir", state], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
for line in p.stdout:
    v = json.loads(line)
    if v.get("event") == "progress" and v.get("phase") == "wipe" and v["done_bytes"] >= v["total_bytes"] / 2:
        break
    if v.get("event") == "completed":
        sys.exit("the wipe ended before the kill")
p.kill(); p.wait()
PY
    ck=$(cat "$WORK"/state/*.json)
    durable=$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["durable_offset"])' <<<"$ck")
    out=$("$MDPILOT" wipe "$LOOP" --yes --progress json --resume --verify --state-dir "$WORK/state" | tail -n 1)
    verified=$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["outcome"]["verified"])' <<<"$out")
    twice=$(( $(written) - w0 - SIZE_MIB * 1048576 ))
    RESUME="killed at >= 50% with $durable bytes durable in the checkpoint; written twice: $twice bytes ($(awk -v t="$twice" 'BEGIN {printf "%.1f", t/1048576}') MiB; goal <= 1 GiB + one block); resumed wipe verified: $verified"
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b == "" || b == 0) print "-"; else printf "%.1fx", a / b}'; }
echo
echo "guest: $LOG (raid1 resyncing; MB/s of the writer, seconds to wiped AND redundant)"
[ "$HOST" = 1 ] && echo "host: best of $REPS on a loop device (direct-io) over a fresh ${SIZE_MIB} MiB file on ${BACKING}; kernel $(uname -r); $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| %-40s | %10s | %12s | %10s |\n' writer "guest MB/s" "guest s W+R" "host MB/s"
printf '|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..42})" "------------" "--------------" "------------"
names=("${G_ORDER[@]}")
for n in "${!H_MBS[@]}"; do [[ -n "${G_MBS[$n]:-}" ]] || names+=("$n"); done
for n in "${names[@]}"; do
    printf '| %-40s | %10s | %12s | %10s |\n' "$n" "${G_MBS[$n]:--}" "${G_S[$n]:--}" "${H_MBS[$n]:--}"
done
m="mdpilot wipe (zero, resync skipped)"; inst="installer 512 KiB buffered + fdatasync"; dd="dd bs=4M oflag=direct"
echo
echo "guest, time to wiped+redundant: installer / mdpilot = $(ratio "${G_S[$inst]:-}" "${G_S[$m]:-}")   (goal >= 10x)"
echo "guest, time to wiped+redundant: dd / mdpilot        = $(ratio "${G_S[$dd]:-}" "${G_S[$m]:-}")"
if [ "$HOST" = 1 ]; then
    echo "host, writer speed: mdpilot / installer = $(ratio "${H_MBS["mdpilot wipe (zero)"]}" "${H_MBS[$inst]}")"
    echo "host, writer speed: mdpilot / dd        = $(ratio "${H_MBS["mdpilot wipe (zero)"]}" "${H_MBS[$dd]}")"
    echo "host resume: $RESUME"
fi
if [ -n "$OFFLOAD" ]; then
    echo
    echo "guest member offload (08-wipe-offload; raid level N, bytes, seconds) against mdpilot's"
    echo "through-md BLKZEROOUT on the 07 raid1 (${G_MBS[$m]:--} MB/s; not the same array: indicative):"
    while read -r lvl bytes secs; do
        mb=$(awk -v b="$bytes" -v s="$secs" 'BEGIN {printf "%.0f", b/s/1e6}')
        echo "  raid$lvl: $bytes bytes in $secs s = $mb MB/s = $(ratio "$mb" "${G_MBS[$m]:-}") (goal >= 5x)"
    done <<<"$OFFLOAD"
fi
