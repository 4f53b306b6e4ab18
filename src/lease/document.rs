//! What a lease blob stores (see [`LeaseDocument`]): a private storage
//! format, which operators see through
//! [`LeaseDescription`](super::LeaseDescription).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::backend::{Blob, Metadata};
use crate::error::{Error, Result};

use super::name::LeaseName;

// Metadata names (see the table on `LeaseDocument`).
pub(crate) const META_OWNER: &str = "leasehold_owner";
pub(crate) const META_ACQUIRED: &str = "leasehold_acquired";
pub(crate) const META_EPOCH: &str = "leasehold_epoch";
pub(crate) const META_ONCE: &str = "leasehold_once";
pub(crate) const META_ONCE_ATTEMPTS: &str = "leasehold_once_attempts";

/// How many reservation records a lease document keeps (the newest ones).
pub(crate) const RESERVATION_LOG_LEN: usize = 10;

/// The document version this leasehold writes and the newest it reads.
pub(crate) const DOCUMENT_VERSION: u32 = 1;

/// The JSON document in a lease blob's body (empty: the empty document),
/// and the metadata beside it. Sections it does not know are kept verbatim,
/// so an older node never erases what a newer one wrote.
///
/// ```json
/// {"v":1,"reservations":[{"seq":7,"holder":"web-1-4711-3fa8","reserved_at":"…","until":"…"}],"journal":{"…":"…"}}
/// ```
///
/// Metadata (names are lowercase; values ASCII):
///
/// | name | value |
/// |---|---|
/// | `leasehold_owner` | identity of the process that last acquired the lease (when owner metadata is on) |
/// | `leasehold_acquired` | when it did, RFC 3339 |
/// | `leasehold_epoch` | the fencing epoch, a decimal `u64` (absent = 0) |
/// | `leasehold_once` | `started` or `done` (run-once marker) |
/// | `leasehold_once_attempts` | how many run-once attempts started |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LeaseDocument {
    #[serde(rename = "v")]
    version: u32,
    /// The newest [`RESERVATION_LOG_LEN`] records, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) reservations: Vec<ReservationRecord>,
    #[serde(flatten)]
    sections: BTreeMap<String, serde_json::Value>,
}

impl Default for LeaseDocument {
    fn default() -> Self {
        LeaseDocument {
            version: DOCUMENT_VERSION,
            reservations: Vec::new(),
            sections: BTreeMap::new(),
        }
    }
}

impl LeaseDocument {
    /// The section `key`, if the document has it.
    #[cfg(test)]
    pub(crate) fn section(&self, key: &str) -> Option<&serde_json::Value> {
        self.sections.get(key)
    }

    pub(crate) fn section_names(&self) -> impl Iterator<Item = &str> {
        self.sections.keys().map(String::as_str)
    }

    /// Writes (`Some`) or removes (`None`) the section `key`, keeping every
    /// other section as it is.
    #[cfg(test)]
    pub(crate) fn set_section(&mut self, key: &str, value: Option<serde_json::Value>) {
        match value {
            Some(v) if !v.is_null() => {
                self.sections.insert(key.to_owned(), v);
            }
            _ => {
                self.sections.remove(key);
            }
        }
    }

    /// `Invalid` when `body` is not a lease document this version reads.
    pub(crate) fn from_bytes(name: &LeaseName, body: &[u8]) -> Result<Self> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(LeaseDocument::default());
        }
        let mut doc: LeaseDocument = serde_json::from_slice(body).map_err(|e| {
            Error::invalid(
                format!("lease document of {name}"),
                format!("is not a leasehold lease document: {e}"),
            )
        })?;
        if doc.version > DOCUMENT_VERSION {
            return Err(Error::invalid(
                format!("lease document of {name}"),
                format!(
                    "has version {}; this leasehold reads up to version {DOCUMENT_VERSION}",
                    doc.version
                ),
            ));
        }
        // A section written as `null` is no section.
        doc.sections.retain(|_, v| !v.is_null());
        Ok(doc)
    }

    /// Serialises the document at [`DOCUMENT_VERSION`].
    pub(crate) fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut doc = self.clone();
        doc.version = DOCUMENT_VERSION;
        serde_json::to_vec(&doc)
            .map_err(|e| Error::invalid("lease document", format!("cannot be serialised: {e}")))
    }

    /// Appends `record`, numbered after the newest, dropping the oldest
    /// beyond [`RESERVATION_LOG_LEN`]; returns its `seq`.
    pub(crate) fn push_reservation(&mut self, mut record: ReservationRecord) -> u64 {
        let seq = self
            .reservations
            .last()
            .map_or(1, |r| r.seq.saturating_add(1));
        record.seq = seq;
        self.reservations.push(record);
        let excess = self.reservations.len().saturating_sub(RESERVATION_LOG_LEN);
        self.reservations.drain(..excess);
        seq
    }
}

/// One entry of a reservation log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationRecord {
    /// Position in the log: strictly increasing, across holders.
    pub seq: u64,
    /// The owner identity of the reserving process.
    pub holder: String,
    /// When the reservation was taken.
    #[serde(with = "rfc3339")]
    pub reserved_at: OffsetDateTime,
    /// When it ends unless cancelled earlier.
    #[serde(with = "rfc3339")]
    pub until: OffsetDateTime,
    /// When it was cancelled, if it was.
    #[serde(
        default,
        with = "rfc3339_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub cancelled_at: Option<OffsetDateTime>,
}

/// Date-times as fixed-width RFC 3339 text (`2024-01-02T03:04:05.1234567Z`).
mod rfc3339 {
    use serde::{Deserialize, Deserializer, Serializer};
    use time::OffsetDateTime;

    pub fn serialize<S: Serializer>(t: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::entity::datetime::format(*t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OffsetDateTime, D::Error> {
        let text = String::deserialize(d)?;
        crate::entity::datetime::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Optional date-times, as [`rfc3339`].
mod rfc3339_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use time::OffsetDateTime;

    pub fn serialize<S: Serializer>(t: &Option<OffsetDateTime>, s: S) -> Result<S::Ok, S::Error> {
        t.map(crate::entity::datetime::format).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<OffsetDateTime>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        (text.map(|t| crate::entity::datetime::parse(&t)).transpose())
            .map_err(serde::de::Error::custom)
    }
}

/// The run-once state of a lease blob, from its metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OnceState {
    /// No run-once attempt started here.
    NotStarted,
    /// An attempt started and has not finished (it is running, or its
    /// process died).
    Started {
        /// Attempts started so far, this one included.
        attempts: u64,
    },
    /// An attempt finished.
    Done {
        /// Attempts started in all.
        attempts: u64,
    },
}

impl OnceState {
    pub(crate) fn from_metadata(metadata: &Metadata) -> Self {
        let attempts = meta_u64(metadata, META_ONCE_ATTEMPTS).unwrap_or(0);
        match meta_get(metadata, META_ONCE) {
            Some("done") => OnceState::Done { attempts },
            Some("started") => OnceState::Started { attempts },
            _ => OnceState::NotStarted,
        }
    }
}

/// A metadata value by name, ignoring ASCII case (as the service does).
pub(crate) fn meta_get<'a>(metadata: &'a Metadata, name: &str) -> Option<&'a str> {
    metadata
        .get(name)
        .or_else(|| {
            metadata
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        })
        .map(String::as_str)
}

/// Sets a metadata value, replacing any spelling of the same name.
pub(crate) fn meta_set(metadata: &mut Metadata, name: &str, value: String) {
    metadata.retain(|k, _| !k.eq_ignore_ascii_case(name));
    metadata.insert(name.to_owned(), value);
}

pub(crate) fn meta_u64(metadata: &Metadata, name: &str) -> Option<u64> {
    meta_get(metadata, name).and_then(|v| v.trim().parse().ok())
}

/// The epoch recorded in blob metadata (0 when absent).
pub(crate) fn epoch_of(metadata: &Metadata) -> u64 {
    meta_u64(metadata, META_EPOCH).unwrap_or(0)
}

/// A lease blob as read, with its document parsed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LeaseBlob {
    pub(crate) document: LeaseDocument,
    pub(crate) metadata: Metadata,
    pub(crate) lease: crate::backend::LeaseInfo,
}

impl LeaseBlob {
    pub(crate) fn from_blob(name: &LeaseName, blob: Blob) -> Result<Self> {
        Ok(LeaseBlob {
            document: LeaseDocument::from_bytes(name, &blob.body)?,
            metadata: blob.properties.metadata,
            lease: blob.properties.lease,
        })
    }

    pub(crate) fn owner(&self) -> Option<&str> {
        meta_get(&self.metadata, META_OWNER)
    }

    /// `leasehold_acquired`, if it parses as RFC 3339.
    pub(crate) fn acquired_at(&self) -> Option<OffsetDateTime> {
        meta_get(&self.metadata, META_ACQUIRED).and_then(|v| crate::datetime::parse(v.trim()).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name() -> LeaseName {
        LeaseName::new("doc").unwrap()
    }

    fn record(holder: &str) -> ReservationRecord {
        ReservationRecord {
            seq: 0,
            holder: holder.into(),
            reserved_at: OffsetDateTime::UNIX_EPOCH,
            until: OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(5),
            cancelled_at: None,
        }
    }

    /// A section of another writer's.
    const OTHER: &str = "journal";

    #[test]
    fn empty_body_is_the_empty_document() {
        let doc = LeaseDocument::from_bytes(&name(), b"").unwrap();
        assert_eq!(doc, LeaseDocument::default());
        assert!(doc.section(OTHER).is_none());
    }

    #[test]
    fn document_round_trips_and_keeps_unknown_sections() {
        let mut doc = LeaseDocument::default();
        doc.set_section(OTHER, Some(serde_json::json!({"ops": [1, 2]})));
        doc.push_reservation(record("a"));
        let bytes = doc.to_bytes().unwrap();
        assert_eq!(LeaseDocument::from_bytes(&name(), &bytes).unwrap(), doc);

        let newer = br#"{"v":1,"future":{"x":1},"journal":null}"#;
        let read = LeaseDocument::from_bytes(&name(), newer).unwrap();
        assert!(read.section(OTHER).is_none(), "null is no section");
        let mut rewritten = read.clone();
        rewritten.push_reservation(record("b"));
        rewritten.set_section(OTHER, Some(serde_json::json!(["op"])));
        rewritten.set_section(OTHER, None);
        let text = String::from_utf8(rewritten.to_bytes().unwrap()).unwrap();
        assert!(text.contains("\"future\":{\"x\":1}"), "{text}");
        assert!(!text.contains("journal"), "{text}");
    }

    #[test]
    fn newer_versions_and_garbage_are_refused() {
        let e = LeaseDocument::from_bytes(&name(), br#"{"v":2}"#).unwrap_err();
        assert!(e.to_string().contains("version 2"), "{e}");
        assert!(LeaseDocument::from_bytes(&name(), b"not json").is_err());
    }

    #[test]
    fn reservation_log_is_bounded_and_ordered() {
        let mut doc = LeaseDocument::default();
        for i in 0..25 {
            doc.push_reservation(record(&format!("h{i}")));
        }
        assert_eq!(doc.reservations.len(), RESERVATION_LOG_LEN);
        let seqs: Vec<u64> = doc.reservations.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (16..=25).collect::<Vec<_>>());
        assert_eq!(doc.reservations[9].holder, "h24");
    }

    #[test]
    fn metadata_helpers_ignore_case() {
        let mut m = Metadata::new();
        m.insert("Leasehold_Epoch".into(), "7".into());
        assert_eq!(epoch_of(&m), 7);
        meta_set(&mut m, META_EPOCH, "8".into());
        assert_eq!(m.len(), 1);
        assert_eq!(epoch_of(&m), 8);
        m.insert(META_ONCE.into(), "started".into());
        m.insert(META_ONCE_ATTEMPTS.into(), "2".into());
        assert_eq!(
            OnceState::from_metadata(&m),
            OnceState::Started { attempts: 2 }
        );
    }
}
