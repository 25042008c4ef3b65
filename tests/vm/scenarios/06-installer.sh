# vm-timeout: 180
# Installer drop-in: partman-crypto's progress loop (a fifo, one `*` line per 1/1000 of the device)
# against `blockdev-wipe` on a resyncing md0 counts exactly 1000 and ends with exit 0.
need_disks 2
require blockdev-wipe
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
dirty /dev/md0 64
# As in partman-crypto's crypto_wipe_device (d-i), called by the name the installer uses.
crypto_wipe /usr/bin/blockdev-wipe /dev/md0
grep -q 'not implemented yet' /tmp/bw.err && skip "mdpilot blockdev-wipe: not implemented yet"
assert_eq "$WIPE_RC" 0 "blockdev-wipe exit status"
assert_eq "$WIPE_STARS" 1000 "number of * lines"
assert_eq "$WIPE_OTHER" 0 "number of other lines on stdout"
echo 3 >/proc/sys/vm/drop_caches
is_zero /dev/md0 64 || fail "md0 does not read back as zeros after blockdev-wipe"
info "blockdev-wipe: 1000 stars, exit 0, md0 zeroed"
