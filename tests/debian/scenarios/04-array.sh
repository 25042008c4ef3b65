# A real raid1 made with mdadm: udev's rule pulls the stopped service in, and the array shows
# on the bus with the kernel's facts.
# vm-timeout: 90
need_disks 2
systemctl stop mdpilot.service
assert_eq "$(unit_state)" inactive "unit state before the array"
md_create md0 1 "${DISKS[0]}" "${DISKS[1]}"
wait_for 30 sh -c '[ "$(systemctl is-active mdpilot.service)" = active ]' ||
    fail "the udev rule did not start mdpilot.service when md0 appeared ($(udevadm info -q property /dev/md0 | grep -E 'MD_LEVEL|SYSTEMD_WANTS' | tr '\n' ' '))"
log "started by: $(systemctl show -p TriggeredBy,WantedBy --value mdpilot.service | tr '\n' ' ')"
# API 1.0: the object path is keyed by the array UUID's 32 hex digits.
hex=$(tr -d -- '-:\n' </sys/block/md0/md/uuid | tr 'A-F' 'a-f')
p=$BUS_PATH/arrays/$hex
wait_for 20 busctl --system introspect "$BUS_NAME" "$p" org.mdpilot.MdPilot1.Array >/dev/null ||
    fail "$p not on the bus"
assert_eq "$(busctl --system get-property "$BUS_NAME" "$p" org.mdpilot.MdPilot1.Array Level)" 's "raid1"' "md0 Level on the bus"
assert_eq "$(busctl --system get-property "$BUS_NAME" "$p" org.mdpilot.MdPilot1.Array NumDevices)" "u 2" "md0 NumDevices on the bus"
mdpilot status | tee /tmp/status.txt
grep -q md0 /tmp/status.txt || fail "mdpilot status does not show md0"
