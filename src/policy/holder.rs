//! Lease holders: the names leases (and journaled changes) are kept under, and the schemes the
//! service and its jobs keep for themselves. Pure: no I/O.
//!
//! The state file keeps the text form ([`Holder`]'s `Display`, read back by [`Holder::parse`]),
//! so files written before this type load as they are. Every producer of a reserved holder
//! builds it here ([`Holder::wipe`], [`Holder::check_throttle`], ...), and every front end
//! (the CLI on the files, the D-Bus service) takes a caller's name through [`Holder::chosen`]
//! and ends a lease by name only after [`Holder::may_release`], so the rules are the same
//! whether or not the service runs.

use super::request::CoreError;
pub use super::request::{valid_holder_text as valid_text, MAX_HOLDER_BYTES};
use std::fmt;

/// The prefixes of the reserved schemes, as the text form spells them: `dbus-` (bus clients'
/// minted ids), `admin-` (`SetArraySpeedLimits`), `check-` (a check's throttle), `resync-` (the
/// pressure throttle of a resync or recovery), `wipe:` (a wipe job's lease) and `freeze:` (a
/// wipe job's freeze).
pub const RESERVED_PREFIXES: [&str; 6] =
    ["dbus-", "admin-", "check-", "resync-", "wipe:", "freeze:"];

/// Makes a holder of one scheme from the text after its prefix.
type Scheme = fn(String) -> Holder;

/// Who holds a lease, by scheme. The text form is the string after the prefix for each
/// reserved scheme; [`Holder::Named`] is any other name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Holder {
    /// A name a caller chose: `installer` (`policy apply`'s default), `timed`, a profile's
    /// name, an `AcquirePriority` `holder`.
    Named(String),
    /// A bus client's lease, minted by the service: `dbus-<unique name without ':'>-<n>`
    /// (the part after `dbus-`).
    BusClient(String),
    /// `SetArraySpeedLimits`' lease on an array: `admin-<kernel name>`.
    ArrayAdmin(String),
    /// A check's throttle on an array's `sync_speed_max`: `check-<kernel name>`.
    CheckThrottle(String),
    /// The pressure throttle of an array's resync or recovery (`[resync] pressure_target`) on
    /// its `sync_speed_max`: `resync-<kernel name>`.
    ResyncThrottle(String),
    /// A wipe job's lease: `wipe:<device path>`.
    Wipe(String),
    /// A wipe job's freeze of an array (a journaled change's id): `freeze:<kernel name>`.
    Freeze(String),
}

impl Holder {
    /// The holder a text form names (any text: the scheme is its prefix, else
    /// [`Holder::Named`]).
    pub fn parse(text: &str) -> Holder {
        let schemes: [(&str, Scheme); 6] = [
            ("dbus-", Holder::BusClient),
            ("admin-", Holder::ArrayAdmin),
            ("check-", Holder::CheckThrottle),
            ("resync-", Holder::ResyncThrottle),
            ("wipe:", Holder::Wipe),
            ("freeze:", Holder::Freeze),
        ];
        for (prefix, make) in schemes {
            if let Some(rest) = text.strip_prefix(prefix) {
                return make(rest.to_string());
            }
        }
        Holder::Named(text.to_string())
    }

    /// A name a caller chose for its lease (`policy apply --holder`, `AcquirePriority`'s
    /// `holder`): 1-[`MAX_HOLDER_BYTES`] bytes without control characters, in none of the
    /// reserved schemes.
    ///
    /// Errors: [`CoreError::InvalidHolder`]; [`CoreError::ReservedHolder`] for a name in a
    /// reserved scheme.
    pub fn chosen(name: &str) -> Result<Holder, CoreError> {
        if !valid_text(name) {
            return Err(CoreError::InvalidHolder(name.to_string()));
        }
        match Holder::parse(name) {
            h @ Holder::Named(_) => Ok(h),
            h => Err(CoreError::ReservedHolder {
                holder: name.to_string(),
                why: format!(
                    "{} uses a prefix the service keeps for its own leases ({})",
                    h.what(),
                    RESERVED_PREFIXES.join(", ")
                ),
            }),
        }
    }

    /// The lease of the bus client `sender` (its unique name, `:1.42`), number `n` of this run
    /// of the service: `dbus-1.42-<n>`.
    pub fn bus_client(sender: &str, n: u64) -> Holder {
        Holder::BusClient(format!("{}-{n}", sender.trim_start_matches(':')))
    }

    /// `SetArraySpeedLimits`' lease on `array` (kernel name).
    pub fn array_admin(array: &str) -> Holder {
        Holder::ArrayAdmin(array.to_string())
    }

    /// A check's throttle on `array` (kernel name).
    pub fn check_throttle(array: &str) -> Holder {
        Holder::CheckThrottle(array.to_string())
    }

    /// The pressure throttle of `array`'s resync or recovery (kernel name).
    pub fn resync_throttle(array: &str) -> Holder {
        Holder::ResyncThrottle(array.to_string())
    }

    /// Whether this is one of the service's pressure throttles (a check's or a resync's):
    /// leases that stand aside for every other lease on the speed limits.
    pub fn is_throttle(&self) -> bool {
        matches!(self, Holder::CheckThrottle(_) | Holder::ResyncThrottle(_))
    }

    /// A wipe job's lease on the device at `path` (as the probe resolved it).
    pub fn wipe(path: &std::path::Path) -> Holder {
        Holder::Wipe(path.display().to_string())
    }

    /// A wipe job's freeze of `array` (kernel name).
    pub fn freeze(array: &str) -> Holder {
        Holder::Freeze(array.to_string())
    }

    /// Whether a front end may end this lease by its name (`ReleasePriority`,
    /// `policy release`), for the bus client `client` (its unique name; `None` for the CLI on
    /// the files). Named leases and `admin-` ones (as `SetArraySpeedLimits` 0 0 would) may be;
    /// a bus client's only by that client; a wipe job's, a freeze and a check's throttle never:
    /// they end with their job or check.
    ///
    /// Errors: [`CoreError::ReservedHolder`], saying how that lease ends.
    pub fn may_release(&self, client: Option<&str>) -> Result<(), CoreError> {
        let why = match self {
            Holder::Named(_) | Holder::ArrayAdmin(_) => return Ok(()),
            Holder::BusClient(rest) => {
                let own = client.is_some_and(|c| {
                    rest.rsplit_once('-')
                        .is_some_and(|(s, _)| s == c.trim_start_matches(':'))
                });
                if own {
                    return Ok(());
                }
                "another bus client's lease; it ends when that client releases it or leaves the bus"
                    .to_string()
            }
            Holder::CheckThrottle(a) => {
                format!("the throttle of a check; pause or cancel the check of {a} to end it")
            }
            Holder::ResyncThrottle(a) => format!(
                "the pressure throttle of {a}'s resync; it ends with the resync, or when [resync] pressure_target is unset (reload)"
            ),
            Holder::Wipe(d) => format!("a wipe job's lease; cancel the wipe of {d} to end it"),
            Holder::Freeze(a) => {
                format!("a wipe job's freeze; cancel the wipe on {a} to end it")
            }
        };
        Err(CoreError::ReservedHolder {
            holder: self.to_string(),
            why,
        })
    }

    /// What kind of holder this is, for messages.
    fn what(&self) -> &'static str {
        match self {
            Holder::Named(_) => "a named lease",
            Holder::BusClient(_) => "a bus client's lease",
            Holder::ArrayAdmin(_) => "an array's admin limits",
            Holder::CheckThrottle(_) => "a check's throttle",
            Holder::ResyncThrottle(_) => "a resync's throttle",
            Holder::Wipe(_) => "a wipe job's lease",
            Holder::Freeze(_) => "a wipe job's freeze",
        }
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Holder::Named(n) => f.write_str(n),
            Holder::BusClient(r) => write!(f, "dbus-{r}"),
            Holder::ArrayAdmin(a) => write!(f, "admin-{a}"),
            Holder::CheckThrottle(a) => write!(f, "check-{a}"),
            Holder::ResyncThrottle(a) => write!(f, "resync-{a}"),
            Holder::Wipe(d) => write!(f, "wipe:{d}"),
            Holder::Freeze(a) => write!(f, "freeze:{a}"),
        }
    }
}

impl From<Holder> for String {
    fn from(h: Holder) -> String {
        h.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_forms_round_trip_and_keep_the_old_spellings() {
        for (text, h) in [
            ("installer", Holder::Named("installer".into())),
            ("dbus-1.5-1", Holder::bus_client(":1.5", 1)),
            ("admin-md0", Holder::array_admin("md0")),
            ("check-md0", Holder::check_throttle("md0")),
            ("resync-md0", Holder::resync_throttle("md0")),
            (
                "wipe:/dev/sda",
                Holder::wipe(std::path::Path::new("/dev/sda")),
            ),
            ("freeze:md0", Holder::freeze("md0")),
        ] {
            assert_eq!(Holder::parse(text), h);
            assert_eq!(h.to_string(), text);
        }
    }

    #[test]
    fn a_chosen_name_is_never_in_a_reserved_scheme() {
        assert_eq!(
            Holder::chosen("installer"),
            Ok(Holder::Named("installer".into()))
        );
        for p in RESERVED_PREFIXES {
            let e = Holder::chosen(&format!("{p}x")).unwrap_err();
            assert!(matches!(e, CoreError::ReservedHolder { .. }), "{p}: {e:?}");
            assert!(e.to_string().contains("keeps for its own"), "{e}");
        }
        for bad in ["", "a\n", &"x".repeat(129)] {
            assert!(matches!(
                Holder::chosen(bad),
                Err(CoreError::InvalidHolder(_))
            ));
        }
    }

    #[test]
    fn only_named_admin_and_own_client_leases_are_released_by_name() {
        assert!(Holder::parse("installer").may_release(None).is_ok());
        assert!(Holder::parse("admin-md0").may_release(None).is_ok());
        let own = Holder::bus_client(":1.5", 3);
        assert!(own.may_release(Some(":1.5")).is_ok());
        for (h, by, says) in [
            (own.clone(), Some(":1.7"), "another bus client"),
            (own.clone(), Some(":1.55"), "another bus client"),
            (own, None, "another bus client"),
            (
                Holder::parse("wipe:/dev/sda"),
                Some(":1.5"),
                "cancel the wipe",
            ),
            (Holder::parse("freeze:md0"), None, "cancel the wipe"),
            (Holder::parse("check-md0"), None, "cancel the check of md0"),
            (Holder::parse("resync-md1"), None, "ends with the resync"),
        ] {
            let e = h.may_release(by).unwrap_err();
            assert!(e.to_string().contains(says), "{h}: {e}");
        }
    }
}
