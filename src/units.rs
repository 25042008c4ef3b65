//! One place for human sizes, rates and durations (binary units: KiB = 1024 bytes).
//!
//! Two byte styles exist on purpose, each kept exactly as its front end has always printed it:
//! [`human_bytes`] (`4 MiB`, `2.73 TiB`: the wipe plan and progress) and [`human_bytes_1dp`]
//! (`64.0 MiB`: `mdpilot status`, like `mdadm --detail`). Durations are printed by
//! [`duration`] in two [`DurationStyle`]s: the wipe ETA (`3m05s`) and the mdstat `finish=` ETA
//! (`12m 06s`, `5d 02h`).

const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// `n / 1024^k` and `k`: the largest unit index `k <= top` with `n >= 1024^k` (0 for `n < 1024`).
fn scale(n: u64, top: usize) -> (f64, usize) {
    let mut unit = 0;
    let mut div = 1u64;
    while unit < top && n / div >= 1024 {
        div *= 1024;
        unit += 1;
    }
    (n as f64 / div as f64, unit)
}

/// `n` bytes in binary units for people: `512 B`, `4 MiB`, `1.5 GiB`, `2.73 TiB` (at most two
/// decimals, trailing zeros dropped; up to PiB). Used by the wipe plan, its reasons and the
/// wipe progress; exact counts are printed next to it where they matter ([`bytes_exact`]).
pub fn human_bytes(n: u64) -> String {
    let (v, unit) = scale(n, 5);
    if unit == 0 {
        return format!("{n} B");
    }
    let v = format!("{v:.2}");
    let v = v.trim_end_matches('0').trim_end_matches('.');
    format!("{v} {}", UNITS[unit])
}

/// `n` bytes in binary units with exactly one decimal: `512 B`, `64.0 MiB`, `5.5 TiB` (up to
/// EiB). Used by `mdpilot status` (array sizes, chunk sizes, resync speeds).
pub fn human_bytes_1dp(n: u64) -> String {
    let (v, unit) = scale(n, 6);
    if unit == 0 {
        return format!("{n} B");
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// `4 MiB (4194304 bytes)`: [`human_bytes`] with the exact count.
pub fn bytes_exact(n: u64) -> String {
    format!("{} ({n} bytes)", human_bytes(n))
}

/// A rate in bytes per second as [`human_bytes`] per second: `123.4 MiB/s` style, `0 B/s`
/// for a negative or NaN rate (fractions of a byte are dropped).
pub fn human_rate(bytes_per_s: f64) -> String {
    format!("{}/s", human_bytes(bytes_per_s as u64))
}

/// How [`duration`] spells a number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurationStyle {
    /// `12s`, `3m05s`, `1h02m` (hours grow without a day unit): the wipe progress bar's ETA.
    Compact,
    /// `42s`, `12m 06s`, `3h 17m`, and `5d 02h` from 48 hours on: `mdpilot status`'s resync
    /// ETA (mdstat's `finish=`).
    Spaced,
}

/// `secs` seconds for people, in `style`: the two most significant units, the second one
/// zero-padded to two digits.
pub fn duration(secs: u64, style: DurationStyle) -> String {
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    match style {
        DurationStyle::Compact => match secs {
            0..=59 => format!("{s}s"),
            60..=3599 => format!("{m}m{s:02}s"),
            _ => format!("{h}h{m:02}m"),
        },
        DurationStyle::Spaced => {
            if h >= 48 {
                format!("{}d {:02}h", h / 24, h % 24)
            } else if h > 0 {
                format!("{h}h {m:02}m")
            } else if m > 0 {
                format!("{m}m {s:02}s")
            } else {
                format!("{s}s")
            }
        }
    }
}

/// A wipe ETA of `s` seconds (f64, as [`crate::wipe::Progress::eta_s`] gives it), rounded up
/// so it never reads `0s` while bytes are left: `12s`, `3m05s`, `1h02m`.
pub fn eta(s: f64) -> String {
    duration(s.max(0.0).ceil() as u64, DurationStyle::Compact)
}

/// Minutes as mdstat's `finish=` gives them (f64), rounded to the second: `42s`, `12m 06s`,
/// `3h 17m`, `5d 02h`; 0 s for a negative, zero or non-finite value.
pub fn minutes(min: f64) -> String {
    let secs = if min.is_finite() && min > 0.0 {
        (min * 60.0).round() as u64
    } else {
        0
    };
    duration(secs, DurationStyle::Spaced)
}

/// The longest duration mdpilot accepts anywhere a caller gives one, seconds: 3650 days
/// (ten years). A timed lease (`AcquirePriority`'s `duration`, `policy apply --for`, a
/// profile's `duration`), a check window (`StartCheck`'s `duration`) and the config's spans
/// (`window`, `random_delay`, `working_hours_length`) are refused above it, so that every end
/// time stays far inside what the state files can hold (TOML integers are i64).
pub const MAX_DURATION_S: u64 = 3650 * 86_400;

/// A duration longer than [`MAX_DURATION_S`], or an end time that does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("duration {0} s is longer than the longest accepted, {max} s (3650 days)", max = MAX_DURATION_S)]
pub struct DurationTooLong(pub u64);

/// `duration_s` itself when it is at most [`MAX_DURATION_S`].
///
/// Errors: [`DurationTooLong`] above it.
pub fn bounded_duration(duration_s: u64) -> Result<u64, DurationTooLong> {
    if duration_s > MAX_DURATION_S {
        return Err(DurationTooLong(duration_s));
    }
    Ok(duration_s)
}

/// The end of a span of `duration_s` seconds that starts at `start_s` (Unix seconds):
/// `start_s + duration_s`, checked.
///
/// Errors: [`DurationTooLong`] when the duration is above [`MAX_DURATION_S`] or the sum
/// overflows.
pub fn end_after(start_s: u64, duration_s: u64) -> Result<u64, DurationTooLong> {
    start_s
        .checked_add(bounded_duration(duration_s)?)
        .ok_or(DurationTooLong(duration_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_byte_styles() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(64 << 20), "64 MiB");
        assert_eq!(human_bytes(3_000_592_982_016), "2.73 TiB");
        assert_eq!(human_bytes(u64::MAX), "16384 PiB");
        assert_eq!(human_bytes_1dp(512), "512 B");
        assert_eq!(human_bytes_1dp(64 << 20), "64.0 MiB");
        assert_eq!(human_bytes_1dp(u64::MAX), "16.0 EiB");
        assert_eq!(human_rate(1.5 * 1048576.0), "1.5 MiB/s");
    }

    #[test]
    fn both_duration_styles() {
        assert_eq!(eta(0.2), "1s");
        assert_eq!(eta(185.0), "3m05s");
        assert_eq!(eta(3720.0), "1h02m");
        assert_eq!(minutes(0.2), "12s");
        assert_eq!(minutes(4.6), "4m 36s");
        assert_eq!(minutes(197.2), "3h 17m");
        assert_eq!(minutes(43200.0), "30d 00h");
        assert_eq!(minutes(f64::NAN), "0s");
    }

    #[test]
    fn durations_are_bounded_and_ends_checked() {
        assert_eq!(bounded_duration(MAX_DURATION_S), Ok(MAX_DURATION_S));
        assert_eq!(
            bounded_duration(MAX_DURATION_S + 1),
            Err(DurationTooLong(MAX_DURATION_S + 1))
        );
        assert_eq!(end_after(10, 5), Ok(15));
        assert!(end_after(10, u64::MAX).is_err());
        assert!(end_after(u64::MAX, 1).is_err());
        assert!(DurationTooLong(u64::MAX)
            .to_string()
            .contains("315360000 s"));
    }
}
