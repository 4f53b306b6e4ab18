//! Building the [`Model`] of a derive input: every attribute read, every
//! rule checked (keys, indexes, chunked fields), every problem reported
//! together.

use std::collections::HashMap;

use leasehold_rules as rules;
use quote::ToTokens;
use syn::{Data, DeriveInput, Fields, Ident};

use crate::attr::{self, FieldAttrs, KeyAttr, Position};
use crate::errors::Errors;
use crate::model::{Field, Index, KeyKind, Model, Property, Role, unraw};

impl<'a> Model<'a> {
    /// Reads and checks a derive input, reporting every problem together.
    pub fn from_input(input: &'a DeriveInput) -> syn::Result<Self> {
        let mut errors = Errors::default();
        let container = attr::container(&input.attrs, &mut errors);

        if !input.generics.params.is_empty() {
            errors.spanned(
                &input.generics,
                "#[derive(Entity)] does not support generic structs: an entity type names one table with one fixed set of properties",
            );
        } else if let Some(clause) = &input.generics.where_clause {
            errors.spanned(clause, "#[derive(Entity)] does not support `where` clauses");
        }

        let named = match &input.data {
            Data::Struct(data) => match &data.fields {
                Fields::Named(named) => Some(named),
                Fields::Unnamed(fields) => {
                    errors.spanned(
                        fields,
                        "#[derive(Entity)] needs named fields: properties are stored under field names",
                    );
                    None
                }
                Fields::Unit => {
                    errors.spanned(
                        &input.ident,
                        "#[derive(Entity)] needs a struct with named fields, at least a partition key and a row key",
                    );
                    None
                }
            },
            Data::Enum(data) => {
                errors.spanned(
                    data.enum_token,
                    "#[derive(Entity)] supports structs with named fields, not enums",
                );
                None
            }
            Data::Union(data) => {
                errors.spanned(
                    data.union_token,
                    "#[derive(Entity)] supports structs with named fields, not unions",
                );
                None
            }
        };

        let table = match &container.table {
            None if container.table_written => String::new(),
            None => {
                errors.spanned(
                    &input.ident,
                    "missing `#[entity(table = \"...\")]`: name the table this entity is stored in",
                );
                String::new()
            }
            Some(lit) => {
                let name = lit.value();
                if let Some(why) = rules::table_name_problem(&name) {
                    errors.spanned(
                        lit,
                        format!("invalid table name {name:?}: {why} (table names match `^[A-Za-z][A-Za-z0-9]{{2,62}}$`)"),
                    );
                }
                name
            }
        };

        let Some(named) = named else {
            // Every branch that yields no fields recorded why.
            return Err(errors.into_error());
        };

        let mut fields = Vec::new();
        let mut key_attrs: Vec<(usize, KeyKind, KeyAttr)> = Vec::new();
        // Stored name -> the field that claimed it first.
        let mut stored: HashMap<String, &Ident> = HashMap::new();
        let mut indexes = Vec::new();
        let mut expiry: Option<crate::model::Expiry> = None;
        for field in &named.named {
            // Invariant: fields of `Fields::Named` always have a name.
            let Some(ident) = field.ident.as_ref() else {
                continue;
            };
            let attrs = attr::field(&field.attrs, &mut errors);
            let index = fields.len();
            if let Some((unique, _)) = crate::index::of_field(ident, &attrs, &mut errors) {
                indexes.push(Index {
                    field: index,
                    unique,
                });
            }
            if let Some((ttl_seconds, span)) = crate::expiry::of_field(ident, &attrs, &mut errors) {
                if let Some(first) = &expiry {
                    let first = fields
                        .get(first.field)
                        .map(|f: &Field<'_>| f.ident.to_string())
                        .unwrap_or_default();
                    errors.at(
                        span,
                        format!("the row's expiry is already declared on `{first}`; an entity has one expiry field"),
                    );
                } else {
                    expiry = Some(crate::model::Expiry {
                        field: index,
                        ttl_seconds,
                    });
                }
            }
            let role = field_role(
                ident,
                attrs,
                index,
                &mut key_attrs,
                &mut stored,
                &mut errors,
            );
            fields.push(Field {
                ident,
                ty: &field.ty,
                role,
            });
        }

        crate::chunked::check(&fields, &mut errors);
        let properties = fields
            .iter()
            .filter(|f| matches!(f.role, Role::Property(_)))
            .count();
        if properties > rules::MAX_USER_PROPERTIES {
            errors.spanned(
                &input.ident,
                format!(
                    "{properties} stored properties; the service allows at most {} besides PartitionKey, RowKey and Timestamp",
                    rules::MAX_USER_PROPERTIES
                ),
            );
        }

        let partition_key_const = crate::keys::constant(
            container.partition_key.as_ref(),
            KeyKind::Partition,
            &mut errors,
        );
        let row_key_const =
            crate::keys::constant(container.row_key.as_ref(), KeyKind::Row, &mut errors);
        let partition_key = match &partition_key_const {
            Some(value) => crate::keys::constant_key_parts(
                KeyKind::Partition,
                value,
                &fields,
                &key_attrs,
                &mut errors,
            ),
            None => key_parts(
                KeyKind::Partition,
                &input.ident,
                &fields,
                &key_attrs,
                &mut errors,
            ),
        };
        let row_key = match &row_key_const {
            Some(value) => crate::keys::constant_key_parts(
                KeyKind::Row,
                value,
                &fields,
                &key_attrs,
                &mut errors,
            ),
            None => key_parts(KeyKind::Row, &input.ident, &fields, &key_attrs, &mut errors),
        };

        errors.finish(Model {
            ident: &input.ident,
            vis: &input.vis,
            table,
            fields,
            partition_key,
            row_key,
            indexes,
            partition_key_const,
            row_key_const,
            drop_unknown: container.drop_unknown.is_some(),
            expiry,
        })
    }
}

/// Decides how one field is stored, checking that its attributes go together.
fn field_role<'a>(
    ident: &'a Ident,
    attrs: FieldAttrs,
    index: usize,
    key_attrs: &mut Vec<(usize, KeyKind, KeyAttr)>,
    stored: &mut HashMap<String, &'a Ident>,
    errors: &mut Errors,
) -> Role {
    let property_attrs = attrs.property_attrs();
    let key = match (attrs.partition_key, attrs.row_key) {
        (Some(_), Some(rk)) => {
            errors.at(
                rk.span,
                format!("`{ident}` cannot be both the partition key and the row key; a field feeds one key"),
            );
            // Not counted as a key field, so no further error follows from it.
            return Role::Skip;
        }
        (Some(pk), None) => Some((KeyKind::Partition, pk)),
        (None, Some(rk)) => Some((KeyKind::Row, rk)),
        (None, None) => None,
    };
    if let Some((kind, key)) = key {
        for (name, span) in property_attrs {
            errors.at(
                span,
                format!(
                    "`{name}` does not apply to a key field: `{ident}` is stored in the {}, not as a property",
                    kind.property()
                ),
            );
        }
        if let Some(span) = attrs.skip {
            errors.at(span, format!("a {} field cannot be skipped", kind.noun()));
        }
        let position = match key.position {
            Position::At(n, _) => n,
            Position::None | Position::Invalid => 0,
        };
        key_attrs.push((index, kind, key));
        return Role::Key { kind, position };
    }
    if attrs.skip.is_some() {
        for (name, span) in property_attrs {
            errors.at(
                span,
                format!("`{name}` does nothing on a skipped field: `{ident}` is not stored"),
            );
        }
        return Role::Skip;
    }

    // Errors about the stored name point at the `rename` literal, or at the
    // field's name when it is stored under it.
    let (name, at) = match &attrs.rename {
        Some(lit) => (lit.value(), lit.to_token_stream()),
        None => (unraw(ident), ident.to_token_stream()),
    };
    if let Some(why) =
        rules::property_name_problem(&name).or_else(|| rules::reserved_property_problem(&name))
    {
        let mut message = format!("property name {name:?} {why}");
        match name.as_str() {
            "PartitionKey" => message.push_str(
                "; to make the field the partition key, mark it `#[entity(partition_key)]`",
            ),
            "RowKey" => {
                message.push_str("; to make the field the row key, mark it `#[entity(row_key)]`")
            }
            "Timestamp" => message.push_str(
                "; the service sets it on every write, and reads return it as `Versioned::timestamp`",
            ),
            _ => {}
        }
        if attrs.rename.is_none() {
            message.push_str(
                "\nhelp: store the field under another name with `#[entity(rename = \"...\")]`",
            );
        }
        errors.spanned(&at, message);
    } else if let Some(first) = stored.get(&name) {
        errors.spanned(
            &at,
            format!(
                "two fields are stored as `{name}`: `{first}` and `{ident}`; `rename` one of them"
            ),
        );
    } else {
        stored.insert(name.clone(), ident);
    }
    Role::Property(Property {
        name,
        json: attrs.json.is_some(),
        default: attrs.default.is_some(),
        chunked: attrs.chunked.is_some(),
    })
}

/// Orders the fields of one key, checking that they are marked consistently.
fn key_parts(
    kind: KeyKind,
    struct_ident: &Ident,
    fields: &[Field<'_>],
    key_attrs: &[(usize, KeyKind, KeyAttr)],
    errors: &mut Errors,
) -> Vec<usize> {
    let attr = kind.attr();
    let marked: Vec<(usize, &KeyAttr)> = key_attrs
        .iter()
        .filter(|(_, k, _)| *k == kind)
        .map(|(i, _, a)| (*i, a))
        .collect();
    let name = |i: usize| fields[i].ident;

    let Some(&(first, _)) = marked.first() else {
        errors.spanned(
            struct_ident,
            format!(
                "missing {noun}: mark the field that holds it with `#[entity({attr})]`",
                noun = kind.noun()
            ),
        );
        return Vec::new();
    };

    let positional: Vec<(usize, usize, &syn::LitInt)> = marked
        .iter()
        .filter_map(|(i, a)| match &a.position {
            Position::At(p, lit) => Some((*i, *p, lit)),
            Position::None | Position::Invalid => None,
        })
        .collect();
    let plain: Vec<(usize, &KeyAttr)> = marked
        .iter()
        .filter(|(_, a)| matches!(a.position, Position::None))
        .copied()
        .collect();
    let invalid = marked
        .iter()
        .any(|(_, a)| matches!(a.position, Position::Invalid));

    if plain.len() == marked.len() {
        for (i, a) in plain.iter().skip(1) {
            errors.at(
                a.span,
                format!(
                    "two {noun}s: `{first}` is already the {noun}, and `{this}` is marked too\n\
                     help: to compose the {noun} from several fields, give each field its position: \
                     `#[entity({attr} = 0)]`, `#[entity({attr} = 1)]`, ...",
                    noun = kind.noun(),
                    first = name(first),
                    this = name(*i),
                ),
            );
        }
        return vec![first];
    }

    for (i, a) in &plain {
        errors.at(
            a.span,
            format!(
                "`{this}` needs a position too: when several fields compose the {noun}, each is written `#[entity({attr} = n)]`",
                noun = kind.noun(),
                this = name(*i),
            ),
        );
    }

    if invalid {
        // Positions cannot be checked against each other with one missing.
        return Vec::new();
    }
    let n = marked.len();
    let mut slots: Vec<Option<usize>> = vec![None; n];
    for &(i, position, lit) in &positional {
        match slots.get_mut(position) {
            None => errors.spanned(
                lit,
                format!(
                    "{noun} position {position} is out of range: the {n} fields of the {noun} take positions 0 to {last}",
                    noun = kind.noun(),
                    last = n - 1,
                ),
            ),
            Some(Some(taken)) => errors.spanned(
                lit,
                format!(
                    "{noun} position {position} is taken twice: by `{taken}` and by `{this}`",
                    noun = kind.noun(),
                    taken = name(*taken),
                    this = name(i),
                ),
            ),
            Some(slot) => *slot = Some(i),
        }
    }
    // With every position in range and none taken twice, the positions are
    // exactly 0..n; otherwise an error was recorded above.
    slots.into_iter().flatten().collect()
}
