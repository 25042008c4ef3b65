# The first boot of tests/debian/bench-bitmap: a RAID1 of the two 8 GiB data disks, made in sync
# (--assume-clean: both members are zeros, so it is), with the write-intent bitmap that
# `mdpilot.bitmap=` names (internal or none), then a steady writer on it until the host kills
# qemu: the crash. The writer rewrites the array's first 64 MiB over and over (1 MiB every 50 ms,
# O_DIRECT), as a database or a log ring rewrites its hot blocks: one chunk of mdadm's default
# internal bitmap (64 MiB), so a bitmap has one dirty bit to resync after the crash. A writer
# spread over N chunks would leave N x 64 MiB to resync.
# vm-timeout: 600
need_disks 2
mode=$(arg mdpilot.bitmap) || fail "no mdpilot.bitmap= on the kernel command line"
mdadm --create /dev/md0 --run --quiet --metadata=1.2 --level=1 --raid-devices=2 --assume-clean \
    --bitmap="$mode" "${DISKS[0]}" "${DISKS[1]}" || fail "mdadm --create --bitmap=$mode failed"
udevadm settle --timeout=20 || true
log "md0: consistency_policy $(cat /sys/block/md0/md/consistency_policy), bitmap/location $(cat /sys/block/md0/md/bitmap/location 2>/dev/null || echo none), bitmap/chunksize $(cat /sys/block/md0/md/bitmap/chunksize 2>/dev/null || echo -) bytes, $(cat /sys/block/md0/size) sectors"
echo "@@ARRAY $(cat /sys/block/md0/md/consistency_policy) chunk $(cat /sys/block/md0/md/bitmap/chunksize 2>/dev/null || echo -)"
echo "@@WRITING md0 bitmap=$mode"
# One process, one 1 MiB write every 50 ms (20 MiB/s): md never sees the array idle for its
# safe-mode delay (200 ms), so it stays marked active (dirty) until the crash.
python3 - <<'PY'
import mmap, os, time
fd = os.open("/dev/md0", os.O_WRONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 1 << 20)
buf.write(os.urandom(1 << 20))
i = 0
while True:
    os.pwrite(fd, buf, (i % 64) << 20)
    i += 1
    time.sleep(0.05)
PY
