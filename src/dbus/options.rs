//! Parsing of the `a{sv}` options of the service's methods, one function per method, with the
//! errors the bus sees (`InvalidArgument`, naming the method, the option and what it wants).
//!
//! Limits are KiB/s (`/proc/sys/dev/raid/speed_limit_{min,max}`,
//! `/sys/block/mdN/md/sync_speed_{min,max}`, kernel Documentation/admin-guide/md.rst); `io_depth`
//! is `sync_io_depth`, resync requests in flight (Linux 6.16+, `drivers/md/md.c`).

use super::errors::{Error, Result};
use crate::policy::{LeaseKind, Limits};
use crate::wipe::Method;
use std::collections::{BTreeMap, HashMap};
use zbus::zvariant::{OwnedValue, Value};

/// `a{sv}` options of a method.
pub type Options = HashMap<String, OwnedValue>;

/// The longest word a caller may send where the service expects a name (an array as users
/// type it, a lease id, a holder, a kind, a `sync_action` word), in bytes. Longer ones are
/// `InvalidArgument` before anything else is done with them (polkit is never asked).
pub const MAX_WORD_BYTES: usize = 256;

/// The most `arrays` keys one call may carry, whatever the machine has; the service also
/// refuses more keys than it knows arrays ([`check_array_count`]).
pub const MAX_ARRAY_KEYS: usize = 1024;

/// `s` as an error message may show it: at most 64 characters, `...` when cut.
pub fn shown(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{:?}...", &s[..i]),
        None => format!("{s:?}"),
    }
}

/// Refuses a `what` word longer than [`MAX_WORD_BYTES`] or holding control characters.
///
/// Errors: `InvalidArgument` naming `method` and `what` (not echoing the whole word).
pub fn check_word(method: &str, what: &str, word: &str) -> Result<()> {
    if word.len() > MAX_WORD_BYTES || word.chars().any(char::is_control) {
        return Err(Error::InvalidArgument(format!(
            "{method}: {what} {} is not a name (at most {MAX_WORD_BYTES} bytes, no control characters)",
            shown(word)
        )));
    }
    Ok(())
}

/// The number of keys in the `arrays` option (0 when absent or not a dict), counted without
/// copying the dict.
pub fn array_key_count(opts: &Options) -> usize {
    match opts.get("arrays").map(|v| &**v) {
        Some(Value::Dict(d)) => d.iter().count(),
        _ => 0,
    }
}

/// Refuses an `arrays` option with more keys than the machine has arrays (`known`), or
/// more than [`MAX_ARRAY_KEYS`]: such a call cannot be valid, and its keys would otherwise
/// be resolved and shown to polkit one by one.
///
/// Errors: `InvalidArgument`.
pub fn check_array_count(method: &str, opts: &Options, known: usize) -> Result<()> {
    let n = array_key_count(opts);
    if n > known.min(MAX_ARRAY_KEYS) {
        return Err(Error::InvalidArgument(format!(
            "{method}: arrays names {n} arrays; this machine has {known}"
        )));
    }
    Ok(())
}

/// Rejects every option: `method` takes none yet.
///
/// Errors: `InvalidArgument` naming the first option.
pub fn no_options(method: &str, opts: &Options) -> Result<()> {
    match opts.keys().next() {
        Some(k) => Err(Error::InvalidArgument(format!(
            "{method}: unknown option {}",
            shown(k)
        ))),
        None => Ok(()),
    }
}

/// `RestoreLimits`' options: `defaults` (b, write the kernel defaults instead of the saved
/// originals). Returns `defaults`.
///
/// Errors: `InvalidArgument` for unknown options or a wrong type.
pub fn parse_restore(opts: &Options) -> Result<bool> {
    let mut defaults = false;
    for (k, v) in opts {
        match (k.as_str(), &**v) {
            ("defaults", Value::Bool(b)) => defaults = *b,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "RestoreLimits: unknown option {k:?} or wrong type {}",
                    v.value_signature()
                )))
            }
        }
    }
    Ok(defaults)
}

fn opt_u64(opts: &Options, key: &str) -> Result<Option<u64>> {
    let Some(v) = opts.get(key) else {
        return Ok(None);
    };
    let n = match &**v {
        Value::U64(n) => Some(*n),
        Value::U32(n) => Some(u64::from(*n)),
        Value::U16(n) => Some(u64::from(*n)),
        Value::I64(n) => u64::try_from(*n).ok(),
        Value::I32(n) => u64::try_from(*n).ok(),
        _ => None,
    };
    n.map(Some).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "option {key:?} must be a non-negative integer (KiB/s), got {}",
            v.value_signature()
        ))
    })
}

fn nonzero(v: u64) -> Option<u64> {
    (v != 0).then_some(v)
}

/// Validates a per-array min/max pair in KiB/s (0 = unset); `what` starts the message.
///
/// Errors: `InvalidArgument` when min is above max.
pub fn check_limits(what: &str, min: u64, max: u64) -> Result<Limits> {
    check_present(
        what,
        Limits {
            min: nonzero(min),
            max: nonzero(max),
            io_depth: None,
        },
    )
}

/// Rejects a min above a max (both present).
fn check_present(what: &str, l: Limits) -> Result<Limits> {
    if let (Some(min), Some(max)) = (l.min, l.max) {
        if min > max {
            return Err(Error::InvalidArgument(format!(
                "{what}: min {min} KiB/s is above max {max} KiB/s"
            )));
        }
    }
    Ok(l)
}

/// `AcquirePriority`'s options, parsed (see [`parse_acquire`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquireOptions {
    /// Who holds it (`kind`).
    pub kind: LeaseKind,
    /// Global limits: a `min`/`max` present in the dict is that value, 0 included.
    pub global: Limits,
    /// Per-array limits: a `min`/`max` present in the array's dict is that value, 0 included.
    pub arrays: BTreeMap<String, Limits>,
    /// `holder`: a named lease, not tied to the caller's connection.
    pub holder: Option<String>,
    /// `pid`: the lease lives while that process does.
    pub pid: Option<u32>,
    /// `duration` (t, seconds, > 0): a timed lease, released that long after it is taken
    /// (the expiry is saved in the policy state, so it survives restarts).
    pub duration_s: Option<u64>,
}

fn opt_str(opts: &Options, key: &str) -> Result<Option<String>> {
    match opts.get(key).map(|v| &**v) {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s.to_string())),
        Some(v) => Err(Error::InvalidArgument(format!(
            "AcquirePriority: {key} must be a string, got {}",
            v.value_signature()
        ))),
    }
}

/// Parses `AcquirePriority`'s options.
///
/// - `min`, `max` (t, KiB/s): global `speed_limit_{min,max}`. PRESENT means that value, 0
///   included (`min` 0: resync yields to all other I/O; `max` 0 pauses resync); absent = not
///   set by this lease.
/// - `io_depth` (t, requests): global `sync_io_depth` (Linux 6.16+; 0 is written as 1; never
///   written, and no error, on a kernel without it).
/// - `arrays` (a{sa{sv}}): per-array `sync_speed_{min,max}` and `sync_io_depth`:
///   `{"md0": {"min": t, "max": t, "io_depth": t}}`, each key optional, present = that value, 0 included (the kernel rejects 0 in
///   `sync_speed_{min,max}`; the policy writes a per-array 0 as 1 KiB/s, the slowest md allows).
///   Arrays are named as users type them ([`crate::array_names::resolve_array`]; the caller resolves).
/// - `kind` (s): `client` (default; also `dbus-client`), `installer`, `admin`, `wipe-job`.
/// - `holder` (s): a named lease that outlives the caller's connection (the CLI's form).
/// - `pid` (u): tie the lease to that process instead.
/// - `duration` (t): seconds until the lease is released by itself (0 and more than
///   [`crate::units::MAX_DURATION_S`], 3650 days, are rejected).
///
/// No `min`, `max`, `io_depth` nor `arrays` at all = the install policy: global min `install.0`
/// (the config's `install_min`, default 0) and max `install.1` (`install_max`).
///
/// Errors: `InvalidArgument` for unknown options, wrong types, min above max, pid 0, a
/// duration of 0 or above the bound.
pub fn parse_acquire(opts: &Options, install: (u64, Option<u64>)) -> Result<AcquireOptions> {
    acquire_keys_known(opts)?;
    let mut global = check_present(
        "AcquirePriority",
        Limits {
            min: opt_u64(opts, "min")?,
            max: opt_u64(opts, "max")?,
            io_depth: opt_u64(opts, "io_depth")?,
        },
    )?;
    let kind = acquire_kind(opts)?;
    check_array_count("AcquirePriority", opts, MAX_ARRAY_KEYS)?;
    let arrays = match opts.get("arrays") {
        Some(v) => acquire_arrays(v)?,
        None => BTreeMap::new(),
    };
    if global.is_empty() && arrays.is_empty() {
        global = Limits {
            min: Some(install.0),
            max: install.1,
            io_depth: None,
        };
    }
    let holder = opt_str(opts, "holder")?;
    if let Some(h) = &holder {
        check_holder(h)?;
    }
    let pid = acquire_pid(opts)?;
    let duration_s = opt_u64(opts, "duration")?;
    if duration_s == Some(0) {
        return Err(Error::InvalidArgument(
            "AcquirePriority: duration 0 would end the lease at once".into(),
        ));
    }
    if let Some(d) = duration_s {
        crate::units::bounded_duration(d)
            .map_err(|e| Error::InvalidArgument(format!("AcquirePriority: {e}")))?;
    }
    Ok(AcquireOptions {
        kind,
        global,
        arrays,
        holder,
        pid,
        duration_s,
    })
}

/// AcquirePriority's option keys: `min`, `max`, `io_depth`, `arrays`, `kind`, `holder`,
/// `pid`, `duration`, nothing else.
///
/// Errors: `InvalidArgument` naming the first unknown key (bounded, [`shown`]).
fn acquire_keys_known(opts: &Options) -> Result<()> {
    const KNOWN: &str = "min, max, io_depth, arrays, kind, holder, pid, duration";
    match opts.keys().find(|k| {
        !matches!(
            k.as_str(),
            "min" | "max" | "io_depth" | "arrays" | "kind" | "holder" | "pid" | "duration"
        )
    }) {
        Some(k) => Err(Error::InvalidArgument(format!(
            "AcquirePriority: unknown option {} (known: {KNOWN})",
            shown(k)
        ))),
        None => Ok(()),
    }
}

/// The `kind` option (s): `client` (also `dbus-client`, the default), `installer`, `admin`,
/// `wipe-job`.
///
/// Errors: `InvalidArgument` for another word or type.
fn acquire_kind(opts: &Options) -> Result<LeaseKind> {
    Ok(match opt_str(opts, "kind")?.as_deref() {
        None | Some("client" | "dbus-client") => LeaseKind::DbusClient,
        Some("installer") => LeaseKind::Installer,
        Some("admin") => LeaseKind::Admin,
        Some("wipe-job") => LeaseKind::WipeJob,
        Some(other) => {
            return Err(Error::InvalidArgument(format!(
                "AcquirePriority: kind {} is not client, installer, admin or wipe-job",
                shown(other)
            )))
        }
    })
}

/// The `arrays` option (`a{sa{sv}}`: array as the caller named it -> `{min t, max t, io_depth t}`, at
/// least one of the two), not yet resolved to kernel names.
///
/// Errors: `InvalidArgument` (wrong type, a bad array word, an unknown per-array key, neither
/// min nor max, min above max).
fn acquire_arrays(v: &Value<'_>) -> Result<BTreeMap<String, Limits>> {
    let m: HashMap<String, Options> = v
        .try_clone()
        .ok()
        .and_then(|v| HashMap::try_from(v).ok())
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "AcquirePriority: arrays must be a{{sa{{sv}}}} ({{array: {{min: t, max: t}}}}), got {}",
                v.value_signature()
            ))
        })?;
    let mut arrays = BTreeMap::new();
    for (a, l) in m {
        check_word("AcquirePriority", "array", &a)?;
        let what = format!("AcquirePriority {a}");
        if let Some(k) = l
            .keys()
            .find(|k| !matches!(k.as_str(), "min" | "max" | "io_depth"))
        {
            return Err(Error::InvalidArgument(format!(
                "{what}: unknown per-array option {} (known: min, max, io_depth)",
                shown(k)
            )));
        }
        let l = check_present(
            &what,
            Limits {
                min: opt_u64(&l, "min").map_err(|e| e.context(&what))?,
                max: opt_u64(&l, "max").map_err(|e| e.context(&what))?,
                io_depth: opt_u64(&l, "io_depth").map_err(|e| e.context(&what))?,
            },
        )?;
        if l.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{what}: give a min, a max or an io_depth"
            )));
        }
        arrays.insert(a, l);
    }
    Ok(arrays)
}

/// The `pid` option (u, not 0); `None` when absent.
///
/// Errors: `InvalidArgument` for 0 or another type.
fn acquire_pid(opts: &Options) -> Result<Option<u32>> {
    match opts.get("pid").map(|v| &**v) {
        None => Ok(None),
        Some(Value::U32(0)) => Err(Error::InvalidArgument(
            "AcquirePriority: pid 0 is no process".into(),
        )),
        Some(Value::U32(p)) => Ok(Some(*p)),
        Some(v) => Err(Error::InvalidArgument(format!(
            "AcquirePriority: pid must be u, got {}",
            v.value_signature()
        ))),
    }
}

/// A caller's `holder`: the policy's rule for chosen names ([`crate::policy::Holder::chosen`]:
/// 1-128 printable characters, in none of the reserved schemes).
///
/// Errors: `InvalidArgument` (the name shown bounded, [`shown`]).
pub fn check_holder(h: &str) -> Result<()> {
    if h.is_empty() {
        return Err(Error::InvalidArgument(
            "AcquirePriority: holder is empty".into(),
        ));
    }
    match crate::policy::Holder::chosen(h) {
        Ok(_) => Ok(()),
        Err(crate::policy::CoreError::ReservedHolder { why, .. }) => Err(Error::InvalidArgument(
            format!("AcquirePriority: holder {}: {why}", shown(h)),
        )),
        Err(_) => Err(Error::InvalidArgument(format!(
            "AcquirePriority: holder {} is not 1-128 printable characters",
            shown(h)
        ))),
    }
}

/// The longest device path StartWipe takes, in bytes: `PATH_MAX` (4096, with its NUL), as
/// `open(2)` would refuse a longer one with `ENAMETOOLONG`.
pub const MAX_DEVICE_BYTES: usize = 4095;

/// Refuses a StartWipe `device` that cannot be a path a person should see in a prompt: empty,
/// longer than [`MAX_DEVICE_BYTES`], or holding control characters (a newline would forge a
/// line of the admin's polkit prompt, an escape sequence repaint the terminal).
///
/// Errors: `InvalidArgument` naming `method` and at most 64 characters of the device.
pub fn check_device(method: &str, device: &str) -> Result<()> {
    let why = if device.is_empty() {
        "is empty"
    } else if device.len() > MAX_DEVICE_BYTES {
        "is longer than PATH_MAX"
    } else if device.chars().any(char::is_control) {
        "contains control characters"
    } else {
        return Ok(());
    };
    Err(Error::InvalidArgument(format!(
        "{method}: device {} ({} bytes) {why}",
        shown(device),
        device.len()
    )))
}

/// StartWipe's options as the wipe core takes them: `method` (s: zero (default), random,
/// discard, zeroout, signatures; [`Method::from_name`]), `verify` (b), `keep-resync` (b),
/// `resume` (b: continue the device's checkpoint of an interrupted wipe; its method, key and
/// verify choice win). Every other field of the returned [`crate::wipe::Options`] is its
/// default: the caller adds the bound device, the owner and who started the job.
///
/// Errors: `InvalidArgument` for unknown options, wrong types or an unknown method (naming at
/// most 64 characters of the key or the word).
pub fn parse_start_wipe(opts: &Options) -> Result<(Method, crate::wipe::Options)> {
    let mut method = Method::Zero;
    let mut o = crate::wipe::Options::default();
    for (k, v) in opts {
        match (k.as_str(), &**v) {
            ("method", Value::Str(s)) => {
                method = Method::from_name(s.as_str()).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "StartWipe: method {} is not zero, random, discard, zeroout or signatures",
                        shown(s.as_str())
                    ))
                })?;
            }
            ("verify", Value::Bool(b)) => o.verify = *b,
            ("keep-resync", Value::Bool(b)) => o.keep_resync = *b,
            ("resume", Value::Bool(b)) => o.resume = *b,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "StartWipe: unknown option {} or wrong type {} (known: method s, verify b, keep-resync b, resume b)",
                    shown(k),
                    v.value_signature()
                )))
            }
        }
    }
    Ok((method, o))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(kv: &[(&str, Value<'static>)]) -> Options {
        kv.iter()
            .map(|(k, v)| ((*k).to_string(), OwnedValue::try_from(v.clone()).unwrap()))
            .collect()
    }

    const INSTALL: (u64, Option<u64>) = (0, None);

    #[test]
    fn acquire_options_parse() {
        let o = parse_acquire(
            &opts(&[
                ("min", Value::U64(50_000)),
                ("kind", Value::from("installer")),
            ]),
            INSTALL,
        )
        .unwrap();
        assert_eq!(o.kind, LeaseKind::Installer);
        assert_eq!(o.global.min, Some(50_000));
        assert_eq!(o.global.max, None);
        assert!(o.arrays.is_empty());
        assert_eq!((o.holder, o.pid), (None, None));
    }

    #[test]
    fn present_zero_means_zero_and_absent_means_unset() {
        let o = parse_acquire(&opts(&[("min", Value::U64(0))]), INSTALL).unwrap();
        assert_eq!(
            o.global,
            Limits {
                min: Some(0),
                max: None,
                io_depth: None,
            }
        );
        let o = parse_acquire(&opts(&[("max", Value::U64(0))]), INSTALL).unwrap();
        assert_eq!(
            o.global,
            Limits {
                min: None,
                max: Some(0),
                io_depth: None,
            }
        );
        // min 0 below max 0 is fine; min above max is not.
        parse_acquire(
            &opts(&[("min", Value::U64(0)), ("max", Value::U64(0))]),
            INSTALL,
        )
        .unwrap();
    }

    #[test]
    fn empty_options_are_the_install_policy() {
        let o = parse_acquire(&opts(&[]), (0, None)).unwrap();
        assert_eq!(
            o.global,
            Limits {
                min: Some(0),
                max: None,
                io_depth: None,
            }
        );
        assert_eq!(o.kind, LeaseKind::DbusClient);
        let o = parse_acquire(
            &opts(&[
                ("holder", Value::from("installer")),
                ("pid", Value::U32(42)),
            ]),
            (7, Some(900)),
        )
        .unwrap();
        assert_eq!(
            o.global,
            Limits {
                min: Some(7),
                max: Some(900),
                io_depth: None,
            }
        );
        assert_eq!(o.holder.as_deref(), Some("installer"));
        assert_eq!(o.pid, Some(42));
    }

    #[test]
    fn acquire_rejects_bad_options() {
        for o in [
            opts(&[("bogus", Value::U64(1))]),
            opts(&[("min", Value::from("fast"))]),
            opts(&[("min", Value::U64(9)), ("max", Value::U64(3))]),
            opts(&[("min", Value::I32(-1))]),
            opts(&[("min", Value::U64(1)), ("kind", Value::from("root"))]),
            opts(&[("holder", Value::U64(1))]),
            opts(&[("holder", Value::from(""))]),
            opts(&[("pid", Value::U32(0))]),
            opts(&[("pid", Value::from("1"))]),
        ] {
            assert!(
                matches!(parse_acquire(&o, INSTALL), Err(Error::InvalidArgument(_))),
                "{o:?}"
            );
        }
    }

    fn per_array(kv: &[(&str, &[(&str, u64)])]) -> Value<'static> {
        let m: HashMap<String, HashMap<String, Value<'static>>> = kv
            .iter()
            .map(|(a, l)| {
                (
                    (*a).to_string(),
                    l.iter()
                        .map(|(k, v)| ((*k).to_string(), Value::U64(*v)))
                        .collect(),
                )
            })
            .collect();
        Value::from(m)
    }

    #[test]
    fn acquire_arrays_option() {
        let v = per_array(&[("md1", &[("min", 10), ("max", 20)])]);
        assert_eq!(v.value_signature().to_string(), "a{sa{sv}}");
        let o = parse_acquire(&opts(&[("arrays", v)]), INSTALL).unwrap();
        assert_eq!(
            o.arrays["md1"],
            Limits {
                min: Some(10),
                max: Some(20),
                io_depth: None,
            }
        );
        // An absent key is unset; the global limits stay unset (no install policy then).
        let o = parse_acquire(
            &opts(&[("arrays", per_array(&[("md1", &[("max", 20)])]))]),
            INSTALL,
        )
        .unwrap();
        assert_eq!(o.arrays["md1"].min, None);
        assert!(o.global.is_empty());
        // A per-array max 0 can be sent (and min 0).
        let o = parse_acquire(
            &opts(&[("arrays", per_array(&[("md1", &[("min", 0), ("max", 0)])]))]),
            INSTALL,
        )
        .unwrap();
        assert_eq!(
            o.arrays["md1"],
            Limits {
                min: Some(0),
                max: Some(0),
                io_depth: None,
            }
        );
        for bad in [
            per_array(&[("md1", &[])]),
            per_array(&[("md1", &[("min", 9), ("max", 3)])]),
            per_array(&[("md1", &[("speed", 3)])]),
            Value::from(HashMap::from([("md1".to_string(), (1u64, 2u64))])),
        ] {
            assert!(
                matches!(
                    parse_acquire(&opts(&[("arrays", bad.clone())]), INSTALL),
                    Err(Error::InvalidArgument(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn caller_words_are_bounded_and_holders_namespaced() {
        for h in [
            "check-md0",
            "admin-md0",
            "dbus-1.5-1",
            "wipe:/dev/sda",
            "freeze:md0",
        ] {
            let e = parse_acquire(&opts(&[("holder", Value::from(h))]), INSTALL).unwrap_err();
            assert!(
                matches!(&e, Error::InvalidArgument(m) if m.contains("keeps for its own")),
                "{h}: {e:?}"
            );
        }
        parse_acquire(&opts(&[("holder", Value::from("installer"))]), INSTALL).unwrap();
        let long = "x".repeat(10_000);
        let e = parse_acquire(&opts(&[("kind", Value::from(long.clone()))]), INSTALL).unwrap_err();
        let Error::InvalidArgument(m) = e else {
            panic!()
        };
        assert!(m.len() < 200, "the word is not echoed whole: {}", m.len());
        assert!(check_word("M", "array", &long).is_err());
        assert!(check_word("M", "array", "/dev/md/root").is_ok());
        assert!(check_word("M", "array", "md0\u{7}").is_err());
        let o = opts(&[(
            "arrays",
            per_array(&[("md0", &[("max", 1)]), ("md1", &[("max", 1)])]),
        )]);
        assert_eq!(array_key_count(&o), 2);
        check_array_count("M", &o, 2).unwrap();
        assert!(matches!(
            check_array_count("M", &o, 1),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(shown("abc"), "\"abc\"");
    }

    #[test]
    fn devices_a_prompt_may_show() {
        check_device("M", "/dev/sdb").unwrap();
        check_device("M", &format!("/dev/{}", "x".repeat(MAX_DEVICE_BYTES - 5))).unwrap();
        for d in [
            String::new(),
            format!("/dev/{}", "x".repeat(MAX_DEVICE_BYTES)),
            "/dev/sdb\nApproved".to_string(),
            "/dev/sdb\u{1b}[2K".to_string(),
            "/dev/sdb\u{85}".to_string(),
        ] {
            let e = check_device("StartWipe", &d).unwrap_err();
            assert!(
                matches!(&e, Error::InvalidArgument(m) if m.len() < 200),
                "{e:?}"
            );
        }
    }

    #[test]
    fn start_wipe_options() {
        let (m, o) = parse_start_wipe(&opts(&[])).unwrap();
        assert_eq!(m, Method::Zero);
        assert!(
            !o.verify && !o.keep_resync && !o.resume && o.bound.is_none(),
            "{o:?}"
        );
        let (m, o) = parse_start_wipe(&opts(&[
            ("method", Value::from("random")),
            ("verify", Value::Bool(true)),
            ("keep-resync", Value::Bool(true)),
            ("resume", Value::Bool(true)),
        ]))
        .unwrap();
        assert_eq!(m, Method::Random);
        assert!(o.verify && o.keep_resync && o.resume, "{o:?}");
        for o in [
            opts(&[("method", Value::from("shred"))]),
            opts(&[("method", Value::U32(1))]),
            opts(&[("verify", Value::from("yes"))]),
            opts(&[("bogus", Value::Bool(true))]),
        ] {
            assert!(
                matches!(parse_start_wipe(&o), Err(Error::InvalidArgument(_))),
                "{o:?}"
            );
        }
    }

    #[test]
    fn no_options_and_restore_options() {
        no_options("Cancel", &opts(&[])).unwrap();
        let e = no_options("Cancel", &opts(&[("force", Value::Bool(true))])).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m == "Cancel: unknown option \"force\""),
            "{e:?}"
        );
        assert!(!parse_restore(&opts(&[])).unwrap());
        assert!(parse_restore(&opts(&[("defaults", Value::Bool(true))])).unwrap());
        for o in [
            opts(&[("defaults", Value::U32(1))]),
            opts(&[("bogus", Value::Bool(true))]),
        ] {
            assert!(
                matches!(parse_restore(&o), Err(Error::InvalidArgument(_))),
                "{o:?}"
            );
        }
    }
}
