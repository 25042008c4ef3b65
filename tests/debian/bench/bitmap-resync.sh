# The second boot of tests/debian/bench-bitmap, after the crash: udev assembles the array from its
# two members (mdadm --incremental, read-auto: it may come back under another name than md0),
# the first write would make it writable, as `mdadm --readwrite` does here, and md resyncs what
# the crash left unknown (with a bitmap: the regions it marks dirty; without: the whole array).
# Redundant again is md's own word: resync_start (the superblock's resync offset) back to
# `none`, sync_action idle, degraded 0. The time is the kernel log's, from md's "resync of RAID
# array" to its "resync done".
# vm-timeout: 900
found() { ls -d /sys/block/md*/md/sync_action >/dev/null 2>&1; }
wait_for 60 found || fail "udev did not assemble the array: $(cat /proc/mdstat)"
md=$(ls -d /sys/block/md* | head -1)
md=${md##*/}
cat /proc/mdstat
policy=$(cat "/sys/block/$md/md/consistency_policy")
log "$md after the crash: array_state $(cat "/sys/block/$md/md/array_state"), resync_start $(cat "/sys/block/$md/md/resync_start")"
mdadm --readwrite "/dev/$md" || fail "mdadm --readwrite /dev/$md failed"
t0=$(date +%s%N)
redundant() {
    [ "$(cat "/sys/block/$md/md/resync_start")" = none ] && [ "$(cat "/sys/block/$md/md/sync_action")" = idle ] &&
        [ "$(cat "/sys/block/$md/md/degraded")" = 0 ]
}
wait_for 850 redundant || fail "$md not redundant after 850 s: $(cat /proc/mdstat)"
wall=$((($(date +%s%N) - t0) / 1000000))
# Kernel timestamps (seconds since boot) of the resync's start and end.
stamp() { dmesg | grep -E "$1" | tail -1 | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p' || true; }
began=$(stamp "md: resync of RAID array $md")
done_at=$(stamp "md: $md: resync done")
dmesg | grep -E "$md|md:" | tail -n 8 || true
if [ -z "$began" ]; then
    secs=0
else
    [ -n "$done_at" ] || fail "$md resynced, but the kernel log has no 'resync done' line"
    secs=$(awk -v a="$began" -v b="$done_at" 'BEGIN{printf "%.3f", b-a}')
fi
info "consistency_policy $policy: resync ${secs} s in the kernel log (${began:-none} .. ${done_at:-none} s of uptime), redundant ${wall} ms after mdadm --readwrite; mismatch_cnt $(cat "/sys/block/$md/md/mismatch_cnt")"
echo "@@RESYNC_SECONDS $secs"
