//! A deadline for sending: inside [`send_by`], a backend refuses a request,
//! without sending it, once the deadline has passed when it would go out
//! (the Azure backend when it signs it, the memory backend when it applies
//! it). A unit's commit point goes out this way (see [`crate::lock`]).

use std::future::Future;

use tokio::time::Instant;

use crate::error::{Error, Result};

tokio::task_local! {
    static SEND_BY: Instant;
}

/// Runs `f`, whose requests are refused once `deadline` has passed (or
/// the deadline of an enclosing [`send_by`], when that comes first: an
/// indexed write inside a unit's scope keeps both).
pub(crate) async fn send_by<F: Future>(deadline: Instant, f: F) -> F::Output {
    let deadline = SEND_BY
        .try_with(|outer| *outer)
        .map_or(deadline, |outer| outer.min(deadline));
    SEND_BY.scope(deadline, f).await
}

/// Whether a request may go out now: [`Error::LeaseLost`] once the deadline
/// of an enclosing [`send_by`] has passed.
pub(crate) fn check() -> Result<()> {
    match SEND_BY.try_with(|deadline| *deadline) {
        Ok(deadline) if Instant::now() > deadline => Err(passed()),
        _ => Ok(()),
    }
}

pub(crate) fn passed() -> Error {
    Error::LeaseLost {
        what: "a request that may only go out while a lease is held was not sent: the lease may have run out before it could go".into(),
        code: None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn requests_go_out_until_the_deadline_and_not_after() {
        assert!(check().is_ok(), "no deadline outside a scope");
        let deadline = Instant::now() + Duration::from_secs(1);
        send_by(deadline, async {
            assert!(check().is_ok());
            tokio::time::sleep(Duration::from_secs(2)).await;
            let e = check().unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::LeaseLost, "{e}");
        })
        .await;
        assert!(check().is_ok(), "the scope ended");
    }

    #[tokio::test(start_paused = true)]
    async fn a_nested_deadline_keeps_the_earlier_one() {
        let soon = Instant::now() + Duration::from_secs(1);
        let late = Instant::now() + Duration::from_secs(10);
        for (outer, inner) in [(soon, late), (late, soon)] {
            send_by(outer, async {
                send_by(inner, async {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    assert!(check().is_err(), "the earlier deadline passed");
                })
                .await;
            })
            .await;
        }
    }
}
