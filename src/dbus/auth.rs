//! Who may call mutating methods: the CALLER of the message (its unique name from the header,
//! resolved by the bus daemon), never this process.
//!
//! Rule: uid 0 passes; any other uid needs polkit's yes for [`POLKIT_ACTION`] (asked on the system
//! bus, with user interaction only when the caller set `ALLOW_INTERACTIVE_AUTHORIZATION`). If polkit
//! is unreachable or says no, the answer is `NotAuthorized`.

use super::errors::{Error, Result};
use super::{BusChoice, POLKIT_ACTION};
use std::collections::HashMap;
use std::time::Duration;
use zbus::message::{Flags, Header};
use zbus::zvariant::Value;

/// Checks that the sender of `header` may change things. `bus` tells whether the sender's name
/// lives on the system bus (polkit subject `system-bus-name`) or elsewhere (subject
/// `unix-process` with the caller's pid, start time and uid).
///
/// Errors: `NotAuthorized` (message names the method, the uid and why).
pub async fn authorize(
    conn: &zbus::Connection,
    header: &Header<'_>,
    bus: &BusChoice,
) -> Result<()> {
    let method = header.member().map(|m| m.to_string()).unwrap_or_default();
    let Some(sender) = header.sender() else {
        return Err(Error::NotAuthorized(format!(
            "{method}: message has no sender"
        )));
    };
    let dbus = zbus::fdo::DBusProxy::new(conn)
        .await
        .map_err(|e| Error::Failed(format!("{method}: cannot ask the bus: {e}")))?;
    let name = zbus::names::BusName::from(sender.to_owned());
    let uid = dbus
        .get_connection_unix_user(name.clone())
        .await
        .map_err(|e| Error::NotAuthorized(format!("{method}: caller {sender} unknown: {e}")))?;
    if uid == 0 {
        return Ok(());
    }
    let interactive = header
        .primary()
        .flags()
        .contains(Flags::AllowInteractiveAuth);
    let subject: (&str, HashMap<&str, Value<'_>>) = if *bus == BusChoice::System {
        let mut d = HashMap::new();
        d.insert("name", Value::from(sender.as_str()));
        ("system-bus-name", d)
    } else {
        let pid = dbus
            .get_connection_unix_process_id(name)
            .await
            .map_err(|e| Error::NotAuthorized(format!("{method}: caller pid unknown: {e}")))?;
        let mut d = HashMap::new();
        d.insert("pid", Value::from(pid));
        d.insert(
            "start-time",
            Value::from(process_start_time(pid).unwrap_or(0)),
        );
        d.insert("uid", Value::from(uid as i32));
        ("unix-process", d)
    };
    match polkit_check(subject, interactive).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(Error::NotAuthorized(format!(
            "{method}: uid {uid} is not authorized for {POLKIT_ACTION}"
        ))),
        Err(e) => {
            tracing::info!("polkit unavailable, denying uid {uid}: {e}");
            Err(Error::NotAuthorized(format!(
                "{method}: uid {uid} is not root and polkit is unavailable ({e})"
            )))
        }
    }
}

/// Field 22 of `/proc/PID/stat` (start time in clock ticks since boot), which polkit uses to
/// pin the process against pid reuse.
fn process_start_time(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces: count from the last ')'.
    let rest = &s[s.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

async fn polkit_check(
    subject: (&str, HashMap<&str, Value<'_>>),
    interactive: bool,
) -> zbus::Result<bool> {
    let limit = if interactive {
        Duration::from_secs(300)
    } else {
        Duration::from_secs(10)
    };
    let fut = async {
        let sys = zbus::Connection::system().await?;
        let details: HashMap<&str, &str> = HashMap::new();
        let reply = sys
            .call_method(
                Some("org.freedesktop.PolicyKit1"),
                "/org/freedesktop/PolicyKit1/Authority",
                Some("org.freedesktop.PolicyKit1.Authority"),
                "CheckAuthorization",
                &(subject, POLKIT_ACTION, details, u32::from(interactive), ""),
            )
            .await?;
        let (authorized, _challenge, _details): (bool, bool, HashMap<String, String>) =
            reply.body().deserialize()?;
        Ok(authorized)
    };
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(zbus::Error::Failure("polkit did not answer in time".into())),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn start_time_of_self_is_readable() {
        assert!(super::process_start_time(std::process::id()).is_some());
    }
}
