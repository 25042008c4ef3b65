//! Configuration: TOML drop-in fragments, merged, then defaults applied.
//!
//! Fragments (`*.toml`) are read from `/usr/lib/mdpilot/config.d` (the package's defaults:
//! `dist/usr/lib/mdpilot/config.d/00-mdpilot.toml`), `/run/mdpilot/config.d` and
//! `/etc/mdpilot/config.d` (the admin's), all under the `Root`. A file in a later directory
//! replaces the file of the same name in an earlier one; the remaining files are applied in
//! file-name order, a later value overriding an earlier one. Every key is optional; unknown keys
//! are errors (`deny_unknown_fields`) so typos do not pass silently.

use crate::host::Root;
use crate::policy::PolicySettings;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// Fragment directories, lowest priority first.
pub const CONFIG_DIRS: [&str; 3] = [
    "/usr/lib/mdpilot/config.d",
    "/run/mdpilot/config.d",
    "/etc/mdpilot/config.d",
];

/// The sections `mdpilot serve` reads only at start-up (the policy's settings and profiles,
/// the progress interval, the metrics listener, the event program, auto-resume); a SIGHUP
/// that changes them logs that they take effect at the next start. `[check]` is read at each
/// use and follows a reload at once, except its `state_path`, which the service reads at start
/// only (a running check's record is there).
pub const READ_AT_START: [&str; 6] = ["policy", "profiles", "service", "metrics", "events", "wipe"];

/// Default state file of the policy.
pub const DEFAULT_STATE_PATH: &str = "/run/mdpilot/policy.toml";

/// Errors loading the configuration; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A directory or file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A fragment is not valid TOML or has an unknown key or a wrong type.
    #[error("{path}: {reason}")]
    Parse {
        /// The fragment.
        path: PathBuf,
        /// The parser's message.
        reason: String,
    },
    /// A value is out of range (e.g. a relative `state_path`).
    #[error("{path}: {reason}")]
    Invalid {
        /// The fragment that set it last (or `<defaults>`).
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The merged configuration with defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `[policy]`: resync priority policy.
    pub policy: PolicyConfig,
    /// `[service]`: the D-Bus service.
    pub service: ServiceConfig,
    /// `[wipe]`: wipe jobs.
    pub wipe: WipeConfig,
    /// `[events]`: what the service does with mdadm-style events.
    pub events: EventsConfig,
    /// `[profiles.NAME]`: named priority profiles for `policy apply --profile NAME`.
    pub profiles: BTreeMap<String, Profile>,
    /// `[check]`: checks (scrubs).
    pub check: CheckConfig,
    /// `[metrics]`: the Prometheus endpoint of the service.
    pub metrics: MetricsConfig,
    /// `[resync]`: the pressure throttle of resync and recovery (opt-in).
    pub resync: ResyncConfig,
}

/// `[resync]` settings: the io-pressure throttle of the syncs that restore redundancy, which
/// an admin opts into (without `pressure_target` md's own limits apply, as always).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResyncConfig {
    /// `pressure_target` (`"full 5%..10%"`, as `[check]`'s): drive `md/sync_speed_max` of an
    /// array running one of [`ResyncConfig::actions`] from the io pressure, through the lease
    /// `resync-<array>`; `None` (default): no throttle.
    pub pressure_target: Option<crate::pressure::Target>,
    /// `pressure_floor`: the least limit, KiB/s (default md's 1000; at least 1).
    pub pressure_floor: Option<u64>,
    /// `pressure_ceiling`: the greatest limit, KiB/s (default md's 200000).
    pub pressure_ceiling: Option<u64>,
    /// `actions`: the syncs throttled, by their `/proc/mdstat` word ([`crate::model::SyncKind`]): `resync`
    /// and `recovery` (default both), `reshape` where named. Never `check`/`repair` (the
    /// `[check]` throttle's).
    pub actions: Vec<crate::model::SyncKind>,
}

impl Default for ResyncConfig {
    fn default() -> Self {
        ResyncConfig {
            pressure_target: None,
            pressure_floor: None,
            pressure_ceiling: None,
            actions: vec![
                crate::model::SyncKind::Resync,
                crate::model::SyncKind::Recovery,
            ],
        }
    }
}

impl ResyncConfig {
    /// The throttle's settings; `None` without `pressure_target` (the opt-in). The ceiling is
    /// never below the floor; both KiB/s, at least 1.
    pub fn pressure_tuning(&self) -> Option<crate::pressure::Tuning> {
        use crate::pressure::{DEFAULT_CEILING_KIB_S, DEFAULT_FLOOR_KIB_S};
        let target = self.pressure_target?;
        let floor = self.pressure_floor.unwrap_or(DEFAULT_FLOOR_KIB_S).max(1);
        let ceiling = self.pressure_ceiling.unwrap_or(DEFAULT_CEILING_KIB_S);
        Some(crate::pressure::Tuning {
            target,
            floor_kib_s: floor,
            ceiling_kib_s: ceiling.max(floor),
        })
    }
}

/// Default file of the saved check positions and results (survives reboots).
pub const DEFAULT_CHECK_STATE_PATH: &str = "/var/lib/mdpilot/checks.toml";

/// `[check]` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckConfig {
    /// `state_path`: absolute path of the positions/results file (default
    /// `/var/lib/mdpilot/checks.toml`), resolved under the root.
    pub state_path: PathBuf,
    /// `check_max`: the array's `sync_speed_max` during a check, KiB/s, through a lease
    /// (`check-<array>`); `None` (default): no throttle unless `--max` is given.
    pub check_max: Option<u64>,
    /// `check_max_working` with `working_hours` (a calendar of band starts, default
    /// `Mon..Fri *-*-* 08:00:00`) and `working_hours_length` (default `10h`): a second
    /// `check_max` that applies inside working hours (local time). `None` (default): one value.
    pub working: Option<WorkingMax>,
    /// `schedule` and the keys around it: the service's check windows (see
    /// [`crate::schedule`]); `None` (default): no scheduled checks.
    pub schedule: Option<crate::schedule::Schedule>,
    /// `pressure_target` (`"full 5%..10%"`): drive the check's `sync_speed_max` from the io
    /// pressure ([`crate::pressure`]); `None` (default): the fixed `check_max`.
    pub pressure_target: Option<crate::pressure::Target>,
    /// `pressure_floor`: the throttle's least limit, KiB/s (default md's 1000).
    pub pressure_floor: Option<u64>,
    /// `pressure_ceiling`: the throttle's greatest limit, KiB/s (default `check_max`, else
    /// md's 200000).
    pub pressure_ceiling: Option<u64>,
}

/// The working-hours throttle of checks ([`CheckConfig::working`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkingMax {
    /// `sync_speed_max` during a check inside working hours, KiB/s (at least 1).
    pub max: u64,
    /// The working hours.
    pub band: crate::schedule::Band,
}

impl CheckConfig {
    /// The configured check throttle at `now` (Unix seconds, wall clock `utc_offset_s` east of
    /// UTC): `check_max_working` inside working hours, else `check_max` (KiB/s; `None`: none).
    pub fn check_max_at(&self, now: i64, utc_offset_s: i64) -> Option<u64> {
        match &self.working {
            Some(w) if w.band.contains(now, utc_offset_s) => Some(w.max),
            _ => self.check_max,
        }
    }

    /// The pressure throttle's settings at `now` ([`CheckConfig::check_max_at`] is the
    /// default ceiling, so working hours lower it); `None` without `pressure_target`. The
    /// ceiling is never below the floor.
    pub fn pressure_tuning(&self, now: i64, utc_offset_s: i64) -> Option<crate::pressure::Tuning> {
        use crate::pressure::{DEFAULT_CEILING_KIB_S, DEFAULT_FLOOR_KIB_S};
        let target = self.pressure_target?;
        let floor = self.pressure_floor.unwrap_or(DEFAULT_FLOOR_KIB_S).max(1);
        let ceiling = match (&self.working, self.pressure_ceiling) {
            (Some(w), _) if w.band.contains(now, utc_offset_s) => w.max,
            (_, Some(c)) => c,
            _ => self.check_max.unwrap_or(DEFAULT_CEILING_KIB_S),
        };
        Some(crate::pressure::Tuning {
            target,
            floor_kib_s: floor,
            ceiling_kib_s: ceiling.max(floor),
        })
    }
}

/// A named priority profile (`[profiles.boost] min = 50000` with `io_depth = 128`,
/// `[profiles.quiet] max = 5000` with `io_depth = 1`): the limits a `policy apply --profile
/// NAME` lease asks for (KiB/s, and the resync I/O depth in requests), and its default duration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    /// `min`: wanted minimum resync speed, KiB/s.
    pub min: Option<u64>,
    /// `max`: wanted maximum resync speed, KiB/s.
    pub max: Option<u64>,
    /// `io_depth`: wanted `sync_io_depth`, resync requests in flight while the array is busy
    /// (Linux 6.16+; kernel default 32; not written on older kernels).
    pub io_depth: Option<u64>,
    /// `duration` (`"1h"`, `"30min"`): how long the lease lasts when `--for` is not given, in
    /// seconds; `None`: until released.
    pub duration_s: Option<u64>,
}

/// `[events]` settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventsConfig {
    /// `program`: run for each event as `PROGRAM EVENT /dev/mdN [/dev/MEMBER]`, like
    /// `mdadm --monitor --program` (default: none). Absolute path, resolved on the host (not
    /// under the root: it is a program, not a kernel file).
    pub program: Option<PathBuf>,
}

/// `[metrics]` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `listen`: where `mdpilot serve` answers `GET /metrics` (default: off).
    pub listen: Option<MetricsListen>,
    /// `socket_mode`: permission bits of a `unix:` socket (default `0660`: owner and group).
    pub socket_mode: u32,
    /// `socket_group`: group (name or number) of a `unix:` socket, the scraper's (default:
    /// the service's own group, root).
    pub socket_group: Option<String>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            listen: None,
            socket_mode: 0o660,
            socket_group: None,
        }
    }
}

/// Where the metrics listener listens, as written in `[metrics] listen` and `serve --metrics`:
/// `ADDR:PORT` (TCP, `127.0.0.1:9163`, `[::1]:9163`) or `unix:PATH` (a Unix stream socket at the
/// absolute `PATH`, on the host, not under the root). Parse errors name the two forms.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum MetricsListen {
    /// A TCP address: anyone who can reach it can scrape (on loopback: every local user).
    Tcp(std::net::SocketAddr),
    /// A Unix socket path: who may connect is decided by its mode and group.
    Unix(PathBuf),
}

impl std::str::FromStr for MetricsListen {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            let p = PathBuf::from(p);
            return if p.is_absolute() && p.file_name().is_some() {
                Ok(MetricsListen::Unix(p))
            } else {
                Err(format!("{s:?}: unix:PATH needs an absolute path to a file"))
            };
        }
        s.parse().map(MetricsListen::Tcp).map_err(|_| {
            format!("{s:?} is neither ADDR:PORT (127.0.0.1:9163) nor unix:/ABSOLUTE/PATH")
        })
    }
}

impl TryFrom<String> for MetricsListen {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl std::fmt::Display for MetricsListen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetricsListen::Tcp(a) => write!(f, "{a}"),
            MetricsListen::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// `[policy]` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyConfig {
    /// `install_min`: global `speed_limit_min` of the install policy, KiB/s (default 0).
    pub install_min: u64,
    /// `install_max`: global `speed_limit_max` of the install policy, KiB/s (default: untouched).
    pub install_max: Option<u64>,
    /// `state_path`: absolute path of the state file (default `/run/mdpilot/policy.toml`),
    /// resolved under the root.
    pub state_path: PathBuf,
}

/// `[service]` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceConfig {
    /// `progress_interval_ms`: how often progress properties are refreshed, ms (default 1000).
    pub progress_interval_ms: u64,
}

/// `[wipe]` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WipeConfig {
    /// `auto_resume`: when `mdpilot serve` starts, continue the wipe jobs it ran whose durable
    /// checkpoints (`/var/lib/mdpilot/wipe`) survived a crash, kill or reboot (default true).
    pub auto_resume: bool,
}

impl Default for WipeConfig {
    fn default() -> Self {
        WipeConfig { auto_resume: true }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            policy: PolicyConfig {
                install_min: 0,
                install_max: None,
                state_path: PathBuf::from(DEFAULT_STATE_PATH),
            },
            service: ServiceConfig {
                progress_interval_ms: 1000,
            },
            wipe: WipeConfig::default(),
            events: EventsConfig::default(),
            profiles: BTreeMap::new(),
            check: CheckConfig {
                state_path: PathBuf::from(DEFAULT_CHECK_STATE_PATH),
                check_max: None,
                working: None,
                schedule: None,
                pressure_target: None,
                pressure_floor: None,
                pressure_ceiling: None,
            },
            metrics: MetricsConfig::default(),
            resync: ResyncConfig::default(),
        }
    }
}

/// One TOML fragment as written: every key optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFragment {
    /// `[policy]`.
    pub policy: Option<PolicyFragment>,
    /// `[service]`.
    pub service: Option<ServiceFragment>,
    /// `[wipe]`.
    pub wipe: Option<WipeFragment>,
    /// `[events]`.
    pub events: Option<EventsFragment>,
    /// `[profiles.NAME]`: a later fragment's profile replaces an earlier one of that name.
    pub profiles: Option<BTreeMap<String, ProfileFragment>>,
    /// `[check]`.
    pub check: Option<CheckFragment>,
    /// `[metrics]`.
    pub metrics: Option<MetricsFragment>,
    /// `[resync]`.
    pub resync: Option<ResyncFragment>,
}

/// `[resync]` of a fragment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResyncFragment {
    /// See [`ResyncConfig::pressure_target`] (`"full 5%..10%"`).
    pub pressure_target: Option<String>,
    /// See [`ResyncConfig::pressure_floor`], KiB/s.
    pub pressure_floor: Option<u64>,
    /// See [`ResyncConfig::pressure_ceiling`], KiB/s.
    pub pressure_ceiling: Option<u64>,
    /// See [`ResyncConfig::actions`]: `["resync", "recovery"]`, optionally `"reshape"`.
    pub actions: Option<Vec<String>>,
}

/// `[check]` of a fragment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckFragment {
    /// See [`CheckConfig::state_path`].
    pub state_path: Option<PathBuf>,
    /// See [`CheckConfig::check_max`].
    pub check_max: Option<u64>,
    /// See [`CheckConfig::working`]: KiB/s inside working hours.
    pub check_max_working: Option<u64>,
    /// Calendar of working-hours starts (default `"Mon..Fri *-*-* 08:00:00"`).
    pub working_hours: Option<String>,
    /// Length of working hours (default `"10h"`).
    pub working_hours_length: Option<String>,
    /// Calendar of cycle starts (`"Sun *-*-1..7 01:00"`); enables the schedule.
    pub schedule: Option<String>,
    /// Calendar of continuation windows within a cycle (`"*-*-* 01:00"`).
    #[serde(rename = "continue")]
    pub continue_: Option<String>,
    /// Window length (`"6h"`, default).
    pub window: Option<String>,
    /// Upper bound of the per-machine start delay (`"24h"`; default none).
    pub random_delay: Option<String>,
    /// Only these arrays (names or UUIDs).
    pub include: Option<Vec<String>>,
    /// Never these arrays (names or UUIDs).
    pub skip: Option<Vec<String>>,
    /// Skip arrays younger than this many days (default 14).
    pub min_age_days: Option<u64>,
    /// At most this many checks at once (default 1).
    pub max_concurrent: Option<usize>,
    /// See [`CheckConfig::pressure_target`] (`"full 5%..10%"`).
    pub pressure_target: Option<String>,
    /// See [`CheckConfig::pressure_floor`], KiB/s.
    pub pressure_floor: Option<u64>,
    /// See [`CheckConfig::pressure_ceiling`], KiB/s.
    pub pressure_ceiling: Option<u64>,
}

/// `[profiles.NAME]` of a fragment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileFragment {
    /// See [`Profile::min`].
    pub min: Option<u64>,
    /// See [`Profile::max`].
    pub max: Option<u64>,
    /// See [`Profile::io_depth`].
    pub io_depth: Option<u64>,
    /// See [`Profile::duration_s`]; systemd-style span (`90s`, `30min`, `2h`, `1d`).
    pub duration: Option<String>,
}

/// `[events]` of a fragment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsFragment {
    /// See [`EventsConfig::program`].
    pub program: Option<PathBuf>,
}

/// `[metrics]` of a fragment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsFragment {
    /// See [`MetricsConfig::listen`] (`"127.0.0.1:9163"`, `"[::1]:9163"`,
    /// `"unix:/run/mdpilot/metrics.sock"`).
    pub listen: Option<MetricsListen>,
    /// See [`MetricsConfig::socket_mode`]: octal digits as a string (`"0660"`), at most `0777`.
    pub socket_mode: Option<String>,
    /// See [`MetricsConfig::socket_group`] (`"prometheus"`).
    pub socket_group: Option<String>,
}

/// `[policy]` of a fragment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFragment {
    /// See [`PolicyConfig::install_min`].
    pub install_min: Option<u64>,
    /// See [`PolicyConfig::install_max`].
    pub install_max: Option<u64>,
    /// See [`PolicyConfig::state_path`].
    pub state_path: Option<PathBuf>,
}

/// `[service]` of a fragment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceFragment {
    /// See [`ServiceConfig::progress_interval_ms`].
    pub progress_interval_ms: Option<u64>,
}

/// `[wipe]` of a fragment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WipeFragment {
    /// See [`WipeConfig::auto_resume`].
    pub auto_resume: Option<bool>,
}

/// Applies the schedule keys of `c` over `cur` (a schedule exists once `schedule` was given).
/// `check_max_working`, `working_hours`, `working_hours_length` of one fragment over `cur`.
fn apply_working(cur: &mut Option<WorkingMax>, c: &CheckFragment) -> Result<(), String> {
    use crate::schedule::{parse_duration, Band, Calendar};
    let has_band_keys = c.working_hours.is_some() || c.working_hours_length.is_some();
    let Some(max) = c.check_max_working.or(cur.as_ref().map(|w| w.max)) else {
        return if has_band_keys {
            Err("working_hours without check_max_working".into())
        } else {
            Ok(())
        };
    };
    let mut band = match cur.take() {
        Some(w) => w.band,
        None => Band {
            start: "Mon..Fri *-*-* 08:00:00"
                .parse()
                .map_err(|e: crate::schedule::ScheduleError| e.to_string())?,
            length_s: 10 * 3600,
        },
    };
    if let Some(t) = &c.working_hours {
        band.start = t
            .parse::<Calendar>()
            .map_err(|e| format!("working_hours: {e}"))?;
    }
    if let Some(t) = &c.working_hours_length {
        band.length_s = match parse_duration(t) {
            Ok(0) => return Err("working_hours_length 0".into()),
            Ok(s) => s,
            Err(e) => return Err(format!("working_hours_length: {e}")),
        };
    }
    *cur = Some(WorkingMax {
        max: max.max(1),
        band,
    });
    Ok(())
}

fn apply_schedule(
    cur: &mut Option<crate::schedule::Schedule>,
    c: &CheckFragment,
) -> Result<(), String> {
    use crate::schedule::{parse_duration, Calendar, Schedule};
    if let Some(s) = &c.schedule {
        let start: Calendar = s
            .parse()
            .map_err(|e: crate::schedule::ScheduleError| e.to_string())?;
        let base = cur.take().map(|old| Schedule {
            start: start.clone(),
            ..old
        });
        *cur = Some(base.unwrap_or_else(|| Schedule::new(start, None)));
    }
    let has_keys = c.continue_.is_some()
        || c.window.is_some()
        || c.random_delay.is_some()
        || c.include.is_some()
        || c.skip.is_some()
        || c.min_age_days.is_some()
        || c.max_concurrent.is_some();
    let Some(s) = cur.as_mut() else {
        return if has_keys {
            Err("schedule keys without `schedule`".into())
        } else {
            Ok(())
        };
    };
    let dur = |t: &str| parse_duration(t).map_err(|e| e.to_string());
    if let Some(t) = &c.continue_ {
        s.cont = Some(
            t.parse()
                .map_err(|e: crate::schedule::ScheduleError| e.to_string())?,
        );
    }
    if let Some(t) = &c.window {
        s.window_s = dur(t)?;
        if s.window_s == 0 {
            return Err("window 0".into());
        }
    }
    if let Some(t) = &c.random_delay {
        s.random_delay_s = dur(t)?;
    }
    if let Some(v) = &c.include {
        s.include = v.clone();
    }
    if let Some(v) = &c.skip {
        s.skip = v.clone();
    }
    if let Some(v) = c.min_age_days {
        s.min_age_days = v;
    }
    if let Some(v) = c.max_concurrent {
        if v == 0 {
            return Err("max_concurrent 0".into());
        }
        s.max_concurrent = v;
    }
    Ok(())
}

impl ConfigFragment {
    /// Parses one fragment's text; `path` only names it in errors.
    ///
    /// # Errors
    /// [`ConfigError::Parse`]: bad TOML, unknown key, wrong type.
    pub fn parse(text: &str, path: &Path) -> Result<ConfigFragment, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            reason: e.message().to_string(),
        })
    }
}

impl Config {
    /// The names of the sections (`policy`, `profiles`, `check`, `events`, `metrics`,
    /// `service`, `wipe`, `resync`) whose values differ between `self` and `new`, in that order.
    pub fn changed_sections(&self, new: &Config) -> Vec<&'static str> {
        [
            ("policy", self.policy != new.policy),
            ("profiles", self.profiles != new.profiles),
            ("check", self.check != new.check),
            ("events", self.events != new.events),
            ("metrics", self.metrics != new.metrics),
            ("service", self.service != new.service),
            ("wipe", self.wipe != new.wipe),
            ("resync", self.resync != new.resync),
        ]
        .into_iter()
        .filter_map(|(name, differs)| differs.then_some(name))
        .collect()
    }

    /// `[metrics]` of `frag` (from `path`) over these settings. Errors:
    /// [`ConfigError::Invalid`] for a `socket_mode` that is not octal up to `0777`.
    fn apply_metrics(&mut self, m: &MetricsFragment, path: &Path) -> Result<(), ConfigError> {
        if let Some(v) = &m.listen {
            self.metrics.listen = Some(v.clone());
        }
        if let Some(v) = &m.socket_mode {
            self.metrics.socket_mode = u32::from_str_radix(v, 8)
                .ok()
                .filter(|&b| b <= 0o777)
                .ok_or_else(|| ConfigError::Invalid {
                    path: path.to_path_buf(),
                    reason: format!("metrics.socket_mode {v:?} must be octal, 0000 to 0777"),
                })?;
        }
        if let Some(v) = &m.socket_group {
            self.metrics.socket_group = Some(v.clone());
        }
        Ok(())
    }

    /// Applies `frag` (from `path`) over `self`: set keys override.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`]: relative `state_path` or `events.program`, zero
    /// `progress_interval_ms`.
    pub fn apply(&mut self, frag: &ConfigFragment, path: &Path) -> Result<(), ConfigError> {
        if let Some(p) = &frag.policy {
            self.apply_policy(p, path)?;
        }
        self.apply_profiles(frag, path)?;
        if let Some(c) = &frag.check {
            self.apply_check(c, path)?;
        }
        if let Some(r) = &frag.resync {
            self.apply_resync(r, path)?;
        }
        if let Some(ev) = &frag.events {
            if let Some(v) = &ev.program {
                if !v.is_absolute() {
                    return Err(ConfigError::Invalid {
                        path: path.to_path_buf(),
                        reason: format!("events.program {} must be an absolute path", v.display()),
                    });
                }
                self.events.program = Some(v.clone());
            }
        }
        if let Some(m) = &frag.metrics {
            self.apply_metrics(m, path)?;
        }
        if let Some(v) = frag.wipe.as_ref().and_then(|w| w.auto_resume) {
            self.wipe.auto_resume = v;
        }
        if let Some(s) = &frag.service {
            if let Some(v) = s.progress_interval_ms {
                if v == 0 {
                    return Err(ConfigError::Invalid {
                        path: path.to_path_buf(),
                        reason: "service.progress_interval_ms must be at least 1".into(),
                    });
                }
                self.service.progress_interval_ms = v;
            }
        }
        Ok(())
    }

    /// `[policy]` of a fragment from `path`. Errors: a relative `state_path`.
    fn apply_policy(&mut self, p: &PolicyFragment, path: &Path) -> Result<(), ConfigError> {
        if let Some(v) = p.install_min {
            self.policy.install_min = v;
        }
        if let Some(v) = p.install_max {
            self.policy.install_max = Some(v);
        }
        if let Some(v) = &p.state_path {
            if !v.is_absolute() || v.file_name().is_none() {
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    reason: format!(
                        "policy.state_path {} must be an absolute file path",
                        v.display()
                    ),
                });
            }
            self.policy.state_path = v.clone();
        }
        Ok(())
    }

    /// `[profiles.*]` of `frag` from `path`, each replacing the profile of that name.
    /// Errors: neither min nor max, min above max, a zero or unparsable duration.
    fn apply_profiles(&mut self, frag: &ConfigFragment, path: &Path) -> Result<(), ConfigError> {
        for (name, p) in frag.profiles.iter().flatten() {
            let bad = |reason: String| ConfigError::Invalid {
                path: path.to_path_buf(),
                reason: format!("profiles.{name}: {reason}"),
            };
            if p.min.is_none() && p.max.is_none() && p.io_depth.is_none() {
                return Err(bad("give min or max (KiB/s), or io_depth".into()));
            }
            if let (Some(a), Some(b)) = (p.min, p.max) {
                if a > b {
                    return Err(bad(format!("min {a} is above max {b}")));
                }
            }
            let duration_s = match &p.duration {
                None => None,
                Some(d) => match crate::schedule::parse_duration(d) {
                    Ok(0) => return Err(bad("duration 0".into())),
                    Ok(s) => Some(s),
                    Err(e) => return Err(bad(e.to_string())),
                },
            };
            self.profiles.insert(
                name.clone(),
                Profile {
                    min: p.min,
                    max: p.max,
                    io_depth: p.io_depth,
                    duration_s,
                },
            );
        }
        Ok(())
    }

    /// `[check]` of a fragment from `path`. Errors: a relative `state_path`, a bad working
    /// window or schedule.
    fn apply_check(&mut self, c: &CheckFragment, path: &Path) -> Result<(), ConfigError> {
        if let Some(v) = &c.state_path {
            if !v.is_absolute() || v.file_name().is_none() {
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    reason: format!(
                        "check.state_path {} must be an absolute file path",
                        v.display()
                    ),
                });
            }
            self.check.state_path = v.clone();
        }
        if let Some(v) = c.check_max {
            self.check.check_max = Some(v.max(1));
        }
        if let Some(t) = &c.pressure_target {
            self.check.pressure_target =
                Some(t.parse().map_err(|reason| ConfigError::Invalid {
                    path: path.to_path_buf(),
                    reason: format!("check.pressure_target: {reason}"),
                })?);
        }
        if let Some(v) = c.pressure_floor {
            self.check.pressure_floor = Some(v.max(1));
        }
        if let Some(v) = c.pressure_ceiling {
            self.check.pressure_ceiling = Some(v.max(1));
        }
        apply_working(&mut self.check.working, c).map_err(|reason| ConfigError::Invalid {
            path: path.to_path_buf(),
            reason: format!("check: {reason}"),
        })?;
        apply_schedule(&mut self.check.schedule, c).map_err(|reason| ConfigError::Invalid {
            path: path.to_path_buf(),
            reason: format!("check: {reason}"),
        })?;
        Ok(())
    }

    /// `[resync]` of a fragment from `path`. Errors ([`ConfigError::Invalid`], naming the
    /// key): a bad `pressure_target`, an empty `actions` or one naming anything but `resync`,
    /// `recovery` and `reshape`.
    fn apply_resync(&mut self, r: &ResyncFragment, path: &Path) -> Result<(), ConfigError> {
        use crate::model::SyncKind;
        let bad = |reason: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            reason,
        };
        if let Some(t) = &r.pressure_target {
            self.resync.pressure_target = Some(
                t.parse()
                    .map_err(|e| bad(format!("resync.pressure_target: {e}")))?,
            );
        }
        if let Some(v) = r.pressure_floor {
            self.resync.pressure_floor = Some(v.max(1));
        }
        if let Some(v) = r.pressure_ceiling {
            self.resync.pressure_ceiling = Some(v.max(1));
        }
        if let Some(words) = &r.actions {
            let mut kinds = Vec::new();
            for w in words {
                let k = SyncKind::from(w.as_str());
                if !matches!(k, SyncKind::Resync | SyncKind::Recovery | SyncKind::Reshape) {
                    return Err(bad(format!(
                        "resync.actions: {w:?} is not one of \"resync\", \"recovery\", \"reshape\" (checks and repairs follow [check] pressure_target)"
                    )));
                }
                if !kinds.contains(&k) {
                    kinds.push(k);
                }
            }
            if kinds.is_empty() {
                return Err(bad(
                    "resync.actions is empty (leave pressure_target unset to throttle nothing)"
                        .into(),
                ));
            }
            self.resync.actions = kinds;
        }
        Ok(())
    }

    /// Loads the fragments under `root` (see the module doc) over the defaults. Missing
    /// directories are fine.
    ///
    /// # Errors
    /// [`ConfigError::Read`] for an unreadable directory or file, else as
    /// [`ConfigFragment::parse`] and [`Config::apply`]; all name the file.
    pub fn load(root: &Root) -> Result<Config, ConfigError> {
        let mut files: BTreeMap<std::ffi::OsString, PathBuf> = BTreeMap::new();
        for dir in CONFIG_DIRS {
            let dir = root.path(dir);
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e)
                    if e.kind() == io::ErrorKind::NotFound
                        || e.raw_os_error() == Some(libc::ENOTDIR) =>
                {
                    continue
                }
                Err(source) => return Err(ConfigError::Read { path: dir, source }),
            };
            for e in entries {
                let e = e.map_err(|source| ConfigError::Read {
                    path: dir.clone(),
                    source,
                })?;
                let name = e.file_name();
                if Path::new(&name).extension().is_some_and(|x| x == "toml") {
                    files.insert(name, e.path());
                }
            }
        }
        let mut config = Config::default();
        for path in files.values() {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.clone(),
                source,
            })?;
            config.apply(&ConfigFragment::parse(&text, path)?, path)?;
        }
        Ok(config)
    }

    /// The policy adapter's settings, with `state_path` resolved under `root`.
    pub fn policy_settings(&self, root: &Root) -> PolicySettings {
        PolicySettings {
            state_path: root.path(&self.policy.state_path),
            install_min: self.policy.install_min,
            install_max: self.policy.install_max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const SHIPPED: &str = include_str!("../dist/usr/lib/mdpilot/config.d/00-mdpilot.toml");

    #[test]
    fn shipped_file_parses_and_documents_the_defaults() {
        let p = Path::new("dist/usr/lib/mdpilot/config.d/00-mdpilot.toml");
        // As shipped (keys commented out): the defaults.
        let mut c = Config::default();
        c.apply(&ConfigFragment::parse(SHIPPED, p).unwrap(), p)
            .unwrap();
        assert_eq!(c, Config::default());
        // With every documented key uncommented: still the defaults, so the comments tell the
        // truth.
        let uncommented: String = SHIPPED
            .lines()
            .map(|l| match l.strip_prefix("#") {
                Some(rest) if rest.trim_start().contains(" = ") && !rest.starts_with("  ") => {
                    rest.trim_start().to_string()
                }
                _ => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n");
        let frag = ConfigFragment::parse(&uncommented, p).unwrap();
        assert!(
            frag.policy.as_ref().unwrap().install_min.is_some(),
            "{uncommented}"
        );
        assert!(frag.policy.as_ref().unwrap().state_path.is_some());
        assert!(frag
            .service
            .as_ref()
            .unwrap()
            .progress_interval_ms
            .is_some());
        let mut c = Config::default();
        c.apply(&frag, p).unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn drop_ins_override_by_dir_and_name() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        let put = |dir: &str, name: &str, text: &str| {
            let dir = root.path(dir);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(name), text).unwrap();
        };
        assert_eq!(Config::load(&root).unwrap(), Config::default());
        put(
            CONFIG_DIRS[0],
            "00-mdpilot.toml",
            "[policy]\ninstall_min = 5\n",
        );
        put(
            CONFIG_DIRS[0],
            "50-x.toml",
            "[service]\nprogress_interval_ms = 50\n",
        );
        put(CONFIG_DIRS[0], "ignored.conf", "garbage");
        assert_eq!(Config::load(&root).unwrap().policy.install_min, 5);
        // Same name in /etc replaces the /usr/lib file entirely.
        put(CONFIG_DIRS[2], "50-x.toml", "[policy]\ninstall_max = 9\n");
        let c = Config::load(&root).unwrap();
        assert_eq!(c.service.progress_interval_ms, 1000);
        assert_eq!(c.policy.install_max, Some(9));
        assert_eq!(c.policy.install_min, 5);
        // Later file name wins.
        put(
            CONFIG_DIRS[1],
            "90-run.toml",
            "[policy]\ninstall_min = 7\nstate_path = \"/run/x/p.toml\"\n",
        );
        let c = Config::load(&root).unwrap();
        assert_eq!(c.policy.install_min, 7);
        put(
            CONFIG_DIRS[2],
            "60-ev.toml",
            "[events]\nprogram = \"/usr/local/sbin/md-alert\"\n",
        );
        let c = Config::load(&root).unwrap();
        assert_eq!(
            c.events.program.as_deref(),
            Some(Path::new("/usr/local/sbin/md-alert"))
        );
        put(
            CONFIG_DIRS[2],
            "70-profiles.toml",
            "[profiles.boost]\nmin = 50000\nio_depth = 128\nduration = \"1h\"\n[profiles.quiet]\nmax = 5000\nio_depth = 1\n[profiles.shallow]\nio_depth = 4\n",
        );
        let c = Config::load(&root).unwrap();
        assert_eq!(
            c.profiles["boost"],
            Profile {
                min: Some(50_000),
                max: None,
                io_depth: Some(128),
                duration_s: Some(3600)
            }
        );
        assert_eq!(c.profiles["quiet"].max, Some(5000));
        assert_eq!(c.profiles["quiet"].io_depth, Some(1));
        assert_eq!(c.profiles["shallow"].io_depth, Some(4));
        put(
            CONFIG_DIRS[2],
            "80-check.toml",
            "[check]\nschedule = \"Sun *-*-1..7 01:00\"\ncontinue = \"*-*-* 01:00\"\nrandom_delay = \"24h\"\nskip = [\"md9\"]\n",
        );
        let s = Config::load(&root).unwrap().check.schedule.unwrap();
        assert_eq!(s.start.text(), "Sun *-*-1..7 01:00");
        assert_eq!(s.cont.unwrap().text(), "*-*-* 01:00");
        assert_eq!(
            (s.window_s, s.random_delay_s, s.max_concurrent),
            (21_600, 86_400, 1)
        );
        assert_eq!(s.skip, ["md9"]);
        assert_eq!(
            c.policy_settings(&root).state_path,
            d.path().join("run/x/p.toml")
        );
    }

    #[test]
    fn metrics_listen_is_off_by_default_and_parses_an_address() {
        assert_eq!(Config::default().metrics.listen, None);
        assert!(Config::default().wipe.auto_resume);
        let w = Path::new("50-wipe.toml");
        let mut c = Config::default();
        c.apply(
            &ConfigFragment::parse("[wipe]\nauto_resume = false\n", w).unwrap(),
            w,
        )
        .unwrap();
        assert!(!c.wipe.auto_resume);
        let p = Path::new("50-metrics.toml");
        let mut c = Config::default();
        let frag = ConfigFragment::parse("[metrics]\nlisten = \"127.0.0.1:9163\"\n", p).unwrap();
        c.apply(&frag, p).unwrap();
        assert_eq!(c.metrics.listen, Some("127.0.0.1:9163".parse().unwrap()));
        assert!(ConfigFragment::parse("[metrics]\nlisten = \"localhost\"\n", p).is_err());
    }

    #[test]
    fn metrics_listen_takes_a_unix_socket_with_its_mode_and_group() {
        let p = Path::new("50-metrics.toml");
        let mut c = Config::default();
        assert_eq!(c.metrics.socket_mode, 0o660);
        let frag = ConfigFragment::parse(
            "[metrics]\nlisten = \"unix:/run/mdpilot/metrics.sock\"\nsocket_mode = \"0640\"\nsocket_group = \"prometheus\"\n",
            p,
        )
        .unwrap();
        c.apply(&frag, p).unwrap();
        assert_eq!(
            c.metrics.listen,
            Some(MetricsListen::Unix("/run/mdpilot/metrics.sock".into()))
        );
        assert_eq!(
            c.metrics.listen.as_ref().unwrap().to_string(),
            "unix:/run/mdpilot/metrics.sock"
        );
        assert_eq!(c.metrics.socket_mode, 0o640);
        assert_eq!(c.metrics.socket_group.as_deref(), Some("prometheus"));
        for bad in ["unix:metrics.sock", "unix:", "unix:/"] {
            let t = format!("[metrics]\nlisten = \"{bad}\"\n");
            assert!(ConfigFragment::parse(&t, p).is_err(), "{bad}");
        }
        for bad in ["8", "1777", "rw-rw----", ""] {
            let t = format!("[metrics]\nsocket_mode = \"{bad}\"\n");
            let frag = ConfigFragment::parse(&t, p).unwrap();
            let e = Config::default().apply(&frag, p).unwrap_err().to_string();
            assert!(e.contains("50-metrics.toml"), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_fragments_name_the_file() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        let dir = root.path(CONFIG_DIRS[2]);
        std::fs::create_dir_all(&dir).unwrap();
        for bad in [
            "[policy]\ninstal_min = 1\n",
            "[wipe]\nspeed = 1\n",
            "[policy]\ninstall_min = -1\n",
            "[policy]\nstate_path = \"relative.toml\"\n",
            "[events]\nprogram = \"notify.sh\"\n",
            "[profiles.boost]\n",
            "[profiles.x]\nmin = 9\nmax = 3\n",
            "[profiles.x]\nmin = 9\nduration = \"soon\"\n",
            "[profiles.x]\nmin = 9\nfast = true\n",
            "[check]\nwindow = \"6h\"\n",
            "[check]\nschedule = \"Sunday-ish\"\n",
            "not toml",
        ] {
            std::fs::write(dir.join("10-bad.toml"), bad).unwrap();
            let e = Config::load(&root).unwrap_err().to_string();
            assert!(e.contains("10-bad.toml"), "{bad}: {e}");
        }
    }

    #[test]
    fn resync_opt_in_parses_and_bad_values_name_the_key() {
        use crate::model::SyncKind;
        let p = Path::new("50-r.toml");
        let mut c = Config::default();
        assert_eq!(c.resync.pressure_tuning(), None, "off by default");
        let text = "[resync]\npressure_target = \"some 2%..4%\"\npressure_floor = 0\npressure_ceiling = 50000\nactions = [\"recovery\", \"reshape\", \"recovery\"]\n";
        c.apply(&ConfigFragment::parse(text, p).unwrap(), p)
            .unwrap();
        let t = c.resync.pressure_tuning().unwrap();
        assert_eq!(
            (t.floor_kib_s, t.ceiling_kib_s),
            (1, 50_000),
            "floor never 0"
        );
        assert_eq!(t.target.to_string(), "some 2%..4%");
        assert_eq!(c.resync.actions, [SyncKind::Recovery, SyncKind::Reshape]);
        assert_eq!(c.changed_sections(&Config::default()), ["resync"]);
        for (bad, says) in [
            (
                "pressure_target = \"5..10\"",
                "resync.pressure_target: \"5..10\": expected",
            ),
            (
                "actions = [\"check\"]",
                "resync.actions: \"check\" is not one of",
            ),
            ("actions = []", "resync.actions is empty"),
        ] {
            let text = format!("[resync]\n{bad}\n");
            let e = Config::default()
                .apply(&ConfigFragment::parse(&text, p).unwrap(), p)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("50-r.toml: ") && e.contains(says),
                "{bad}: {e}"
            );
        }
        let e = ConfigFragment::parse("[resync]\npressure_targte = \"x\"\n", p).unwrap_err();
        assert!(e.to_string().contains("pressure_targte"), "{e}");
    }
}
