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
    /// Entity-group transactions that applied its writes: the commit
    /// point's, and those finishing marked rows.
    pub batches: usize,
    /// The transaction id of a commit decided in a row (`None` for a
    /// single transaction), as
    /// [`Store::commit_outcome`](crate::Store::commit_outcome) takes it.
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
    /// Readers finished some marked rows first; every write is applied.
    Recovery,
}
