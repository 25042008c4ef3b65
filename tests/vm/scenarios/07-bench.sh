# vm-timeout: 1500
# vm-bench: a benchmark (tests/vm/run bench, tests/vm/bench-kernels, benches/wipe-ratios.sh)
# Bench (figures printed, not asserted as time): on md0 (raid1 of 1020 MiB on the default 1 GiB
# virtio disks; 8 GiB with `MDPILOT_VM_DISK_SIZE=9G MDPILOT_VM_SPARSE=1 tests/vm/run bench`) while its
# initial resync runs at the kernel's default limits, each writer wipes the array:
#   mdpilot wipe (zero) | dd 4 MiB O_DIRECT | the installer's 512 KiB buffered writer with an
#   fdatasync about once a second | 64 KiB O_SYNC (the installer until 2013; 64 MiB sample, so its
#   wiped+redundant time is only the resync's)
# and the time to "wiped AND redundant": the writer plus any resync still to run afterwards.
need_disks 2
# The array: each member's whole disk less 4 MiB for the superblock and data offset, at most
# 8 GiB (1020 MiB on the default 1 GiB disks; 8 GiB with MDPILOT_VM_DISK_SIZE=9G).
BENCH_MIB=$(($(blockdev --getsize64 "${DISKS[0]}") / 1048576 - 4))
[ "$BENCH_MIB" -le 8192 ] || BENCH_MIB=8192
set_limits 1000 200000
d0=${DISKS[0]} d1=${DISKS[1]}
fresh_md0() {
    mdadm --stop /dev/md0 >/dev/null 2>&1 || true
    mdadm --zero-superblock "$d0" "$d1" >/dev/null 2>&1 || true
    mdadm --create /dev/md0 --run --quiet --metadata=1.2 --level=1 --raid-devices=2 --size="${BENCH_MIB}M" "$d0" "$d1" ||
        fail "mdadm --create /dev/md0"
    udevadm settle --timeout=20 || true
    wait_for 10 sync_is md0 resync || fail "md0 is not resyncing"
    size=$(blockdev --getsize64 /dev/md0)
}
# Installer's writer: 512 KiB buffered writes, fdatasync every 100 MiB (~once a second here).
installer_writer() {
    local chunk=200 total=$(($1 / 524288)) off=0 n
    while [ "$off" -lt "$total" ]; do
        n=$((total - off < chunk ? total - off : chunk))
        dd if=/dev/zero of=/dev/md0 bs=512K seek="$off" count="$n" conv=fdatasync,notrunc status=none || return 1
        off=$((off + n))
    done
}
rows=()
row() { rows+=("$(printf '%-44s %8s MB/s %10s s to wiped+redundant' "$1" "$2" "$3")"); }
# bench LABEL BYTES CMD...: a fresh resyncing md0, CMD timed, then the wait for the resync.
bench() {
    local label=$1 bytes=$2
    shift 2
    fresh_md0
    timed "$@"
    [ "$TIMED_RC" = 0 ] || { echo "$label: exit $TIMED_RC"; return 1; }
    local w=$ELAPSED_MS
    local t0
    t0=$(now_ms)
    wait_for 300 sync_is md0 idle || fail "$label: resync did not finish"
    local total=$((w + $(now_ms) - t0))
    row "$label" "$(mbs "$bytes" "$w")" "$(awk -v ms="$total" 'BEGIN{printf "%.1f", ms/1000}')"
    log "$label: ${w} ms writing, ${total} ms to wiped+redundant"
}
fresh_md0
info "md0: raid1 of $((size >> 20)) MiB on 2 virtio disks, resyncing; limits min $(limit_min) max $(limit_max) KiB/s"
bench "dd bs=4M oflag=direct" "$size" dd if=/dev/zero of=/dev/md0 bs=4M oflag=direct iflag=count_bytes count="$size" status=none
bench "installer 512 KiB buffered + fdatasync" "$size" installer_writer "$size"
sample=$((64 << 20))
bench "64 KiB O_SYNC (64 MiB sample)" "$sample" dd if=/dev/zero of=/dev/md0 bs=64K count=1024 oflag=sync status=none
mdpilot_ok=1
probe=$("$MDP" wipe /dev/mdpilot-probe-nonexistent 2>&1 </dev/null || true)
if grep -q 'not implemented yet' <<<"$probe"; then mdpilot_ok=0; fi
if [ "$mdpilot_ok" = 1 ]; then
    bench "mdpilot wipe (zero, resync skipped)" "$size" "$MDP" wipe /dev/md0 --yes --progress json
fi
for r in "${rows[@]}"; do info "$r"; done
[ "$mdpilot_ok" = 1 ] || skip "mdpilot wipe: not implemented yet (the other writers' figures are above)"
