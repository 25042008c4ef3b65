# The service's own records reach the journal under its unit.
# vm-timeout: 30
journalctl --sync 2>/dev/null || true
journalctl -u mdpilot.service --no-pager -o short-monotonic | tail -n 20
n=$(journalctl _SYSTEMD_UNIT=mdpilot.service --no-pager -o cat | wc -l)
[ "$n" -gt 0 ] || fail "no records from the mdpilot process under _SYSTEMD_UNIT=mdpilot.service"
journalctl _SYSTEMD_UNIT=mdpilot.service --no-pager -o cat | grep -q "serving $BUS_NAME" ||
    fail "journal lacks the 'serving $BUS_NAME' record"
info "journal: $n records from the mdpilot process"
