//! The machine's load as the check throttle and guards read it: the io pressure
//! (`/proc/pressure/io`, Documentation/accounting/psi.rst) and the power source
//! (`/sys/class/power_supply/*`, Documentation/ABI/testing/sysfs-class-power). Parsing is in
//! small pure functions; the readers take a [`Root`].

use crate::host::Root;

/// One reading of `/proc/pressure/io`: the 10-second averages, percent of wall time (0–100),
/// and the cumulative stall counters, microseconds since boot (the kernel's `total=`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IoPressure {
    /// `some avg10`: at least one task stalled on io.
    pub some_avg10: f64,
    /// `full avg10`: every non-idle task stalled on io at once.
    pub full_avg10: f64,
    /// `some total`: microseconds of wall time with at least one task stalled on io.
    pub some_total_us: u64,
    /// `full total`: microseconds of wall time with every non-idle task stalled on io.
    pub full_total_us: u64,
}

/// Why there is no io pressure to read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PsiUnavailable {
    /// The file is missing: a kernel without `CONFIG_PSI`.
    #[error("no /proc/pressure/io (kernel without CONFIG_PSI)")]
    Missing,
    /// Reading failed (`EOPNOTSUPP` when booted with `psi=0`).
    #[error("cannot read /proc/pressure/io: {0} (psi=0 on the kernel command line?)")]
    Read(String),
    /// The text is not the documented form.
    #[error("/proc/pressure/io: unexpected text {0:?}")]
    Parse(String),
}

/// Parses the text of `/proc/pressure/io`:
/// `some avg10=0.08 avg60=0.25 avg300=0.75 total=7227935` and the same for `full`
/// (Documentation/accounting/psi.rst; io always has both lines, and every kernel with PSI
/// prints `total`). An `avg10` outside 0–100 or not finite, or a `total` that is not a whole
/// number of microseconds, is refused. `None`: no `some` and `full` line with a valid `avg10`
/// and `total`.
pub fn parse_io_pressure(text: &str) -> Option<IoPressure> {
    let line = |kind: &str| -> Option<(f64, u64)> {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(kind))?;
        let field = |k: &str| line.split_whitespace().find_map(|f| f.strip_prefix(k));
        let v = field("avg10=")?.parse::<f64>().ok()?;
        let total = field("total=")?.parse::<u64>().ok()?;
        (v.is_finite() && (0.0..=100.0).contains(&v)).then_some((v, total))
    };
    let (some_avg10, some_total_us) = line("some")?;
    let (full_avg10, full_total_us) = line("full")?;
    Some(IoPressure {
        some_avg10,
        full_avg10,
        some_total_us,
        full_total_us,
    })
}

/// Reads `/proc/pressure/io` under `root`.
///
/// Errors: [`PsiUnavailable`] with the reason, shown to the admin as the reason the throttle is
/// fixed.
pub fn read_io_pressure(root: &Root) -> Result<IoPressure, PsiUnavailable> {
    let text = match std::fs::read_to_string(root.proc("pressure/io")) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(PsiUnavailable::Missing),
        Err(e) => return Err(PsiUnavailable::Read(e.to_string())),
    };
    parse_io_pressure(&text).ok_or_else(|| PsiUnavailable::Parse(text.trim().to_string()))
}

/// One entry of `/sys/class/power_supply`: the files the battery rule needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerSupply {
    /// Directory name (`AC`, `BAT0`, `hid-...-battery`).
    pub name: String,
    /// `type`: `Mains`, `Battery`, `USB`, `UPS`, `Wireless`.
    pub kind: String,
    /// `online` (mains, USB): `Some(true)` when it supplies power.
    pub online: Option<bool>,
    /// `scope`: `Device` for the battery of a peripheral (a mouse), which powers nothing else.
    pub scope: Option<String>,
}

/// Whether the machine runs on battery: a system battery is present (`type` `Battery`, not of
/// `scope` `Device`) and no mains, USB or wireless supply is `online` (upower's rule).
/// No supplies at all (servers, VMs): not on battery.
pub fn on_battery(supplies: &[PowerSupply]) -> bool {
    let battery = supplies
        .iter()
        .any(|s| s.kind == "Battery" && s.scope.as_deref() != Some("Device"));
    let line = supplies
        .iter()
        .any(|s| s.kind != "Battery" && s.online == Some(true));
    battery && !line
}

/// The entries of `/sys/class/power_supply` under `root`; none when the class is missing.
pub fn read_power_supplies(root: &Root) -> Vec<PowerSupply> {
    let dir = root.sys("class/power_supply");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<PowerSupply> = entries
        .flatten()
        .map(|e| {
            let p = e.path();
            let text = |f: &str| {
                std::fs::read_to_string(p.join(f))
                    .ok()
                    .map(|t| t.trim().to_string())
            };
            PowerSupply {
                name: e.file_name().to_string_lossy().into_owned(),
                kind: text("type").unwrap_or_default(),
                online: text("online").map(|t| t == "1"),
                scope: text("scope"),
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_pressure_lines() {
        let t = "some avg10=0.08 avg60=0.25 avg300=0.75 total=7227935\n\
                 full avg10=12.50 avg60=0.06 avg300=0.57 total=5666789\n";
        assert_eq!(
            parse_io_pressure(t),
            Some(IoPressure {
                some_avg10: 0.08,
                full_avg10: 12.5,
                some_total_us: 7_227_935,
                full_total_us: 5_666_789,
            })
        );
        assert_eq!(parse_io_pressure("some avg10=1.00 total=1\n"), None);
        assert_eq!(parse_io_pressure(""), None);
        for bad in [
            "some avg10=NaN total=1\nfull avg10=1 total=1\n",
            "some avg10=1 total=1\nfull avg10=101 total=1\n",
            "some avg10=1\nfull avg10=1\n",
            "some avg10=1 total=-5\nfull avg10=1 total=1\n",
            "some avg10=1 total=1.5\nfull avg10=1 total=1\n",
            "some avg10=1 total=1\nfull avg10=1 total=99999999999999999999999\n",
        ] {
            assert_eq!(parse_io_pressure(bad), None, "{bad:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn io_pressure_parser_never_panics(text in "(some|full|avg10=|total=|[0-9. \n-])*") {
            if let Some(p) = parse_io_pressure(&text) {
                proptest::prop_assert!((0.0..=100.0).contains(&p.full_avg10));
                proptest::prop_assert!((0.0..=100.0).contains(&p.some_avg10));
            }
        }
    }

    #[test]
    fn missing_pressure_file_says_why() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        assert_eq!(read_io_pressure(&root), Err(PsiUnavailable::Missing));
        std::fs::create_dir_all(d.path().join("proc/pressure")).unwrap();
        std::fs::write(d.path().join("proc/pressure/io"), "bogus\n").unwrap();
        assert!(matches!(
            read_io_pressure(&root),
            Err(PsiUnavailable::Parse(_))
        ));
    }

    fn ps(name: &str, kind: &str, online: Option<bool>, scope: Option<&str>) -> PowerSupply {
        PowerSupply {
            name: name.into(),
            kind: kind.into(),
            online,
            scope: scope.map(Into::into),
        }
    }

    #[test]
    fn battery_rule() {
        assert!(!on_battery(&[]), "a server has no supplies");
        let bat = ps("BAT0", "Battery", None, None);
        assert!(on_battery(std::slice::from_ref(&bat)));
        assert!(on_battery(&[
            ps("AC", "Mains", Some(false), None),
            bat.clone()
        ]));
        assert!(!on_battery(&[ps("AC", "Mains", Some(true), None), bat]));
        assert!(
            !on_battery(&[ps("hid-mouse", "Battery", None, Some("Device"))]),
            "a mouse's battery powers nothing else"
        );
        assert!(!on_battery(&[ps("AC", "Mains", Some(false), None)]));
    }

    #[test]
    fn power_supplies_are_read_from_the_class() {
        let d = tempfile::tempdir().unwrap();
        for (n, f, v) in [
            ("AC", "type", "Mains"),
            ("AC", "online", "0"),
            ("BAT0", "type", "Battery"),
        ] {
            let p = d.path().join("sys/class/power_supply").join(n);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join(f), format!("{v}\n")).unwrap();
        }
        let s = read_power_supplies(&Root::new(d.path()));
        assert_eq!(s.len(), 2);
        assert!(on_battery(&s));
    }
}
