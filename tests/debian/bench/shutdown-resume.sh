# The second boot of `tests/debian/bench-shutdown --test`, on the same disks: udev assembles the
# RAID1 (as md127), /var/lib/mdpilot is restored from the state disk as the first boot's
# shutdown left it. The record must say the check was paused for the shutdown, with a position;
# then the .deb is installed, and its service must resume the check from exactly that
# position (`md/sync_min` = the record's sectors). Printed: `@@SAVED <sectors> <paused_for>` and
# `@@RESUMED <md> sync_min <sectors>`; the check is cancelled at the end (the harness then
# powers off and reports the result).
# vm-timeout: 300
# shellcheck source=shutdown-lib.sh
source "$T/bench/shutdown-lib.sh"
assembled
restore_state
rec=/var/lib/mdpilot/checks.toml
[ -s "$rec" ] || fail "no check record kept from the first boot"
log "the record: $(tr '\n' ' ' <"$rec")"
sectors=$(sed -n 's/^sectors = \([0-9]*\)$/\1/p' "$rec" | head -1)
why=$(sed -n 's/^paused_for = "\(.*\)"$/\1/p' "$rec" | head -1)
echo "@@SAVED $sectors $why"
assert_eq "$why" shutdown "the record's paused_for"
[ -n "$sectors" ] && [ "$sectors" -gt 0 ] || fail "no position in the record: $(cat "$rec")"
grep -q '^running' "$rec" && fail "the record still says running: $(cat "$rec")"
install_mdpilot
running() { [ "$(cat "/sys/block/$md/md/sync_action")" = check ]; }
wait_for 120 running || fail "mdpilot did not resume the check on $md: $(cat /proc/mdstat); $(journalctl -u mdpilot --no-pager | tail -5)"
min=$(cat "/sys/block/$md/md/sync_min")
echo "@@RESUMED $md sync_min $min"
assert_eq "$min" "$sectors" "md/sync_min of the resumed check (the record's position)"
info "resumed at the saved $sectors sectors"
mdpilot check cancel "$md" || fail "mdpilot check cancel failed"
wait_for 60 idle "$md" || fail "$md not idle after the cancel"
