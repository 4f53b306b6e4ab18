//! Entity mapping checks: two versions of one struct over one table keep
//! each other's properties through every kind of replace; the opt-out;
//! enums, constant keys and prefix filters round trip.

use leasehold::entity::Value;
use leasehold::{Entity, PropertyCodec};

use super::Ctx;

crate::checks::checks! {

/// A status column, stored by name.
#[derive(PropertyCodec, Debug, Clone, Copy, PartialEq)]
#[entity(rename_all = "snake_case")]
enum Status {
    /// Not sent yet.
    Pending,
    /// On its way.
    OutForDelivery,
    /// Delivered.
    Delivered,
}

/// A priority, stored as Edm.Int32.
#[derive(PropertyCodec, Debug, Clone, Copy, PartialEq)]
#[entity(int32)]
enum Priority {
    /// Whenever.
    Low = 1,
    /// First.
    High = 9,
}

/// The newer version of a customer: adds `email` and `status`, and no
/// longer has `nickname`.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "MapCustomers", row_key = "profile")]
struct CustomerV2 {
    /// The customer.
    #[entity(partition_key)]
    pub id: String,
    /// Shared by both versions.
    pub name: String,
    /// Added by this version.
    pub email: String,
    /// Added by this version.
    pub status: Status,
}

/// The older version of the same rows.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "MapCustomers", row_key = "profile")]
struct CustomerV1 {
    /// The customer.
    #[entity(partition_key)]
    pub id: String,
    /// Shared by both versions.
    pub name: String,
    /// Dropped by the newer version.
    pub nickname: Option<String>,
}

/// The older version, opting out of keeping what it does not know.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "MapCustomers", row_key = "profile", drop_unknown_properties)]
struct CustomerV1Strict {
    /// The customer.
    #[entity(partition_key)]
    pub id: String,
    /// Shared by all versions.
    pub name: String,
}

/// Order lines keyed by (year, number, line).
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "MapOrders")]
struct OrderLine {
    /// The shop.
    #[entity(partition_key)]
    pub shop: String,
    /// First key part.
    #[entity(row_key = 0)]
    pub year: i32,
    /// Second key part, text.
    #[entity(row_key = 1)]
    pub number: String,
    /// Third key part.
    #[entity(row_key = 2)]
    pub line: u16,
    /// An enum column.
    pub status: Status,
    /// An optional Int32 enum column.
    pub priority: Option<Priority>,
}

fn v2(id: &str) -> CustomerV2 {
    CustomerV2 {
        id: id.into(),
        name: "Ann".into(),
        email: "ann@example.com".into(),
        status: Status::OutForDelivery,
    }
}

/// Writes a row as the newer version, then has the older version add its
/// `nickname` (by a merge, which leaves the newer version's properties).
async fn seed(ctx: &Ctx, id: &str) {
    let new = ctx.store.table::<CustomerV2>();
    new.insert(v2(id)).await.expect("insert v2");
    let old = ctx.store.table::<CustomerV1>();
    // A constant row key: read by partition key alone.
    let mut read = old.get_one(id).await.expect("get v1").expect("row");
    read.nickname = Some("annie".into());
    old.merge(&read).await.expect("merge v1");
}

/// Asserts the row holds both versions' properties and the older version's
/// name change.
async fn assert_both_kept(ctx: &Ctx, id: &str, name: &str) {
    let new = ctx
        .store
        .table::<CustomerV2>()
        .get(id, "profile")
        .await
        .expect("get v2")
        .expect("row");
    assert_eq!(new.name, name, "{id}");
    assert_eq!(
        new.email, "ann@example.com",
        "{id}: the newer version's email was lost"
    );
    assert_eq!(new.status, Status::OutForDelivery, "{id}");
    assert_eq!(
        new.unknown_properties().and_then(|p| p.get("nickname")),
        Some(&Value::String("annie".into())),
        "{id}: the older version's nickname was lost"
    );
}

/// Two versions of one struct over one table keep each other's properties
/// through a replace, a batch replace, a unit replace, `update_with` and
/// chained replaces of what a write returned.
plain async fn two_versions_keep_each_others_properties(ctx) {
    let old = ctx.store.table::<CustomerV1>();

    seed(ctx, "replace").await;
    let mut v = old.get("replace", "profile").await.unwrap().unwrap();
    assert!(
        v.unknown_properties()
            .is_some_and(|p| p.get("email").is_some() && p.get("status").is_some()),
        "{:?}",
        v.unknown_properties()
    );
    v.name = "Anna".into();
    let mut v = old.replace(&v).await.expect("replace v1");
    assert_both_kept(ctx, "replace", "Anna").await;
    // What the replace returned keeps them for the next one.
    v.name = "Anne".into();
    old.replace(&v).await.expect("second replace v1");
    assert_both_kept(ctx, "replace", "Anne").await;

    seed(ctx, "batch").await;
    let mut v = old.get("batch", "profile").await.unwrap().unwrap();
    v.name = "Anna".into();
    old.batch()
        .replace(&v)
        .commit()
        .await
        .expect("batch replace");
    assert_both_kept(ctx, "batch", "Anna").await;

    seed(ctx, "unit").await;
    let mut unit = ctx.store.lock("unit").await.expect("lock");
    let mut v = unit.get::<CustomerV1>("profile").await.unwrap().unwrap();
    v.name = "Anna".into();
    unit.replace(&v).expect("stage");
    unit.commit().await.expect("commit");
    assert_both_kept(ctx, "unit", "Anna").await;

    seed(ctx, "update").await;
    old.update_with("update", "profile", |c| c.name = "Anna".into())
        .await
        .expect("update_with");
    assert_both_kept(ctx, "update", "Anna").await;

    // A merge leaves them stored too.
    seed(ctx, "merge").await;
    let mut v = old.get("merge", "profile").await.unwrap().unwrap();
    v.name = "Anna".into();
    let merged = old.merge(&v).await.expect("merge");
    assert!(
        merged
            .unknown_properties()
            .is_some_and(|p| p.get("email").is_some())
    );
    assert_both_kept(ctx, "merge", "Anna").await;
}

/// The opt-out: a type derived with `drop_unknown_properties` keeps none,
/// so its replace removes them; one value can drop them too; an upsert of a
/// fresh value replaces everything.
plain async fn unknown_properties_can_be_dropped(ctx) {
    seed(ctx, "strict").await;
    let strict = ctx.store.table::<CustomerV1Strict>();
    let mut v = strict.get("strict", "profile").await.unwrap().unwrap();
    assert!(v.unknown_properties().is_none());
    v.name = "Anna".into();
    strict.replace(&v).await.expect("replace");
    let row = ctx
        .store
        .table::<CustomerV1>()
        .get("strict", "profile")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.name, "Anna");
    assert_eq!(row.nickname, None);
    assert!(
        row.unknown_properties().is_none(),
        "{:?}",
        row.unknown_properties()
    );

    seed(ctx, "take").await;
    let old = ctx.store.table::<CustomerV1>();
    let mut v = old.get("take", "profile").await.unwrap().unwrap();
    let taken = v.take_unknown_properties().expect("some");
    assert!(taken.get("email").is_some());
    old.replace(&v).await.expect("replace");
    let row = old.get("take", "profile").await.unwrap().unwrap();
    assert!(row.unknown_properties().is_none());

    seed(ctx, "upsert").await;
    old.upsert(CustomerV1 {
        id: "upsert".into(),
        name: "Bob".into(),
        nickname: None,
    })
    .await
    .expect("upsert");
    let row = old.get("upsert", "profile").await.unwrap().unwrap();
    assert!(row.unknown_properties().is_none());
    assert_eq!(row.nickname, None);
}

/// Enum columns, composite keys, constant keys and prefix filters round
/// trip through the backend.
plain async fn enums_keys_and_prefix_filters_round_trip(ctx) {
    let t = ctx.store.table::<OrderLine>();
    let rows = [
        (2025, "9", 1, Status::Delivered, None),
        (2026, "1", 1, Status::Pending, Some(Priority::High)),
        (2026, "1", 2, Status::OutForDelivery, Some(Priority::Low)),
        (2026, "10", 1, Status::Pending, None),
        (2026, "1 b", 1, Status::Pending, None),
        (2027, "1", 1, Status::Pending, Some(Priority::High)),
    ];
    for (year, number, line, status, priority) in rows {
        t.insert(OrderLine {
            shop: "s1".into(),
            year,
            number: number.into(),
            line,
            status,
            priority,
        })
        .await
        .expect("insert");
    }
    let keys = |v: &[leasehold::Versioned<OrderLine>]| -> Vec<(i32, String, u16)> {
        v.iter()
            .map(|l| (l.year, l.number.clone(), l.line))
            .collect()
    };
    let of_2026 = t
        .query()
        .partition("s1")
        .filter(OrderLine::row_key_prefix_year(2026))
        .all()
        .await
        .expect("query");
    assert_eq!(
        keys(&of_2026),
        [
            (2026, "1".into(), 1),
            (2026, "1".into(), 2),
            (2026, "1 b".into(), 1),
            (2026, "10".into(), 1)
        ]
    );
    let order_1 = t
        .query()
        .partition("s1")
        .filter(OrderLine::row_key_prefix_year_number(2026, "1"))
        .all()
        .await
        .expect("query");
    assert_eq!(
        keys(&order_1),
        [(2026, "1".into(), 1), (2026, "1".into(), 2)]
    );

    let c = OrderLine::columns();
    let pending = t
        .query()
        .partition("s1")
        .filter(c.status.eq(Status::Pending) & c.priority.ge(Priority::High))
        .all()
        .await
        .expect("query");
    assert_eq!(
        keys(&pending),
        [(2026, "1".into(), 1), (2027, "1".into(), 1)]
    );
    let out = t
        .get("s1", OrderLine::row_key_from(2026, "1", 2).expect("key"))
        .await
        .expect("get")
        .expect("row");
    assert_eq!(out.status, Status::OutForDelivery);
    assert_eq!(out.priority, Some(Priority::Low));

    // A value no variant stands for names the value and the row.
    let raw = ctx.store.table::<CustomerV2>();
    ctx.store
        .table::<CustomerV1>()
        .insert(CustomerV1 {
            id: "odd".into(),
            name: "X".into(),
            nickname: None,
        })
        .await
        .expect("insert");
    let mut v = ctx
        .store
        .table::<CustomerV1>()
        .get("odd", "profile")
        .await
        .unwrap()
        .unwrap();
    v.take_unknown_properties();
    let e = ctx
        .store
        .table::<OddStatus>()
        .replace(&leasehold::Versioned::new(
            OddStatus {
                id: "odd".into(),
                name: "X".into(),
                email: "x".into(),
                status: "lost".into(),
            },
            v.etag().clone(),
            v.timestamp(),
        ))
        .await;
    e.expect("replace with an odd status");
    let e = raw.get("odd", "profile").await.expect_err("odd status");
    let text = e.to_string();
    assert!(
        text.contains("status") && text.contains("\"lost\""),
        "{text}"
    );
    assert!(text.contains("odd") && text.contains("profile"), "{text}");
}

/// The newer version's row as a program with a plain string status writes
/// it.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "MapCustomers", row_key = "profile")]
struct OddStatus {
    /// The customer.
    #[entity(partition_key)]
    pub id: String,
    /// Name.
    pub name: String,
    /// Email.
    pub email: String,
    /// Any text.
    pub status: String,
}

/// A dynamic entity reads rows of typed entities and rows in the forms
/// other programs store (64-bit integers as plain numbers, GUIDs and dates
/// as text), and has the table operations and queries typed tables have.
plain async fn dynamic_entities_read_and_write_any_row(ctx) {
    use leasehold::query::Column;
    use leasehold::{DynamicEntity, PartitionKey, RowKey};
    use time::OffsetDateTime;
    use uuid::Uuid;

    // Rows of a typed entity, read without the type.
    let typed = ctx.store.table::<CustomerV2>();
    typed.insert(v2("c1")).await.expect("insert");
    let rows = ctx.store.dynamic_table("MapCustomers");
    let mut row = rows.get("c1", "profile").await.expect("get").expect("row");
    assert_eq!(
        row.get::<String>("email").unwrap().as_deref(),
        Some("ann@example.com")
    );
    assert_eq!(
        row.get::<Status>("status").unwrap(),
        Some(Status::OutForDelivery)
    );
    assert!(row.unknown_properties().is_none());

    // A replace writes the bag as it is: a removed property is removed.
    row.properties.remove("email");
    row.set("vip", true).unwrap();
    let row = rows.replace(&row).await.expect("replace");
    let raw = rows.get("c1", "profile").await.unwrap().unwrap();
    assert_eq!(raw.properties, row.properties);
    assert!(raw.properties.get("email").is_none());
    assert_eq!(raw.get::<bool>("vip").unwrap(), Some(true));
    assert!(
        typed.get("c1", "profile").await.is_err(),
        "the typed row lost its email"
    );

    // Rows as another program writes them.
    let legacy = ctx.store.dynamic_table("MapLegacy");
    let guid = "c2b7ae4b-9b7f-4d60-a8c0-50a1bd1c9e38";
    for (rk, count) in [("a", 3), ("b", 7), ("c", 11)] {
        let mut d = DynamicEntity::new(PartitionKey::new("p").unwrap(), RowKey::new(rk).unwrap());
        d.properties.insert("count", Value::Int32(count));
        d.properties
            .insert("big", Value::Double(1_099_511_627_776.0));
        d.properties.insert("id", Value::String(guid.into()));
        d.properties
            .insert("at", Value::String("2024-05-06T07:08:09.5+02:00".into()));
        legacy.insert(d).await.expect("insert legacy");
    }
    let count = Column::<DynamicEntity, i32>::new("count");
    let found = legacy
        .query()
        .partition("p")
        .filter(count.ge(5))
        .all()
        .await
        .expect("query");
    assert_eq!(found.len(), 2);
    let b = &found[0];
    assert_eq!(b.row_key.as_str(), "b");
    assert_eq!(b.get::<i64>("count").unwrap(), Some(7));
    assert_eq!(b.get::<i64>("big").unwrap(), Some(1 << 40));
    assert_eq!(
        b.get::<Uuid>("id").unwrap(),
        Some(Uuid::parse_str(guid).unwrap())
    );
    let at = b.get::<OffsetDateTime>("at").unwrap().unwrap();
    assert_eq!(at.unix_timestamp(), 1_714_972_089);
    let e = b.get::<Uuid>("count").unwrap_err();
    assert!(
        e.to_string().contains("count") && e.to_string().contains("\"b\""),
        "{e}"
    );

    // Merge, update_with, a batch, delete.
    let mut patch = DynamicEntity::new(PartitionKey::new("p").unwrap(), RowKey::new("a").unwrap());
    patch.set("note", "x".to_string()).unwrap();
    let a = legacy.get("p", "a").await.unwrap().unwrap();
    let merged = legacy
        .merge(&leasehold::Versioned::new(
            patch,
            a.etag().clone(),
            a.timestamp(),
        ))
        .await
        .expect("merge");
    assert_eq!(merged.get::<i64>("count").unwrap(), Some(3));
    legacy
        .update_with("p", "a", |d| {
            let n = d.get::<i64>("count").ok().flatten().unwrap_or(0);
            d.set("count", n + 1).unwrap();
        })
        .await
        .expect("update_with");
    let a = legacy.get("p", "a").await.unwrap().unwrap();
    assert_eq!(a.properties.get("count"), Some(&Value::Int64(4)));
    assert_eq!(a.get::<String>("note").unwrap().as_deref(), Some("x"));
    let c = legacy.get("p", "c").await.unwrap().unwrap();
    legacy
        .batch()
        .delete(&c)
        .replace(&a)
        .commit()
        .await
        .expect("batch");
    let left = legacy.query().partition("p").all().await.unwrap();
    assert_eq!(left.len(), 2);
    let b = legacy.get("p", "b").await.unwrap().unwrap();
    legacy.delete(&b).await.expect("delete");
    assert!(legacy.get("p", "b").await.unwrap().is_none());
}

/// A document with large values.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "MapDocuments")]
struct Document {
    #[entity(partition_key)]
    folder: String,
    #[entity(row_key)]
    name: String,
    #[entity(chunked)]
    body: String,
    #[entity(chunked)]
    scan: Option<Vec<u8>>,
    #[entity(json, chunked)]
    lines: Vec<String>,
    title: String,
}

/// Chunked fields round trip across numbered properties; a replace with a
/// shorter value leaves no stale chunk; a value over the entity limit is
/// refused naming the field, before anything is sent.
plain async fn chunked_fields_round_trip_and_shrink(ctx) {
    // ASCII text: Azurite garbles non-ASCII text in single-entity requests
    // over 64 KiB (see the README's Azurite differences).
    let body: String = (0..200_000u32)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let scan: Vec<u8> = (0..=255u8).cycle().take(150_000).collect();
    let lines: Vec<String> = (0..3000)
        .map(|i| format!("line {i}: {}", "x".repeat(20)))
        .collect();
    let doc = Document {
        folder: "f".into(),
        name: "big".into(),
        body: body.clone(),
        scan: Some(scan.clone()),
        lines: lines.clone(),
        title: "Big".into(),
    };
    let t = ctx.store.table::<Document>();
    let stored = t.insert(doc.clone()).await.expect("insert");
    assert_eq!(*stored, doc);
    let mut read = t.get("f", "big").await.expect("get").expect("row");
    assert_eq!(*read, doc);
    assert!(
        read.unknown_properties().is_none(),
        "{:?}",
        read.unknown_properties()
    );

    let raw = ctx.store.dynamic_table("MapDocuments");
    let row = raw.get("f", "big").await.unwrap().unwrap();
    assert_eq!(row.properties.get("body_count"), Some(&Value::Int32(7)));
    assert!(row.properties.get("body_6").is_some());
    assert_eq!(row.properties.get("scan_count"), Some(&Value::Int32(3)));

    // Shrink: a replace stores exactly the new value's chunks.
    read.body = "short".into();
    read.scan = None;
    let after = t.replace(&read).await.expect("replace");
    assert_eq!(after.body, "short");
    let row = raw.get("f", "big").await.unwrap().unwrap();
    let names: Vec<&str> = row.properties.iter().map(|(k, _)| k).collect();
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("body_") && *n != "body_count" || n.starts_with("scan")),
        "{names:?}"
    );
    assert_eq!(row.properties.get("body_count"), Some(&Value::Int32(1)));
    let read = t.get("f", "big").await.unwrap().unwrap();
    assert_eq!(
        (read.body.as_str(), read.scan.as_ref(), read.lines.len()),
        ("short", None, 3000)
    );

    // Over the limit: named, nothing sent.
    let huge = Document {
        name: "huge".into(),
        body: "a".repeat(600_000),
        ..doc
    };
    let e = t.insert(huge).await.expect_err("over 1 MiB");
    let text = e.to_string();
    assert!(text.contains("body") && text.contains("1048576"), "{text}");
    assert!(t.get("f", "huge").await.unwrap().is_none());
}
}
