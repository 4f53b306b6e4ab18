//! The data the blob side of a backend speaks.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::future::Future;
use std::time::Duration;

use uuid::Uuid;

use crate::error::{Error, Result};
use crate::key::{BlobName, ContainerName, ETag, shorten};

/// Blob metadata: names (C# identifiers, case-insensitive) to ASCII values.
pub type Metadata = BTreeMap<String, String>;

const MAX_METADATA_BYTES: usize = 8 * 1024;

/// Checks metadata as the service would; values are printable ASCII because
/// they travel as HTTP headers.
pub(crate) fn validate_metadata(metadata: &Metadata) -> Result<()> {
    let mut seen = HashSet::new();
    let mut bytes = 0;
    for (name, value) in metadata {
        let what = || format!("blob metadata name {}", shorten(name));
        let mut chars = name.chars();
        let starts_well = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if !starts_well || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Error::invalid(
                what(),
                "must be an ASCII identifier: a letter or `_`, then letters, digits or `_`",
            ));
        }
        if !seen.insert(name.to_ascii_lowercase()) {
            return Err(Error::invalid(
                what(),
                "appears twice ignoring case; metadata names are case-insensitive",
            ));
        }
        // The value itself is never quoted back: metadata may hold anything.
        if !value.bytes().all(|b| (b' '..=b'~').contains(&b)) {
            return Err(Error::invalid(
                format!("value of blob metadata `{name}`"),
                "must be printable ASCII",
            ));
        }
        bytes += name.len() + value.len();
    }
    if bytes > MAX_METADATA_BYTES {
        return Err(Error::invalid(
            "blob metadata",
            format!("is {bytes} bytes; the limit is {MAX_METADATA_BYTES}"),
        ));
    }
    Ok(())
}

pub(crate) fn validate_break_period(period: Option<Duration>) -> Result<()> {
    match period {
        Some(p) if p > LeaseDuration::MAX || p.subsec_nanos() != 0 => Err(Error::invalid(
            format!("lease break period {p:?}"),
            "must be whole seconds from 0 to 60",
        )),
        _ => Ok(()),
    }
}

/// A lease id. leasehold always proposes its own, so a retried acquire is
/// recognised as the same request.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseId(Uuid);

impl LeaseId {
    /// A fresh random lease id.
    pub fn new_random() -> Self {
        LeaseId(Uuid::new_v4())
    }

    /// Wraps a UUID.
    pub fn from_uuid(id: Uuid) -> Self {
        LeaseId(id)
    }

    /// The UUID.
    pub fn as_uuid(&self) -> Uuid {
        self.0
    }
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.hyphenated())
    }
}

impl fmt::Debug for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LeaseId({})", self.0.hyphenated())
    }
}

/// What [`BlobBackend::lease`](super::BlobBackend::lease) does to a
/// blob's lease: one request of the Lease Blob operation each, answered by
/// the [`LeaseReply`] of its name. Every action also fails with
/// [`Error::NotFound`] for a missing blob, and as
/// [every request](super::TableBackend#errors) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseAction {
    /// Acquires a lease with the client-chosen id `proposed` (again with the
    /// active id succeeds: an idempotent retry).
    ///
    /// # Errors
    /// [`Error::LeaseHeld`] when another id holds the lease or it is
    /// breaking; [`Error::Invalid`] for a duration outside 15–60 s.
    Acquire {
        /// How long the lease lasts unless renewed.
        duration: LeaseDuration,
        /// The lease id to take it with.
        proposed: LeaseId,
    },
    /// Renews the lease `id`.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when `id` is not the blob's lease or it was
    /// broken (an expired lease nobody took since can still be renewed).
    Renew(LeaseId),
    /// Changes the active lease `id` to `proposed`.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when `id` is not the active lease (changing to
    /// the current id is a retry).
    Change {
        /// The lease's current id.
        id: LeaseId,
        /// Its new id.
        proposed: LeaseId,
    },
    /// Releases the lease `id`.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when `id` is not the blob's lease.
    Release(LeaseId),
    /// Breaks the lease without its id. `period` (0–60 s) is how long the
    /// holder keeps it; `None` lets a timed lease run out and breaks an
    /// infinite one at once.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a period not whole seconds from 0 to 60;
    /// [`Error::LeaseLost`] when there is no lease to break.
    Break {
        /// How long the holder keeps the lease.
        period: Option<Duration>,
    },
}

/// What a successful [`BlobBackend::lease`](super::BlobBackend::lease)
/// answers, one variant per [`LeaseAction`].
///
/// ```
/// use leasehold::backend::{LeaseAction, LeaseDuration, LeaseId, LeaseReply};
/// use leasehold::backend::{BlobBackend, BlobConditions, Metadata, memory::MemoryBackend};
/// use leasehold::key::{BlobName, ContainerName};
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let backend = MemoryBackend::new();
/// let (c, b) = (ContainerName::new("locks")?, BlobName::new("job")?);
/// backend.create_container(&c).await?;
/// let etag = backend.put_blob(&c, &b, Vec::new(), &Metadata::new(), &BlobConditions::none()).await?;
/// let id = LeaseId::new_random();
/// let acquire = LeaseAction::Acquire { duration: LeaseDuration::Infinite, proposed: id };
/// let reply = backend.lease(&c, &b, acquire).await?;
/// assert_eq!(reply, LeaseReply::Acquired { id, etag: Some(etag) });
/// assert_eq!(backend.lease(&c, &b, LeaseAction::Release(id)).await?, LeaseReply::Released);
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseReply {
    /// [`LeaseAction::Acquire`]. A lease never changes the ETag, so a caller
    /// that remembers the blob at that ETag knows its content unread.
    Acquired {
        /// The lease id now active.
        id: LeaseId,
        /// The blob's ETag, when the reply reported it.
        etag: Option<ETag>,
    },
    /// [`LeaseAction::Renew`].
    Renewed,
    /// [`LeaseAction::Change`]: the lease's id now.
    Changed(LeaseId),
    /// [`LeaseAction::Release`].
    Released,
    /// [`LeaseAction::Break`]: the time until the lease is broken.
    Broken(Duration),
}

impl LeaseReply {
    /// The lease's id after an acquire or a change; `None` otherwise.
    pub fn lease_id(&self) -> Option<LeaseId> {
        match self {
            LeaseReply::Acquired { id, .. } | LeaseReply::Changed(id) => Some(*id),
            _ => None,
        }
    }
}

impl LeaseAction {
    pub(crate) fn op(&self) -> super::Op {
        match self {
            LeaseAction::Acquire { .. } => super::Op::AcquireLease,
            LeaseAction::Renew(_) => super::Op::RenewLease,
            LeaseAction::Change { .. } => super::Op::ChangeLease,
            LeaseAction::Release(_) => super::Op::ReleaseLease,
            LeaseAction::Break { .. } => super::Op::BreakLease,
        }
    }
}

/// One method of [`LeaseCalls`]: its arguments, the action they make, and
/// what it keeps of the reply.
macro_rules! lease_call {
    ($name:ident($($arg:ident: $ty:ty),*) -> $out:ty = $action:expr, $reply:pat => $keep:expr) => {
        fn $name(
            &self,
            container: &ContainerName,
            blob: &BlobName,
            $($arg: $ty),*
        ) -> impl Future<Output = Result<$out>> + Send {
            answer(self, container, blob, $action, |reply| match reply {
                $reply => Some($keep),
                _ => None,
            })
        }
    };
}

/// The lease actions one at a time, each with its own answer. A backend
/// answering with another action's reply is [`Error::Inconsistent`].
pub(crate) trait LeaseCalls: super::BlobBackend {
    lease_call!(acquire_lease(duration: LeaseDuration, proposed: LeaseId) -> Option<ETag> =
        LeaseAction::Acquire { duration, proposed },
        LeaseReply::Acquired { etag, .. } => etag);
    lease_call!(renew_lease(id: LeaseId) -> () =
        LeaseAction::Renew(id), LeaseReply::Renewed => ());
    lease_call!(change_lease(id: LeaseId, proposed: LeaseId) -> LeaseId =
        LeaseAction::Change { id, proposed }, LeaseReply::Changed(id) => id);
    lease_call!(release_lease(id: LeaseId) -> () =
        LeaseAction::Release(id), LeaseReply::Released => ());
    lease_call!(break_lease(period: Option<Duration>) -> Duration =
        LeaseAction::Break { period }, LeaseReply::Broken(left) => left);
}

impl<B: super::BlobBackend + ?Sized> LeaseCalls for B {}

async fn answer<B: super::BlobBackend + ?Sized, T>(
    backend: &B,
    container: &ContainerName,
    blob: &BlobName,
    action: LeaseAction,
    pick: fn(LeaseReply) -> Option<T>,
) -> Result<T> {
    let reply = backend.lease(container, blob, action).await?;
    pick(reply.clone()).ok_or_else(|| Error::Inconsistent {
        what: format!(
            "the backend answered {:?} with {reply:?}",
            action.op().name()
        ),
    })
}

/// How long a lease lasts unless renewed: 15 to 60 seconds, or infinite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaseDuration {
    /// A timed lease, in whole seconds (15..=60).
    Seconds(u8),
    /// A lease that lasts until released or broken.
    Infinite,
}

impl LeaseDuration {
    /// The shortest timed lease.
    pub const MIN: Duration = Duration::from_secs(15);
    /// The longest timed lease.
    pub const MAX: Duration = Duration::from_secs(60);

    /// A timed lease of `duration`; [`Error::Invalid`] unless it is whole
    /// seconds in 15..=60.
    pub fn timed(duration: Duration) -> Result<Self> {
        let secs = duration.as_secs();
        if duration.subsec_nanos() != 0 || !(15..=60).contains(&secs) {
            return Err(Error::invalid(
                format!("lease duration {duration:?}"),
                "must be whole seconds from 15 to 60, or infinite",
            ));
        }
        Ok(LeaseDuration::Seconds(secs as u8))
    }

    /// The duration, or `None` for an infinite lease.
    pub fn as_duration(self) -> Option<Duration> {
        match self {
            LeaseDuration::Seconds(s) => Some(Duration::from_secs(u64::from(s))),
            LeaseDuration::Infinite => None,
        }
    }

    /// Whether the lease is timed or infinite.
    pub fn kind(self) -> LeaseKind {
        match self {
            LeaseDuration::Seconds(_) => LeaseKind::Fixed,
            LeaseDuration::Infinite => LeaseKind::Infinite,
        }
    }

    /// Checks a value built directly from the enum ([`Error::Invalid`] as
    /// [`LeaseDuration::timed`]).
    pub fn validate(self) -> Result<Self> {
        match self {
            LeaseDuration::Seconds(s) => Self::timed(Duration::from_secs(u64::from(s))),
            LeaseDuration::Infinite => Ok(self),
        }
    }
}

/// The state of a blob's lease, as Get Blob Properties reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaseState {
    /// Never leased, or released: anyone can acquire.
    Available,
    /// Held.
    Leased,
    /// A timed lease ran out; anyone can acquire (its holder can still renew
    /// while nobody has).
    Expired,
    /// Being broken: the holder keeps it for the rest of the break period.
    Breaking,
    /// Broken: anyone can acquire.
    Broken,
}

/// Whether a lease is timed or infinite (the service does not report a
/// timed lease's seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaseKind {
    /// A timed lease (15–60 s).
    Fixed,
    /// An infinite lease.
    Infinite,
}

/// A blob's lease, as Get Blob Properties reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseInfo {
    /// The lease state.
    pub state: LeaseState,
    /// The kind of the current lease, while `Leased`.
    pub kind: Option<LeaseKind>,
}

impl LeaseInfo {
    /// Whether the blob is locked (`lease_status: locked`): leased or breaking.
    pub fn is_locked(&self) -> bool {
        matches!(self.state, LeaseState::Leased | LeaseState::Breaking)
    }
}

/// A blob's properties.
#[derive(Debug, Clone, PartialEq)]
pub struct BlobProperties {
    /// The blob's ETag.
    pub etag: ETag,
    /// The blob's metadata.
    pub metadata: Metadata,
    /// The blob's lease.
    pub lease: LeaseInfo,
    /// The body length in bytes.
    pub content_length: u64,
}

/// A blob: body and properties.
#[derive(Debug, Clone, PartialEq)]
pub struct Blob {
    /// The body.
    pub body: Vec<u8>,
    /// The properties.
    pub properties: BlobProperties,
}

/// One blob of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct BlobItem {
    /// The blob's name.
    pub name: String,
    /// Its properties.
    pub properties: BlobProperties,
}

/// One page of a blob listing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BlobListPage {
    /// The blobs, in name order.
    pub items: Vec<BlobItem>,
    /// Where the next page starts; `None` on the last page.
    pub next_marker: Option<String>,
}

/// How a blob write treats the blob as it is: one mode per write, so
/// conditions that cannot hold together cannot be asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum BlobWriteMode {
    /// Whatever is stored, or nothing: no condition.
    #[default]
    Overwrite,
    /// Only if the blob does not exist (`If-None-Match: *`): a put finds one
    /// there with 409 `BlobAlreadyExists`, other writes with 412
    /// `ConditionNotMet`.
    Create,
    /// Only if the blob still has this ETag (`If-Match`; 412
    /// `ConditionNotMet`, also when the blob is gone).
    IfMatch(ETag),
}

/// The conditions of a blob write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlobConditions {
    /// What the blob must be for the write to apply.
    pub mode: BlobWriteMode,
    /// The lease the write is made under (a leased blob takes writes only
    /// with its id; an id on a blob without an active lease fails).
    pub lease_id: Option<LeaseId>,
}

impl BlobConditions {
    /// No conditions: overwrite, without a lease.
    pub fn none() -> Self {
        Self::default()
    }

    /// Overwrite, under this lease.
    pub fn leased(id: LeaseId) -> Self {
        Self::none().with_lease(id)
    }

    /// Only if the blob does not exist.
    pub fn create_only() -> Self {
        BlobConditions {
            mode: BlobWriteMode::Create,
            lease_id: None,
        }
    }

    /// Only if the blob still has `etag`.
    pub fn if_match(etag: ETag) -> Self {
        BlobConditions {
            mode: BlobWriteMode::IfMatch(etag),
            lease_id: None,
        }
    }

    /// These conditions, under the lease `id`.
    pub fn with_lease(mut self, id: LeaseId) -> Self {
        self.lease_id = Some(id);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_durations() {
        assert_eq!(
            LeaseDuration::timed(Duration::from_secs(15)).unwrap(),
            LeaseDuration::Seconds(15)
        );
        assert!(LeaseDuration::timed(Duration::from_secs(60)).is_ok());
        for bad in [0, 14, 61, 300] {
            let e = LeaseDuration::timed(Duration::from_secs(bad)).unwrap_err();
            assert!(e.to_string().contains("lease duration"), "{e}");
        }
        assert!(LeaseDuration::timed(Duration::from_millis(15_500)).is_err());
        assert!(LeaseDuration::Seconds(61).validate().is_err());
        assert!(LeaseDuration::Seconds(14).validate().is_err());
    }
}
