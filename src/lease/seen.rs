//! [`SeenBlobs`]: what a lease manager last saw of its lease blobs, each at
//! the ETag it had then (see the [module docs](super#reading-the-lease-blob)).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::backend::Metadata;
use crate::key::{BlobName, ETag};

use super::document::LeaseDocument;

/// How many lease blobs a manager remembers (the most recently seen).
pub(crate) const SEEN_CAPACITY: usize = 1024;

/// The last view of each of a manager's lease blobs, with its ETag.
#[derive(Debug, Default)]
pub(crate) struct SeenBlobs(Mutex<Seen>);

#[derive(Debug, Default)]
struct Seen {
    blobs: HashMap<BlobName, Entry>,
    /// The stamp of the next blob remembered.
    next: u64,
}

#[derive(Debug)]
struct Entry {
    etag: ETag,
    document: LeaseDocument,
    metadata: Metadata,
    stamp: u64,
}

impl SeenBlobs {
    fn lock(&self) -> MutexGuard<'_, Seen> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that `blob` holds `document` and `metadata` at `etag`.
    pub(crate) fn remember(
        &self,
        blob: &BlobName,
        etag: ETag,
        document: &LeaseDocument,
        metadata: &Metadata,
    ) {
        if etag.is_superseded() {
            // Not the blob's ETag: the write's own was not learnt.
            self.forget(blob);
            return;
        }
        let mut seen = self.lock();
        let stamp = seen.next;
        seen.next += 1;
        let entry = Entry {
            etag,
            document: document.clone(),
            metadata: metadata.clone(),
            stamp,
        };
        seen.blobs.insert(blob.clone(), entry);
        if seen.blobs.len() > SEEN_CAPACITY {
            let oldest = (seen.blobs.iter())
                .min_by_key(|(_, e)| e.stamp)
                .map(|(b, _)| b.clone());
            seen.blobs.retain(|b, _| Some(b) != oldest.as_ref());
        }
    }

    /// Forgets what was seen of `blob` (its content is unknown now).
    pub(crate) fn forget(&self, blob: &BlobName) {
        self.lock().blobs.remove(blob);
    }

    /// The document and metadata `blob` holds at `etag`, if that is the
    /// ETag it was last seen with.
    pub(crate) fn at(&self, blob: &BlobName, etag: &ETag) -> Option<(LeaseDocument, Metadata)> {
        let seen = self.lock();
        let entry = seen.blobs.get(blob).filter(|e| &e.etag == etag)?;
        Some((entry.document.clone(), entry.metadata.clone()))
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().blobs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(i: usize) -> BlobName {
        BlobName::new(format!("b{i}")).unwrap()
    }

    #[test]
    fn a_view_is_returned_only_at_the_etag_it_was_seen_with() {
        let seen = SeenBlobs::default();
        let mut metadata = Metadata::new();
        metadata.insert("leasehold_owner".into(), "a".into());
        let document = LeaseDocument::default();
        assert!(seen.at(&blob(1), &ETag::new("e1")).is_none());
        seen.remember(&blob(1), ETag::new("e1"), &document, &metadata);
        assert_eq!(
            seen.at(&blob(1), &ETag::new("e1")),
            Some((document.clone(), metadata.clone()))
        );
        assert!(seen.at(&blob(1), &ETag::new("e2")).is_none(), "changed");
        assert!(
            seen.at(&blob(2), &ETag::new("e1")).is_none(),
            "another blob"
        );
        seen.remember(&blob(1), ETag::new("e2"), &document, &Metadata::new());
        assert!(seen.at(&blob(1), &ETag::new("e1")).is_none(), "replaced");
        assert_eq!(
            seen.at(&blob(1), &ETag::new("e2")).map(|(_, m)| m),
            Some(Metadata::new())
        );
        seen.forget(&blob(1));
        assert!(seen.at(&blob(1), &ETag::new("e2")).is_none(), "forgotten");
        seen.remember(&blob(1), ETag::superseded(), &document, &metadata);
        assert!(seen.at(&blob(1), &ETag::superseded()).is_none());
        assert_eq!(seen.len(), 0);
    }

    #[test]
    fn the_least_recently_seen_blobs_are_forgotten_beyond_the_capacity() {
        let seen = SeenBlobs::default();
        let document = LeaseDocument::default();
        let etag = ETag::new("e");
        for i in 0..SEEN_CAPACITY {
            seen.remember(&blob(i), etag.clone(), &document, &Metadata::new());
        }
        // Seen again: now the most recent.
        seen.remember(&blob(0), etag.clone(), &document, &Metadata::new());
        seen.remember(
            &blob(SEEN_CAPACITY),
            etag.clone(),
            &document,
            &Metadata::new(),
        );
        assert_eq!(seen.len(), SEEN_CAPACITY);
        assert!(seen.at(&blob(0), &etag).is_some(), "seen again, kept");
        assert!(seen.at(&blob(1), &etag).is_none(), "the oldest, forgotten");
        assert!(seen.at(&blob(2), &etag).is_some());
        assert!(seen.at(&blob(SEEN_CAPACITY), &etag).is_some());
    }
}
