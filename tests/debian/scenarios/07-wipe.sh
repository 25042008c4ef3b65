# A wipe job through the bus opens a data disk for writing under the shipped unit's device policy
# (DevicePolicy=closed, DeviceAllow=block-* rw): a swap signature is gone afterwards. The journal
# has the job's start record natively (tracing-journald) with DEVICE=, UID= and JOB= fields.
# vm-timeout: 60
need_disks 4
name_on_bus || systemctl start mdpilot.service
d=${DISKS[3]}
mkswap -q "$d" >/dev/null
[ "$(blkid -o value -s TYPE "$d")" = swap ] || fail "mkswap left no signature on $d"
job=$(mcall StartWipe 'sa{sv}' "$d" 1 method s signatures | sed -n 's/^o "\(.*\)"$/\1/p')
[ -n "$job" ] || fail "StartWipe $d returned no job"
log "job $job"
gone() { [ -z "$(blkid -o value -s TYPE "$d" 2>/dev/null)" ]; }
wait_for 60 gone || fail "the wipe job left the signature on $d: $(blkid "$d")"
journalctl _SYSTEMD_UNIT=mdpilot.service --no-pager -o cat | tail -n 5
journalctl --sync 2>/dev/null || true
rec=$(journalctl -u mdpilot.service --no-pager -o json |
    jq -c --arg b "${d##*/}" 'select((.DEVICE // "" | endswith($b)) and .JOB != null and .UID != null)' |
    head -n 1)
[ -n "$rec" ] || fail "no journal record of the wipe with DEVICE=$d, UID= and JOB=: $(
    journalctl -u mdpilot.service --no-pager -o json | tail -n 3)"
log "journal record: $rec"
[ "$(jq -r .UID <<<"$rec")" = 0 ] || fail "the wipe record's UID= is not 0 (root called StartWipe): $rec"
[ "$(jq -r .PRIORITY <<<"$rec")" = 5 ] || fail "the wipe record's PRIORITY= is not 5 (info): $rec"
