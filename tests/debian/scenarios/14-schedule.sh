# The check schedule under the shipped unit: a `[check]` schedule in /etc/mdpilot/config.d whose
# cycle opens now (an OnCalendar time of this second) makes the restarted service start a check of
# md0 on its first tick; md runs it to the end and the service records it in
# /var/lib/mdpilot/checks.toml (LastCheckCompleted moves on).
# vm-timeout: 120
[ -d /sys/block/md0/md ] || fail "md0 (04-array) is not there"
conf=/etc/mdpilot/config.d/50-test-schedule.toml
cleanup() { rm -f "$conf"; systemctl restart mdpilot.service || true; }
trap cleanup EXIT
name_on_bus || systemctl start mdpilot.service
wait_for 60 idle md0 || fail "md0 is still busy: $(cat /sys/block/md0/md/sync_action)"
before=$(aprop md0 LastCheckCompleted)
# A cycle that opens after any earlier check completed (12-check's): this second, not this minute.
sleep 1
now=$(date +%H:%M:%S)
mkdir -p /etc/mdpilot/config.d
cat >"$conf" <<T
[check]
schedule = "*-*-* $now"
window = "1h"
min_age_days = 0
include = ["md0"]
T
cat "$conf"
t0=$(date +%s%N)
restart_unit
started() { unit_journal | jq -e -s 'map(.MESSAGE) | any(. == "scheduled check started")' >/dev/null; }
wait_for 45 started || fail "the schedule started no check: $(unit_journal | jq -r .MESSAGE | tail -n 5)"
info "scheduled check started $((($(date +%s%N) - t0) / 1000000)) ms after the restart (schedule *-*-* $now)"
unit_journal | jq -c 'select(.MESSAGE == "scheduled check started") | {MESSAGE, ARRAY, RESUME}'
recorded() { [ "$(aprop md0 LastCheckCompleted)" != "$before" ]; }
wait_for 60 recorded || fail "LastCheckCompleted stayed '$before' after the scheduled check (sync_action $(cat /sys/block/md0/md/sync_action))"
log "LastCheckCompleted: $before -> $(aprop md0 LastCheckCompleted); NextCheckStart $(aprop md0 NextCheckStart)"
cat /var/lib/mdpilot/checks.toml
