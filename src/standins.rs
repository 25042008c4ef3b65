//! TEMPORARY stand-ins for modules other helpers are writing in parallel (issue 2: `mdstat`,
//! `sysfs`, `status::collect`; issue 3: `policy`, `config`). They have exactly the names and
//! signatures agreed in the briefs so that the service code only says `crate::standins::X`.
//!
//! AT MERGE: delete this file and its `pub mod standins;` line in `lib.rs`, then
//! `sed -i 's/crate::standins::/crate::/g' src/service.rs src/watch.rs src/sim.rs src/dbus/*.rs`.
//! These are deliberately minimal: they parse only what `serve --sim` writes.

#![allow(missing_docs)]

/// Stand-in for `crate::mdstat` (issue 2).
pub mod mdstat {
    use crate::model::*;

    /// Minimal `/proc/mdstat` parser: header, blocks line, progress line. The real one is issue 2's.
    pub fn parse(text: &str) -> MdStat {
        let mut out = MdStat::default();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("Personalities :") {
                out.personalities = rest
                    .split_whitespace()
                    .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
                    .collect();
            } else if !line.starts_with(' ') && line.contains(" : ") && line.starts_with("md") {
                let (name, rest) = line.split_once(" : ").unwrap_or_default();
                let mut words = rest.split_whitespace().peekable();
                let state = match words.next() {
                    Some("active") => ArrayState::Active,
                    Some("broken") => ArrayState::Broken,
                    _ => ArrayState::Inactive,
                };
                let read_only = match words.peek() {
                    Some(&"(read-only)") => Some(ReadOnly::ReadOnly),
                    Some(&"(auto-read-only)") => Some(ReadOnly::AutoReadOnly),
                    _ => None,
                };
                if read_only.is_some() {
                    words.next();
                }
                let mut level = None;
                let mut members = Vec::new();
                for w in words {
                    if let Some((n, r)) = w.split_once('[') {
                        let (slot, flags) = r.split_once(']').unwrap_or((r, ""));
                        let flags = flags
                            .split(')')
                            .filter_map(|f| match f.trim_start_matches('(') {
                                "W" => Some(MemberFlag::WriteMostly),
                                "J" => Some(MemberFlag::Journal),
                                "F" => Some(MemberFlag::Faulty),
                                "S" => Some(MemberFlag::Spare),
                                "R" => Some(MemberFlag::Replacement),
                                _ => None,
                            })
                            .collect();
                        members.push(Member {
                            name: n.to_string(),
                            slot: slot.parse().unwrap_or(0),
                            flags,
                        });
                    } else if level.is_none() {
                        level = Some(w.to_string());
                    }
                }
                members.reverse();
                out.arrays.push(Array {
                    name: name.trim().to_string(),
                    state,
                    read_only,
                    level,
                    size_kib: None,
                    metadata: None,
                    raid_disks: None,
                    active_disks: None,
                    member_status: None,
                    members,
                    sync: None,
                    bitmap: None,
                    sysfs: None,
                });
            } else if let Some(a) = out.arrays.last_mut() {
                let t = line.trim();
                if t.contains(" blocks") {
                    let mut it = t.split_whitespace();
                    a.size_kib = it.next().and_then(|n| n.parse().ok());
                    if let Some(p) = t.find("super ") {
                        a.metadata = t[p + 6..].split_whitespace().next().map(str::to_string);
                    }
                    if let (Some(o), Some(c)) = (t.find("] ["), t.rfind(']')) {
                        let tl = &t[..o];
                        if let Some(s) = tl.rfind('[') {
                            let (x, y) = tl[s + 1..].split_once('/').unwrap_or(("", ""));
                            a.raid_disks = x.parse().ok();
                            a.active_disks = y.parse().ok();
                        }
                        a.member_status = Some(t[o + 3..c].to_string());
                    }
                } else if t.contains(" = ") && t.contains('%') {
                    // "[==>...]  resync = 12.5% (1/8) finish=1.0min speed=1000K/sec"
                    let after = t.split_once(']').map(|x| x.1).unwrap_or(t).trim();
                    let (action, rest) = after.split_once(" = ").unwrap_or(("resync", after));
                    let pct = rest.split('%').next().and_then(|p| p.trim().parse().ok());
                    let (done, total) = rest
                        .split_once('(')
                        .and_then(|x| x.1.split_once(')'))
                        .and_then(|(f, _)| f.split_once('/'))
                        .map(|(d, t)| (d.parse().ok(), t.parse().ok()))
                        .unwrap_or((None, None));
                    let field = |k: &str| {
                        rest.split_whitespace()
                            .find_map(|w| w.strip_prefix(k))
                            .map(|v| v.trim_end_matches("min").trim_end_matches("K/sec"))
                    };
                    a.sync = Some(SyncStatus {
                        action: action.trim().to_string(),
                        state: SyncState::Running,
                        percent: pct,
                        done_kib: done,
                        total_kib: total,
                        finish_min: field("finish=").and_then(|v| v.parse().ok()),
                        speed_kib_s: field("speed=").and_then(|v| v.parse().ok()),
                    });
                }
            }
        }
        out
    }
}

/// Stand-in for `crate::sysfs` (issue 2).
pub mod sysfs {
    use crate::host::{read_optional, Root};
    use crate::model::*;

    fn num<T: std::str::FromStr>(root: &Root, name: &str, f: &str) -> Option<T> {
        read_optional(&root.sys(format!("block/{name}/{f}")))
            .ok()
            .flatten()
            .and_then(|s| s.split_whitespace().next().and_then(|w| w.parse().ok()))
    }
    fn text(root: &Root, name: &str, f: &str) -> Option<String> {
        read_optional(&root.sys(format!("block/{name}/{f}")))
            .ok()
            .flatten()
    }
    fn limit(root: &Root, name: &str, f: &str) -> Option<SpeedLimit> {
        let t = text(root, name, f)?;
        Some(SpeedLimit {
            kib_s: t.split_whitespace().next()?.parse().ok()?,
            system: t.contains("(system)"),
        })
    }

    /// Reads `/sys/block/<name>/md/*`; missing files are `None`.
    pub fn read_array(root: &Root, name: &str) -> ArraySysfs {
        let sync_completed = text(root, name, "md/sync_completed").map(|t| match t.as_str() {
            "none" => SyncCompleted::None,
            "delayed" => SyncCompleted::Delayed,
            _ => {
                let (d, tot) = t.split_once('/').unwrap_or(("0", "0"));
                SyncCompleted::Sectors {
                    done: d.trim().parse().unwrap_or(0),
                    total: tot.trim().parse().unwrap_or(0),
                }
            }
        });
        let mut members = Vec::new();
        if let Ok(rd) = std::fs::read_dir(root.sys(format!("block/{name}/md"))) {
            for e in rd.flatten() {
                let f = e.file_name().to_string_lossy().to_string();
                if let Some(m) = f.strip_prefix("dev-") {
                    members.push(MemberSysfs {
                        name: m.to_string(),
                        state: text(root, name, &format!("md/{f}/state"))
                            .map(|s| s.split(',').map(str::to_string).collect())
                            .unwrap_or_default(),
                        slot: num(root, name, &format!("md/{f}/slot")),
                        errors: num(root, name, &format!("md/{f}/errors")),
                    });
                }
            }
        }
        members.sort_by(|a, b| a.name.cmp(&b.name));
        ArraySysfs {
            array_state: text(root, name, "md/array_state"),
            level: text(root, name, "md/level"),
            raid_disks: num(root, name, "md/raid_disks"),
            degraded: num(root, name, "md/degraded"),
            sync_action: text(root, name, "md/sync_action"),
            sync_completed,
            sync_speed_kib_s: num(root, name, "md/sync_speed"),
            sync_speed_min: limit(root, name, "md/sync_speed_min"),
            sync_speed_max: limit(root, name, "md/sync_speed_max"),
            metadata_version: text(root, name, "md/metadata_version"),
            chunk_size_bytes: num(root, name, "md/chunk_size"),
            component_size_kib: num(root, name, "md/component_size"),
            uuid: text(root, name, "md/uuid"),
            mismatch_cnt: num(root, name, "md/mismatch_cnt"),
            logical_block_size: num(root, name, "queue/logical_block_size"),
            physical_block_size: num(root, name, "queue/physical_block_size"),
            optimal_io_size: num(root, name, "queue/optimal_io_size"),
            members,
        }
    }

    /// Fills `Array::sysfs` of every array.
    pub fn enrich(root: &Root, stat: &mut MdStat) {
        for a in &mut stat.arrays {
            a.sysfs = Some(read_array(root, &a.name));
        }
    }
}

/// Stand-in for `crate::status::collect` (issue 2).
pub mod status {
    use crate::host::{read_optional, Root};
    use crate::model::MdStat;

    /// Why the arrays could not be read.
    #[derive(Debug, thiserror::Error)]
    pub enum StatusError {
        /// `/proc/mdstat` unreadable.
        #[error("cannot read {path}")]
        Mdstat {
            path: String,
            #[source]
            source: std::io::Error,
        },
    }

    /// mdstat + sysfs + `/proc/sys/dev/raid/speed_limit_*`.
    pub fn collect(root: &Root) -> Result<MdStat, StatusError> {
        let p = root.proc("mdstat");
        let text = std::fs::read_to_string(&p).map_err(|source| StatusError::Mdstat {
            path: p.display().to_string(),
            source,
        })?;
        let mut m = super::mdstat::parse(&text);
        super::sysfs::enrich(root, &mut m);
        let lim = |f: &str| {
            read_optional(&root.proc(format!("sys/dev/raid/{f}")))
                .ok()
                .flatten()
                .and_then(|s| s.trim().parse().ok())
        };
        m.speed_limit_min = lim("speed_limit_min");
        m.speed_limit_max = lim("speed_limit_max");
        Ok(m)
    }
}

/// Stand-in for `crate::config` (issue 3).
pub mod config {
    use crate::host::Root;

    /// `[service]` table.
    #[derive(Debug, Clone)]
    pub struct ServiceConfig {
        pub progress_interval_ms: u64,
    }
    /// The merged configuration.
    #[derive(Debug, Clone)]
    pub struct Config {
        pub service: ServiceConfig,
    }
    /// Config could not be loaded.
    #[derive(Debug, thiserror::Error)]
    #[error("config error")]
    pub struct ConfigError;

    impl Config {
        /// Defaults only.
        pub fn load(_root: &Root) -> Result<Config, ConfigError> {
            Ok(Config {
                service: ServiceConfig {
                    progress_interval_ms: 1000,
                },
            })
        }

        /// The policy adapter's settings, with `state_path` resolved under `root`.
        pub fn policy_settings(&self, root: &Root) -> super::policy::PolicySettings {
            super::policy::PolicySettings {
                state_path: root.run("mdpilot/policy.toml"),
                install_min: 0,
                install_max: None,
            }
        }
    }
}

/// Stand-in for `crate::policy` (issue 3): in-memory leases, writes the knobs under the root.
pub mod policy {
    use crate::host::{read_optional, Root};
    use serde::Serialize;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    pub enum LeaseKind {
        Installer,
        WipeJob,
        Admin,
        DbusClient,
    }
    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    pub enum Owner {
        Pid(u32),
        BusName(String),
        None,
    }
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
    pub struct Limits {
        pub min: Option<u64>,
        pub max: Option<u64>,
    }
    #[derive(Debug, Clone, Serialize)]
    pub struct LeaseRequest {
        pub holder: String,
        pub kind: LeaseKind,
        pub owner: Owner,
        pub global: Limits,
        pub arrays: BTreeMap<String, Limits>,
    }
    #[derive(Debug, Clone)]
    pub struct PolicySettings {
        pub state_path: std::path::PathBuf,
        pub install_min: u64,
        pub install_max: Option<u64>,
    }

    /// Saved originals of `speed_limit_{min,max}`, KiB/s.
    #[derive(Debug, Clone, Default, Serialize)]
    pub struct GlobalOriginals {
        pub speed_limit_min: Option<u64>,
        pub speed_limit_max: Option<u64>,
    }

    /// What the policy looks like now (same field names as issue 3's `PolicyView`).
    #[derive(Debug, Clone, Default, Serialize)]
    pub struct PolicyView {
        pub state_path: std::path::PathBuf,
        pub speed_limit_min: Option<u64>,
        pub speed_limit_max: Option<u64>,
        pub originals: GlobalOriginals,
        pub leases: Vec<LeaseRequest>,
        pub warnings: Vec<String>,
    }
    #[derive(Debug, thiserror::Error)]
    pub enum PolicyError {
        #[error("no lease named {0}")]
        NoSuchLease(String),
        #[error("no array {0}")]
        NoSuchArray(String),
        #[error("invalid limits: {0}")]
        Invalid(String),
        #[error("cannot write {path}")]
        Io {
            path: String,
            #[source]
            source: std::io::Error,
        },
    }

    #[derive(Default)]
    struct State {
        originals: Option<(Limits, BTreeMap<String, Limits>)>,
        leases: Vec<LeaseRequest>,
    }
    pub struct Policy {
        root: Root,
        state: Mutex<State>,
    }

    impl Policy {
        pub fn new(root: Root, _settings: PolicySettings) -> Self {
            Policy {
                root,
                state: Mutex::new(State::default()),
            }
        }
        fn knob(&self, f: &str) -> std::path::PathBuf {
            self.root.proc(format!("sys/dev/raid/{f}"))
        }
        fn read_global(&self) -> Limits {
            let r = |f: &str| {
                read_optional(&self.knob(f))
                    .ok()
                    .flatten()
                    .and_then(|s| s.parse().ok())
            };
            Limits {
                min: r("speed_limit_min"),
                max: r("speed_limit_max"),
            }
        }
        fn write(&self, p: std::path::PathBuf, v: &str) -> Result<(), PolicyError> {
            std::fs::write(&p, format!("{v}\n")).map_err(|source| PolicyError::Io {
                path: p.display().to_string(),
                source,
            })
        }
        fn apply(&self, st: &State) -> Result<(), PolicyError> {
            let Some((orig, orig_arrays)) = &st.originals else {
                return Ok(());
            };
            // As issue 3's policy: the most yielding request wins (lowest min, lowest max);
            // knobs no lease targets keep their originals.
            let low = |a: Option<u64>, b: Option<u64>| match (a, b) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            };
            let mut lease_g = Limits::default();
            let mut arrays: BTreeMap<String, Limits> = BTreeMap::new();
            for l in &st.leases {
                lease_g.min = low(lease_g.min, l.global.min);
                lease_g.max = low(lease_g.max, l.global.max);
                for (a, lim) in &l.arrays {
                    let e = arrays.entry(a.clone()).or_default();
                    e.min = low(e.min, lim.min);
                    e.max = low(e.max, lim.max);
                }
            }
            let g = Limits {
                min: lease_g.min.or(orig.min),
                max: lease_g.max.or(orig.max),
            };
            if let Some(v) = g.min {
                self.write(self.knob("speed_limit_min"), &v.to_string())?;
            }
            if let Some(v) = g.max {
                self.write(self.knob("speed_limit_max"), &v.to_string())?;
            }
            for a in orig_arrays.keys().chain(arrays.keys()) {
                let l = arrays.get(a).copied().unwrap_or_default();
                let md = self.root.sys(format!("block/{a}/md"));
                self.write(
                    md.join("sync_speed_min"),
                    &l.min.map_or("system".into(), |v| v.to_string()),
                )?;
                self.write(
                    md.join("sync_speed_max"),
                    &l.max.map_or("system".into(), |v| v.to_string()),
                )?;
            }
            Ok(())
        }
        fn view(&self, st: &State) -> PolicyView {
            let cur = self.read_global();
            let orig = st.originals.as_ref().map(|o| o.0).unwrap_or_default();
            PolicyView {
                state_path: self.root.run("mdpilot/policy.toml"),
                speed_limit_min: cur.min,
                speed_limit_max: cur.max,
                originals: GlobalOriginals {
                    speed_limit_min: orig.min,
                    speed_limit_max: orig.max,
                },
                leases: st.leases.clone(),
                warnings: vec![],
            }
        }
        pub fn acquire(&self, req: LeaseRequest) -> Result<PolicyView, PolicyError> {
            for a in req.arrays.keys() {
                if !self.root.sys(format!("block/{a}/md")).is_dir() {
                    return Err(PolicyError::NoSuchArray(a.clone()));
                }
            }
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if st.originals.is_none() {
                st.originals = Some((self.read_global(), BTreeMap::new()));
            }
            if let Some((_, oa)) = st.originals.as_mut() {
                for a in req.arrays.keys() {
                    oa.entry(a.clone()).or_default();
                }
            }
            st.leases.retain(|l| l.holder != req.holder);
            st.leases.push(req);
            self.apply(&st)?;
            Ok(self.view(&st))
        }
        pub fn release(&self, holder: &str) -> Result<PolicyView, PolicyError> {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let n = st.leases.len();
            st.leases.retain(|l| l.holder != holder);
            if n == st.leases.len() {
                return Err(PolicyError::NoSuchLease(holder.to_string()));
            }
            if st.leases.is_empty() {
                drop(st);
                return self.restore(false);
            }
            self.apply(&st)?;
            Ok(self.view(&st))
        }
        pub fn restore(&self, defaults: bool) -> Result<PolicyView, PolicyError> {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.leases.clear();
            let orig = st.originals.take();
            let (g, arrays) = match (defaults, orig) {
                (false, Some(o)) => o,
                (_, o) => (
                    Limits {
                        min: Some(1000),
                        max: Some(200000),
                    },
                    o.map(|o| o.1).unwrap_or_default(),
                ),
            };
            if let Some(v) = g.min {
                self.write(self.knob("speed_limit_min"), &v.to_string())?;
            }
            if let Some(v) = g.max {
                self.write(self.knob("speed_limit_max"), &v.to_string())?;
            }
            for a in arrays.keys() {
                let md = self.root.sys(format!("block/{a}/md"));
                self.write(md.join("sync_speed_min"), "system")?;
                self.write(md.join("sync_speed_max"), "system")?;
            }
            Ok(self.view(&st))
        }
        pub fn show(&self) -> Result<PolicyView, PolicyError> {
            let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            Ok(self.view(&st))
        }
        pub fn reap(&self, alive: &dyn Fn(&Owner) -> bool) -> Result<PolicyView, PolicyError> {
            let dead: Vec<String> = {
                let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
                st.leases
                    .iter()
                    .filter(|l| !alive(&l.owner))
                    .map(|l| l.holder.clone())
                    .collect()
            };
            for h in dead {
                let _ = self.release(&h);
            }
            self.show()
        }
    }
}
