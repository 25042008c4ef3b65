#!/usr/bin/python3
"""Storage that stops answering, for tests: a FUSE filesystem (pyfuse3, Debian's python3-pyfuse3)
holding one file, `disk`, whose reads and writes can be made to wait until they are let go.
A loop device over `disk` then behaves like a disk, NFS file, NBD or iSCSI target that stopped
answering: its I/O waits in the kernel, and whatever holds a lock while it waits (a partition
scan holds the device's open mutex) makes every open of the device wait too.

Usage: stallfs.py MOUNTPOINT SIZE_BYTES FILL_BYTE

  MOUNTPOINT  an empty directory; mounted until the filesystem is unmounted (umount)
  SIZE_BYTES  the size of `disk`, held in memory
  FILL_BYTE   every byte of `disk` at start (0-255)

The second file, `ctl`, takes one word per write:
  stall   reads and writes of `disk` from now on wait
  go      every waiting read and write goes on, and later ones are answered at once

Prints to stdout, one line each, flushed: `READY` once mounted, `STALLED read|write` when a
request of `disk` begins to wait (the test's signal that the kernel is waiting for it).
Ends when the filesystem is unmounted. Files are opened with direct_io, so every read of `disk`
reaches this process (no page cache of FUSE answers in its place).
"""

import errno
import os
import stat
import sys

import pyfuse3
import trio

DISK, CTL = pyfuse3.ROOT_INODE + 1, pyfuse3.ROOT_INODE + 2
NAMES = {b"disk": DISK, b"ctl": CTL}


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class StallFs(pyfuse3.Operations):
    def __init__(self, size, fill):
        super().__init__()
        self.data = bytearray([fill]) * size
        self.stalled = False
        self.go = trio.Event()

    async def wait_if_stalled(self, what):
        if self.stalled:
            say("STALLED " + what)
            await self.go.wait()

    async def getattr(self, inode, ctx=None):
        a = pyfuse3.EntryAttributes()
        if inode == pyfuse3.ROOT_INODE:
            a.st_mode, a.st_size, a.st_nlink = stat.S_IFDIR | 0o755, 0, 2
        elif inode == DISK:
            a.st_mode, a.st_size, a.st_nlink = stat.S_IFREG | 0o600, len(self.data), 1
        elif inode == CTL:
            a.st_mode, a.st_size, a.st_nlink = stat.S_IFREG | 0o600, 0, 1
        else:
            raise pyfuse3.FUSEError(errno.ENOENT)
        a.st_ino = inode
        a.st_uid, a.st_gid = os.getuid(), os.getgid()
        a.st_blksize = 4096
        a.st_blocks = (a.st_size + 511) // 512
        a.entry_timeout = a.attr_timeout = 3600
        return a

    async def lookup(self, parent_inode, name, ctx=None):
        if parent_inode != pyfuse3.ROOT_INODE or name not in NAMES:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return await self.getattr(NAMES[name])

    async def opendir(self, inode, ctx):
        if inode != pyfuse3.ROOT_INODE:
            raise pyfuse3.FUSEError(errno.ENOTDIR)
        return inode

    async def readdir(self, fh, start_id, token):
        for i, (name, inode) in enumerate(sorted(NAMES.items())):
            if i < start_id:
                continue
            if not pyfuse3.readdir_reply(token, name, await self.getattr(inode), i + 1):
                break

    async def open(self, inode, flags, ctx):
        if inode not in (DISK, CTL):
            raise pyfuse3.FUSEError(errno.ENOENT)
        return pyfuse3.FileInfo(fh=inode, direct_io=True)

    async def read(self, fh, off, size):
        if fh != DISK:
            word = b"stall\n" if self.stalled else b"go\n"
            return word[off : off + size]
        await self.wait_if_stalled("read")
        return bytes(self.data[off : off + size])

    async def write(self, fh, off, buf):
        if fh == CTL:
            word = buf.decode(errors="replace").strip()
            if word == "stall":
                self.stalled = True
            elif word == "go":
                self.stalled = False
                self.go.set()
                self.go = trio.Event()
            else:
                raise pyfuse3.FUSEError(errno.EINVAL)
            return len(buf)
        await self.wait_if_stalled("write")
        end = min(off + len(buf), len(self.data))
        if off >= end:
            raise pyfuse3.FUSEError(errno.ENOSPC)
        self.data[off:end] = buf[: end - off]
        return end - off

    async def setattr(self, inode, attr, fields, fh, ctx):
        # O_TRUNC of ctl (echo > ctl): nothing to truncate.
        return await self.getattr(inode)

    async def flush(self, fh):
        pass

    async def fsync(self, fh, datasync):
        pass

    async def release(self, fh):
        pass

    async def releasedir(self, fh):
        pass

    async def statfs(self, ctx):
        s = pyfuse3.StatvfsData()
        s.f_bsize = s.f_frsize = 4096
        s.f_blocks = len(self.data) // 4096
        s.f_namemax = 255
        return s


def main():
    mountpoint, size, fill = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    fs = StallFs(size, fill)
    pyfuse3.init(fs, mountpoint, {"fsname=mdpilot-stallfs", "subtype=stallfs"})
    say("READY")
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=False)


if __name__ == "__main__":
    main()
