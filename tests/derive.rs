//! `#[derive(Entity)]`: what the generated impl stores, and its column set.

use leasehold::entity::{EntityData, Properties, Value};
use leasehold::{Entity, EntityTrait, PartitionKey, RowKey};

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: i64,
    #[entity(rename = "Owner")]
    owner: Option<String>,
    #[entity(json)]
    tags: Vec<String>,
    #[entity(skip)]
    cache: u32,
}

#[test]
fn encodes_keys_and_properties() {
    let a = Account {
        customer: "c1".into(),
        name: "savings".into(),
        balance: 5,
        owner: Some("ann".into()),
        tags: vec!["x".into()],
        cache: 9,
    };
    let data = a.encode().unwrap();
    assert_eq!(data.partition_key.as_str(), "c1");
    assert_eq!(data.row_key.as_str(), "savings");
    let mut expected = Properties::new();
    expected.insert("balance", Value::Int64(5));
    expected.insert("Owner", Value::String("ann".into()));
    expected.insert("tags", Value::String(r#"["x"]"#.into()));
    assert_eq!(data.properties, expected);
    let back = Account::decode(data).unwrap();
    assert_eq!(back, Account { cache: 0, ..a });
    assert_eq!(Account::TABLE, "Accounts");
    assert_eq!(Account::PROPERTY_NAMES, ["balance", "Owner", "tags"]);
    let _ = (
        PartitionKey::new("x"),
        RowKey::new("y"),
        EntityData {
            partition_key: PartitionKey::new("x").unwrap(),
            row_key: RowKey::new("y").unwrap(),
            properties: Properties::new(),
        },
    );
}
