//! What a commit reports: [`CommitReport`] and [`FinishedBy`].

/// What a commit did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitReport {
    /// Operations written.
    pub operations: usize,
    /// Tables written.
    pub tables: usize,
    /// Partitions written.
    pub partitions: usize,
    /// Entity-group transactions sent.
    pub batches: usize,
    /// Whether the commit went through the journal (several partitions or
    /// tables, or more than 100 operations).
    pub journalled: bool,
    /// The transaction id of a journalled commit (`None` for a single
    /// transaction): what [`Store::commit_outcome`](crate::Store::commit_outcome)
    /// and [`crate::Error::InDoubt`] name.
    pub transaction: Option<String>,
    /// Who finished applying the writes.
    pub finished_by: FinishedBy,
}

/// Who finished applying a commit's writes ([`CommitReport::finished_by`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FinishedBy {
    /// The unit's own commit.
    #[default]
    ThisUnit,
    /// The unit lost its lease after its journal was stored (its commit
    /// point), and the journal was rolled forward by the partition's next
    /// holder — another process, or this one taking the lock again to find
    /// out. Every write is applied all the same.
    Recovery,
}
