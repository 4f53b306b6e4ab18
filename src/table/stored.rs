//! From stored entities to typed values, for reads and writes.

use std::sync::Arc;

use crate::backend::{StoredEntity, write_log};
use crate::entity::{Entity, EntityData, Properties, Stored, Value, Versioned};
use crate::error::Result;

/// The typed value of a stored entity, its write log kept beside it.
pub(crate) fn versioned<E: Entity>(stored: StoredEntity) -> Result<Versioned<E>> {
    versioned_from(stored, true)
}

/// As [`versioned`]; `complete`: `stored` holds every stored property
/// (not a projection's).
pub(crate) fn versioned_from<E: Entity>(
    mut stored: StoredEntity,
    complete: bool,
) -> Result<Versioned<E>> {
    let log = match stored.data.properties.remove(write_log::PROPERTY) {
        Some(Value::String(log)) => Some(log),
        _ => None,
    };
    let state = if complete {
        Stored::unchanged(extra_properties::<E>(&stored.data.properties))
    } else {
        Stored::Unknown
    };
    Ok(
        Versioned::new(E::decode(stored.data)?, stored.etag, stored.timestamp)
            .with_write_log(log)
            .with_stored(state)
            .with_projection(!complete),
    )
}

/// The stored properties that `E` does not carry, if any.
fn extra_properties<E: Entity>(properties: &Properties) -> Option<Arc<Properties>> {
    // Chunks of chunked fields are carried, though not named.
    if properties.iter().all(|(name, _)| E::is_own_property(name)) {
        return None;
    }
    // Copies only what `E` does not carry, not the whole row.
    let extra = (properties.iter())
        .filter(|(name, _)| !E::is_own_property(name))
        .map(|(name, value)| (name.to_owned(), value.clone()));
    Some(Arc::new(extra.collect()))
}

/// What a write stores beside the properties it sends, as far as known
/// before sending.
pub(crate) enum Base {
    /// Nothing: an insert or a full replacement stores what it sends.
    Nothing,
    /// A replace of a read value, which sends these properties its type
    /// does not know beside the entity's own (see
    /// [`Versioned::unknown_properties`]).
    Replace(Option<Arc<Properties>>),
    /// A merge onto a version whose stored properties are these (`None`:
    /// unknown).
    Merge(Option<Arc<Properties>>),
    /// A merge onto an unchanged value: the stored properties were the
    /// entity's own encoding (which the merge sends again) plus these.
    MergeUnchanged(Option<Arc<Properties>>),
}

impl Base {
    /// The base of a replace of `current`.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) for a projection.
    pub(crate) fn replace_of<E: Entity>(current: &Versioned<E>) -> Result<Base> {
        if current.is_projection() {
            let type_name = std::any::type_name::<E>();
            let type_name = type_name.rsplit("::").next().unwrap_or(type_name);
            return Err(crate::Error::invalid(
                format!(
                    "replace of a `{type_name}` of table `{}` read through a projection",
                    E::TABLE
                ),
                "a projection (`select`, `get_as`) reads only some of the row's properties, and a replace would delete the others; write it back with `merge`, which changes only the properties it carries, at the ETag read",
            ));
        }
        Ok(Base::Replace(current.unknown_shared()))
    }

    /// An entity's own stored form with the unknown properties a replace
    /// keeps.
    pub(crate) fn complete<E: Entity>(&self, mut data: EntityData) -> Result<EntityData> {
        if let Base::Replace(Some(unknown)) = self {
            for (name, value) in unknown.iter() {
                if data.properties.get(name).is_none() {
                    data.properties.insert(name, value.clone());
                }
            }
            crate::entity::validate_entity(
                E::TABLE,
                &data.partition_key,
                &data.row_key,
                &data.properties,
            )?;
        }
        Ok(data)
    }

    pub(crate) fn merge_of<E>(current: &Versioned<E>) -> Base {
        match current.unchanged_extra() {
            Some(extra) => Base::MergeUnchanged(extra.cloned()),
            None => Base::Merge(current.stored_properties()),
        }
    }
}

/// What a write of `entity` leaves stored, as far as known before sending.
pub(crate) type After<E> = std::result::Result<(E, Stored<E>), E>;

/// The stored form a write of `entity` onto `base` sends, checked, and
/// what it leaves stored (`Err`: the entity as sent, when only a read can
/// tell).
pub(crate) fn prepare<E: Entity>(entity: &E, base: Base) -> Result<(EntityData, After<E>)> {
    let data = base.complete::<E>(entity.encode()?)?;
    crate::entity::refuse_reserved_properties(&data.properties, true, |name| {
        format!("property `{name}` of {}", std::any::type_name::<E>())
    })?;
    let after = match stored_after::<E>(&data, base)? {
        Some(known) => Ok(known),
        None => Err(E::decode(data.clone())?),
    };
    Ok((data, after))
}

/// The entity a write of `data` onto `base` leaves stored, as a read
/// decodes it; `None` when only a read can tell (a merge onto unknown
/// properties leaving some of `E`'s unwritten).
pub(crate) fn stored_after<E: Entity>(
    data: &EntityData,
    base: Base,
) -> Result<Option<(E, Stored<E>)>> {
    let decode = |properties: Properties| {
        E::decode(EntityData {
            partition_key: data.partition_key.clone(),
            row_key: data.row_key.clone(),
            properties,
        })
    };
    // The stored properties merged with those sent.
    let merged = |stored: Arc<Properties>| {
        let mut after = Arc::unwrap_or_clone(stored);
        after.merge_from(&data.properties);
        Ok::<_, crate::Error>((decode(after.clone())?, Stored::Known(Arc::new(after))))
    };
    Ok(Some(match base {
        Base::Nothing => (decode(data.properties.clone())?, Stored::unchanged(None)),
        // A type with no property names of its own (`DynamicEntity`, whose
        // bag is every stored property) is what the merge leaves.
        Base::MergeUnchanged(Some(extra)) if E::PROPERTY_NAMES.is_empty() => merged(extra)?,
        Base::Replace(kept) | Base::MergeUnchanged(kept) => {
            (decode(data.properties.clone())?, Stored::unchanged(kept))
        }
        Base::Merge(Some(stored)) => merged(stored)?,
        Base::Merge(None) => {
            // Every property of `E` sent: the merge leaves exactly them for
            // `E` (not so for a type with no property names of its own).
            if !E::PROPERTY_NAMES.is_empty()
                && E::PROPERTY_NAMES
                    .iter()
                    .all(|name| data.properties.get(name).is_some())
            {
                (decode(data.properties.clone())?, Stored::Unknown)
            } else {
                return Ok(None);
            }
        }
    }))
}
