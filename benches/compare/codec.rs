//! Section 2, codec (CPU): an entity to its JSON body and back, against serde_json.

use std::time::Instant;

use leasehold::__private::{wire_body, wire_read};
use leasehold::entity::Entity as _;
use leasehold::{PartitionKey, RowKey};

use crate::Res;
use crate::report::Report;
use crate::setup::{Env, Sample, sample};
use crate::stats::median;

pub(crate) fn codec(env: &Env, report: &mut Report, rtt_ms: f64) -> Res<()> {
    const SECTION: &str = "2 codec";
    let s = sample("customer-42", "row-0001", 42);
    // Check both paths round-trip before timing them.
    // The Azure backend's path, through the hooks leasehold keeps for this
    // benchmark: `wire_body` is the body text of every request that carries
    // an entity (`wire::EntityBody` serialized by serde_json), `wire_read`
    // reads a reply body as the backend does (`wire::ParsedEntity`, read by
    // `wire::entity_from_parsed`).
    let lh = |s: &Sample| -> Sample {
        let data = s.encode().unwrap();
        let text = wire_body(
            data.partition_key.as_str(),
            data.row_key.as_str(),
            &data.properties,
        )
        .unwrap();
        let (partition_key, row_key, properties) = wire_read(Sample::TABLE, &text).unwrap();
        Sample::decode(leasehold::EntityData {
            partition_key: PartitionKey::new(partition_key).unwrap(),
            row_key: RowKey::new(row_key).unwrap(),
            properties,
        })
        .unwrap()
    };
    let sj = |s: &Sample| -> Sample {
        let text = serde_json::to_string(s).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    assert_eq!(lh(&s), s);
    assert_eq!(sj(&s), s);

    let batches = 31;
    let per_batch = env.n(2000);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..batches {
        let run_a = || {
            let start = Instant::now();
            for _ in 0..per_batch {
                std::hint::black_box(lh(std::hint::black_box(&s)));
            }
            start.elapsed().as_secs_f64() * 1e9 / per_batch as f64
        };
        let run_b = || {
            let start = Instant::now();
            for _ in 0..per_batch {
                std::hint::black_box(sj(std::hint::black_box(&s)));
            }
            start.elapsed().as_secs_f64() * 1e9 / per_batch as f64
        };
        if i % 2 == 0 {
            a.push(run_a());
            b.push(run_b());
        } else {
            b.push(run_b());
            a.push(run_a());
        }
    }
    report.row(
        SECTION,
        "encode+decode, 12 fields, via JSON text",
        format!("{:.0} ns", median(&a)),
        format!("{:.0} ns", median(&b)),
        median(&a) / median(&b),
        Some(1.0),
        None,
        "leasehold's path does more work than serde_json's: it validates keys and service \
         limits, goes through an intermediate property bag (names and typed values, as the \
         backends store and compare them), writes `@odata.type` annotations, renders Int64 as \
         strings, Binary as base64 and the `json` field as a nested JSON string, and reads any \
         key order and annotation placement the service sends; serde_json writes the struct \
         straight to text and reads it straight back",
    );
    report.detail(format!(
        "Codec cost against the network: leasehold's encode+decode is {:.2} % of this run's \
         simple-get round trip ({rtt_ms:.3} ms), serde_json's {:.2} %.",
        median(&a) / 1e4 / rtt_ms,
        median(&b) / 1e4 / rtt_ms
    ));
    report.detail(format!(
        "Codec: median of {batches} interleaved batches of {per_batch} round trips \
         (struct → JSON text → struct). leasehold: `Entity::encode` (keys, properties, limit \
         checks) → `wire::entity_to_json_string` (serializes `wire::EntityBody` through \
         serde_json straight from the property bag, as the Azure backend's requests do) → \
         `wire::entity_from_json_str` \
         (deserializes `wire::ParsedEntity` and reads it with `wire::entity_from_parsed`, as \
         the backend reads replies) → `Entity::decode`; no `serde_json::Map` on the way. \
         Baseline: `serde_json::to_string` / `from_str` of the same struct with \
         `#[derive(Serialize, Deserialize)]`."
    ));
    Ok(())
}
