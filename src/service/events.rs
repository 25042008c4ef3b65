//! The service's side of [`crate::alerts`]: each new model goes through the classifier; each
//! event is logged with journald-style fields and handed to the configured program.
//!
//! Log: one record per event at `error` (critical), `warn` (warning) or `info`, with the fields
//! `MESSAGE_ID` (fixed per event type, [`crate::alerts::EventKind::message_id`]), `ARRAY` (`md0`),
//! `DEVICE` (member, empty when none), `MD_EVENT` (`Rebuild40`), `MD_UUID`, and the text line as
//! the message. Under systemd, stderr goes to the journal.
//!
//! Program (`[events] program`): run as `PROGRAM EVENT /dev/mdN [/dev/MEMBER]`, the argument
//! order of `mdadm --monitor --program` (mdadm's `alert()`), one at a time in event order as
//! mdadm does (a hook sees `Fail` before the `DegradedArray` it caused). A failing program is
//! logged, never fatal. Bounds, since the program runs as root beside the service:
//! - Environment: cleared; the program sees only `PATH=/usr/sbin:/usr/bin:/sbin:/bin`,
//!   `LANG=C.UTF-8` and `MDPILOT_EVENT_JSON` (the event as JSON) ([`program_env`]).
//! - Process group: each run is the leader of its own group. A run longer than
//!   [`PROGRAM_TIMEOUT`] is killed with its whole group; children a run leaves behind are
//!   killed with their group at shutdown ([`EventSink::shutdown`]). The service is a child
//!   subreaper (`PR_SET_CHILD_SUBREAPER`), so left-behind children become its own; a group is
//!   signalled only while one of its members is such an unreaped child (the leader, waited for
//!   through a pidfd and reaped under the same lock, or an adopted child), so its id cannot
//!   belong to another process. A group with no such member is forgotten at the end of a run
//!   (never signalled later: a stranger may have its id by then). A left-behind child that
//!   exits waits as a zombie until the next run ends or the service stops.
//! - Queue: at most [`QUEUE_LIMIT`] events wait; critical ones go first. When full, a new
//!   event pushes out the oldest waiting one of lower severity, or is itself dropped; each drop
//!   is counted ([`EventSink::dropped`]) and logged (at most every 10 s).

use crate::alerts::{Classifier, Event, Severity};
use crate::host::OwnChild;
use crate::lock::lock;
use crate::model::MdStat;
use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one run of the event program may take before its process group is killed.
pub const PROGRAM_TIMEOUT: Duration = Duration::from_secs(60);
/// Events waiting for the program, at most.
pub const QUEUE_LIMIT: usize = 64;
/// `PATH` of the program.
pub const PROGRAM_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// The bounded, severity-ordered queue of events waiting for the program. Pure.
#[derive(Debug, Default)]
pub struct EventQueue {
    critical: VecDeque<Event>,
    other: VecDeque<Event>,
}

impl EventQueue {
    /// Queues `e` within `limit` events; returns the event dropped to keep the bound (the
    /// oldest non-critical one when `e` is critical, else `e` itself), if any.
    pub fn push(&mut self, e: Event, limit: usize) -> Option<Event> {
        if self.critical.len() + self.other.len() < limit {
            self.queue_of(e.severity).push_back(e);
            return None;
        }
        if e.severity == Severity::Critical {
            if let Some(old) = self.other.pop_front() {
                self.critical.push_back(e);
                return Some(old);
            }
        }
        Some(e)
    }

    /// The next event to run: the oldest critical one, else the oldest other one.
    pub fn pop(&mut self) -> Option<Event> {
        self.critical.pop_front().or_else(|| self.other.pop_front())
    }

    fn queue_of(&mut self, s: Severity) -> &mut VecDeque<Event> {
        if s == Severity::Critical {
            &mut self.critical
        } else {
            &mut self.other
        }
    }
}

use crate::metrics::HOOK_EVENTS_DROPPED;

/// Events dropped because an event program's queue was full ([`QUEUE_LIMIT`]), by every sink
/// of this process since start ([`HOOK_EVENTS_DROPPED`]).
pub fn hook_events_dropped_total() -> u64 {
    HOOK_EVENTS_DROPPED.load(Ordering::Relaxed)
}

/// What the program task and the sink share.
#[derive(Default)]
struct Runner {
    timeout: Duration,
    queue: Mutex<EventQueue>,
    wake: tokio::sync::Notify,
    dropped: AtomicU64,
    /// Process groups of runs still owned, killed at shutdown; every reap of one of their
    /// members happens under this lock.
    owned: Mutex<Owned>,
    log_limit: Mutex<super::metrics_http::LogLimit>,
}

/// The process groups of event-program runs this process still owns. Pure: the caller passes
/// the children it sees ([`crate::host::own_children`]) and reaps what it is told to.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Owned {
    /// The group id (= leader pid) of every run with a member among this process's children.
    pub groups: BTreeSet<i32>,
    /// The running program's pid: reaped by its run, never by [`Owned::tidy`].
    pub leader: Option<i32>,
}

impl Owned {
    /// Given this process's `children`: returns the exited members of owned groups to reap
    /// now (every zombie but the leader) and forgets each group left with no other member
    /// among `children`, since its id may be reused once those are reaped.
    pub fn tidy(&mut self, children: &[OwnChild]) -> Vec<i32> {
        let leader = self.leader;
        let member = |c: &OwnChild| self.groups.contains(&c.pgid);
        let reap: Vec<i32> = children
            .iter()
            .filter(|c| member(c) && c.zombie && Some(c.pid) != leader)
            .map(|c| c.pid)
            .collect();
        let keep: BTreeSet<i32> = children
            .iter()
            .filter(|c| member(c) && !reap.contains(&c.pid))
            .map(|c| c.pgid)
            .collect();
        self.groups
            .retain(|g| keep.contains(g) || Some(*g) == leader);
        reap
    }

    /// The owned groups that may be signalled: those with a member among `children` (which
    /// cannot be reaped meanwhile, the caller holding the lock every reap takes).
    pub fn signallable(&self, children: &[OwnChild]) -> Vec<i32> {
        self.groups
            .iter()
            .copied()
            .filter(|g| children.iter().any(|c| c.pgid == *g))
            .collect()
    }
}

/// Classifier plus outputs, owned by the service loop.
pub struct EventSink {
    classifier: Classifier,
    program: Option<Arc<Runner>>,
}

impl EventSink {
    /// A sink; with `program`, a task runs it for each event (needs a tokio runtime).
    pub fn new(program: Option<PathBuf>) -> Self {
        Self::with_timeout(program, PROGRAM_TIMEOUT)
    }

    /// [`EventSink::new`] with another limit per run than [`PROGRAM_TIMEOUT`] (tests).
    pub fn with_timeout(program: Option<PathBuf>, timeout: Duration) -> Self {
        let program = program.map(|p| {
            // Children a run leaves behind become ours, so that shutdown may kill them
            // knowing their group ids are not reused (see the module doc).
            if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
                tracing::warn!("cannot become a child subreaper ({e}): left-behind children of the event program are not stopped with the service");
            }
            let runner = Arc::new(Runner {
                timeout,
                ..Runner::default()
            });
            let r = runner.clone();
            tokio::spawn(async move {
                loop {
                    let next = lock(&r.queue).pop();
                    match next {
                        Some(e) => run_program(&p, &e, &r).await,
                        None => r.wake.notified().await,
                    }
                }
            });
            runner
        });
        EventSink {
            classifier: Classifier::new(),
            program,
        }
    }

    /// Classifies `model` ([`crate::alerts::views_from_model`]), logs and dispatches the
    /// events; returns them (for tests and callers that publish them).
    pub fn feed(&mut self, model: &MdStat) -> Vec<Event> {
        let views = crate::alerts::views_from_model(model);
        let now = crate::host::unix_now_s();
        let events = self.classifier.observe(&views, now);
        for e in &events {
            log(e);
            if let Some(r) = &self.program {
                r.enqueue(e.clone());
            }
        }
        events
    }

    /// Events dropped because the program's queue was full, since start.
    pub fn dropped(&self) -> u64 {
        self.program
            .as_ref()
            .map_or(0, |r| r.dropped.load(Ordering::Relaxed))
    }

    /// Kills (SIGKILL) the process group of every run still running or with children left
    /// behind that are still this process's (see the module doc). Called on SIGTERM, so no
    /// hook outlives the service; a group whose run ended and left nothing is not signalled.
    pub fn shutdown(&self) {
        if let Some(r) = &self.program {
            let mut owned = lock(&r.owned);
            let children = crate::host::own_children();
            for pg in owned.signallable(&children) {
                kill_group(pg);
            }
            owned.groups.clear();
        }
    }
}

impl Runner {
    fn enqueue(&self, e: Event) {
        let dropped = lock(&self.queue).push(e, QUEUE_LIMIT);
        if let Some(d) = dropped {
            HOOK_EVENTS_DROPPED.fetch_add(1, Ordering::Relaxed);
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            let every = Duration::from_secs(10);
            if lock(&self.log_limit)
                .allow(std::time::Instant::now(), every)
                .is_some()
            {
                tracing::warn!(
                    "event program queue full ({QUEUE_LIMIT}): dropped {} for {} ({n} dropped so far)",
                    d.kind.name(),
                    d.array
                );
            }
        }
        self.wake.notify_one();
    }
}

/// SIGKILL to process group `pg`; ESRCH (the group is gone) is fine.
fn kill_group(pg: i32) {
    if pg > 1 {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pg),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// [`Owned::tidy`] over this process's children, reaping what it returns; `owned` is the
/// runner's locked record.
fn tidy(owned: &mut Owned) {
    for pid in owned.tidy(&crate::host::own_children()) {
        let _ = nix::sys::wait::waitpid(
            nix::unistd::Pid::from_raw(pid),
            Some(nix::sys::wait::WaitPidFlag::WNOHANG),
        );
    }
}

fn log(e: &Event) {
    let id = e.kind.message_id();
    let name = e.kind.name();
    let dev = e.device.as_deref().unwrap_or("");
    let uuid = e.uuid.as_deref().unwrap_or("");
    let line = e.line();
    match e.severity {
        Severity::Critical => tracing::error!(
            MESSAGE_ID = id, MD_EVENT = %name, ARRAY = %e.array, DEVICE = dev, MD_UUID = uuid,
            "{line}"
        ),
        Severity::Warning => tracing::warn!(
            MESSAGE_ID = id, MD_EVENT = %name, ARRAY = %e.array, DEVICE = dev, MD_UUID = uuid,
            "{line}"
        ),
        Severity::Info => tracing::info!(
            MESSAGE_ID = id, MD_EVENT = %name, ARRAY = %e.array, DEVICE = dev, MD_UUID = uuid,
            "{line}"
        ),
    }
}

/// The program's arguments: event word, `/dev/<array>`, then `/dev/<member>` when there is one.
pub fn program_args(e: &Event) -> Vec<String> {
    let mut a = vec![e.kind.name(), format!("/dev/{}", e.array)];
    if let Some(d) = &e.device {
        a.push(format!("/dev/{d}"));
    }
    a
}

/// The program's whole environment: `PATH`, `LANG` and `MDPILOT_EVENT_JSON`.
pub fn program_env(e: &Event) -> Vec<(&'static str, String)> {
    vec![
        ("PATH", PROGRAM_PATH.to_string()),
        ("LANG", "C.UTF-8".to_string()),
        (
            "MDPILOT_EVENT_JSON",
            serde_json::to_string(e).unwrap_or_default(),
        ),
    ]
}

async fn run_program(program: &std::path::Path, e: &Event, runner: &Runner) {
    let child = tokio::process::Command::new(program)
        .args(program_args(e))
        .env_clear()
        .envs(program_env(e))
        .stdin(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(err) => {
            tracing::warn!("event program {}: {err}", program.display());
            return;
        }
    };
    let pg = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
    {
        let mut owned = lock(&runner.owned);
        tidy(&mut owned);
        owned.leader = Some(pg);
        owned.groups.insert(pg);
    }
    let (status, timed_out) = wait_run(&mut child, pg, runner).await;
    match status {
        _ if timed_out => tracing::warn!(
            "event program {} for {} took over {:?}: killed with its process group",
            program.display(),
            e.kind.name(),
            runner.timeout
        ),
        Ok(st) if st.success() => {}
        Ok(st) => tracing::warn!(
            "event program {} for {}: {st}",
            program.display(),
            e.kind.name()
        ),
        Err(err) => tracing::warn!("event program {}: {err}", program.display()),
    }
}

/// Waits for the run led by `child` (group `pg`), killing its group after the runner's
/// timeout; returns its exit status and whether it timed out. The leader is reaped under the
/// runner's lock, which then forgets its group unless children it left behind are still ours.
async fn wait_run(
    child: &mut tokio::process::Child,
    pg: i32,
    runner: &Runner,
) -> (std::io::Result<std::process::ExitStatus>, bool) {
    // A pidfd tells the exit without reaping, so the group id stays ours until the lock is held.
    let pidfd = rustix::process::Pid::from_raw(pg)
        .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok())
        // SAFETY: the OwnedFd moves into the AsyncFd, which owns it until dropped; it is
        // closed only after deregistration (the I/O-safety condition of `register`).
        .and_then(|fd| unsafe { tokio::io::unix::AsyncFd::register(fd) }.ok());
    let Some(pidfd) = pidfd else {
        // No pidfds (Linux before 5.3): reaped by tokio, then forgotten.
        let r = tokio::time::timeout(runner.timeout, child.wait()).await;
        let timed_out = r.is_err();
        if timed_out {
            kill_group(pg);
        }
        let st = match r {
            Ok(st) => st,
            Err(_) => child.wait().await,
        };
        let mut owned = lock(&runner.owned);
        owned.leader = None;
        tidy(&mut owned);
        return (st, timed_out);
    };
    let timed_out = tokio::time::timeout(runner.timeout, pidfd.readable())
        .await
        .is_err();
    if timed_out {
        // The leader is not reaped yet: `pg` is still its group.
        kill_group(pg);
        let _ = pidfd.readable().await;
    }
    let mut owned = lock(&runner.owned);
    let st = child
        .try_wait()
        .and_then(|s| s.ok_or_else(|| std::io::Error::other("exited but not reapable")));
    owned.leader = None;
    tidy(&mut owned);
    (st, timed_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = "Personalities : [raid1]\nmd1 : active raid1 loop4[1] loop3[0]\n      1046528 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n";

    #[tokio::test]
    async fn program_gets_mdadm_arguments_in_order() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("calls");
        let script = d.path().join("notify.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$@\" \"$(echo \"$MDPILOT_EVENT_JSON\" | cut -c1-20)\" >> {}\n",
                out.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut sink = EventSink::new(Some(script));
        assert!(sink.feed(&crate::mdstat::parse(OK)).is_empty());
        let failed = OK
            .replace("loop4[1]", "loop4[1](F)")
            .replace("[2/2] [UU]", "[2/1] [U_]");
        let ev = sink.feed(&crate::mdstat::parse(&failed));
        assert_eq!(ev.len(), 2);
        for _ in 0..100 {
            if std::fs::read_to_string(&out)
                .unwrap_or_default()
                .lines()
                .count()
                == 2
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "Fail /dev/md1 /dev/loop4 {\"event\":\"Fail\",\"arr\nDegradedArray /dev/md1 {\"event\":\"DegradedAr\n"
        );
    }

    fn ev(kind: &str, severity: Severity) -> Event {
        let mut e = sample_event();
        e.severity = severity;
        e.array = kind.to_string();
        e
    }

    fn sample_event() -> Event {
        let mut c = Classifier::new();
        let _ = c.observe(
            &crate::alerts::views_from_model(&crate::mdstat::parse(OK)),
            0,
        );
        let failed = OK
            .replace("loop4[1]", "loop4[1](F)")
            .replace("[2/2] [UU]", "[2/1] [U_]");
        let views = crate::alerts::views_from_model(&crate::mdstat::parse(&failed));
        c.observe(&views, 1).remove(0)
    }

    #[test]
    fn the_queue_is_bounded_and_runs_critical_events_first() {
        let mut q = EventQueue::default();
        for i in 0..3 {
            assert!(q.push(ev(&format!("info{i}"), Severity::Info), 3).is_none());
        }
        // Full: an info event is dropped itself, a critical one pushes out the oldest info.
        assert_eq!(
            q.push(ev("info3", Severity::Info), 3).unwrap().array,
            "info3"
        );
        assert_eq!(
            q.push(ev("crit", Severity::Critical), 3).unwrap().array,
            "info0"
        );
        let order: Vec<String> = std::iter::from_fn(|| q.pop()).map(|e| e.array).collect();
        assert_eq!(order, ["crit", "info1", "info2"]);
    }

    #[test]
    fn drops_of_a_full_queue_feed_the_process_wide_counter() {
        // A flood while the program is stuck: nothing pops, so past the bound every event is
        // a drop, counted by the sink and by the metric's counter.
        let r = Runner::default();
        let before = hook_events_dropped_total();
        for i in 0..QUEUE_LIMIT + 5 {
            r.enqueue(ev(&format!("md{i}"), Severity::Info));
        }
        assert_eq!(r.dropped.load(Ordering::Relaxed), 5);
        // Other tests' sinks may drop meanwhile: at least ours are counted.
        assert!(hook_events_dropped_total() >= before + 5);
    }

    fn child(pid: i32, pgid: i32, zombie: bool) -> OwnChild {
        OwnChild { pid, pgid, zombie }
    }

    #[test]
    fn a_run_that_ended_with_nothing_left_behind_is_forgotten() {
        // Its pid may now be anyone's, even a stranger's group leader: never signalled.
        let mut o = Owned {
            groups: BTreeSet::from([100]),
            leader: None,
        };
        let stranger_not_our_child: [OwnChild; 0] = [];
        assert!(o.tidy(&stranger_not_our_child).is_empty());
        assert_eq!(o, Owned::default());
        assert!(o.signallable(&[child(100, 100, false)]).is_empty());
    }

    #[test]
    fn children_left_behind_keep_their_group_owned_until_reaped() {
        let mut o = Owned {
            groups: BTreeSet::from([100, 200]),
            leader: Some(300),
        };
        o.groups.insert(300);
        let kids = [
            child(101, 100, false),
            child(201, 200, true),
            child(300, 300, true),
            child(7, 7, false),
        ];
        // 201 exited: reaped, and group 200 has no member left. The leader is its run's.
        assert_eq!(o.tidy(&kids), [201]);
        assert_eq!(o.groups, BTreeSet::from([100, 300]));
        assert_eq!(o.signallable(&kids), [100, 300]);
        // The leader reaped by its run: its group goes with it.
        o.leader = None;
        assert!(o.tidy(&[child(101, 100, false)]).is_empty());
        assert_eq!(o.groups, BTreeSet::from([100]));
    }

    #[tokio::test]
    async fn a_finished_run_is_forgotten_when_it_ends() {
        let d = tempfile::tempdir().unwrap();
        let script = d.path().join("quick.sh");
        std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let r = Arc::new(Runner {
            timeout: PROGRAM_TIMEOUT,
            ..Runner::default()
        });
        run_program(&script, &sample_event(), &r).await;
        // Before, the finished run's group stayed until the next run and shutdown killed it.
        assert_eq!(*lock(&r.owned), Owned::default());
    }

    #[tokio::test]
    async fn a_hung_program_is_killed_with_its_children() {
        let d = tempfile::tempdir().unwrap();
        let script = d.path().join("hang.sh");
        let pids = d.path().join("pids");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nsleep 300 &\necho $! $$ > {p}.tmp && mv {p}.tmp {p}\nsleep 300\n",
                p = pids.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut sink = EventSink::with_timeout(Some(script), Duration::from_millis(500));
        sink.feed(&crate::mdstat::parse(OK));
        let failed = OK
            .replace("loop4[1]", "loop4[1](F)")
            .replace("[2/2] [UU]", "[2/1] [U_]");
        assert!(!sink.feed(&crate::mdstat::parse(&failed)).is_empty());
        let mut ids: Vec<i32> = Vec::new();
        for _ in 0..100 {
            if let Ok(t) = std::fs::read_to_string(&pids) {
                ids = t
                    .split_whitespace()
                    .filter_map(|w| w.parse().ok())
                    .collect();
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(ids.len(), 2, "the program did not start");
        let gone = |p: i32| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).map_or(true, |s| {
                s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z'))
            })
        };
        for _ in 0..100 {
            if ids.iter().all(|p| gone(*p)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(ids.iter().all(|p| gone(*p)), "{ids:?} outlived the timeout");
        sink.shutdown();
    }
}
