# The first boot of tests/debian/bench-bitmap: a RAID1 of the two 8 GiB data disks, made in sync
# (--assume-clean: both members are zeros, so it is), with the write-intent bitmap that
# `mdpilot.bitmap=` names (internal or none), then a steady writer on it (1 MiB every 50 ms,
# O_DIRECT, from the start of the array onwards) until the host kills qemu: the crash.
# vm-timeout: 600
need_disks 2
mode=$(arg mdpilot.bitmap) || fail "no mdpilot.bitmap= on the kernel command line"
mdadm --create /dev/md0 --run --quiet --metadata=1.2 --level=1 --raid-devices=2 --assume-clean \
    --bitmap="$mode" "${DISKS[0]}" "${DISKS[1]}" || fail "mdadm --create --bitmap=$mode failed"
udevadm settle --timeout=20 || true
log "md0: consistency_policy $(cat /sys/block/md0/md/consistency_policy), bitmap/location $(cat /sys/block/md0/md/bitmap/location 2>/dev/null || echo none), $(cat /sys/block/md0/size) sectors"
echo "@@WRITING md0 bitmap=$mode"
# One process, one 1 MiB write every 50 ms (20 MiB/s): md never sees the array idle for its
# safe-mode delay (200 ms), so it stays marked active, as under a database or a log.
python3 - <<'PY'
import mmap, os, time
fd = os.open("/dev/md0", os.O_WRONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 1 << 20)
buf.write(os.urandom(1 << 20))
i = 0
while True:
    os.pwrite(fd, buf, (i % 8000) << 20)
    i += 1
    time.sleep(0.05)
PY
