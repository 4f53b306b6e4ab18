//! Writing a row twice in a unit: how a second write folds into the one
//! staged (the table in the [`Unit`](super::Unit) docs).

use crate::backend::{Precondition, TableOp};
use crate::entity::EntityData;

/// The staged write of a row once `op` follows `previous`: `Ok(None)` when
/// they cancel out, `Err(why)` when refused (the table in the [`Unit`]
/// docs). `read_absent`: the unit read the row and found none.
pub(crate) fn fold(
    previous: Option<&TableOp>,
    op: TableOp,
    read_absent: bool,
) -> std::result::Result<Option<TableOp>, &'static str> {
    use TableOp::{Delete, Insert, Merge, Replace};
    const UPSERT: Precondition = Precondition::Upsert;
    let Some(previous) = previous else {
        return Ok(Some(op));
    };
    Ok(match (previous, op) {
        // Creating a row this unit deletes: the delete's condition, then the
        // new content.
        (previous @ Delete { .. }, Insert(d) | Replace(d, UPSERT) | Merge(d, UPSERT)) => {
            Some(Replace(d, previous.condition().unwrap_or(UPSERT)))
        }
        (Delete { .. }, _) => return Err("this unit already deletes that row"),
        (Insert(_), Insert(_)) => return Err("this unit already inserts that row"),
        (_, Insert(_)) => return Err("this unit already writes that row, so it exists"),
        (Insert(_), Replace(d, _)) => Some(Insert(d)),
        (Insert(old), Merge(d, _)) => Some(Insert(merged(old.clone(), &d))),
        (Insert(_), Delete { .. }) => None,
        (Replace(_, c) | Merge(_, c), Replace(d, _)) => Some(Replace(d, c.clone())),
        (Replace(old, c), Merge(d, _)) => Some(Replace(merged(old.clone(), &d), c.clone())),
        (Merge(old, c), Merge(d, _)) => Some(Merge(merged(old.clone(), &d), c.clone())),
        (Replace(_, c) | Merge(_, c), op @ Delete { .. }) => match c {
            // An upsert of a row the unit found absent, then its delete:
            // nothing to write.
            Precondition::Upsert if read_absent => None,
            c => {
                let (pk, rk) = (op.partition_key(), op.row_key());
                Some(crate::rows::delete(pk, rk, delete_condition(c.clone())))
            }
        },
    })
}

/// A delete's condition for a write condition: the ETag it names, else
/// `IfExists` (the service cannot delete "if present": the delete needs
/// the row to exist at commit).
pub(crate) fn delete_condition(condition: Precondition) -> Precondition {
    match condition {
        Precondition::IfMatch(etag) => Precondition::IfMatch(etag),
        Precondition::IfExists | Precondition::Upsert => Precondition::IfExists,
    }
}

fn merged(mut base: EntityData, update: &EntityData) -> EntityData {
    base.properties.merge_from(&update.properties);
    base
}
