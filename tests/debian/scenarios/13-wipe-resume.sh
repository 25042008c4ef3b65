# A random wipe with verify through the bus (StartWipe) is killed with SIGKILL halfway
# (`systemctl kill -s KILL`): its checkpoint is in /var/lib/mdpilot/wipe (StateDirectory=), the
# unit restarts (Restart=on-failure), the new process resumes the job from the checkpoint as a new
# job object (auto_resume), which completes and verifies the whole device; no block of the old
# content (zeros) is left, and the checkpoint is gone.
# vm-timeout: 240
need_disks 4
name_on_bus || systemctl start mdpilot.service
# The device: the last 1 GiB data disk (free since 10-python-client stopped md1 and zeroed its
# superblocks; 16-hook makes md2 on it later). Large enough that a random wipe under TCG runs
# for several seconds (a 192 MiB loop device on the guest's RAM root ended within the first
# checkpoint interval).
dev=${DISKS[3]}
[ -z "$(lsblk -no HOLDERS "$dev" 2>/dev/null | tr -d ' \n')" ] || fail "$dev has holders: $(lsblk "$dev")"
job=$(mcall StartWipe 'sa{sv}' "$dev" 2 method s random verify b true | sed -n 's/^o "\(.*\)"$/\1/p')
[ -n "$job" ] || fail "StartWipe $dev returned no job"
log "job $job on $dev"
ck=
durable() {
    local f
    for f in /var/lib/mdpilot/wipe/*.json; do
        [ "$(jq -r .device "$f" 2>/dev/null)" = "$dev" ] && ck=$f
    done
    [ -n "$ck" ] && [ "$(jq -r .durable_offset "$ck" 2>/dev/null || echo 0)" -gt 0 ]
}
wait_for 60 durable || fail "no checkpoint with durable bytes in /var/lib/mdpilot/wipe: $(ls -la /var/lib/mdpilot/wipe 2>&1) $(jprop "$job" BytesDone 2>&1)"
done1=$(jprop "$job" BytesDone | cut -d' ' -f2)
total=$(jprop "$job" Bytes | cut -d' ' -f2)
[ "$done1" -lt "$total" ] || fail "the wipe ended before it could be killed ($done1 of $total bytes): make the device larger"
pid0=$(main_pid)
systemctl kill -s KILL mdpilot.service
off=$(jq -r .durable_offset "$ck")
log "killed $pid0 at $done1 of $total bytes; checkpoint $ck durable_offset $off"
info "killed halfway: $done1 of $total bytes done, $off durable in $ck"
assert_eq "$(stat -c %a "$ck")" 600 "checkpoint mode (its random key is private)"
assert_eq "$(jq -r .started_by.service.uid "$ck")" 0 "checkpoint started_by"
# Restart=on-failure brings the service back; it resumes the job from the checkpoint.
wait_for 30 sh -c '[ "$(systemctl is-active mdpilot.service)" = active ] && [ "$(systemctl show -p MainPID --value mdpilot.service)" != '"$pid0"' ]' ||
    fail "the unit did not restart after SIGKILL: $(systemctl show -p ActiveState,SubState,NRestarts mdpilot.service | tr '\n' ' ')"
wait_for 20 name_on_bus || fail "$BUS_NAME not back on the bus"
t0=$(date +%s%N)
resumed() { unit_journal | jq -e -s 'map(.MESSAGE) | any(test("resuming the interrupted random wipe"))' >/dev/null; }
wait_for 30 resumed || fail "the new process did not resume the wipe: $(unit_journal | jq -r .MESSAGE | tail -n 5)"
unit_journal | jq -r 'select(.MESSAGE | test("resuming")) | .MESSAGE'
# (busctl's introspection parser warns about zbus's signal args: stderr dropped.)
jobs=$(busctl --system --list tree "$BUS_NAME" 2>/dev/null | grep "/jobs/" || true)
log "job objects after the restart: $jobs"
job2=$(for j in $jobs; do [ "$(jprop "$j" Device 2>/dev/null)" = "s \"$dev\"" ] && echo "$j"; done | head -1)
[ -n "$job2" ] || fail "no job object on $dev after the restart (jobs: $jobs)"
assert_eq "$(jprop "$job2" Operation)" 's "wipe-random"' "the resumed job's Operation"
# The job's end record, `job N: DEVICE: ...` (its start record is `job N: wiping DEVICE ...`):
# info on success (tracing-journald writes info as PRIORITY 5), warning (4) on failure.
end_records() { unit_journal | jq -c 'select(.JOB != null and (.MESSAGE | test("^job [0-9]+: /")))'; }
finished() { [ -n "$(end_records)" ]; }
wait_for 150 finished || fail "the resumed job did not finish: $(jprop "$job2" BytesDone) of $(jprop "$job2" Bytes)"
rec=$(end_records | head -1)
log "end record: $rec"
[ "$(jq -r .PRIORITY <<<"$rec")" = 5 ] || fail "the resumed job failed: $(jq -r .MESSAGE <<<"$rec")"
case $(jq -r .MESSAGE <<<"$rec") in
    *", verified"*", continued after "*" bytes durable before an interruption"*) ;;
    *) fail "the resumed job's summary says neither verified nor continued: $(jq -r .MESSAGE <<<"$rec")" ;;
esac
info "resumed job completed $((($(date +%s%N) - t0) / 1000000)) ms after the restart: $(jq -r .MESSAGE <<<"$rec")"
[ ! -e "$ck" ] || fail "checkpoint $ck left after the job completed"
# The data, read here: the job's verify compared the whole key stream; no 4 KiB block of zeros
# (the disk's old content, sparse on the host) is left.
python3 - "$dev" <<'PY' || fail "$dev is not wiped through"
import os, sys
zero, bad, n = bytes(4096), 0, 0
fd = os.open(sys.argv[1], os.O_RDONLY)
while True:
    b = os.read(fd, 1 << 20)
    if not b:
        break
    for i in range(0, len(b), 4096):
        n += 1
        bad += b[i:i + 4096] == zero
print(f"{n} blocks of 4 KiB read, {bad} of zeros")
sys.exit(1 if bad or n == 0 else 0)
PY
