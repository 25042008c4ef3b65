# The check throttle under the shipped unit (ProtectSystem=strict; its notes in /run/mdpilot):
# with `[check] pressure_target`, StartCheck through the bus on a new raid1 (md21, made in sync
# on the last two data disks) starts the check under the throttle's first decision, so md's
# knob reads the throttle's limit in the call's reply, never md's own `200000 (system)`;
# synchronous foreground writes (io pressure `some` far above the band) take it to its floor
# (`check status --json`'s throttle, md/sync_speed_max); CancelCheck ends the check, the lease
# goes and md/sync_speed_max reads `200000 (system)` again.
# vm-timeout: 300
need_disks 4
[ -r /proc/pressure/io ] || skip "this kernel has no /proc/pressure/io (CONFIG_PSI off or psi=0)"
md=md21
conf=/etc/mdpilot/config.d/50-test-check.toml
cleanup() {
    rm -f "$conf"
    stop_writers
    drop_array "$md" "${DISKS[2]}" "${DISKS[3]}"
    systemctl restart mdpilot.service || true
}
trap cleanup EXIT
mkdir -p /etc/mdpilot/config.d
# The band on `some`; the ceiling 5000 KiB/s keeps the 512 MiB check running for the whole look.
printf '[check]\npressure_target = "some 10%%..20%%"\npressure_floor = 1000\npressure_ceiling = 5000\n' >"$conf"
restart_unit
mdadm --create "/dev/$md" --run --quiet --metadata=1.2 --level=1 --raid-devices=2 --size=512M \
    --assume-clean "${DISKS[2]}" "${DISKS[3]}" || fail "mdadm --create /dev/$md failed"
udevadm settle --timeout=20 || true
wait_for 20 busctl --system introspect "$BUS_NAME" "$(array_path $md)" "$ARRAY" >/dev/null || fail "$md not on the bus"
idle "$md" || fail "$md is not idle after --assume-clean: $(cat "/sys/block/$md/md/sync_action")"
knob() { cat "/sys/block/$md/md/sync_speed_max"; }
busctl --system call "$BUS_NAME" "$(array_path $md)" "$ARRAY" StartCheck 'a{sv}' 0 ||
    fail "StartCheck $md failed: $(journalctl -u mdpilot.service --no-pager -o cat | tail -n 3)"
at_start=$(knob)
th() { mdpilot check status --json "$md" | jq -r ".arrays[0].throttle$1 // empty"; }
first=$(th .limit_kib_s)
[ -n "$first" ] || fail "no throttle decision at the check's start: $(mdpilot check status --json "$md")"
case $at_start in
    "$first (local)" | "$first") ;;
    *) fail "md/sync_speed_max read '$at_start' right after StartCheck; the throttle's first decision is $first" ;;
esac
info "StartCheck under the throttle: md/sync_speed_max '$at_start' at the reply ($(th .why))"
sync_writers "$md"
at_floor() { [ "$(th .limit_kib_s)" = 1000 ]; }
wait_for 90 at_floor || fail "the check throttle did not drop to its floor: $(tr '\n' ' ' </proc/pressure/io); $(mdpilot check status --json "$md" | jq -c '.arrays[0].throttle')"
case $(knob) in "1000 (local)" | 1000) ;; *) fail "$md sync_speed_max reads '$(knob)', the throttle holds 1000" ;; esac
info "check throttle under the unit: limit $first -> 1000 KiB/s, md/sync_speed_max '$(knob)' ($(th .why))"
stop_writers
busctl --system call "$BUS_NAME" "$(array_path $md)" "$ARRAY" CancelCheck ||
    fail "CancelCheck $md failed: $(journalctl -u mdpilot.service --no-pager -o cat | tail -n 3)"
wait_for 20 idle "$md" || fail "$md still $(cat "/sys/block/$md/md/sync_action") after CancelCheck"
released() { [ "$(knob)" = "200000 (system)" ]; }
wait_for 20 released || fail "after CancelCheck: $md sync_speed_max '$(knob)'; $(mdpilot policy show)"
info "after CancelCheck: $md idle, sync_speed_max '$(knob)'"
