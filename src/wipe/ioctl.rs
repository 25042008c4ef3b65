//! Block-layer ioctls (linux/fs.h): size, block sizes, zero-out and discard.

// nix's ioctl macros generate the raw wrappers; each is described by the comment above it.
#![allow(missing_docs)]

use std::io;
use std::os::fd::AsRawFd;

// BLKGETSIZE64 = _IOR(0x12, 114, size_t): device size in bytes.
nix::ioctl_read!(blkgetsize64, 0x12, 114, u64);
// BLKSSZGET = _IO(0x12, 104): logical block size (int).
nix::ioctl_read_bad!(blksszget, nix::request_code_none!(0x12, 104), libc::c_int);
// BLKPBSZGET = _IO(0x12, 123): physical block size (unsigned int).
nix::ioctl_read_bad!(blkpbszget, nix::request_code_none!(0x12, 123), libc::c_uint);
// BLKDISCARD = _IO(0x12, 119), arg uint64_t[2] = {start, len} in bytes.
nix::ioctl_write_ptr_bad!(blkdiscard, nix::request_code_none!(0x12, 119), [u64; 2]);
// BLKZEROOUT = _IO(0x12, 127), arg uint64_t[2] = {start, len} in bytes.
nix::ioctl_write_ptr_bad!(blkzeroout, nix::request_code_none!(0x12, 127), [u64; 2]);

// BLKRRPART = _IO(0x12, 95): re-read the partition table.
nix::ioctl_none_bad!(blkrrpart, nix::request_code_none!(0x12, 95));
// BLKFLSBUF = _IO(0x12, 97): write back and drop the device's cached pages.
nix::ioctl_none_bad!(blkflsbuf, nix::request_code_none!(0x12, 97));

fn errno(e: nix::errno::Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// Size of the block device in bytes (BLKGETSIZE64).
pub fn size_bytes(f: &impl AsRawFd) -> io::Result<u64> {
    let mut v = 0u64;
    // SAFETY: valid fd and a pointer to a u64, as the ioctl expects.
    unsafe { blkgetsize64(f.as_raw_fd(), &mut v) }.map_err(errno)?;
    Ok(v)
}

/// Logical block size in bytes (BLKSSZGET).
pub fn logical_block_size(f: &impl AsRawFd) -> io::Result<u32> {
    let mut v: libc::c_int = 0;
    // SAFETY: valid fd and a pointer to an int.
    unsafe { blksszget(f.as_raw_fd(), &mut v) }.map_err(errno)?;
    Ok(v as u32)
}

/// Physical block size in bytes (BLKPBSZGET).
pub fn physical_block_size(f: &impl AsRawFd) -> io::Result<u32> {
    let mut v: libc::c_uint = 0;
    // SAFETY: valid fd and a pointer to an unsigned int.
    unsafe { blkpbszget(f.as_raw_fd(), &mut v) }.map_err(errno)?;
    Ok(v)
}

/// Zeroes `len` bytes at `offset` (BLKZEROOUT); returns when the zeroes are written. Both must be
/// multiples of the logical block size (EINVAL otherwise).
pub fn zeroout(f: &impl AsRawFd, offset: u64, len: u64) -> io::Result<()> {
    let range = [offset, len];
    // SAFETY: valid fd and a pointer to two u64.
    unsafe { blkzeroout(f.as_raw_fd(), &range) }.map_err(errno)?;
    Ok(())
}

/// Discards `len` bytes at `offset` (BLKDISCARD). EOPNOTSUPP where the device cannot discard.
pub fn discard(f: &impl AsRawFd, offset: u64, len: u64) -> io::Result<()> {
    let range = [offset, len];
    // SAFETY: valid fd and a pointer to two u64.
    unsafe { blkdiscard(f.as_raw_fd(), &range) }.map_err(errno)?;
    Ok(())
}

/// Re-reads the partition table (BLKRRPART, as wipefs(8) and `blockdev --rereadpt`): the
/// kernel drops partitions no longer in the table. EBUSY when a partition is open; EINVAL on a
/// device that cannot have partitions (a loop device without `LO_FLAGS_PARTSCAN`, a partition).
/// Works on an fd opened `O_EXCL` by the caller (kernel `disk_scan_partitions`).
pub fn reread_partitions(f: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: valid fd, no argument.
    unsafe { blkrrpart(f.as_raw_fd()) }.map_err(errno)?;
    Ok(())
}

/// Writes back and drops the device's cached pages (BLKFLSBUF, `blockdev --flushbufs`).
pub fn flush_buffers(f: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: valid fd, no argument.
    unsafe { blkflsbuf(f.as_raw_fd()) }.map_err(errno)?;
    Ok(())
}
