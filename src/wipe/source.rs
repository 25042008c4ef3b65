//! The data a write job puts on the device and `--verify` expects back: zeroes, the random
//! stream ([`super::stream`]), a small file's content repeated from memory ([`Data::Pattern`]),
//! a large file repeated by `pread` ([`Data::RepeatFile`]) and a stream read in device order
//! ([`Data::Stream`], `blockdev-wipe -f /dev/urandom`).
//!
//! Every filler is addressed by device offset, so worker threads fill their blocks
//! independently; only a stream is read under a lock, in order.

use super::error::WipeError;
use super::plan::{Data, Op};
use super::stream;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Fills `buf` with `content` repeated from device offset 0, starting at device `offset`
/// (zeroes for an empty `content`).
fn fill_pattern(content: &[u8], offset: u64, buf: &mut [u8]) {
    if content.is_empty() {
        buf.fill(0);
        return;
    }
    let mut pos = (offset % content.len() as u64) as usize;
    let mut i = 0;
    while i < buf.len() {
        let n = (content.len() - pos).min(buf.len() - i);
        buf[i..i + n].copy_from_slice(&content[pos..pos + n]);
        i += n;
        pos = 0;
    }
}

/// Fills `buf` with the bytes of a file of `len` bytes repeated from device offset 0, starting
/// at device `offset`: `pread` at `offset % len`, wrapping at the file's end. Thread-safe (no
/// shared file position); memory is only `buf`.
fn fill_repeat(file: &File, len: u64, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    if len == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "data file is empty",
        ));
    }
    let mut pos = offset % len;
    let mut i = 0;
    while i < buf.len() {
        let want = ((len - pos) as usize).min(buf.len() - i);
        let n = file.read_at(&mut buf[i..i + want], pos)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("data file shrank below {len} bytes during the job"),
            ));
        }
        i += n;
        pos = (pos + n as u64) % len;
    }
    Ok(())
}

/// Reads up to `buf.len()` bytes from a stream; fewer only at its end.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The open data sources of a plan's operation: a streamed source (read in device order under
/// a lock, with the count of bytes read so far) and a repeated file (read with `pread`).
pub(super) struct Sources {
    /// The streamed source (`Data::Stream`): its path, and the open file with the bytes read.
    pub(super) stream: Option<(PathBuf, Mutex<(File, u64)>)>,
    /// The repeated file (`Data::RepeatFile`) and its length in bytes.
    pub(super) repeat: Option<(File, u64)>,
}

impl Sources {
    /// No open source (zeroes, the random stream, a pattern in memory).
    pub(super) fn none() -> Sources {
        Sources {
            stream: None,
            repeat: None,
        }
    }

    /// Opens the files `op` reads. Errors: [`WipeError::Open`].
    pub(super) fn open(op: &Op) -> Result<Sources, WipeError> {
        let open = |p: &Path| {
            File::open(p).map_err(|source| WipeError::Open {
                path: p.to_path_buf(),
                source,
            })
        };
        Ok(match op {
            Op::Write(Data::Stream(p)) => Sources {
                stream: Some((p.clone(), Mutex::new((open(p)?, 0)))),
                repeat: None,
            },
            Op::Write(Data::RepeatFile { path, len }) => Sources {
                stream: None,
                repeat: Some((open(path)?, *len)),
            },
            _ => Sources::none(),
        })
    }
}

/// Expected content at `offset` for `op`, into `buf` (verify).
pub(super) fn expected(op: &Op, src: &Sources, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    match (op, &src.repeat) {
        (Op::Write(Data::Random(seed)), _) => stream::fill(seed, offset, buf),
        (Op::Write(Data::Pattern(c)), _) => fill_pattern(c, offset, buf),
        (Op::Write(Data::RepeatFile { .. }), Some((f, len))) => {
            return fill_repeat(f, *len, offset, buf)
        }
        _ => buf.fill(0),
    }
    Ok(())
}

/// Why a write block could not be filled.
pub(super) enum FillError {
    /// Reading the data file or the stream failed: the operation (`read data file`, `read data
    /// source`) and the OS error.
    Io(&'static str, std::io::Error),
    /// The stream ended before the device did, after `source_bytes` bytes in all (not an OS
    /// error: the source is shorter than the device).
    Ended {
        /// Bytes read from the stream before its end.
        source_bytes: u64,
    },
}

/// Fills `buf` with what `data` puts at device `offset` (left as is for [`Data::Zero`]: write
/// buffers start zeroed and are never filled with anything else). `stream` is the locked
/// stream source and its count of bytes read, for [`Data::Stream`] (read in device order).
pub(super) fn fill(
    data: &Data,
    sources: &Sources,
    stream: Option<&mut (File, u64)>,
    offset: u64,
    buf: &mut [u8],
) -> Result<(), FillError> {
    match data {
        Data::Zero => {}
        Data::Random(seed) => stream::fill(seed, offset, buf),
        Data::Pattern(c) => fill_pattern(c, offset, buf),
        Data::RepeatFile { .. } => {
            if let Some((f, flen)) = &sources.repeat {
                fill_repeat(f, *flen, offset, buf)
                    .map_err(|e| FillError::Io("read data file", e))?;
            }
        }
        Data::Stream(_) => {
            if let Some((file, read)) = stream {
                let n = read_full(file, buf).map_err(|e| FillError::Io("read data source", e))?;
                *read += n as u64;
                if n < buf.len() {
                    return Err(FillError::Ended {
                        source_bytes: *read,
                    });
                }
            }
        }
    }
    Ok(())
}
