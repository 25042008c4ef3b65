# A wipe job through the bus opens a data disk for writing under the shipped unit's device policy
# (DevicePolicy=closed, DeviceAllow=block-* rw): a swap signature is gone afterwards.
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
