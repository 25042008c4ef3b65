# The second boot of tests/debian/bench-shutdown, on the same disks: udev assembles the RAID1
# (under another name, md127), /var/lib/mdpilot is restored from the state disk and the .deb
# installed, whose service starts and resumes the check it paused for the shutdown from the
# position in checks.toml (md/sync_min). Printed: the saved record, the position md starts
# from, then `@@RESUMED <saved sectors> <sync_min sectors>`. Then the same check by hand
# (`echo check > md/sync_action`, mdpilot running but not holding it), `sd.run` seconds, and
# the second timed `systemctl poweroff`.
# vm-timeout: 900
# shellcheck source=shutdown-lib.sh
source "$T/bench/shutdown-lib.sh"
assembled
restore_state
echo "@@SAVED $(tr '\n' ' ' </var/lib/mdpilot/checks.toml 2>/dev/null || echo none)"
install_mdpilot
running() { [ "$(cat "/sys/block/$md/md/sync_action")" = check ]; }
wait_for 120 running || fail "mdpilot did not resume the check on $md: $(cat /proc/mdstat); $(journalctl -u mdpilot --no-pager | tail -5)"
min=$(cat "/sys/block/$md/md/sync_min")
echo "@@RESUMED $md sync_min $min sectors, now at $(position "$md") KiB"
mdpilot check status "$md" || true
mdpilot check cancel "$md" || fail "mdpilot check cancel failed"
wait_for 60 idle "$md" || fail "$md not idle after the cancel"
echo 0 >"/sys/block/$md/md/sync_min"
echo check >"/sys/block/$md/md/sync_action"
sleep "$(arg sd.run || echo 20)"
echo "@@CHECK hand $(position "$md") KiB, speed $(cat "/sys/block/$md/md/sync_speed") KiB/s"
poweroff_now hand
