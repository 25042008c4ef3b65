# The first boot of tests/debian/bench-shutdown: a RAID1 of the two data disks (sparse, made in
# sync with --assume-clean), mdpilot's state directory kept on a disk of its own (serial
# `sd-state`, [keep_state]), and a check started through mdpilot (`mdpilot check start`, md's
# default speed limits; `sd.max=KIBS`: `--max KIBS`, so a small array's check cannot end
# before the poweroff). After `sd.run` seconds of checking the step prints the position mdstat
# shows (`@@CHECK mdpilot <KiB> KiB ...`), then `@@POWEROFF` and runs `systemctl poweroff`:
# the host times from that line to qemu's exit. The step never ends by itself (the poweroff
# ends it).
# vm-timeout: 900
# shellcheck source=shutdown-lib.sh
source "$T/bench/shutdown-lib.sh"
keep_state
install_mdpilot
mdadm --create /dev/md0 --run --quiet --metadata=1.2 --level=1 --raid-devices=2 --assume-clean \
    --bitmap=none "$(data 0)" "$(data 1)" || fail "mdadm --create failed"
udevadm settle --timeout=20 || true
max=$(arg sd.max || true)
started() { mdpilot check start md0 ${max:+--max "$max"} >/tmp/start.txt 2>&1; }
wait_for 30 started || fail "mdpilot check start failed: $(cat /tmp/start.txt)"
sleep "$(arg sd.run || echo 20)"
echo "@@CHECK mdpilot $(position md0) KiB of $(($(cat /sys/block/md0/size) / 2)) KiB, speed $(cat /sys/block/md0/md/sync_speed) KiB/s"
poweroff_now mdpilot
