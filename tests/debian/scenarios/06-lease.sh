# Under the shipped unit (ProtectSystem=strict, ReadWritePaths, DeviceAllow) the service writes
# the kernel's knobs: a named lease sets speed_limit_min to 0, per-array limits reach sysfs, and
# releasing restores the originals.
# vm-timeout: 60
name_on_bus || systemctl start mdpilot.service
echo 1000 >/proc/sys/dev/raid/speed_limit_min
orig=$(limit_min)
assert_eq "$(mcall AcquirePriority 'a{sv}' 2 holder s installer kind s installer)" 's "installer"' "lease id"
assert_eq "$(limit_min)" 0 "speed_limit_min during the installer lease"
assert_eq "$(busctl --system get-property "$BUS_NAME" "$MANAGER_PATH" "$MANAGER" SpeedLimitMin)" "t 0" "SpeedLimitMin on the bus"
mcall ReleasePriority s installer || fail "ReleasePriority installer failed"
assert_eq "$(limit_min)" "$orig" "speed_limit_min after release"
# Per-array limits: sysfs below /sys/devices/virtual/block/md0/md, reached through /sys/block.
amin=$(cat /sys/block/md0/md/sync_speed_min)
mcall SetArraySpeedLimits 'stta{sv}' md0 2000 50000 0 || fail "SetArraySpeedLimits md0 failed"
assert_eq "$(cat /sys/block/md0/md/sync_speed_min)" "2000 (local)" "md0 sync_speed_min"
assert_eq "$(cat /sys/block/md0/md/sync_speed_max)" "50000 (local)" "md0 sync_speed_max"
mcall RestoreLimits 'a{sv}' 0 || fail "RestoreLimits failed"
assert_eq "$(cat /sys/block/md0/md/sync_speed_min)" "$amin" "md0 sync_speed_min after RestoreLimits"
ls -la /run/mdpilot
[ "$(stat -c %a /run/mdpilot/policy.toml 2>/dev/null || echo 600)" = 600 ] ||
    fail "policy state is not private (UMask=0077): $(stat -c %a /run/mdpilot/policy.toml)"
