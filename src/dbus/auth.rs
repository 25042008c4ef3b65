//! Who may call mutating methods: the CALLER of the message (its unique name from the header,
//! resolved by the bus daemon), never this process. Modelled on udisks2
//! (`udisks_daemon_util_check_authorization_sync`).
//!
//! Rule: uid 0 passes without polkit; any other uid needs polkit's yes for the method's action
//! (shipped in `dist/usr/share/polkit-1/actions/org.mdpilot.MdPilot1.policy`):
//!
//! | method | action | defaults (any / inactive / active) |
//! |---|---|---|
//! | AcquirePriority, ReleasePriority, SetArraySpeedLimits, RestoreLimits, RequestSyncAction, StartCheck, PauseCheck, ResumeCheck, CancelCheck ([`super::check::request`]) | [`PRIORITY_ACTION`] | auth_admin / auth_admin / auth_admin_keep |
//! | StartCheck with `repair`, ResumeCheck of a paused repair, RequestSyncAction `repair` | [`REPAIR_ACTION`] | auth_admin / auth_admin / auth_admin_keep |
//! | StartWipe, Job.Cancel of another uid's job | [`WIPE_ACTION`] | auth_admin, every time |
//! | AddBitmap | [`BITMAP_ACTION`] | auth_admin / auth_admin / auth_admin_keep |
//!
//! Cancelling one's own job needs no polkit (the caller was allowed to start it). The polkit
//! details (`a{ss}`) name the method and the device so the prompt names them: `method`,
//! `device` (when there is one), `polkit.message` (with `$(device)` expanded by polkit) and
//! `polkit.gettext_domain` (`mdpilot`). User interaction (CheckAuthorization flag 1) is allowed
//! unless the method's `a{sv}` options carry `auth.no_user_interaction` = true, as in udisks2: a
//! GDBus or dbus-python caller with an agent gets a prompt instead of a bare `NotAuthorized`.
//!
//! One [`Authority`] per service: it asks the bus for the caller's uid once per call and keeps
//! one system-bus connection for polkit (the service's own connection when it serves on the
//! system bus). If polkit is unreachable or says no, the answer is `NotAuthorized`.

use super::errors::{Error, Result};
use super::options::Options;
use super::BusChoice;
use enumflags2::BitFlags;
use std::collections::HashMap;
use std::time::Duration;
use zbus::message::Header;
use zbus::zvariant::{OwnedValue, Value};
use zbus_polkit::policykit1::{AuthorityProxy, CheckAuthorizationFlags, Subject};

/// Polkit action for changing resync priority and md speed limits.
pub const PRIORITY_ACTION: &str = "org.mdpilot.MdPilot1.manage-priority";
/// Polkit action for destroying data: StartWipe, and cancelling another user's wipe job.
pub const WIPE_ACTION: &str = "org.mdpilot.MdPilot1.wipe";
/// Polkit action for adding a write-intent bitmap to an array (`Array.AddBitmap`: mdadm
/// rewrites the members' superblocks).
pub const BITMAP_ACTION: &str = "org.mdpilot.MdPilot1.add-bitmap";
/// Polkit action for a repair (`StartCheck` with `repair`, `ResumeCheck` of a paused repair,
/// `RequestSyncAction("repair")`): md rewrites the blocks that do not match, so it asks for
/// more than a read-only check.
pub const REPAIR_ACTION: &str = "org.mdpilot.MdPilot1.repair";
/// The `a{sv}` option (b) that forbids a polkit prompt (udisks2's standard option).
pub const NO_USER_INTERACTION: &str = "auth.no_user_interaction";
/// CheckAuthorization flag `AllowUserInteraction`.
pub const ALLOW_USER_INTERACTION: u32 = 1;

/// What a method asks polkit for: the action, the method name and the device, and the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The polkit action id ([`PRIORITY_ACTION`] or [`WIPE_ACTION`]).
    pub action: &'static str,
    /// The D-Bus method (`StartWipe`).
    pub method: &'static str,
    /// The device the method works on (`/dev/loop3`, `/dev/md0`); `None` for global changes.
    pub device: Option<String>,
    /// The prompt (`polkit.message`); may hold `$(device)`, which polkit expands.
    pub message: &'static str,
    /// More details (`sync-action`).
    pub extra: Vec<(&'static str, String)>,
    /// A uid that needs no polkit for this request besides root (the uid that started the
    /// job a `Job.Cancel` ends); `None` for every other method.
    pub exempt_uid: Option<u32>,
}

/// The device node of an array named as the caller named it: kernel names (`md0`) and
/// `/dev/md/` link names (`md/root`) become `/dev/...`; paths stay.
fn array_device(array: &str) -> String {
    if array.starts_with('/') {
        array.to_string()
    } else {
        format!("/dev/{array}")
    }
}

impl Request {
    fn priority(method: &'static str, message: &'static str, device: Option<String>) -> Request {
        Request {
            action: PRIORITY_ACTION,
            method,
            device,
            message,
            extra: Vec::new(),
            exempt_uid: None,
        }
    }

    /// `AcquirePriority` on `arrays`: the kernel names (`md0`) the validated `arrays` option
    /// resolved to, so the details hold only canonical values (`/dev/md0, /dev/md1`, sorted,
    /// at most one per array of the machine); none: a global change.
    pub fn acquire_priority(arrays: &[String]) -> Request {
        let mut arrays = arrays.to_vec();
        arrays.sort();
        arrays.dedup();
        if arrays.is_empty() {
            Request::priority(
                "AcquirePriority",
                "Authentication is required to change the md RAID resync priority",
                None,
            )
        } else {
            let devs: Vec<String> = arrays.iter().map(|a| array_device(a)).collect();
            Request::priority(
                "AcquirePriority",
                "Authentication is required to change the resync priority of $(device)",
                Some(devs.join(", ")),
            )
        }
    }

    /// `ReleasePriority`.
    pub fn release_priority() -> Request {
        Request::priority(
            "ReleasePriority",
            "Authentication is required to end an md RAID resync priority lease",
            None,
        )
    }

    /// `SetArraySpeedLimits` on `array`.
    pub fn set_array_speed_limits(array: &str) -> Request {
        Request::priority(
            "SetArraySpeedLimits",
            "Authentication is required to change the resync speed limits of $(device)",
            Some(array_device(array)),
        )
    }

    /// `RestoreLimits`.
    pub fn restore_limits() -> Request {
        Request::priority(
            "RestoreLimits",
            "Authentication is required to restore the md RAID resync speed limits",
            None,
        )
    }

    /// `RequestSyncAction(action)` on `array` (`check`, `repair`, `idle`: a word the method
    /// validated, spelled as md spells it).
    pub fn request_sync_action(array: &str, action: &str) -> Request {
        let mut r = Request::priority(
            "RequestSyncAction",
            "Authentication is required to start $(sync-action) on $(device)",
            Some(array_device(array)),
        );
        r.extra.push(("sync-action", action.to_string()));
        if crate::model::SyncAction::Repair == action {
            r.action = REPAIR_ACTION;
        }
        r
    }

    /// `AddBitmap` on `array` (kernel name).
    pub fn add_bitmap(array: &str) -> Request {
        Request {
            action: BITMAP_ACTION,
            method: "AddBitmap",
            device: Some(array_device(array)),
            message: "Authentication is required to add a write-intent bitmap to $(device)",
            extra: Vec::new(),
            exempt_uid: None,
        }
    }

    /// `StartWipe` on `device`.
    pub fn start_wipe(device: &str) -> Request {
        Request {
            action: WIPE_ACTION,
            method: "StartWipe",
            device: Some(device.to_string()),
            message: "Authentication is required to wipe $(device): all data on it is destroyed",
            extra: Vec::new(),
            exempt_uid: None,
        }
    }

    /// `Job.Cancel` of a wipe of `device` that uid `started_by` started: that uid (and root)
    /// pass without polkit, any other uid needs the wipe action.
    pub fn cancel_job(device: &str, started_by: u32) -> Request {
        Request {
            action: WIPE_ACTION,
            method: "Cancel",
            device: Some(device.to_string()),
            message: "Authentication is required to cancel another user's wipe of $(device)",
            extra: Vec::new(),
            exempt_uid: Some(started_by),
        }
    }

    /// The CheckAuthorization details (`a{ss}`): `method`, `device` (if any), the extras,
    /// `polkit.message` and `polkit.gettext_domain`.
    pub fn details(&self) -> HashMap<String, String> {
        let mut d = HashMap::new();
        d.insert("method".to_string(), self.method.to_string());
        if let Some(dev) = &self.device {
            d.insert("device".to_string(), dev.clone());
        }
        for (k, v) in &self.extra {
            d.insert((*k).to_string(), v.clone());
        }
        d.insert("polkit.message".to_string(), self.message.to_string());
        d.insert("polkit.gettext_domain".to_string(), "mdpilot".to_string());
        d
    }
}

/// Removes `auth.no_user_interaction` from `options` (so the method's own parser never sees
/// it) and returns the CheckAuthorization flags: 0 when it was true, else
/// [`ALLOW_USER_INTERACTION`].
///
/// Errors: `InvalidArgument` when the value is not a boolean.
pub fn take_interaction_flags(method: &str, options: &mut Options) -> Result<u32> {
    match options.remove(NO_USER_INTERACTION) {
        None => Ok(ALLOW_USER_INTERACTION),
        Some(v) => match &*v {
            Value::Bool(true) => Ok(0),
            Value::Bool(false) => Ok(ALLOW_USER_INTERACTION),
            other => Err(Error::InvalidArgument(format!(
                "{method}: option {NO_USER_INTERACTION} must be a boolean, got {}",
                other.value_signature()
            ))),
        },
    }
}

/// The caller of a message as the bus daemon knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Its unique name (`:1.42`).
    pub sender: String,
    /// Its uid (`GetConnectionUnixUser`).
    pub uid: u32,
}

/// The service's authority: which bus it serves on (decides the polkit subject) and the one
/// system-bus connection it asks polkit on.
pub struct Authority {
    bus: BusChoice,
    system: tokio::sync::Mutex<Option<zbus::Connection>>,
    questions: std::sync::atomic::AtomicU64,
}

impl Authority {
    /// An authority for a service on `bus` (no connection is opened until polkit is needed).
    pub fn new(bus: BusChoice) -> Authority {
        Authority {
            bus,
            system: tokio::sync::Mutex::new(None),
            questions: std::sync::atomic::AtomicU64::new(1),
        }
    }

    /// The sender of `header` and its uid (one `GetConnectionUnixUser` call).
    ///
    /// Errors: `NotAuthorized` when the message has no sender or the bus does not know it.
    pub async fn caller(&self, conn: &zbus::Connection, header: &Header<'_>) -> Result<Caller> {
        let method = header
            .member()
            .map(std::string::ToString::to_string)
            .unwrap_or_default();
        let Some(sender) = header.sender() else {
            return Err(Error::NotAuthorized(format!(
                "{method}: message has no sender"
            )));
        };
        let uid = zbus::fdo::DBusProxy::new(conn)
            .await
            .map_err(|e| Error::Failed(format!("{method}: cannot ask the bus: {e}")))?
            .get_connection_unix_user(zbus::names::BusName::from(sender.to_owned()))
            .await
            .map_err(|e| Error::NotAuthorized(format!("{method}: caller {sender} unknown: {e}")))?;
        Ok(Caller {
            sender: sender.to_string(),
            uid,
        })
    }

    /// The preamble of every mutating method, in this order: `auth.no_user_interaction` is
    /// taken out of `options` ([`take_interaction_flags`]); `validate` gets the rest and checks
    /// every argument (unknown options, types, bounds, names resolved to canonical values),
    /// returning the method's parsed arguments and the polkit question built from the
    /// validated values only; then the caller is authorized for that question
    /// ([`Authority::authorize_with`]). So nothing a caller sends reaches polkit, or an admin's
    /// prompt, before it is validated. Returns the caller and the parsed arguments.
    ///
    /// Errors: `InvalidArgument` (a non-boolean `auth.no_user_interaction`), `validate`'s
    /// errors (polkit is not asked then), and those of [`Authority::authorize_with`].
    pub async fn guarded<T>(
        &self,
        conn: &zbus::Connection,
        header: &Header<'_>,
        method: &str,
        options: Options,
        validate: impl FnOnce(Options) -> Result<(T, Request)>,
    ) -> Result<(Caller, T)> {
        self.guarded_async(conn, header, method, options, |o| {
            std::future::ready(validate(o))
        })
        .await
    }

    /// [`Authority::guarded`] for a validation that asks the bus itself (`AcquirePriority`'s
    /// `pid`, checked against the caller's process with [`check_own_pid`]): the same order,
    /// and still nothing reaches polkit before `validate` has accepted it.
    ///
    /// Errors: as [`Authority::guarded`].
    pub async fn guarded_async<T, F>(
        &self,
        conn: &zbus::Connection,
        header: &Header<'_>,
        method: &str,
        mut options: Options,
        validate: impl FnOnce(Options) -> F,
    ) -> Result<(Caller, T)>
    where
        F: std::future::Future<Output = Result<(T, Request)>>,
    {
        let flags = take_interaction_flags(method, &mut options)?;
        let (value, req) = validate(options).await?;
        let caller = self.authorize_with(conn, header, &req, flags).await?;
        Ok((caller, value))
    }

    /// Authorizes the sender of `header` for `req` with CheckAuthorization `flags` the method
    /// took out of its options already ([`take_interaction_flags`]), for methods that validate
    /// their arguments before anything is asked. Returns the caller.
    ///
    /// Errors: as [`Authority::check_caller`].
    pub async fn authorize_with(
        &self,
        conn: &zbus::Connection,
        header: &Header<'_>,
        req: &Request,
        flags: u32,
    ) -> Result<Caller> {
        let caller = self.caller(conn, header).await?;
        self.check_caller(conn, &caller, req, flags).await?;
        Ok(caller)
    }

    /// Asks polkit whether `caller` may do `req` (uid 0 passes without asking). `flags` are
    /// CheckAuthorization's (see [`take_interaction_flags`]). Each question carries its own
    /// cancellation id (`mdpilot-<service pid>-<n>`); when the caller leaves the bus before
    /// polkit answers, the question is withdrawn (`CancelCheckAuthorization` with that id) and
    /// the call fails, so nothing is done in the name of a caller that is gone.
    ///
    /// Errors: `NotAuthorized`; `Failed` when the caller left the bus while polkit decided.
    pub async fn check_caller(
        &self,
        conn: &zbus::Connection,
        caller: &Caller,
        req: &Request,
        flags: u32,
    ) -> Result<()> {
        if caller.uid == 0 || req.exempt_uid == Some(caller.uid) {
            return Ok(());
        }
        let (method, uid, action) = (req.method, caller.uid, req.action);
        let subject = self.subject(conn, caller, method).await?;
        let cancellation_id = format!(
            "mdpilot-{}-{}",
            std::process::id(),
            self.questions
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let left = caller_leaves(conn, &caller.sender)
            .await
            .map_err(|e| Error::Failed(format!("{method}: cannot watch the caller: {e}")))?;
        let answer = tokio::select! {
            a = self.polkit_check(conn, subject, req, flags, &cancellation_id) => a,
            () = left => {
                self.cancel_question(conn, &cancellation_id).await;
                tracing::info!(caller = %caller.sender, "{method}: the caller left the bus during authorization; question {cancellation_id} withdrawn");
                return Err(Error::Failed(format!(
                    "{method}: the caller {} left the bus during authorization",
                    caller.sender
                )));
            }
        };
        match answer {
            Ok((true, _)) => Ok(()),
            Ok((false, challenge)) => Err(Error::NotAuthorized(format!(
                "{method}: uid {uid} is not authorized for {action}{}",
                if challenge {
                    " (authentication is required but no polkit agent answered: run the \
                     client with an agent, e.g. pkttyagent, or as root)"
                } else {
                    ""
                }
            ))),
            Err(e) => {
                tracing::info!("polkit unavailable, denying uid {uid}: {e}");
                Err(Error::NotAuthorized(format!(
                    "{method}: uid {uid} is not root and polkit is unavailable ({e})"
                )))
            }
        }
    }

    /// The connection polkit is asked on: the service's own on the system bus, else one
    /// system-bus connection opened on first use and kept.
    async fn polkit_connection(&self, conn: &zbus::Connection) -> zbus::Result<zbus::Connection> {
        if self.bus == BusChoice::System {
            return Ok(conn.clone());
        }
        let mut g = self.system.lock().await;
        if let Some(c) = &*g {
            return Ok(c.clone());
        }
        let c = zbus::Connection::system().await?;
        *g = Some(c.clone());
        Ok(c)
    }

    /// `CancelCheckAuthorization(cancellation_id)` on the connection the question was asked on
    /// (polkit accepts it only from the asker). Failures are logged: the question ends with
    /// polkit's own timeout then.
    async fn cancel_question(&self, conn: &zbus::Connection, cancellation_id: &str) {
        let r = match self.polkit_connection(conn).await {
            Ok(sys) => match AuthorityProxy::new(&sys).await {
                Ok(p) => p.cancel_check_authorization(cancellation_id).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        if let Err(e) = r {
            tracing::warn!("cannot withdraw polkit question {cancellation_id}: {e}");
        }
    }

    /// The polkit subject of `caller`: on the system bus its unique name
    /// (`system-bus-name`, which polkit resolves itself); on any other bus polkit cannot see
    /// our bus's names, so the process: `unix-process` with the pid, the start time and the
    /// uid the bus daemon gives (`GetConnectionCredentials`). The start time pins the pid
    /// against reuse; where the bus also hands a pidfd (`ProcessFD`), the process is checked
    /// to be alive after the start time was read, so the start time is the caller's.
    ///
    /// Errors: `NotAuthorized` when the bus does not know the caller, the start time is
    /// unreadable or the caller's process is gone (never a subject without a start time,
    /// which polkit would look up itself, racily).
    async fn subject(
        &self,
        conn: &zbus::Connection,
        caller: &Caller,
        method: &str,
    ) -> Result<Subject> {
        if self.bus == BusChoice::System {
            let mut d = HashMap::new();
            d.insert(
                "name".to_string(),
                OwnedValue::from(zbus::zvariant::Str::from(caller.sender.clone())),
            );
            return Ok(Subject {
                subject_kind: "system-bus-name".into(),
                subject_details: d,
            });
        }
        let denied = |what: String| Error::NotAuthorized(format!("{method}: {what}"));
        let creds = zbus::fdo::DBusProxy::new(conn)
            .await
            .map_err(|e| Error::Failed(format!("{method}: cannot ask the bus: {e}")))?
            .get_connection_credentials(
                zbus::names::BusName::try_from(caller.sender.as_str())
                    .map_err(|e| denied(e.to_string()))?,
            )
            .await
            .map_err(|e| denied(format!("caller credentials unknown: {e}")))?;
        let pid = creds
            .process_id()
            .ok_or_else(|| denied("the bus gives no pid of the caller".into()))?;
        let start = crate::host::process_start_time(pid)
            .ok_or_else(|| denied(format!("the caller's process {pid} is gone")))?;
        if creds.process_fd().is_some_and(process_exited) {
            return Err(denied(format!("the caller's process {pid} is gone")));
        }
        Subject::new_for_owner(pid, Some(start), Some(caller.uid))
            .map_err(|e| denied(e.to_string()))
    }

    /// CheckAuthorization with `cancellation_id`; returns (is_authorized, is_challenge).
    async fn polkit_check(
        &self,
        conn: &zbus::Connection,
        subject: Subject,
        req: &Request,
        flags: u32,
        cancellation_id: &str,
    ) -> zbus::Result<(bool, bool)> {
        // A prompt waits for a person; without one polkit answers at once.
        let limit = if flags & ALLOW_USER_INTERACTION != 0 {
            Duration::from_secs(300)
        } else {
            Duration::from_secs(10)
        };
        let details = req.details();
        let details: HashMap<&str, &str> = details
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let flags = if flags & ALLOW_USER_INTERACTION != 0 {
            CheckAuthorizationFlags::AllowUserInteraction.into()
        } else {
            BitFlags::empty()
        };
        let fut = async {
            let sys = self.polkit_connection(conn).await?;
            let reply = AuthorityProxy::new(&sys)
                .await?
                .check_authorization(&subject, req.action, &details, flags, cancellation_id)
                .await;
            if let Err(e) = &reply {
                if !matches!(e, zbus::Error::MethodError(..) | zbus::Error::FDO(_)) {
                    // The connection itself may be broken: open a new one next time.
                    *self.system.lock().await = None;
                }
            }
            let r = reply?;
            Ok((r.is_authorized, r.is_challenge))
        };
        match tokio::time::timeout(limit, fut).await {
            Ok(r) => r,
            Err(_) => Err(zbus::Error::Failure("polkit did not answer in time".into())),
        }
    }
}

/// True when `name` (a unique bus name) has an owner on `conn`'s bus (`NameHasOwner`).
///
/// Errors: the bus call failing.
pub async fn name_has_owner(conn: &zbus::Connection, name: &str) -> zbus::Result<bool> {
    zbus::fdo::DBusProxy::new(conn)
        .await?
        .name_has_owner(zbus::names::BusName::try_from(name)?)
        .await
        .map_err(zbus::Error::from)
}

/// A future that completes when the unique name `sender` leaves `conn`'s bus (at once when it
/// has already gone). The watch (`NameOwnerChanged` with arg0 = `sender`) is in place before
/// `NameHasOwner` is asked, so a leave in between is not missed.
///
/// Errors: the bus calls failing.
async fn caller_leaves(
    conn: &zbus::Connection,
    sender: &str,
) -> zbus::Result<impl std::future::Future<Output = ()>> {
    use futures_util::StreamExt;
    let proxy = zbus::fdo::DBusProxy::new(conn).await?;
    let mut changes = proxy
        .receive_name_owner_changed_with_args(&[(0, sender)])
        .await?;
    let gone = !name_has_owner(conn, sender).await?;
    Ok(async move {
        if gone {
            return;
        }
        while let Some(sig) = changes.next().await {
            if sig.args().is_ok_and(|a| a.new_owner().is_none()) {
                return;
            }
        }
        // The connection to the bus is gone: the service stops on its own (`BusLost`).
        std::future::pending::<()>().await;
    })
}

/// Refuses an `AcquirePriority` `pid` that is neither the caller's own process nor one of its
/// descendants (the bus daemon's `GetConnectionUnixProcessID` of the sender, then the parent
/// chain through [`crate::host::descends_from`]): a lease tied to a stranger's process, or to
/// pid 1, would never end with the caller's work.
///
/// Errors: `InvalidArgument` for such a pid; `NotAuthorized` when the message has no sender or
/// the bus does not know its pid; `Failed` when the bus cannot be asked.
pub async fn check_own_pid(conn: &zbus::Connection, header: &Header<'_>, pid: u32) -> Result<()> {
    let Some(sender) = header.sender() else {
        return Err(Error::NotAuthorized(
            "AcquirePriority: message has no sender".into(),
        ));
    };
    let caller = zbus::fdo::DBusProxy::new(conn)
        .await
        .map_err(|e| Error::Failed(format!("AcquirePriority: cannot ask the bus: {e}")))?
        .get_connection_unix_process_id(zbus::names::BusName::from(sender.to_owned()))
        .await
        .map_err(|e| {
            Error::NotAuthorized(format!("AcquirePriority: the caller's pid is unknown: {e}"))
        })?;
    if crate::host::descends_from(pid, caller) {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "AcquirePriority: pid {pid} is not the caller's process ({caller}) or one of its descendants"
    )))
}

/// True when the process of `pidfd` has exited (a pidfd polls readable then, pidfd_open(2)).
fn process_exited(pidfd: &zbus::zvariant::OwnedFd) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::ZERO).map_or(true, |n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_of_self_is_readable() {
        assert!(crate::host::process_start_time(std::process::id()).is_some());
    }

    #[test]
    fn wiping_and_priority_are_separate_actions() {
        for r in [
            Request::acquire_priority(&[]),
            Request::release_priority(),
            Request::set_array_speed_limits("md0"),
            Request::restore_limits(),
            Request::request_sync_action("md0", "check"),
        ] {
            assert_eq!(r.action, PRIORITY_ACTION, "{r:?}");
        }
        for r in [
            Request::start_wipe("/dev/loop0"),
            Request::cancel_job("/dev/loop0", 1000),
        ] {
            assert_eq!(r.action, WIPE_ACTION, "{r:?}");
        }
    }

    #[test]
    fn details_name_the_method_and_the_device() {
        let d = Request::start_wipe("/dev/loop3").details();
        assert_eq!(d["method"], "StartWipe");
        assert_eq!(d["device"], "/dev/loop3");
        assert!(d["polkit.message"].contains("$(device)"));
        assert_eq!(d["polkit.gettext_domain"], "mdpilot");
        let d = Request::set_array_speed_limits("md/root").details();
        assert_eq!(d["device"], "/dev/md/root");
        let d = Request::acquire_priority(&["md1".into(), "md0".into(), "md1".into()]).details();
        assert_eq!(d["device"], "/dev/md0, /dev/md1");
        assert!(!Request::restore_limits().details().contains_key("device"));
        let d = Request::request_sync_action("md0", "repair").details();
        assert_eq!(d["sync-action"], "repair");
    }

    #[test]
    fn no_user_interaction_is_taken_out_of_the_options() {
        let mut o = Options::new();
        assert_eq!(take_interaction_flags("M", &mut o).unwrap(), 1);
        o.insert(NO_USER_INTERACTION.into(), OwnedValue::from(true));
        o.insert(
            "method".into(),
            OwnedValue::try_from(Value::from("zero")).unwrap(),
        );
        assert_eq!(take_interaction_flags("M", &mut o).unwrap(), 0);
        assert_eq!(o.len(), 1, "the other options stay");
        o.insert(NO_USER_INTERACTION.into(), OwnedValue::from(false));
        assert_eq!(take_interaction_flags("M", &mut o).unwrap(), 1);
        o.insert(NO_USER_INTERACTION.into(), OwnedValue::from(1u32));
        assert!(matches!(
            take_interaction_flags("M", &mut o),
            Err(Error::InvalidArgument(_))
        ));
    }
}
