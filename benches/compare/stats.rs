//! Statistics of samples.

use std::time::Duration;

use uuid::Uuid;

pub(crate) fn median(v: &[f64]) -> f64 {
    percentile(v, 0.5)
}

pub(crate) fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let idx = ((s.len() - 1) as f64 * p).round() as usize;
    s[idx]
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub(crate) fn random_between(lo: Duration, hi: Duration) -> Duration {
    let r = (Uuid::new_v4().as_u128() % 1_000_000) as f64 / 1_000_000.0;
    lo + (hi - lo).mul_f64(r)
}
