//! [`LeaseOptions`], and the [`Settings`] they are checked into.

use std::time::Duration;

use crate::backend::LeaseDuration;
use crate::error::{Error, Result};
use crate::key::{BlobName, ContainerName};
use crate::lease::LeaseName;
use crate::retry;

/// Settings of a [`LeaseManager`](crate::lease::LeaseManager), checked by
/// [`LeaseManager::new`](crate::lease::LeaseManager::new); each setter
/// names its default.
#[derive(Debug, Clone)]
#[must_use = "LeaseOptions do nothing until given to `StoreBuilder::lease_options` or `LeaseManager::new`"]
pub struct LeaseOptions {
    /// `None` for an infinite lease.
    pub(crate) duration: Option<Duration>,
    renew_interval: Option<Duration>,
    pub(crate) drift_margin: Duration,
    container: Option<ContainerName>,
    pub(crate) poll_interval: Duration,
    owner: Option<String>,
    pub(crate) owner_metadata: bool,
    pub(crate) max_handovers: u32,
    pub(crate) max_hold: Duration,
    jitter_seed: Option<u64>,
    pub(crate) unavailable_after: Duration,
}

/// The default lease duration, in seconds.
pub(crate) const DEFAULT_DURATION_SECS: u8 = 30;

impl Default for LeaseOptions {
    fn default() -> Self {
        LeaseOptions {
            duration: Some(Duration::from_secs(u64::from(DEFAULT_DURATION_SECS))),
            renew_interval: None,
            drift_margin: Duration::from_secs(1),
            container: None,
            poll_interval: Self::DEFAULT_POLL_INTERVAL,
            owner: None,
            owner_metadata: true,
            max_handovers: 1000,
            max_hold: Duration::from_millis(500),
            jitter_seed: None,
            unavailable_after: Self::DEFAULT_UNAVAILABLE_AFTER,
        }
    }
}

/// Builder methods that set one option each: `name(arg: Type) => field = value;`.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident($arg:ident: $ty:ty) => $field:ident = $value:expr;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $arg: $ty) -> Self {
                self.$field = $value;
                self
            }
        )*
    };
}
pub(super) use setters;

impl LeaseOptions {
    /// The default of [`LeaseOptions::with_poll_interval`].
    pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(100);

    /// The default of [`LeaseOptions::with_unavailable_after`].
    pub const DEFAULT_UNAVAILABLE_AFTER: Duration = Duration::from_secs(30);

    /// The default container for lease blobs.
    pub const DEFAULT_CONTAINER: &str = "leasehold-leases";

    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Infinite leases: never renewed, held until released or broken; a
    /// loss shows only when a write under the lease is refused.
    pub fn with_infinite_duration(mut self) -> Self {
        self.duration = None;
        self
    }

    /// The bound of a [tenure](crate::lease#turns-between-processes):
    /// `max_handovers` guards or `max_hold` (default: 1000 and 500 ms).
    pub fn with_handover_limit(mut self, max_handovers: u32, max_hold: Duration) -> Self {
        self.max_handovers = max_handovers;
        self.max_hold = max_hold;
        self
    }

    setters! {
        /// The lease duration: whole seconds from 15 to 60.
        with_duration(duration: Duration) => duration = Some(duration);

        /// How often a held lease is renewed; must be shorter than the duration
        /// minus the drift margin. Default: a third of the duration.
        with_renew_interval(interval: Duration) => renew_interval = Some(interval);

        /// How much earlier than the service a guard counts its lease
        /// expired: less than half the duration (default 1 s).
        with_drift_margin(margin: Duration) => drift_margin = margin;

        /// The container that holds the lease blobs.
        with_container(container: ContainerName) => container = Some(container);

        /// The pause between attempts at a lease held elsewhere (±10 %):
        /// from 10 ms to half the lease duration; default 100 ms. Standby
        /// leader candidates back off from 50 ms to 1 s (or this, if longer).
        with_poll_interval(interval: Duration) => poll_interval = interval;

        /// The identity written as owner metadata and into reservation logs:
        /// 1 to 256 printable ASCII characters, no leading or trailing space.
        with_owner(owner: impl Into<String>) => owner = Some(owner.into());

        /// Whether a fresh acquire records the owner in the blob's metadata
        /// (one more write). Default: yes.
        with_owner_metadata(write: bool) => owner_metadata = write;

        /// Seeds the jitter of acquire polling (for reproducible tests).
        with_jitter_seed(seed: u64) => jitter_seed = Some(seed);

        /// How long a wait for a lease rides out [failing
        /// storage](crate::lease#failing-storage): from 1 ms to 24 hours.
        with_unavailable_after(bound: Duration) => unavailable_after = bound;
    }

    /// Checks the options and fills in the defaults that depend on others.
    pub(crate) fn resolve(&self) -> Result<Settings> {
        let lease_len = self.duration;
        let duration = lease_len.map_or(Ok(LeaseDuration::Infinite), LeaseDuration::timed)?;
        if let Some(len) = lease_len
            && self.drift_margin >= len / 2
        {
            return Err(Error::invalid(
                format!("drift margin {:?}", self.drift_margin),
                format!("must be less than half the lease duration ({len:?})"),
            ));
        }
        let renew_interval = match (self.renew_interval, lease_len) {
            (Some(i), Some(len)) => {
                let limit = len - self.drift_margin;
                if i.is_zero() || i >= limit {
                    return Err(Error::invalid(
                        format!("renew interval {i:?}"),
                        format!(
                            "must be positive and shorter than the lease duration ({len:?}) \
                             minus the drift margin ({:?})",
                            self.drift_margin
                        ),
                    ));
                }
                i
            }
            (None, Some(len)) => len / 3,
            (_, None) => Duration::MAX,
        };
        let poll_limit = lease_len.map_or(Duration::from_secs(30), |len| len / 2);
        if self.poll_interval < Duration::from_millis(10) || self.poll_interval > poll_limit {
            return Err(Error::invalid(
                format!("poll interval {:?}", self.poll_interval),
                format!("must be from 10ms to {poll_limit:?} (half the lease duration)"),
            ));
        }
        if self.unavailable_after < Duration::from_millis(1)
            || self.unavailable_after > Duration::from_secs(86_400)
        {
            return Err(Error::invalid(
                format!("unavailable-after bound {:?}", self.unavailable_after),
                "must be from 1ms to 24h",
            ));
        }
        let owner = match &self.owner {
            Some(owner) => check_owner(owner)?,
            None => default_owner(),
        };
        Ok(self.settings(duration, renew_interval, owner))
    }

    fn settings(
        &self,
        duration: LeaseDuration,
        renew_interval: Duration,
        owner: String,
    ) -> Settings {
        Settings {
            options: self.clone(),
            duration,
            renew_interval,
            container: (self.container.clone())
                .unwrap_or_else(|| ContainerName::from_static(Self::DEFAULT_CONTAINER)),
            owner,
            seed: self.jitter_seed.unwrap_or_else(retry::random_seed),
            name_prefix: String::new(),
        }
    }
}

fn check_owner(owner: &str) -> Result<String> {
    let refuse = |why| Err(Error::invalid(format!("owner identity {owner:?}"), why));
    if owner.is_empty() || owner.len() > 256 {
        return refuse("must be 1 to 256 characters long");
    }
    if !owner.bytes().all(|b| (b' '..=b'~').contains(&b)) {
        return refuse("may contain only printable ASCII characters");
    }
    if owner.starts_with(' ') || owner.ends_with(' ') {
        return refuse("must not start or end with a space");
    }
    Ok(owner.to_owned())
}

/// `hostname-pid-random`, with the host name cut to safe ASCII.
fn default_owner() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        .take(200)
        .collect();
    let host = if host.is_empty() {
        "host".to_owned()
    } else {
        host
    };
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}-{}", std::process::id(), &random[..8])
}

impl Settings {
    /// The default options' settings in `container`, for leases of `secs`
    /// seconds (clamped to 15 to 60): valid without a check.
    pub(crate) fn defaults(container: ContainerName, owner_metadata: bool, secs: u8) -> Settings {
        let secs = secs.clamp(15, 60);
        let len = Duration::from_secs(u64::from(secs));
        let options = LeaseOptions {
            duration: Some(len),
            container: Some(container),
            owner_metadata,
            ..LeaseOptions::default()
        };
        options.settings(LeaseDuration::Seconds(secs), len / 3, default_owner())
    }

    pub(crate) fn with_name_prefix(mut self, prefix: &str) -> Settings {
        prefix.clone_into(&mut self.name_prefix);
        self
    }

    /// `encoded`, under `{name_prefix}/` when there is a prefix.
    fn prefixed(&self, encoded: String) -> String {
        if self.name_prefix.is_empty() {
            encoded
        } else {
            format!("{}/{encoded}", self.name_prefix)
        }
    }

    pub(crate) fn blob_of(&self, name: &LeaseName) -> Result<BlobName> {
        BlobName::new(self.prefixed(name.encoded()))
    }

    /// The lease name a blob of this manager's container stores, if any.
    pub(crate) fn name_of(&self, blob: &str) -> Option<LeaseName> {
        let encoded = if self.name_prefix.is_empty() {
            blob
        } else {
            blob.strip_prefix(self.name_prefix.as_str())?
                .strip_prefix('/')?
        };
        LeaseName::from_blob_name(encoded).ok()
    }

    /// The blob-name prefix of the leases whose names start with `prefix`.
    pub(crate) fn blob_prefix(&self, prefix: &str) -> Result<String> {
        let encoded = if prefix.is_empty() {
            String::new()
        } else {
            LeaseName::new(prefix)?.encoded()
        };
        Ok(self.prefixed(encoded))
    }
}

/// Checked [`LeaseOptions`], with what they leave open filled in.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) options: LeaseOptions,
    pub(crate) duration: LeaseDuration,
    pub(crate) renew_interval: Duration,
    pub(crate) container: ContainerName,
    pub(crate) owner: String,
    pub(crate) seed: u64,
    /// A store's table prefix, put before every lease blob's name with a
    /// `/` (which no encoded lease name holds), to keep stores apart.
    pub(crate) name_prefix: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn check(o: LeaseOptions) -> Result<Settings> {
        o.resolve()
    }

    #[test]
    fn defaults_are_thirty_second_leases_renewed_every_ten() {
        let s = check(LeaseOptions::default()).unwrap();
        assert_eq!(s.duration, LeaseDuration::Seconds(30));
        assert_eq!(s.renew_interval, Duration::from_secs(10));
        assert_eq!(s.container.as_str(), LeaseOptions::DEFAULT_CONTAINER);
        assert!(
            s.owner.contains(&format!("-{}-", std::process::id())),
            "{}",
            s.owner
        );
        check_owner(&s.owner).unwrap();
    }

    #[test]
    fn the_default_settings_are_those_of_the_default_options() {
        let resolved = check(LeaseOptions::default()).unwrap();
        let built = Settings::defaults(resolved.container.clone(), true, DEFAULT_DURATION_SECS);
        let fields = |s: &Settings| {
            format!(
                "{:?} {:?} {:?} {:?} {} {:?} {} {} {:?} {:?}",
                s.duration,
                s.options.duration,
                s.renew_interval,
                s.options.drift_margin,
                s.container,
                s.options.poll_interval,
                s.options.owner_metadata,
                s.options.max_handovers,
                s.options.max_hold,
                s.options.unavailable_after
            )
        };
        assert_eq!(fields(&built), fields(&resolved));
        check_owner(&built.owner).unwrap();
        ContainerName::new(LeaseOptions::DEFAULT_CONTAINER).unwrap();
    }

    #[test]
    fn bad_options_are_invalid_and_name_the_option() {
        let (o, ms) = (LeaseOptions::new(), Duration::from_millis);
        let cases = [
            (o.clone().with_duration(ms(14_000)), "lease duration"),
            (o.clone().with_duration(ms(61_000)), "lease duration"),
            (o.clone().with_duration(ms(15_500)), "lease duration"),
            (o.clone().with_renew_interval(ms(30_000)), "renew interval"),
            (o.clone().with_renew_interval(ms(29_000)), "renew interval"),
            (o.clone().with_renew_interval(ms(0)), "renew interval"),
            (o.clone().with_drift_margin(ms(15_000)), "drift margin"),
            (o.clone().with_poll_interval(ms(16_000)), "poll interval"),
            (o.clone().with_poll_interval(ms(1)), "poll interval"),
            (o.clone().with_owner(""), "owner identity"),
            (o.clone().with_owner("é"), "owner identity"),
            (o.clone().with_owner(" x"), "owner identity"),
        ];
        for (o, what) in cases {
            let e = check(o).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Invalid);
            assert!(e.to_string().contains(what), "{e} should name {what}");
        }
        let ok = LeaseOptions::new()
            .with_duration(Duration::from_secs(15))
            .with_renew_interval(Duration::from_secs(5))
            .with_owner("node a");
        assert!(check(ok).is_ok());
        assert!(check(LeaseOptions::new().with_infinite_duration()).is_ok());
    }
}
