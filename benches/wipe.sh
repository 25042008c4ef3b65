#!/usr/bin/env bash
# Wipe benchmark: one run of each writer on a fresh loop device, printing MB/s,
# ratios, peak RSS and the peak growth of Dirty+Writeback (/proc/meminfo) during the job.
#
#   sudo benches/wipe.sh                 # 1 GiB loop device over a file on a private tmpfs
#   SIZE_MIB=2048 BACKING=file benches/wipe.sh   # sparse file on /var/tmp instead
#   MDPILOT=target/debug/mdpilot benches/wipe.sh
#
# Writes ONLY to the loop devices it attaches (over its own temp files); detaches on exit.
# Needs: root, losetup, dd, blkdiscard, python3 (the installer's writer), /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MIB=${SIZE_MIB:-1024}
REPS=${REPS:-3}          # each writer runs REPS times; the table shows the fastest run
BACKING=${BACKING:-tmpfs}
MDPILOT=${MDPILOT:-target/release/mdpilot}
[ "$(id -u)" = 0 ] || { echo "wipe.sh: needs root (loop devices)" >&2; exit 1; }
[ -x "$MDPILOT" ] || cargo build --release --locked
MDPILOT=$(readlink -f "$MDPILOT")

WORK=$(mktemp -d /var/tmp/mdpilot-bench.XXXXXX)
LOOP=""
cleanup() {
    [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null || true
    if [ "$BACKING" = tmpfs ]; then umount "$WORK/mnt" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/mnt"
if [ "$BACKING" = tmpfs ]; then
    mount -t tmpfs -o size=$((SIZE_MIB + 64))m tmpfs "$WORK/mnt"
fi
IMG=$WORK/mnt/disk.img

# The installer's writer since 2013: 512 KiB buffered writes, fdatasync at most once a second.
cat > "$WORK/installer.py" <<'PY'
import os, sys, time
dev = sys.argv[1]
fd = os.open(dev, os.O_WRONLY)
size = os.lseek(fd, 0, os.SEEK_END); os.lseek(fd, 0, os.SEEK_SET)
buf = bytes(512 * 1024); done = 0; last = time.monotonic()
while done < size:
    n = os.write(fd, buf[: min(len(buf), size - done)]); done += n
    if time.monotonic() - last >= 1.0:
        os.fdatasync(fd); last = time.monotonic()
os.fdatasync(fd); os.close(fd)
PY

dirty_kib() { awk '/^(Dirty|Writeback):/ {s += $2} END {print s}' /proc/meminfo; }

# run NAME CMD...: fresh sparse backing file + loop device, then time the command.
declare -A MBS RSS DIRTY
ORDER=()
run() {
    local name=$1; shift
    local best_t=999999 best_rss=0 best_dirty=0 i
    for ((i = 0; i < REPS; i++)); do
        [ -n "$LOOP" ] && losetup -d "$LOOP"
        rm -f "$IMG"; truncate -s "${SIZE_MIB}M" "$IMG"
        LOOP=$(losetup --find --show --direct-io=on "$IMG")
        sync
        local cmd=("${@//@DEV@/$LOOP}")
        local base t0 t1 dt p rss dirty
        base=$(dirty_kib)
        echo 0 > "$WORK/peak"
        ( peak=0; while :; do d=$(dirty_kib); if [ "$d" -gt "$peak" ]; then peak=$d; echo "$peak" > "$WORK/peak"; fi; sleep 0.02; done ) &
        local sampler=$!
        t0=$(date +%s.%N)
        /usr/bin/time -v -o "$WORK/time" "${cmd[@]}" > /dev/null 2> "$WORK/err" || {
            kill "$sampler"; echo "$name failed:"; cat "$WORK/err"; exit 1; }
        t1=$(date +%s.%N)
        kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
        p=$(cat "$WORK/peak")
        rss=$(awk '/Maximum resident set size/ {print $NF}' "$WORK/time")
        dirty=$(( p > base ? p - base : 0 ))
        # Memory figures: the worst over the runs; speed: the best run.
        [ "$rss" -gt "$best_rss" ] && best_rss=$rss
        [ "$dirty" -gt "$best_dirty" ] && best_dirty=$dirty
        dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.6f", b - a}')
        best_t=$(awk -v a="$dt" -v b="$best_t" 'BEGIN {print (a < b ? a : b)}')
    done
    MBS[$name]=$(awk -v s="$SIZE_MIB" -v t="$best_t" 'BEGIN {printf "%.0f", s*1048576/t/1e6}')
    RSS[$name]=$best_rss
    DIRTY[$name]=$best_dirty
    ORDER+=("$name")
    echo "  $name: ${MBS[$name]} MB/s" >&2
}

COUNT4M=$((SIZE_MIB / 4))
COUNT64K=$((SIZE_MIB * 16))
run "mdpilot zero"             "$MDPILOT" wipe --yes --progress none @DEV@
run "mdpilot zero (O_DIRECT)"  "$MDPILOT" wipe --yes --progress none --force-writes @DEV@
run "mdpilot zero (O_DIRECT, 1 in flight)" "$MDPILOT" wipe --yes --progress none --force-writes --queue-depth 1 @DEV@
run "mdpilot random"           "$MDPILOT" wipe --yes --progress none --method random @DEV@
run "mdpilot random (1 in flight)" "$MDPILOT" wipe --yes --progress none --method random --queue-depth 1 @DEV@
run "mdpilot blockdev-wipe"    "$MDPILOT" blockdev-wipe -s 65536 @DEV@
run "dd bs=4M oflag=direct"    dd if=/dev/zero of=@DEV@ bs=4M count=$COUNT4M oflag=direct status=none
run "blkdiscard -z"            blkdiscard -z @DEV@
run "installer (512K buffered + fdatasync/s)" python3 "$WORK/installer.py" @DEV@
run "64K O_SYNC"               dd if=/dev/zero of=@DEV@ bs=64K count=$COUNT64K oflag=sync status=none

echo
echo "loop device (direct-io) over a fresh ${SIZE_MIB} MiB sparse file on ${BACKING}; kernel $(uname -r);"
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); best of $REPS runs (memory: worst)"
printf '| %-40s | %8s | %12s | %16s |\n' writer MB/s "peak RSS KiB" "+Dirty+WB KiB"
printf '|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..42})" "----------" "--------------" "------------------"
for n in "${ORDER[@]}"; do
    printf '| %-40s | %8s | %12s | %16s |\n' "$n" "${MBS[$n]}" "${RSS[$n]}" "${DIRTY[$n]}"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }
best=${MBS["dd bs=4M oflag=direct"]}
[ "${MBS["blkdiscard -z"]}" -gt "$best" ] && best=${MBS["blkdiscard -z"]}
z=${MBS["mdpilot zero"]}; zd=${MBS["mdpilot zero (O_DIRECT)"]}; r=${MBS["mdpilot random"]}
inst=${MBS["installer (512K buffered + fdatasync/s)"]}
echo
echo "zero / best(dd-direct, blkdiscard -z) = $(ratio "$z" "$best")   (goal >= 0.95)"
echo "zero / installer's writer             = $(ratio "$z" "$inst")   (goal >= 4)"
echo "random / zero by O_DIRECT             = $(ratio "$r" "$zd")   (goal >= 0.9)"
echo "random / zero (BLKZEROOUT)            = $(ratio "$r" "$z")"
