//! Where the engine writes: a block device, or (in tests) a regular file or a memory buffer.
//!
//! Every method is positional (`pwrite`-like) and takes `&self`, so several worker threads can
//! have requests in flight on one sink.

use super::ioctl;
use std::fs::File;
use std::io::{self, Cursor};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

/// A positional byte store the engine can wipe.
pub trait Sink: Send + Sync {
    /// Writes all of `buf` at `offset`; returns once the write completed (for O_DIRECT: the
    /// device has it).
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Zeroes `[offset, offset + len)` (BLKZEROOUT on devices).
    fn zeroout(&self, offset: u64, len: u64) -> io::Result<()>;
    /// Discards `[offset, offset + len)` (BLKDISCARD on devices).
    fn discard(&self, offset: u64, len: u64) -> io::Result<()>;
    /// For buffered sinks: starts writeback of the range and waits for it; a no-op for O_DIRECT.
    fn settle(&self, offset: u64, len: u64) -> io::Result<()>;
    /// Makes everything written durable (fdatasync: a cache flush on devices).
    fn flush(&self) -> io::Result<()>;
    /// Drops the device's cached pages (BLKFLSBUF on devices), after its members were written
    /// behind its back; a no-op elsewhere.
    fn drop_cache(&self) -> io::Result<()> {
        Ok(())
    }
    /// Re-reads the partition table (BLKRRPART on devices); ENOTTY where there is none.
    fn reread_partitions(&self) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(libc::ENOTTY))
    }
}

fn write_all_at(f: &File, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match f.write_at(buf, offset) {
            // A block device returns 0 (or a short write) at its end: report ENOSPC.
            Ok(0) => return Err(io::Error::from_raw_os_error(libc::ENOSPC)),
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn read_exact_at(f: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match f.read_at(buf, offset) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// An open block device (opened by the engine with the plan's flags).
#[derive(Debug)]
pub struct BlockDevice {
    /// The open device.
    pub file: File,
    /// Opened with O_DIRECT (no `sync_file_range` needed).
    pub direct: bool,
}

impl Sink for BlockDevice {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        write_all_at(&self.file, buf, offset)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        read_exact_at(&self.file, buf, offset)
    }
    fn zeroout(&self, offset: u64, len: u64) -> io::Result<()> {
        ioctl::zeroout(&self.file, offset, len)
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        ioctl::discard(&self.file, offset, len)
    }
    fn settle(&self, offset: u64, len: u64) -> io::Result<()> {
        if self.direct {
            return Ok(());
        }
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        // SAFETY: plain syscall on a valid fd.
        let r = unsafe {
            libc::sync_file_range(self.file.as_raw_fd(), offset as i64, len as i64, flags)
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn reread_partitions(&self) -> io::Result<()> {
        ioctl::reread_partitions(&self.file)
    }
    fn drop_cache(&self) -> io::Result<()> {
        ioctl::flush_buffers(&self.file)
    }
}

/// A regular file (engine tests): zero-out writes zeroes, discard is unsupported.
#[derive(Debug)]
pub struct FileSink(pub File);

impl Sink for FileSink {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        write_all_at(&self.0, buf, offset)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        read_exact_at(&self.0, buf, offset)
    }
    fn zeroout(&self, offset: u64, len: u64) -> io::Result<()> {
        let z = vec![0u8; len.min(1 << 20) as usize];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(z.len() as u64) as usize;
            write_all_at(&self.0, &z[..n], offset + done)?;
            done += n as u64;
        }
        Ok(())
    }
    fn discard(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    }
    fn settle(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.0.sync_data()
    }
}

/// An in-memory device of fixed size (engine unit tests). Writes past the end fail with ENOSPC;
/// `fail_at` makes any request touching that offset fail with EIO (a bad sector).
#[derive(Debug)]
pub struct MemSink {
    /// The bytes.
    pub data: Mutex<Cursor<Vec<u8>>>,
    /// Offset of a simulated bad sector.
    pub fail_at: Option<u64>,
    /// Simulates a driver without BLKZEROOUT/BLKDISCARD (EOPNOTSUPP).
    pub ranges_unsupported: bool,
}

impl MemSink {
    /// `size` bytes of `fill`.
    pub fn new(size: usize, fill: u8) -> Self {
        MemSink {
            data: Mutex::new(Cursor::new(vec![fill; size])),
            fail_at: None,
            ranges_unsupported: false,
        }
    }

    /// A copy of the contents.
    pub fn contents(&self) -> Vec<u8> {
        crate::lock::lock(&self.data).get_ref().clone()
    }

    fn check(&self, offset: u64, len: u64) -> io::Result<()> {
        let size = crate::lock::lock(&self.data).get_ref().len() as u64;
        if let Some(bad) = self.fail_at {
            if bad >= offset && bad < offset + len {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
        }
        if offset + len > size {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }
}

impl Sink for MemSink {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        use std::io::{Seek, SeekFrom, Write};
        self.check(offset, buf.len() as u64)?;
        let mut c = crate::lock::lock(&self.data);
        c.seek(SeekFrom::Start(offset))?;
        c.write_all(buf)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        use std::io::{Read, Seek, SeekFrom};
        self.check(offset, buf.len() as u64)?;
        let mut c = crate::lock::lock(&self.data);
        c.seek(SeekFrom::Start(offset))?;
        c.read_exact(buf)
    }
    fn zeroout(&self, offset: u64, len: u64) -> io::Result<()> {
        if self.ranges_unsupported {
            return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        }
        self.check(offset, len)?;
        let mut c = crate::lock::lock(&self.data);
        c.get_mut()[offset as usize..(offset + len) as usize].fill(0);
        Ok(())
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        // Models a device whose discarded blocks read back as zeroes.
        self.zeroout(offset, len)
    }
    fn settle(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
}
