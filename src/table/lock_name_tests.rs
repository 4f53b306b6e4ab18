use super::lock_name::lock_name;
use crate::key::PartitionKey;

#[test]
fn lock_names_are_plain_for_short_keys_and_hashed_for_long_ones() {
    let short = PartitionKey::new("customer-1").unwrap();
    assert_eq!(lock_name("", &short).unwrap().as_str(), "customer-1");
    assert_eq!(lock_name("t1", &short).unwrap().as_str(), "t1/customer-1");
    let long = PartitionKey::new("日".repeat(200)).unwrap();
    let name = lock_name("", &long).unwrap();
    assert!(name.as_str().starts_with('#'), "{}", name.as_str());
    let prefixed = lock_name("t1", &long).unwrap();
    assert!(
        prefixed.as_str().starts_with("t1/#"),
        "{}",
        prefixed.as_str()
    );
    let other = PartitionKey::new(format!("{}x", "日".repeat(199))).unwrap();
    assert_ne!(lock_name("", &other).unwrap(), name);
    assert_eq!(lock_name("", &long).unwrap(), name, "stable");
}
