//! Row marks ([`MARK`]): their layout and the writes that put one on, take
//! it off and finish it (see "The commit protocol" in `crate::lock`).

use std::time::Duration;

use crate::backend::{Precondition, StoredEntity, TableOp};
use crate::entity::{EntityData, Properties, Value};
use crate::key::{ETag, PartitionKey, RowKey, TableName};

use super::after::AFTER;

/// The reserved property holding a row's mark.
pub(crate) const MARK: &str = "_lhTxn";

/// A row's mark: the commit `txn` deciding in `primary`; `absent`: a
/// placeholder where there was no row; `ttl`: a transaction's time-to-live
/// (`None`: a unit's, whose primary's lock tells).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) txn: String,
    pub(crate) primary: PartitionKey,
    pub(crate) absent: bool,
    pub(crate) ttl: Option<Duration>,
}

impl Mark {
    /// The stored form: `txn|R|primary` (`A` for a placeholder; a
    /// transaction's with its time-to-live in ms, `R2000`); the primary is
    /// whatever follows the second `|`.
    fn encode(&self) -> String {
        let kind = if self.absent { 'A' } else { 'R' };
        let ttl = self
            .ttl
            .map(|t| t.as_millis().to_string())
            .unwrap_or_default();
        format!("{}|{kind}{ttl}|{}", self.txn, self.primary.as_str())
    }

    /// The mark a row carries, if any (a value that does not parse is not a
    /// mark).
    pub(crate) fn of(properties: &Properties) -> Option<Mark> {
        let Some(Value::String(text)) = properties.get(MARK) else {
            return None;
        };
        let mut parts = text.splitn(3, '|');
        let (txn, kind, primary) = (parts.next()?, parts.next()?, parts.next()?);
        let absent = match kind.get(..1)? {
            "A" => true,
            "R" => false,
            _ => return None,
        };
        let ttl = match &kind[1..] {
            "" => None,
            ms => Some(Duration::from_millis(ms.parse().ok()?)),
        };
        Some(Mark {
            txn: txn.to_owned(),
            primary: PartitionKey::new(primary).ok()?,
            absent,
            ttl,
        })
    }

    /// The table of the primary partition holding this mark's decision row
    /// (`None`: not parsable).
    pub(crate) fn decision_table(&self) -> Option<TableName> {
        super::decision::table_of(&self.txn)
    }

    /// The prewrite putting this mark on a row the unit found as `read`
    /// (`None`: absent, so a placeholder is inserted).
    pub(crate) fn prewrite(
        &self,
        pk: &PartitionKey,
        rk: &RowKey,
        read: Option<&StoredEntity>,
    ) -> TableOp {
        match read {
            Some(row) => {
                let mut data = row.data.clone();
                data.properties
                    .insert_static(MARK, Value::String(self.encode()));
                TableOp::Replace(data, Precondition::IfMatch(row.etag.clone()))
            }
            None => {
                let mut properties = Properties::new();
                properties.insert_static(MARK, Value::String(self.encode()));
                TableOp::Insert(super::row(pk, rk, properties))
            }
        }
    }
}

/// The mark write `pre` as sent: a replace of a row as read becomes a
/// merge of the mark and after-image alone at the same ETag (the same row
/// stored, less sent); limits are judged on `pre`.
pub(crate) fn slim(pre: &TableOp) -> TableOp {
    match pre {
        TableOp::Replace(data, condition) => {
            let mut properties = Properties::with_capacity(2);
            for name in [MARK, AFTER] {
                if let Some(value) = data.properties.get(name) {
                    properties.insert_static(name, value.clone());
                }
            }
            let data = super::row(&data.partition_key, &data.row_key, properties);
            TableOp::Merge(data, condition.clone())
        }
        other => other.clone(),
    }
}

/// The write taking a mark off a row stored as `data` at `etag`, without
/// the commit: the row as it was (a placeholder nothing else wrote into is
/// deleted), at that ETag.
pub(crate) fn strip(mut data: EntityData, etag: ETag, mark: &Mark) -> TableOp {
    data.properties.remove(MARK);
    data.properties.remove(AFTER);
    let at = Precondition::IfMatch(etag);
    if mark.absent && data.properties.is_empty() {
        super::delete(&data.partition_key, &data.row_key, at)
    } else {
        TableOp::Replace(data, at)
    }
}

/// The write a commit applies to a marked row for the staged `op`, the row
/// having been `read` before its mark: a whole replacement
/// (a merge's result computed from the row as read, so the mark goes) or a
/// delete, at the ETag `marked`.
pub(crate) fn apply_op(op: &TableOp, read: Option<&StoredEntity>, marked: &ETag) -> TableOp {
    let at = Precondition::IfMatch(marked.clone());
    match op {
        TableOp::Insert(data) | TableOp::Replace(data, _) => TableOp::Replace(data.clone(), at),
        TableOp::Merge(data, _) => {
            let mut properties = read.map(|r| r.data.properties.clone()).unwrap_or_default();
            properties.remove(crate::backend::write_log::PROPERTY);
            properties.merge_from(&data.properties);
            let data = super::row(&data.partition_key, &data.row_key, properties);
            TableOp::Replace(data, at)
        }
        TableOp::Delete { .. } => super::delete(op.partition_key(), op.row_key(), at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pk(s: &str) -> PartitionKey {
        PartitionKey::new(s).unwrap()
    }

    #[test]
    fn a_mark_round_trips_and_other_values_are_not_marks() {
        for absent in [false, true] {
            for ttl in [None, Some(Duration::from_millis(2000))] {
                let mark = Mark {
                    txn: "0f1e".into(),
                    primary: pk("a|b c"),
                    absent,
                    ttl,
                };
                let mut props = Properties::new();
                props.insert(MARK, Value::String(mark.encode()));
                assert_eq!(Mark::of(&props), Some(mark));
            }
        }
        let mut props = Properties::new();
        assert_eq!(Mark::of(&props), None);
        props.insert(MARK, Value::String("nonsense".into()));
        assert_eq!(Mark::of(&props), None);
        props.insert(MARK, Value::Int64(3));
        assert_eq!(Mark::of(&props), None);
    }

    #[test]
    fn stripping_a_placeholder_deletes_it_and_keeps_what_was_merged_in() {
        let mark = Mark {
            txn: "t".into(),
            primary: pk("p"),
            absent: true,
            ttl: None,
        };
        let TableOp::Insert(mut data) = mark.prewrite(&pk("p"), &RowKey::new("r").unwrap(), None)
        else {
            panic!("a placeholder is inserted");
        };
        let etag = crate::key::ETag::new("W/\"1\"");
        let row = StoredEntity {
            data: data.clone(),
            etag: etag.clone(),
            timestamp: time::OffsetDateTime::UNIX_EPOCH,
        };
        assert!(
            matches!(strip(row.data.clone(), row.etag.clone(), &mark), TableOp::Delete { condition: Precondition::IfMatch(e), .. } if e == etag)
        );
        data.properties.insert("n", Value::Int64(1));
        let merged = StoredEntity { data, ..row };
        let TableOp::Replace(kept, Precondition::IfMatch(e)) =
            strip(merged.data.clone(), merged.etag.clone(), &mark)
        else {
            panic!("a placeholder written into keeps what was written");
        };
        assert_eq!(e, etag);
        assert_eq!(kept.properties.get("n"), Some(&Value::Int64(1)));
        assert!(kept.properties.get(MARK).is_none());
    }
}
