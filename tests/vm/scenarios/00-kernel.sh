# vm-timeout: 120
# The test bed itself: the guest has a real md driver, a new raid1 really resyncs, the speed-limit
# knobs are writable, udev sees md events and the system bus is up. Needs nothing from mdpilot.
need_disks 2
# The bed: its kernel and the mdadm udev and the scenarios call (the bed's own release's).
info "kernel $(uname -r), $(mdadm -V 2>&1 | head -1)"
mdadm -V 2>&1 | grep -qF "$(sed 's/^mdadm \([0-9.]*\).*/v\1/' /vm/mdadm-version)" ||
    fail "mdadm -V says $(mdadm -V 2>&1 | head -1), the bed wants $(cat /vm/mdadm-version)"
grep -q '^Personalities :.*\[raid1\]' /proc/mdstat || fail "raid1 personality not in /proc/mdstat"
dbus-send --system --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus.ListNames >/dev/null || fail "system bus not reachable"

# Slow the resync down so it is still running when we look.
set_limits 1000 20000
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
wait_for 10 grep -q 'resync =' /proc/mdstat || { cat /proc/mdstat; fail "no resync line in /proc/mdstat"; }
cat /proc/mdstat
assert_eq "$(md_attr md0 sync_action)" resync "md0 sync_action"
assert_eq "$(md_attr md0 level)" raid1 "md0 level"

# udev saw the array (63-md-raid-arrays.rules imports mdadm --detail --export).
wait_for 10 sh -c 'udevadm info --query=property /dev/md0 | grep -q "^MD_LEVEL=raid1"' ||
    { udevadm info /dev/md0; fail "udev has no MD_LEVEL=raid1 for md0"; }
log "ok: udev knows md0 as raid1"

# The global limits are writable and read back; the per-array ones follow the kernel rules.
echo 5000 >/proc/sys/dev/raid/speed_limit_min
assert_eq "$(limit_min)" 5000 "speed_limit_min after writing 5000"
echo 0 >/proc/sys/dev/raid/speed_limit_min
assert_eq "$(limit_min)" 0 "speed_limit_min after writing 0"
echo 1000 >/proc/sys/dev/raid/speed_limit_min
assert_eq "$(md_attr md0 sync_speed_min)" "1000 (system)" "md0 sync_speed_min"
md_set md0 sync_speed_min 1
assert_eq "$(md_attr md0 sync_speed_min)" "1 (local)" "md0 sync_speed_min after writing 1"
md_set md0 sync_speed_min system
assert_eq "$(md_attr md0 sync_speed_min)" "1000 (system)" "md0 sync_speed_min after writing system"

# Throttled rate, then the unthrottled one the guest reaches.
throttled=$(sync_rate_mbs md0 2)
info "raid1 resync throttled to 20000 KiB/s: $throttled MB/s"
set_limits 1000 2000000
unthrottled=$(sync_rate_mbs md0 2)
info "raid1 resync unthrottled (1 GiB virtio disks): $unthrottled MB/s"
wait_for 90 sync_is md0 idle || fail "resync did not finish within 90 s"
assert_eq "$(md_attr md0 mismatch_cnt)" 0 "md0 mismatch_cnt after resync"
grep -q 'resync' /proc/mdstat && fail "resync line still in /proc/mdstat after idle"
mdadm --stop /dev/md0 >/dev/null || fail "mdadm --stop /dev/md0 failed"
log "kernel test bed OK"
